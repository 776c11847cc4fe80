/**
 * The Docker runtime of the OS and DB tasks, over dockerode: starts containers with limits,
 * runs commands in them with a time limit and bounded output, and makes sure nothing it
 * started outlives it.
 *
 * Everything started carries its owner's identity: the labels `agentrl=1`, `agentrl.run=<run
 * id>`, `agentrl.host=<hostname>`, `agentrl.pid=<pid>` and `agentrl.pidstart=<start time of
 * that process, in clock ticks after boot>` (so a reused pid is not taken for the owner).
 * Containers are removed when their session ends (`remove`), when the runtime closes
 * (`close`), when the process exits or gets SIGINT/SIGTERM/SIGHUP (a synchronous `docker rm
 * -f`), and — for an owner killed with SIGKILL or crashed — by the reaper
 * (`removeLeftovers`): every runtime runs it when it is made and then every `reapSeconds`. The
 * reaper removes only containers whose owner process is provably dead on this host (never by
 * age, never another host's), so concurrent runs on one engine keep theirs.
 */
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import Docker from "dockerode";
import { ContainerDeaths } from "./attribution.js";
import {
  DiskLimits,
  ENGINE_FILES,
  SEED_MOUNT,
  type DiskLimit,
  type FolderArchive,
} from "./disk.js";
import {
  ContainerError,
  DockerUnavailableError,
  SandboxEndedError,
  type DeathCause,
} from "./errors.js";
import { collectOutput } from "./exec-output.js";
import { HARNESS_SOURCE, HarnessConnection, HarnessLost } from "./harness.js";
import {
  forgetAtExit,
  HOST_DIR_LABEL,
  HOST_LABEL,
  ownerIsDead,
  PID_LABEL,
  PID_START_LABEL,
  processStartTime,
  removeAtExit,
  RUN_LABEL,
} from "./owner.js";

export * from "./errors.js";
export * from "./owner.js";
export { WRITABLE_FOLDERS, type DiskLimit, type DiskSettings, type FolderArchive } from "./disk.js";

/** Linux capabilities a container may get back after all are dropped. */
export type Capability =
  "CHOWN" | "DAC_OVERRIDE" | "FOWNER" | "SETUID" | "SETGID" | "KILL" | "FSETID";

export interface ContainerSpec {
  /** Image tag, e.g. `agentrl/os:latest`. */
  image: string;
  /** Command of the main process. Default: the image's CMD. */
  command?: string[];
  /** Memory limit in bytes. Default 1 GiB (the original OS task). */
  memoryBytes?: number;
  /** CPU limit in cores (fractions allowed). Default 1. */
  cpus?: number;
  /** Maximum number of processes. Default 256. */
  pidsLimit?: number;
  /** `none` (default) or `host` (only for a task that needs a loopback service). */
  networkMode?: "none" | "host";
  /** Capabilities given back after `CapDrop: ALL`; each needs a reason at the call site. Default none. */
  capabilities?: Capability[];
  /** User of the main process (name or uid). Default: the image's. */
  user?: string;
  /** Environment variables. */
  env?: Record<string, string>;
  /** tmpfs mounts: path → mount options (e.g. `rw,size=256m,mode=1777`). */
  tmpfs?: Record<string, string>;
  /** Bind mounts `host:container[:ro]`. */
  binds?: string[];
  /** Extra labels (the runtime adds its own). */
  labels?: Record<string, string>;
  /** Name prefix; the runtime appends a random suffix. Default `agentrl`. */
  namePrefix?: string;
  /** A hard limit on what the container may write (see `DiskLimit`). Default: none. */
  disk?: DiskLimit;
  /**
   * Resource limits of every process (setrlimit), soft = hard. `fsize` is the largest file a
   * process may write, in bytes. `nproc` counts the processes of the user id on the whole host
   * (not per container), so it is for non-root users only; `pidsLimit` bounds a container.
   */
  ulimits?: { nofile?: number; fsize?: number; nproc?: number };
  /**
   * Run the command harness (`harness.ts`, python3 in the image) as the main process, and
   * send `exec` / `shell` through its stdin instead of a `docker exec` each. Default false.
   */
  harness?: boolean;
}

