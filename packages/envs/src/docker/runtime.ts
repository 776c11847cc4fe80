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
import { AgentRLError } from "@agentrl/spec";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync, rmSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { posix } from "node:path";
import { PassThrough } from "node:stream";
import Docker from "dockerode";
import { HARNESS_SOURCE, HarnessConnection, HarnessLost } from "./harness.js";

export class DockerUnavailableError extends AgentRLError {}

/** A container died or an exec failed for reasons outside the agent's command. */
export class ContainerError extends AgentRLError {}

/**
 * The container ended on its own while it ran commands: no one outside killed or removed
 * it (no `kill` event from the engine before its `die`), so its own processes ended it —
 * PID 1's child killed (`kill -9 -1`), out of memory, … For a sandbox whose commands are the
 * agent's, that is the agent's doing, not an infrastructure fault.
 */
export class SandboxEndedError extends ContainerError {
  constructor(
    message: string,
    readonly exitCode: number,
    readonly outOfMemory: boolean,
  ) {
    super(message);
  }
}

/** Why a container stopped: `own` (its own processes ended it) or `external` (killed, removed, engine gone). */
export type DeathCause = { cause: "own" | "external"; exitCode: number; outOfMemory: boolean };

export const RUN_LABEL = "agentrl.run";
export const PID_LABEL = "agentrl.pid";
export const HOST_LABEL = "agentrl.host";
export const PID_START_LABEL = "agentrl.pidstart";
/** A host folder made for the container (e.g. a socket folder), deleted with its leftovers. */
export const HOST_DIR_LABEL = "agentrl.hostdir";

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

/**
 * A hard limit on the bytes a container may write, in one of two forms:
 * - `writable-layer`: the engine caps the container's writable layer (`--storage-opt size`);
 *   the whole root stays writable. Needs overlay2 on xfs mounted with `pquota`.
 * - `read-only-root`: the root filesystem is read-only, and each folder in `writable` is a
 *   tmpfs of `bytes` (held in the container's memory, so also bounded by its memory limit),
 *   filled at start with the image's content of that folder.
 * `auto` (default) takes `writable-layer` when the engine supports it, else `read-only-root`.
 * Never unlimited: a form the engine refuses fails the start (`ContainerError`).
 */
export interface DiskLimit {
  bytes: number;
  mode?: "auto" | "writable-layer" | "read-only-root";
  /** Writable folders under a read-only root. Default `WRITABLE_FOLDERS`. */
  writable?: string[];
}

/**
 * Folders writable under a read-only root: where AgentBench OS tasks and their agents write
 * (home folders, /etc for users and config, /var for logs and web roots, /tmp, /usr/local/bin
 * for scripts). Writes elsewhere (/usr, /lib, a new top-level folder) fail with EROFS.
 */
