/**
 * One MariaDB server in a container, shared by many DB sessions (one database each).
 *
 * The container has no network at all (`NetworkMode: none`): the server listens only on a
 * unix socket in a host folder bind-mounted at /run/agentrl, and this process talks to it
 * with mysql2 over that socket. So no port can clash with anything else on the machine and
 * no traffic leaves the host, and queries cost a socket round trip instead of a `docker
 * exec` (tens of milliseconds each). The server runs as the unprivileged `mysql` user with
 * every capability dropped; its data lives on a tmpfs.
 *
 * Space: each session's database folder is a symlink into a tmpfs of its own (a "space" of
 * `sessionBytes`, one per session slot, made by `claimSpace`), and every table an agent makes
 * is MyISAM (`enforce_storage_engine`): its files live in that folder only, with no shared log.
 * A session that fills its space gets "disk full" errors (after its statement's time limit)
 * on its own tables; other sessions' spaces are untouched. InnoDB is not offered: on a full
 * file system InnoDB ends the whole server ("Out of disk space in rollback", measured with
 * 300 KB rows in a 64 MiB space), and Aria's transaction log is shared. Session users have no
 * CREATE TEMPORARY TABLES; the statements' own temporary files go to a shared tmpfs of
 * `tmpBytes`, freed when the statement ends.
 *
 * Sandbox: this process connects as the admin account `agentrl`; each session gets a
 * database and a user of its own (`createSessionUser`) with privileges on that database
 * only (no FILE, SUPER, SHUTDOWN, PROCESS, GRANT OPTION), a statement time limit and a
 * connection cap. The server refuses file import/export outside an empty read-only folder
 * (`secure_file_priv`), and the host socket folder belongs to the container's `mysql` user
 * (mode 0755, not world-writable).
 */