export interface ExecOptions {
  /** Seconds before the command is killed. Default 30 (the original's per-command limit). */
  timeoutSeconds?: number;
  /** Characters of output kept (stdout and stderr interleaved); the rest is dropped. Default 65,536. */
  maxOutputChars?: number;
  /** User to run as. Default: root. */
  user?: string;
  /** Working directory. Default: the container's. */
  workingDir?: string;
  /** Environment variables. */
  env?: Record<string, string>;
}

export interface ExecResult {
  exitCode: number;
  /** stdout and stderr in arrival order, at most `maxOutputChars` characters. */
  output: string;
  timedOut: boolean;
  /** True when output beyond `maxOutputChars` was dropped. */
  truncated: boolean;
}

export interface DockerRuntimeOptions {
  /** A dockerode client. Default: the local socket (or DOCKER_HOST). */
  docker?: Docker;
  /** Id of this run, written on every container. Default: random. */
  runId?: string;
  /**
   * Seconds a container may take to be created and started; past it, `start` throws a
   * `ContainerError` (the episode fails) instead of waiting on a wedged engine for ever.
   * Default 120.
   */
  startSeconds?: number;
  /** Seconds between two runs of the reaper (`removeLeftovers`); 0 runs it only at creation. Default 60. */
  reapSeconds?: number;
  /** Environment of the `docker` CLI that removes this run's containers at exit (`DOCKER_HOST` of a remote engine). Default: the process's. */
  cliEnv?: Record<string, string>;
}

/** Exit code reported when a command hits its time limit (as coreutils `timeout`). */
export const TIMEOUT_EXIT_CODE = 124;
const DEFAULT_MEMORY = 1024 ** 3;
const DEFAULT_OUTPUT = 65_536;

export class DockerRuntime {
  readonly docker: Docker;
  readonly runId: string;
  private readonly live = new Set<string>();
  private closed = false;
  private readonly startMs: number;
  /** The first reaper run (started with the runtime): resolves to the number of containers removed. */
  readonly reaped: Promise<number>;
  private readonly reaper: NodeJS.Timeout | undefined;
  private readonly cliEnv?: Record<string, string>;
  private readonly harnesses = new Map<string, HarnessConnection>();
  private readonly deaths: ContainerDeaths;
  private readonly disks: DiskLimits;

  constructor(options: DockerRuntimeOptions = {}) {
    this.docker = options.docker ?? new Docker();
    this.startMs = (options.startSeconds ?? 120) * 1000;
    this.cliEnv = options.cliEnv;
    this.runId = options.runId ?? `${Date.now().toString(36)}-${randomBytes(4).toString("hex")}`;
    this.deaths = new ContainerDeaths(this.docker, this.runId, (id) => this.live.has(id));
    this.disks = new DiskLimits(this.docker, () => this.labels());
    removeAtExit(this);
    this.reaped = this.removeLeftovers().catch(() => 0);
    const every = options.reapSeconds ?? 60;
    if (every > 0) {
      this.reaper = setInterval(() => void this.removeLeftovers().catch(() => 0), every * 1000);
      this.reaper.unref();
    }
  }

  /** A runtime on a Docker engine that answers; throws `DockerUnavailableError` otherwise. */
  static async connect(options: DockerRuntimeOptions = {}): Promise<DockerRuntime> {
    const docker = options.docker ?? new Docker();
    if (!(await isDockerAvailable(docker))) {
      throw new DockerUnavailableError(
        "no Docker engine answers on the local socket; run `bash scripts/start-dockerd.sh` (or `bash scripts/setup.sh`)",
      );
    }
    return new DockerRuntime({ ...options, docker });
  }

  /** Labels every container of this run carries. */
  labels(extra: Record<string, string> = {}): Record<string, string> {
    const start = processStartTime(process.pid);
    return {
      agentrl: "1",
      [RUN_LABEL]: this.runId,
      [PID_LABEL]: String(process.pid),
      ...(start ? { [PID_START_LABEL]: start } : {}),
      [HOST_LABEL]: hostname(),
      ...extra,
    };
  }

