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
}

/** The login of one session: a user with privileges on its own database only. */
export interface SessionLogin {
  user: string;
  password: string;
  database: string;
}

export class MariaDbServer {
  readonly containerId: string;
  readonly socketPath: string;
  private readonly password: string;
  private readonly socketDir: string;

  private constructor(containerId: string, socketDir: string, password: string) {
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
      tmpfs: { "/var/lib/agentrl-mysql": "rw,mode=1777,size=1g" },
      binds: [`${socketDir}:/run/agentrl`],
      labels: { "agentrl.task": "db", [HOST_DIR_LABEL]: socketDir },
      namePrefix: "agentrl-db",
    });
    const server = new MariaDbServer(containerId, socketDir, password);
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
    await admin.query(`CREATE DATABASE \`${database}\` CHARACTER SET utf8mb4`);
    await admin.query(
      `CREATE USER '${user}'@'localhost' IDENTIFIED BY '${password}' WITH MAX_USER_CONNECTIONS ${maxConnections} MAX_STATEMENT_TIME ${statementSeconds}`,
    );
    await admin.query(`GRANT ALL PRIVILEGES ON \`${database}\`.* TO '${user}'@'localhost'`);
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