import { randomBytes } from "node:crypto";
import { chmodSync, chownSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import mysql from "mysql2/promise";
import { IMAGES } from "../docker/images.js";
import { ContainerError, HOST_DIR_LABEL, type DockerRuntime } from "../docker/runtime.js";

export interface MariaDbServerOptions {
  /** Image with MariaDB and /usr/local/bin/start-mariadb. Default `agentrl/db:latest`. */
  image?: string;
  /** Memory of the container in bytes. Default 2 GiB. */
  memoryBytes?: number;
  /** CPU cores of the container. Default 2. */
  cpus?: number;
  /** Seconds to wait for the server to accept connections. Default 90. */
  startSeconds?: number;
  /** Seconds any statement may run on the server (`max_statement_time`). Default 60. */
  statementSeconds?: number;
  /** Sessions at once (each gets a space of its own). Default 64. */
  sessionSlots?: number;
  /** Bytes of one session's space (its database's files). Default 16 MiB. */
  sessionBytes?: number;
  /** Bytes of the tmpfs of the statements' temporary files, shared. Default 256 MiB. */
  tmpBytes?: number;
}

/** Folder of the session spaces in the container: `<SPACES>/<slot>` is one tmpfs each. */
const SPACES = "/var/lib/agentrl-db-space";
/** The server's data folder (start-mariadb). */
const DATA = "/var/lib/agentrl-mysql";

/** The login of one session: a user with privileges on its own database only. */
export interface SessionLogin {
  user: string;
  password: string;
  database: string;
  /** Gives the session's space back (set when it has one). */
  releaseSpace?: () => void;
  /** The server holding the session's user and database (set when it has one). */
  server?: MariaDbServer;
}

export class MariaDbServer {
  readonly containerId: string;
  readonly socketPath: string;
  private readonly password: string;
  private readonly socketDir: string;
  private readonly freeSpaces: number[];
  private runtime!: DockerRuntime;
  /** Set when the container died: its sessions' users and databases went with it. */
  stopped = false;

  private constructor(
    containerId: string,
    socketDir: string,
    password: string,
    readonly sessionSlots: number,
  ) {
    this.freeSpaces = Array.from({ length: sessionSlots }, (_, slot) => slot);
    this.containerId = containerId;
    this.socketDir = socketDir;
    this.socketPath = join(socketDir, "mysqld.sock");
    this.password = password;
  }

  /** Starts the container and waits until the server accepts connections. */
  static async start(
    runtime: DockerRuntime,
    options: MariaDbServerOptions = {},
  ): Promise<MariaDbServer> {
    const image = options.image ?? IMAGES.db.tag;
    const socketDir = mkdtempSync(join(tmpdir(), "agentrl-mariadb-"));
    const owner = await runtime.imageUser(image, "mysql");
    chmodSync(socketDir, 0o755);
    chownSync(socketDir, owner.uid, owner.gid);
    const password = randomBytes(12).toString("hex");
    const sessionSlots = options.sessionSlots ?? 64;
    const sessionBytes = options.sessionBytes ?? 16 * 1024 ** 2;
    const tmpfs: Record<string, string> = {
      [DATA]: "rw,mode=1777,size=256m",
      "/var/lib/agentrl-db-tmp": `rw,mode=1777,size=${options.tmpBytes ?? 256 * 1024 ** 2}`,
    };
    for (let slot = 0; slot < sessionSlots; slot += 1)
      tmpfs[`${SPACES}/${slot}`] = `rw,noexec,nosuid,nodev,mode=1777,size=${sessionBytes}`;
    const containerId = await runtime.start({
      image,
      user: "mysql",
      env: {
        AGENTRL_DB_PASSWORD: password,
        AGENTRL_DB_STATEMENT_SECONDS: String(options.statementSeconds ?? 60),
      },
      memoryBytes: options.memoryBytes ?? 2 * 1024 ** 3,
      cpus: options.cpus ?? 2,
      pidsLimit: 512,
      networkMode: "none",
      capabilities: [],
      tmpfs,
      binds: [`${socketDir}:/run/agentrl`],
      labels: { "agentrl.task": "db", [HOST_DIR_LABEL]: socketDir },
      namePrefix: "agentrl-db",
    });
    const server = new MariaDbServer(containerId, socketDir, password, sessionSlots);
    server.runtime = runtime;
    const deadline = Date.now() + (options.startSeconds ?? 90) * 1000;
    let lastError = "";
    while (Date.now() < deadline) {
      try {
        const connection = await server.connect();
        await connection.end();
        return server;
      } catch (error) {
        lastError = (error as Error).message;
        if (!(await runtime.isRunning(containerId))) break;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
    await runtime.remove(containerId);
    rmSync(socketDir, { recursive: true, force: true });
    throw new ContainerError(`MariaDB did not come up: ${lastError}`);
  }

  /** A new admin connection (optionally on one database). */
  async connect(database?: string): Promise<mysql.Connection> {
    return this.open("agentrl", this.password, database);
  }

  /** A new connection as a session's own user, on its database. */
  async connectAs(login: SessionLogin): Promise<mysql.Connection> {
    return this.open(login.user, login.password, login.database);
  }

  /**
   * Takes a free space for database `database` (its folder in the data folder becomes a
   * symlink into the space, emptied first). Call before `createSessionUser`; the returned
   * function gives the space back. Throws `ContainerError` when every space is taken.
   */
  async claimSpace(database: string): Promise<() => void> {
    if (!/^[A-Za-z0-9_]+$/.test(database))
      throw new ContainerError(`database name ${database} is not plain`);
    const slot = this.freeSpaces.shift();
    if (slot === undefined)
      throw new ContainerError(
        `all ${this.sessionSlots} session spaces of the MariaDB server are taken`,
      );
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.freeSpaces.push(slot);
    };
    const space = `${SPACES}/${slot}`;
    try {
      const result = await this.runtime.exec(
        this.containerId,
        [
          "sh",
          "-c",
          `find ${space} -mindepth 1 -delete && mkdir ${space}/${database} && ln -s ${space}/${database} ${DATA}/${database}`,
        ],
        { user: "mysql", timeoutSeconds: 30 },
      );
      if (result.exitCode !== 0)
        throw new ContainerError(`cannot make the session's space: ${result.output.slice(0, 300)}`);
    } catch (error) {
      release();
      throw error;
    }
    return release;
  }

  /**
   * Makes a session's database and its user: all privileges on that database and nothing
   * else (no FILE, SUPER, SHUTDOWN, PROCESS, GRANT OPTION), `statementSeconds` per
   * statement and `maxConnections` at once. `admin` is an admin connection.
   */
  static async createSessionUser(
    admin: mysql.Connection,
    database: string,
    statementSeconds: number,
    maxConnections = 2,
  ): Promise<SessionLogin> {
    const user = `s_${randomBytes(6).toString("hex")}`;
    const password = randomBytes(12).toString("hex");
    // The folder may exist already: a symlink into the session's space (`claimSpace`).
    await admin.query(`CREATE DATABASE IF NOT EXISTS \`${database}\` CHARACTER SET utf8mb4`);
    await admin.query(
      `CREATE USER '${user}'@'localhost' IDENTIFIED BY '${password}' WITH MAX_USER_CONNECTIONS ${maxConnections} MAX_STATEMENT_TIME ${statementSeconds}`,
    );
    await admin.query(`GRANT ALL PRIVILEGES ON \`${database}\`.* TO '${user}'@'localhost'`);
    // Temporary tables would live in the shared tmpfs for the whole connection.
    await admin.query(
      `REVOKE CREATE TEMPORARY TABLES ON \`${database}\`.* FROM '${user}'@'localhost'`,
    );
    return { user, password, database };
  }

  /** Stops a session's running statements, then drops its user and database (never throws). */
  static async dropSessionUser(admin: mysql.Connection, login: SessionLogin): Promise<void> {
    try {
      const [rows] = await admin.query(
        "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?",
        [login.user],
      );
      for (const row of rows as Array<{ ID: number }>)
        await admin.query(`KILL ${Number(row.ID)}`).catch(() => {});
      await admin.query(`DROP USER IF EXISTS '${login.user}'@'localhost'`);
      await admin.query(`DROP DATABASE IF EXISTS \`${login.database}\``);
    } catch {
      // The server may be gone; its tmpfs goes with it.
    } finally {
      login.releaseSpace?.();
    }
  }

  private async open(user: string, password: string, database?: string): Promise<mysql.Connection> {
    const connection = await mysql.createConnection({
      socketPath: this.socketPath,
      user,
      password,
      database,
      charset: "utf8mb4",
      supportBigNumbers: true,
      bigNumberStrings: true,
      dateStrings: true,
      connectTimeout: 10_000,
    });
    // A server that dies while the connection is idle emits 'error'; the session learns of
    // it from Docker's events and its next query, so the event must not crash the process.
    connection.on("error", () => {});
    return connection;
  }

  /** Removes the socket folder (the container is removed by the runtime). */
  dispose(): void {
    rmSync(this.socketDir, { recursive: true, force: true });
  }
}