  /**
   * Starts a container with limits, all capabilities dropped and no new privileges; returns
   * its id. Throws a `ContainerError` when the engine has not created and started it within
   * `startSeconds` (the container, should it appear later, is removed).
   */
  async start(spec: ContainerSpec): Promise<string> {
    if (this.closed) throw new ContainerError("the Docker runtime is closed");
    let timer: NodeJS.Timeout | undefined;
    let late = false;
    const started = this.createAndStart(spec, () => late);
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        late = true;
        reject(
          new ContainerError(
            `container of ${spec.image} not started after ${this.startMs / 1000} s: the Docker engine does not answer (restart it: bash scripts/start-dockerd.sh)`,
          ),
        );
      }, this.startMs);
    });
    // A start that finishes after the deadline cleans up after itself (see createAndStart).
    started.catch(() => {});
    try {
      return await Promise.race([started, deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  private async createAndStart(spec: ContainerSpec, late: () => boolean): Promise<string> {
    const name = `${spec.namePrefix ?? "agentrl"}-${randomBytes(5).toString("hex")}`;
    const disk = spec.disk ? await this.disks.settings(spec.image, spec.disk) : undefined;
    const ulimits = Object.entries(spec.ulimits ?? {})
      .filter(([, value]) => value !== undefined)
      .map(([key, value]) => ({ Name: key, Soft: value, Hard: value }));
    // A harness container without network gets none from the engine at all: no network sandbox
    // (dockerd re-executes itself twice a container for one: a namespace helper and a prestart
    // hook, ~0.15 core-s), and runc gives it a new network namespace holding only loopback, as
    // `none` did. The engine then writes no /etc/hosts: the harness writes Docker's.
    const networkDisabled = spec.harness === true && (spec.networkMode ?? "none") === "none";
    // The seed's archives are read from a read-only mount of a host folder when the engine can
    // mount it (it runs on this host), else they travel through the command stream.
    const seedFolder = spec.harness ? disk?.seedFolder : undefined;
    const options = (withSeedFolder: boolean): Docker.ContainerCreateOptions => ({
      name,
      Image: spec.image,
      Cmd: spec.harness
        ? ["python3", "-S", "-c", HARNESS_SOURCE, ...(networkDisabled ? ["--etc-hosts"] : [])]
        : spec.command,
      NetworkDisabled: networkDisabled,
      User: spec.user,
      Env: Object.entries(spec.env ?? {}).map(([key, value]) => `${key}=${value}`),
      Labels: this.labels(spec.labels),
      Tty: false,
      OpenStdin: spec.harness === true,
      StdinOnce: false,
      AttachStdin: spec.harness === true,
      AttachStdout: spec.harness === true,
      AttachStderr: spec.harness === true,
      HostConfig: {
        Memory: spec.memoryBytes ?? DEFAULT_MEMORY,
        MemorySwap: spec.memoryBytes ?? DEFAULT_MEMORY,
        NanoCpus: Math.round((spec.cpus ?? 1) * 1e9),
        PidsLimit: spec.pidsLimit ?? 256,
        NetworkMode: spec.networkMode ?? "none",
        CapDrop: ["ALL"],
        CapAdd: spec.capabilities ?? [],
        SecurityOpt: ["no-new-privileges"],
        Init: true,
        Tmpfs: { ...disk?.tmpfs, ...spec.tmpfs },
        ReadonlyRootfs: disk?.readOnlyRoot ?? false,
        StorageOpt: disk?.storageOpt,
        Ulimits: ulimits,
        Binds: spec.binds,
        // The harness's stdout is its reply stream, read through the attach: the engine keeps no
        // log of it (the json-file driver encoded and wrote every reply to disk).
        ...(spec.harness ? { LogConfig: { Type: "none", Config: {} } } : {}),
        ...(withSeedFolder && seedFolder
          ? { Mounts: [{ Type: "bind", Source: seedFolder, Target: SEED_MOUNT, ReadOnly: true }] }
          : {}),
        AutoRemove: false,
      },
    });
    let container: Docker.Container;
    let seedMounted = seedFolder !== undefined;
    try {
      container = await this.docker.createContainer(options(seedMounted));
    } catch (error) {
      if (!seedMounted) throw error;
      // An engine on another host has no such folder: seeds travel through the stream from now on.
      this.disks.seedFoldersWork = false;
      seedMounted = false;
      container = await this.docker.createContainer(options(false));
    }
    this.live.add(container.id);
    try {
      if (spec.harness) {
        // Events first: a death must find its record (see deathOf).
        await this.deaths.watch();
        const stream = (await container.attach({
          stream: true,
          stdin: true,
          stdout: true,
          stderr: true,
          hijack: true,
        })) as unknown as NodeJS.ReadWriteStream;
        const harness = new HarnessConnection(this.docker, stream);
        this.harnesses.set(container.id, harness);
        await container.start();
        await harness.ready;
      } else await container.start();
      if (disk?.seed) await this.seed(container.id, disk.seed, seedMounted);
    } catch (error) {
      await this.remove(container.id);
      throw new ContainerError(
        `container of ${spec.image} did not start: ${(error as Error).message}`,
      );
    }
    if (late()) {
      await this.remove(container.id);
      throw new ContainerError(`container of ${spec.image} started after its deadline`);
    }
    return container.id;
  }

  /** Whether a container of `image` with `limit` gets a capped writable layer (a writable root), not the read-only root. */
  writableRoot(image: string, limit: DiskLimit): Promise<boolean> {
    return this.disks.writableRoot(image, limit);
  }

  /** Fills the tmpfs folders of a read-only-root container with the image's content (a tar of them). */
  private async seed(id: string, archives: FolderArchive[], mounted: boolean): Promise<void> {
    for (const [index, { parent, archive }] of archives.entries()) {
      const command = [
        "tar",
        "-x",
        "-i",
        "-p",
        "-C",
        parent,
        ...ENGINE_FILES.map((file) => `--exclude=${file}`),
      ];
      let result: { exitCode: number; output: string } | undefined;
      if (mounted) {
        result = await this.execWithInput(id, [...command, "-f", `${SEED_MOUNT}/${index}.tar`]);
        // The engine mounted an empty folder (not the one written here): the stream it is.
        if (result.exitCode !== 0) this.disks.seedFoldersWork = false;
      }
      if (!result || result.exitCode !== 0) result = await this.execWithInput(id, command, archive);
      if (result.exitCode !== 0)
        throw new ContainerError(
          `could not fill the writable folders in ${parent} (tar exit ${result.exitCode}): ${result.output.slice(0, 300)}`,
        );
    }
  }

  /** Runs a command with `input` on its stdin (none: /dev/null) as root, 60 s limit. */
  async execWithInput(
    id: string,
    command: string[],
    input?: Buffer,
  ): Promise<{ exitCode: number; output: string }> {
    const harness = this.harnesses.get(id);
    if (harness) {
      const reply = await this.throughHarness(
        id,
        harness,
        { op: "run", argv: command, timeout: 60, max: 4096, ...(input ? { stdin: input } : {}) },
        70,
      );
      return { exitCode: reply.exitCode, output: reply.output };
    }
    try {
      const exec = await this.docker.getContainer(id).exec({
        Cmd: ["timeout", "60", ...command],
        AttachStdin: true,
        AttachStdout: true,
        AttachStderr: true,
        Tty: false,
        User: "root",
      });
      const stream = await exec.start({ hijack: true, stdin: true });
      const collected = collectOutput(
        this.docker,
        stream,
        4096,
        65_000,
        async () => (await exec.inspect()).Running === true,
      );
      stream.end(input);
      const { output } = await collected;
      return { exitCode: (await exec.inspect()).ExitCode ?? -1, output };
    } catch (error) {
      throw new ContainerError(
        `cannot run a command in container ${id.slice(0, 12)}: ${(error as Error).message}`,
      );
    }
  }

  /** The uid and gid of `user` in `image` (from its /etc/passwd). Throws `ContainerError` when it has none. */
  async imageUser(image: string, user: string): Promise<{ uid: number; gid: number }> {
    const container = await this.docker.createContainer({
      Image: image,
      Cmd: ["true"],
      Labels: this.labels(),
      HostConfig: { NetworkMode: "none" },
    });
    try {
      const chunks: Buffer[] = [];
      for await (const chunk of (await container.getArchive({
        path: "/etc/passwd",
      })) as AsyncIterable<Buffer>)
        chunks.push(chunk);
      const archive = Buffer.concat(chunks);
      // One tar entry: a 512-byte header (size in octal at 124), then the file.
      const size = parseInt(
        archive.subarray(124, 136).toString("ascii").replace(/\0.*$/, "").trim(),
        8,
      );
      const passwd = archive.subarray(512, 512 + size).toString("utf8");
      const line = passwd.split("\n").find((entry) => entry.startsWith(`${user}:`));
      if (!line) throw new ContainerError(`image ${image} has no user ${user}`);
      const [, , uid, gid] = line.split(":");
      return { uid: Number(uid), gid: Number(gid) };
    } finally {
      await container.remove({ force: true, v: true }).catch(() => {});
    }
  }

  /** Whether a container is running. */
  async isRunning(id: string): Promise<boolean> {
    try {
      return (await this.docker.getContainer(id).inspect()).State.Running === true;
    } catch {
      return false;
    }
  }

  /**
   * Runs `command` in a running container, stopped after `timeoutSeconds` (coreutils
   * `timeout` inside the container signals the command's whole process group; the host
   * stops reading if the exec does not return).
   * Throws `ContainerError` when the container is gone or the engine refuses.
   */
  async exec(id: string, command: string[], options: ExecOptions = {}): Promise<ExecResult> {
    const timeoutSeconds = options.timeoutSeconds ?? 30;
    const maxOutput = options.maxOutputChars ?? DEFAULT_OUTPUT;
    const harness = this.harnesses.get(id);
    if (harness && (options.user ?? "root") === "root") {
      return this.throughHarness(
        id,
        harness,
        {
          op: "run",
          argv: command,
          cwd: options.workingDir,
          timeout: timeoutSeconds,
          max: maxOutput,
          env: options.env,
        },
        timeoutSeconds + 15,
      );
    }
    const container = this.docker.getContainer(id);
    // Every process of this command inherits the tag, so a timed-out command can be killed
    // whole (its process group is not reliable: bash puts jobs in their own groups).
    const tag = randomBytes(6).toString("hex");
    let exec: Docker.Exec;
    try {
      exec = await container.exec({
        Cmd: ["timeout", "-k", "2", String(timeoutSeconds), ...command],
        AttachStdout: true,
        AttachStderr: true,
        AttachStdin: false,
        Tty: false,
        User: options.user ?? "root",
        WorkingDir: options.workingDir,
        Env: [
          ...Object.entries(options.env ?? {}).map(([key, value]) => `${key}=${value}`),
          `AGENTRL_EXEC=${tag}`,
        ],
      });
    } catch (error) {
      throw new ContainerError(
        `cannot run a command in container ${id.slice(0, 12)}: ${(error as Error).message}`,
      );
    }
    const stream = await exec.start({ hijack: true, stdin: false }).catch((error: Error) => {
      throw new ContainerError(
        `cannot start a command in container ${id.slice(0, 12)}: ${error.message}`,
      );
    });
    const collected = await collectOutput(
      this.docker,
      stream,
      maxOutput,
      (timeoutSeconds + 5) * 1000,
      async () => (await exec.inspect()).Running === true,
    );
    let exitCode: number;
    try {
      const info = await exec.inspect();
      exitCode = info.ExitCode ?? -1;
      if (info.Running) exitCode = TIMEOUT_EXIT_CODE;
    } catch (error) {
      throw new ContainerError(
        `lost the command in container ${id.slice(0, 12)}: ${(error as Error).message}`,
      );
    }
    // A dead container shows up as a missing exit code or a SIGKILL (137) with the container
    // stopped; a container being killed may still look running for a moment, so look again.
    if (exitCode === -1 || exitCode === 137) {
      for (let look = 0; look < 10; look += 1) {
        if (!(await this.isRunning(id)))
          throw new ContainerError(`container ${id.slice(0, 12)} stopped while running a command`);
        if (exitCode === 137 && look >= 2) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    // `timeout -k 2` sends SIGTERM to the command's process group at the limit (exit 124) and
    // SIGKILL two seconds later to a command that ignores it (exit 137).
    const timedOut =
      collected.hostTimedOut ||
      ((exitCode === 124 || exitCode === 137) &&
        collected.elapsedMs >= timeoutSeconds * 1000 - 200);
    if (timedOut) await this.killTagged(id, tag);
    return {
      exitCode: timedOut ? TIMEOUT_EXIT_CODE : exitCode,
      output: collected.output,
      timedOut,
      truncated: collected.truncated,
    };
  }

  /** Starts the container's long-lived login shell in `cwd` (a container started with `harness`). */
  async shellStart(id: string, cwd: string): Promise<void> {
    const harness = this.harnesses.get(id);
    if (!harness) throw new ContainerError(`container ${id.slice(0, 12)} has no command harness`);
    await this.throughHarness(id, harness, { op: "shell-start", cwd }, 30);
  }

  /**
   * Types `script` into the container's long-lived shell (see `shellStart`; started in `/` on
   * first use): its `cd`, variables and functions stay for the next call. At the time limit
   * the shell and the command's processes are killed (exit 124) and the next call gets a new
   * login shell in the last folder.
   */
  async shell(
    id: string,
    script: string,
    options: Pick<ExecOptions, "timeoutSeconds" | "maxOutputChars"> = {},
  ): Promise<ExecResult> {
    const harness = this.harnesses.get(id);
    if (!harness) throw new ContainerError(`container ${id.slice(0, 12)} has no command harness`);
    const timeoutSeconds = options.timeoutSeconds ?? 30;
    return this.throughHarness(
      id,
      harness,
      {
        op: "shell",
        script,
        timeout: timeoutSeconds,
        max: options.maxOutputChars ?? DEFAULT_OUTPUT,
      },
      timeoutSeconds + 15,
    );
  }

  /**
   * One request to a container's harness. A closed stream is a dead container (or engine):
   * `SandboxEndedError` when the engine says it ended on its own, `ContainerError` otherwise.
   */
  private async throughHarness(
    id: string,
    harness: HarnessConnection,
    request: Parameters<HarnessConnection["request"]>[0],
    deadlineSeconds: number,
  ): Promise<ExecResult> {
    try {
      const reply = await harness.request(request, deadlineSeconds * 1000);
      return {
        exitCode: reply.exit,
        output: reply.output,
        timedOut: reply.timedOut,
        truncated: reply.truncated,
      };
    } catch (error) {
      if (!(error instanceof HarnessLost))
        throw new ContainerError(
          `command in container ${id.slice(0, 12)}: ${(error as Error).message}`,
        );
      const death = await this.deaths.deathOf(id, 5000);
      if (death?.cause === "own") {
        throw new SandboxEndedError(
          `container ${id.slice(0, 12)} ended on its own while running a command (exit ${death.exitCode}${death.outOfMemory ? ", out of memory" : ""}): its own processes stopped it`,
          death.exitCode,
          death.outOfMemory,
        );
      }
      throw new ContainerError(
        `container ${id.slice(0, 12)} stopped while running a command (${death ? `killed from outside, exit ${death.exitCode}` : (error as Error).message})`,
      );
    }
  }

  /**
   * How a container of this run died, from the engine's events (waits up to `waitMs` for its
   * `die`); undefined when no `die` came (e.g. the engine does not answer).
   */
  deathOf(id: string, waitMs: number): Promise<DeathCause | undefined> {
    return this.deaths.deathOf(id, waitMs);
  }

  /**
   * Calls `listener` once when the container stops without `remove` (killed, out of memory,
   * crashed), from Docker's event stream. Returns a function that stops watching.
   */
  onDeath(id: string, listener: (death: DeathCause) => void): Promise<() => void> {
    return this.deaths.onDeath(id, listener);
  }

  /** Kills every process of the container whose environment carries `AGENTRL_EXEC=<tag>`. */
  private async killTagged(id: string, tag: string): Promise<void> {
    const script = `for p in /proc/[0-9]*; do tr '\\0' '\\n' < "$p/environ" 2>/dev/null | grep -qx 'AGENTRL_EXEC=${tag}' && kill -9 "\${p#/proc/}" 2>/dev/null; done; true`;
    try {
      const exec = await this.docker
        .getContainer(id)
        .exec({ Cmd: ["sh", "-c", script], AttachStdout: true, AttachStderr: true, User: "root" });
      const stream = await exec.start({ hijack: true, stdin: false });
      await collectOutput(
        this.docker,
        stream,
        1000,
        10_000,
        async () => (await exec.inspect()).Running === true,
      );
    } catch {
      // The container is gone: so are its processes.
    }
  }

  /** Runs a command detached (no output, returns at once), e.g. a background service. */
  async execDetached(
    id: string,
    command: string[],
    options: Pick<ExecOptions, "user" | "workingDir" | "env"> = {},
  ): Promise<void> {
    try {
      const exec = await this.docker.getContainer(id).exec({
        Cmd: command,
        AttachStdout: false,
        AttachStderr: false,
        User: options.user ?? "root",
        WorkingDir: options.workingDir,
        Env: Object.entries(options.env ?? {}).map(([key, value]) => `${key}=${value}`),
      });
      await exec.start({ Detach: true });
    } catch (error) {
      throw new ContainerError(
        `cannot start a background command in container ${id.slice(0, 12)}: ${(error as Error).message}`,
      );
    }
  }

  /** Kills and removes a container (idempotent, never throws). */
  async remove(id: string): Promise<void> {
    this.live.delete(id);
    this.deaths.forget(id);
    this.harnesses.get(id)?.close();
    this.harnesses.delete(id);
    try {
      await this.docker.getContainer(id).remove({ force: true, v: true });
    } catch {
      // Already gone.
    }
  }

  /** Ids of the containers this runtime started and has not removed. */
  get containers(): string[] {
    return [...this.live];
  }

  /**
   * The reaper: removes containers whose owner is dead — labelled `agentrl=1`, started on
   * this host by a process that no longer exists (or whose pid now belongs to a younger
   * process). Containers of live owners, of other hosts, and without an owner label are kept.
   * Returns the number removed.
   */
  async removeLeftovers(): Promise<number> {
    const list = await this.docker.listContainers({ all: true, filters: { label: ["agentrl=1"] } });
    let removed = 0;
    for (const info of list) {
      const labels = info.Labels ?? {};
      if (labels[RUN_LABEL] === this.runId || !ownerIsDead(labels)) continue;
      await this.remove(info.Id);
      const folder = labels[HOST_DIR_LABEL];
      if (folder && folder.startsWith(tmpdir())) rmSync(folder, { recursive: true, force: true });
      removed += 1;
    }
    return removed;
  }

  /** Removes every container of this run. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.reaper) clearInterval(this.reaper);
    forgetAtExit(this);
    this.deaths.close();
    for (const harness of this.harnesses.values()) harness.close();
    this.harnesses.clear();
    const list = await this.docker
      .listContainers({ all: true, filters: { label: [`${RUN_LABEL}=${this.runId}`] } })
      .catch(() => []);
    const ids = new Set([...this.live, ...list.map((info) => info.Id)]);
    await Promise.all([...ids].map((id) => this.remove(id)));
  }

  /** At process exit or a fatal signal (no async possible): `docker rm -f` of this run's containers. */
  removeAllSync(): void {
    if (this.live.size === 0) return;
    spawnSync("docker", ["rm", "-f", "-v", ...this.live], {
      stdio: "ignore",
      timeout: 20_000,
      env: this.cliEnv ? { ...process.env, ...this.cliEnv } : process.env,
    });
  }
}

/** Whether a Docker engine answers. */
export async function isDockerAvailable(docker: Docker = new Docker()): Promise<boolean> {
  try {
    await Promise.race([
      docker.ping(),
      new Promise((_, reject) => setTimeout(() => reject(new Error("timeout")), 3000).unref()),
    ]);
    return true;
  } catch {
    return false;
  }
}