export const WRITABLE_FOLDERS = [
  "/etc",
  "/var",
  "/var/tmp",
  "/tmp",
  "/run",
  "/root",
  "/home",
  "/opt",
  "/srv",
  "/mnt",
  "/media",
  "/usr/local",
];
/** Files Docker itself mounts into /etc: never overwritten by the folder's content. */
const ENGINE_FILES = ["etc/hostname", "etc/hosts", "etc/resolv.conf"];

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
  private readonly deathListeners = new Map<string, (death: DeathCause) => void>();
  private events: NodeJS.ReadableStream | undefined;
  private readonly startMs: number;
  /** The first reaper run (started with the runtime): resolves to the number of containers removed. */
  readonly reaped: Promise<number>;
  private readonly reaper: NodeJS.Timeout | undefined;
  private layerLimits: Promise<boolean> | undefined;
  private readonly seeds = new Map<string, Promise<FolderArchive[]>>();
  private readonly cliEnv?: Record<string, string>;
  private readonly harnesses = new Map<string, HarnessConnection>();
  /** Engine events seen per container of this run: a `kill` (from outside), an `oom`, and its `die`. */
  private readonly seen = new Map<
    string,
    {
      killed: boolean;
      outOfMemory: boolean;
      oomAt?: number;
      died?: DeathCause;
      waiters: Array<(death: DeathCause) => void>;
    }
  >();

  constructor(options: DockerRuntimeOptions = {}) {
    this.docker = options.docker ?? new Docker();
    this.startMs = (options.startSeconds ?? 120) * 1000;
    this.cliEnv = options.cliEnv;
    this.runId = options.runId ?? `${Date.now().toString(36)}-${randomBytes(4).toString("hex")}`;
    liveRuntimes.add(this);
    installProcessCleanup();
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
    const disk = spec.disk ? await this.diskSettings(spec.image, spec.disk) : undefined;
    const ulimits = Object.entries(spec.ulimits ?? {})
      .filter(([, value]) => value !== undefined)
      .map(([key, value]) => ({ Name: key, Soft: value, Hard: value }));
    const container = await this.docker.createContainer({
      name,
      Image: spec.image,
      Cmd: spec.harness ? ["python3", "-c", HARNESS_SOURCE] : spec.command,
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
        AutoRemove: false,
      },
    });
    this.live.add(container.id);
    try {
      if (spec.harness) {
        // Events first: a death must find its record (see deathOf).
        await this.watchEvents();
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
      if (disk?.seed) await this.seed(container.id, disk.seed);
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

  /**
   * Bytes the engine counts in a new container's layer before it writes anything: btrfs
   * limits a container's subvolume by all it references, the image's files included, so the
   * image's size is added to the budget; overlay2 (xfs project quotas) counts the upper layer
   * alone (0).
   */
  private async layerBase(image: string): Promise<number> {
    this.driver ??= this.docker.info().then((info: { Driver?: string }) => info.Driver ?? "");
    if ((await this.driver) !== "btrfs") return 0;
    return (await this.docker.getImage(image).inspect()).Size;
  }

  private driver: Promise<string> | undefined;

  /** Whether a container of `image` with `limit` gets a capped writable layer (a writable root), not the read-only root. */
  async writableRoot(image: string, limit: DiskLimit): Promise<boolean> {
    if ((limit.mode ?? "auto") === "read-only-root") return false;
    this.layerLimits ??= supportsLayerLimit(this.docker, image, this.labels());
    return this.layerLimits;
  }

  /** Engine settings of a disk limit; throws `ContainerError` for a form the engine cannot enforce. */
  private async diskSettings(
    image: string,
    limit: DiskLimit,
  ): Promise<{
    readOnlyRoot: boolean;
    tmpfs?: Record<string, string>;
    storageOpt?: Record<string, string>;
    seed?: FolderArchive[];
  }> {
    if (!(Number.isSafeInteger(limit.bytes) && limit.bytes > 0))
      throw new ContainerError(`disk limit must be a positive number of bytes, got ${limit.bytes}`);
    const mode = limit.mode ?? "auto";
    if (mode !== "read-only-root") {
      this.layerLimits ??= supportsLayerLimit(this.docker, image, this.labels());
      if (await this.layerLimits)
        return {
          readOnlyRoot: false,
          storageOpt: { size: String(limit.bytes + (await this.layerBase(image))) },
        };
      if (mode === "writable-layer") {
        throw new ContainerError(
          "this Docker engine cannot limit a container's writable layer (--storage-opt size needs overlay2 on xfs with pquota); use the read-only-root disk limit",
        );
      }
    }
    const folders = limit.writable ?? WRITABLE_FOLDERS;
    const tmpfs: Record<string, string> = {};
    for (const folder of folders)
      tmpfs[folder] =
        `rw,exec,nodev,size=${limit.bytes},mode=${folder.endsWith("tmp") ? "1777" : "0755"}`;
    let seed = this.seeds.get(image);
    if (!seed) {
      seed = imageFolders(this.docker, image, folders, this.labels());
      this.seeds.set(image, seed);
      seed.catch(() => this.seeds.delete(image));
    }
    return { readOnlyRoot: true, tmpfs, seed: await seed };
  }

  /** Fills the tmpfs folders of a read-only-root container with the image's content (a tar of them). */
  private async seed(id: string, archives: FolderArchive[]): Promise<void> {
    for (const { parent, archive } of archives) {
      const command = [
        "tar",
        "-x",
        "-i",
        "-p",
        "-C",
        parent,
        ...ENGINE_FILES.map((file) => `--exclude=${file}`),
      ];
      const result = await this.execWithInput(id, command, archive);
      if (result.exitCode !== 0)
        throw new ContainerError(
          `could not fill the writable folders in ${parent} (tar exit ${result.exitCode}): ${result.output.slice(0, 300)}`,
        );
    }
  }

  /** Runs a command with `input` on its stdin (as root, 60 s limit). */
  async execWithInput(
    id: string,
    command: string[],
    input: Buffer,
  ): Promise<{ exitCode: number; output: string }> {
    const harness = this.harnesses.get(id);
    if (harness) {
      const reply = await this.throughHarness(
        id,
        harness,
        { op: "run", argv: command, timeout: 60, max: 4096, stdin: input.toString("base64") },
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
      const death = await this.deathOf(id, 5000);
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
  async deathOf(id: string, waitMs: number): Promise<DeathCause | undefined> {
    if (!this.live.has(id)) return undefined; // removed by this runtime
    const record = this.record(id);
    if (record.died) return record.died;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        record.waiters = record.waiters.filter((waiter) => waiter !== done);
        resolve(undefined);
      }, waitMs);
      const done = (death: DeathCause) => {
        clearTimeout(timer);
        resolve(death);
      };
      record.waiters.push(done);
    });
  }

  private record(id: string) {
    let record = this.seen.get(id);
    if (!record) {
      record = { killed: false, outOfMemory: false, waiters: [] };
      this.seen.set(id, record);
    }
    return record;
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

  /**
   * Calls `listener` once when the container stops without `remove` (killed, out of memory,
   * crashed), from Docker's event stream. Returns a function that stops watching.
   */
  async onDeath(id: string, listener: (death: DeathCause) => void): Promise<() => void> {
    this.deathListeners.set(id, listener);
    await this.watchEvents();
    return () => this.deathListeners.delete(id);
  }

  private watchEvents(): Promise<void> {
    this.watching ??= this.openEvents().catch((error: Error) => {
      this.watching = undefined;
      throw error;
    });
    return this.watching;
  }

  private watching: Promise<void> | undefined;

  private async openEvents(): Promise<void> {
    const stream = (await this.docker.getEvents({
      filters: {
        type: ["container"],
        event: ["die", "kill", "oom"],
        label: [`${RUN_LABEL}=${this.runId}`],
      },
    })) as NodeJS.ReadableStream;
    this.events = stream;
    (stream as unknown as { unref?: () => void }).unref?.();
    const socket = (stream as unknown as { socket?: { unref(): void } }).socket;
    socket?.unref();
    let buffer = "";
    stream.on("data", (chunk: Buffer) => {
      buffer += chunk.toString("utf8");
      let newline = buffer.indexOf("\n");
      while (newline >= 0) {
        const line = buffer.slice(0, newline).trim();
        buffer = buffer.slice(newline + 1);
        newline = buffer.indexOf("\n");
        if (!line) continue;
        try {
          const event = JSON.parse(line) as {
            id?: string;
            Action?: string;
            status?: string;
            Actor?: { Attributes?: Record<string, string> };
          };
          if (!event.id) continue;
          const action = event.Action ?? event.status;
          if (!this.live.has(event.id)) continue; // removed by this runtime, or not ours
          const record = this.record(event.id);
          if (action === "kill") record.killed = true;
          else if (action === "oom") {
            record.outOfMemory = true;
            record.oomAt = Date.now();
          } else if (action === "die") {
            const exitCode = Number(event.Actor?.Attributes?.exitCode ?? -1);
            // Out of memory just before: its own processes exhausted it (the engine then kills
            // the rest, which also shows as a `kill`). Otherwise a `kill` is from outside.
            const outOfMemoryNow = record.oomAt !== undefined && Date.now() - record.oomAt < 10_000;
            const death: DeathCause = {
              cause: outOfMemoryNow || !record.killed ? "own" : "external",
              exitCode,
              outOfMemory: record.outOfMemory,
            };
            record.died = death;
            for (const waiter of record.waiters.splice(0)) waiter(death);
            const listener = this.deathListeners.get(event.id);
            if (listener) {
              this.deathListeners.delete(event.id);
              listener(death);
            }
          }
        } catch {
          // A partial or foreign line: ignore.
        }
      }
    });
    stream.on("error", () => {
      this.events = undefined;
      this.watching = undefined;
    });
    stream.on("end", () => {
      this.events = undefined;
      this.watching = undefined;
    });
  }

  /** Kills and removes a container (idempotent, never throws). */
  async remove(id: string): Promise<void> {
    this.live.delete(id);
    this.deathListeners.delete(id);
    this.harnesses.get(id)?.close();
    this.harnesses.delete(id);
    this.seen.delete(id);
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
    liveRuntimes.delete(this);
    this.deathListeners.clear();
    for (const harness of this.harnesses.values()) harness.close();
    this.harnesses.clear();
    (this.events as unknown as { destroy?: () => void } | undefined)?.destroy?.();
    this.events = undefined;
    this.watching = undefined;
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

const liveRuntimes = new Set<DockerRuntime>();
let cleanupInstalled = false;

/**
 * At exit and on SIGINT / SIGTERM / SIGHUP, removes the containers of every open runtime (one
 * listener each for the whole process, not one per runtime: a run over many task worlds opens
 * dozens); a signal then does what it would have done (unless the program has its own handler).
 */
function installProcessCleanup(): void {
  if (cleanupInstalled) return;
  cleanupInstalled = true;
  process.once("exit", () => {
    for (const runtime of liveRuntimes) runtime.removeAllSync();
  });
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    const handler = () => {
      for (const runtime of liveRuntimes) runtime.removeAllSync();
      if (process.listenerCount(signal) === 1) {
        process.removeListener(signal, handler);
        process.kill(process.pid, signal);
      }
    };
    process.on(signal, handler);
  }
}

/**
 * Whether the engine caps a container's writable layer (`--storage-opt size`): it refuses
 * the option at create time on overlay2 over anything but xfs with pquota.
 */
async function supportsLayerLimit(
  docker: Docker,
  image: string,
  labels: Record<string, string>,
): Promise<boolean> {
  try {
    const probe = await docker.createContainer({
      Image: image,
      Cmd: ["true"],
      Labels: labels,
      HostConfig: { StorageOpt: { size: "1G" }, NetworkMode: "none" },
    });
    await probe.remove({ force: true, v: true }).catch(() => {});
    return true;
  } catch {
    return false;
  }
}

/** Tar streams of image folders that share a parent folder (concatenated archives: extract with `tar -i` in `parent`). */
export interface FolderArchive {
  parent: string;
  archive: Buffer;
}

/** The image's content of `folders`, one archive per parent folder (an archive's entries start with the folder's base name). */
async function imageFolders(
  docker: Docker,
  image: string,
  folders: string[],
  labels: Record<string, string>,
): Promise<FolderArchive[]> {
  const container = await docker.createContainer({
    Image: image,
    Cmd: ["true"],
    Labels: labels,
    HostConfig: { NetworkMode: "none" },
  });
  try {
    const parts = new Map<string, Buffer[]>();
    // A nested folder (/var/tmp in /var) is in its parent's archive already.
    for (const folder of folders.filter(
      (folder) => !folders.some((other) => other !== folder && folder.startsWith(`${other}/`)),
    )) {
      const stream = await container.getArchive({ path: folder }).catch(() => undefined);
      if (!stream) continue; // not in the image: an empty folder
      const chunks: Buffer[] = [];
      for await (const chunk of stream as AsyncIterable<Buffer>) chunks.push(chunk);
      const parent = posix.dirname(folder);
      parts.set(parent, [...(parts.get(parent) ?? []), Buffer.concat(chunks)]);
    }
    return [...parts].map(([parent, archives]) => ({ parent, archive: Buffer.concat(archives) }));
  } finally {
    await container.remove({ force: true, v: true }).catch(() => {});
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

/**
 * Whether the labels name an owner process on this host that is gone: no such pid, or a pid
 * whose start time differs from the one recorded (the pid was reused).
 */
export function ownerIsDead(labels: Record<string, string>): boolean {
  if (labels[HOST_LABEL] !== undefined && labels[HOST_LABEL] !== hostname()) return false;
  const pid = Number(labels[PID_LABEL]);
  if (!Number.isInteger(pid) || pid <= 0) return false;
  if (!processAlive(pid)) return true;
  const recorded = labels[PID_START_LABEL];
  const current = processStartTime(pid);
  return recorded !== undefined && current !== undefined && recorded !== current;
}

/** Start time of a process in clock ticks after boot (/proc/<pid>/stat field 22), undefined off Linux. */
export function processStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name (which may hold spaces) start after the last ")".
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** After this long, a command's process is polled: once it has exited, output stops being read. */
const POLL_AFTER_MS = 1000;
const POLL_EVERY_MS = 250;

/**
 * Reads a multiplexed exec stream, keeping at most `maxChars`, until it ends, until the host
 * deadline, or — for a command that left a background program holding its output open
 * (`server &`) — shortly after the command's own process has exited (`running` says so).
 */
function collectOutput(
  docker: Docker,
  stream: NodeJS.ReadWriteStream,
  maxChars: number,
  deadlineMs: number,
  running: () => Promise<boolean>,
): Promise<{ output: string; truncated: boolean; hostTimedOut: boolean; elapsedMs: number }> {
  const started = Date.now();
  return new Promise((resolvePromise) => {
    let output = "";
    let truncated = false;
    let done = false;
    const sink = new PassThrough();
    sink.setEncoding("utf8"); // decodes characters split across chunks
    sink.on("data", (text: string) => {
      const room = maxChars - output.length;
      if (text.length > room) truncated = true;
      if (room > 0) output += text.slice(0, room);
    });
    docker.modem.demuxStream(stream, sink, sink);
    const finish = (hostTimedOut: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      clearTimeout(poller);
      resolvePromise({ output, truncated, hostTimedOut, elapsedMs: Date.now() - started });
    };
    const poll = async () => {
      if (done) return;
      const alive = await running().catch(() => false);
      if (done) return;
      if (alive) {
        poller = setTimeout(poll, POLL_EVERY_MS);
        return;
      }
      // The command exited; give its last output a moment to arrive, then stop reading.
      poller = setTimeout(() => {
        (stream as unknown as { destroy?: () => void }).destroy?.();
        finish(false);
      }, 500);
    };
    let poller = setTimeout(poll, POLL_AFTER_MS);
    const timer = setTimeout(() => {
      (stream as unknown as { destroy?: () => void }).destroy?.();
      finish(true);
    }, deadlineMs);
    stream.on("end", () => finish(false));
    stream.on("close", () => finish(false));
    stream.on("error", () => finish(false));
  });
}
