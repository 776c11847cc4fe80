/**
 * Environments on many Docker engines: one worker spreads its OS (or DB) sessions over a set
 * of engines — local unix sockets, remote TCP with TLS, remote over SSH — by free slots.
 *
 *   DockerHostSpec        one engine's address, parsed from a URL (`parseDockerHost`, hosts.ts)
 *   DockerEngineSet       the engines, each with its slots and health: a probe pings every
 *                         engine; one that stops answering is marked down and pinged again
 *                         with exponential backoff until it answers, then marked up
 *   MultiEngineTaskFamily a task family over the set: one per-engine family (each with its
 *                         own `DockerRuntime`), a new session goes to the engine that is up
 *                         and has the most free slots; when an engine goes down its sessions
 *                         end at once with status `task error` (in-flight turns included),
 *                         the others go on; when it is back, it gets a fresh family.
 */
import Docker from "dockerode";
import type { TaskFamilyOptions } from "../types.js";
import type {
  AssistantMessage,
  CurriculumTaskFamily,
  Difficulty,
  Expert,
  InteractResult,
  Split,
  StartResult,
  TaskSession,
} from "../types.js";
import { EnvironmentError } from "../types.js";
import { DockerRuntime, DockerUnavailableError } from "./runtime.js";
import { IMAGES, imageHash } from "./images.js";
import { DockerHostError, parseDockerHost, type DockerHostSpec } from "./hosts.js";

export type EngineState = "up" | "down";

/** One engine of a set: its client, its slots, its health. */
export class DockerEngine {
  readonly docker: Docker;
  state: EngineState = "up";
  /** Sessions running on it now. */
  active = 0;
  /** Consecutive failed probes. */
  failures = 0;
  /** Delay before the next probe of a down engine, in ms. */
  backoffMs: number;
  /** Why it was marked down (last time). */
  reason?: string;
  timer?: NodeJS.Timeout;

  constructor(
    readonly spec: DockerHostSpec,
    readonly capacity: number,
    initialBackoffMs: number,
    docker?: Docker,
  ) {
    this.docker = docker ?? new Docker(spec.options);
    this.backoffMs = initialBackoffMs;
  }

  get label(): string {
    return this.spec.label;
  }

  /** Slots free now (negative when sessions wait in the family's own queue). */
  get free(): number {
    return this.capacity - this.active;
  }
}

export interface DockerEngineSetOptions {
  /** Slots of an engine whose URL gives none. Default 16. */
  slotsPerEngine?: number;
  /** Time between probes of an engine that is up, in ms. Default 5,000. */
  probeIntervalMs?: number;
  /** A ping that takes longer than this fails, in ms. Default 3,000. */
  probeTimeoutMs?: number;
  /** Consecutive failed probes that mark an engine down. Default 2. */
  failuresBeforeDown?: number;
  /** First delay before a down engine is probed again, in ms; doubles each failure. Default 1,000. */
  initialBackoffMs?: number;
  /** Longest delay between probes of a down engine, in ms. Default 60,000. */
  maxBackoffMs?: number;
  /** Where state changes go. Default: nowhere. */
  log?: (line: string) => void;
  /** dockerode clients to use instead of ones made from the specs (tests). */
  clients?: Docker[];
}

type EngineListener = (engine: DockerEngine) => void | Promise<void>;

/** Docker engines with slots and health probes; `pick` gives the up engine with the most free slots. */
export class DockerEngineSet {
  readonly engines: DockerEngine[];
  private readonly options: Required<Omit<DockerEngineSetOptions, "log" | "clients">> &
    Pick<DockerEngineSetOptions, "log">;
  private readonly downListeners: EngineListener[] = [];
  private readonly upListeners: EngineListener[] = [];
  private closed = false;

  constructor(specs: DockerHostSpec[], options: DockerEngineSetOptions = {}) {
    if (specs.length === 0) throw new DockerHostError("no Docker hosts given");
    this.options = {
      slotsPerEngine: options.slotsPerEngine ?? 16,
      probeIntervalMs: options.probeIntervalMs ?? 5_000,
      probeTimeoutMs: options.probeTimeoutMs ?? 3_000,
      failuresBeforeDown: options.failuresBeforeDown ?? 2,
      initialBackoffMs: options.initialBackoffMs ?? 1_000,
      maxBackoffMs: options.maxBackoffMs ?? 60_000,
      log: options.log,
    };
    const labels = new Set<string>();
    for (const spec of specs) {
      if (labels.has(spec.label))
        throw new DockerHostError(`Docker host ${spec.label} is given twice`);
      labels.add(spec.label);
    }
    this.engines = specs.map(
      (spec, i) =>
        new DockerEngine(
          spec,
          spec.slots ?? this.options.slotsPerEngine,
          this.options.initialBackoffMs,
          options.clients?.[i],
        ),
    );
  }

  /** Calls `listener` whenever an engine is marked down (its sessions must end). */
  onDown(listener: EngineListener): void {
    this.downListeners.push(listener);
  }

  /** Calls `listener` whenever a down engine answers again. */
  onUp(listener: EngineListener): void {
    this.upListeners.push(listener);
  }

  /** Pings every engine once (marking those that do not answer down), then starts the periodic probes. */
  async start(): Promise<void> {
    await Promise.all(
      this.engines.map(async (engine) => {
        if (await this.ping(engine)) this.schedule(engine, this.options.probeIntervalMs);
        else await this.markDown(engine, "it did not answer at start");
      }),
    );
  }

  /** The up engine with the most free slots (full engines too: the family queues), or none. */
  pick(): DockerEngine | undefined {
    let best: DockerEngine | undefined;
    for (const engine of this.engines) {
      if (engine.state === "up" && (!best || engine.free > best.free)) best = engine;
    }
    return best;
  }

  /** Engines that are up. */
  get upCount(): number {
    return this.engines.filter((engine) => engine.state === "up").length;
  }

  /** Something failed on `engine`: ping it now and mark it down if it does not answer. Resolves with whether it is up. */
  async check(engine: DockerEngine, reason: string): Promise<boolean> {
    if (engine.state === "down") return false;
    if (await this.ping(engine)) return true;
    await this.markDown(engine, reason);
    return false;
  }

  /** Marks `engine` down (its sessions end) and schedules probes with backoff. Idempotent. */
  async markDown(engine: DockerEngine, reason: string): Promise<void> {
    if (this.closed || engine.state === "down") return;
    engine.state = "down";
    engine.reason = reason;
    engine.backoffMs = this.options.initialBackoffMs;
    this.options.log?.(
      `[engines] Docker engine ${engine.label} is down: ${reason}; retrying in ${engine.backoffMs / 1000} s`,
    );
    this.schedule(engine, engine.backoffMs);
    await Promise.all(this.downListeners.map(async (listener) => listener(engine)));
  }

  /** Stops the probes. */
  close(): void {
    this.closed = true;
    for (const engine of this.engines) clearTimeout(engine.timer);
  }

  private schedule(engine: DockerEngine, delayMs: number): void {
    clearTimeout(engine.timer);
    if (this.closed) return;
    engine.timer = setTimeout(() => void this.probe(engine), delayMs);
    engine.timer.unref();
  }

  private async probe(engine: DockerEngine): Promise<void> {
    if (this.closed) return;
    const alive = await this.ping(engine);
    if (this.closed) return;
    if (engine.state === "up") {
      engine.failures = alive ? 0 : engine.failures + 1;
      if (engine.failures >= this.options.failuresBeforeDown) {
        await this.markDown(engine, `${engine.failures} health probes failed`);
        return;
      }
      this.schedule(engine, this.options.probeIntervalMs);
      return;
    }
    if (!alive) {
      engine.backoffMs = Math.min(this.options.maxBackoffMs, engine.backoffMs * 2);
      this.schedule(engine, engine.backoffMs);
      return;
    }
    try {
      await Promise.all(this.upListeners.map(async (listener) => listener(engine)));
    } catch (error) {
      // Could not get it ready (e.g. its family failed to start): stay down, try again later.
      engine.backoffMs = Math.min(this.options.maxBackoffMs, engine.backoffMs * 2);
      this.options.log?.(
        `[engines] Docker engine ${engine.label} answers but is not usable: ${(error as Error).message}`,
      );
      this.schedule(engine, engine.backoffMs);
      return;
    }
    engine.state = "up";
    engine.failures = 0;
    engine.reason = undefined;
    this.options.log?.(`[engines] Docker engine ${engine.label} is back up`);
    this.schedule(engine, this.options.probeIntervalMs);
  }

  private async ping(engine: DockerEngine): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        engine.docker.ping(),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error("timeout")), this.options.probeTimeoutMs);
        }),
      ]);
      return true;
    } catch {
      return false;
    } finally {
      clearTimeout(timer);
    }
  }
}

/** Creates a task family by name with options (the registry's `createTaskFamily`). */
export type EngineFamilyFactory = (
  name: string,
  options: TaskFamilyOptions,
) => Promise<CurriculumTaskFamily>;

/** One engine's share of a multi-engine family: its runtime and the family on it. */
interface Lane {
  runtime: DockerRuntime;
  family: CurriculumTaskFamily;
}

/** Families whose sessions run in containers; the others need no engine. */
const DOCKER_TASKS: ReadonlySet<string> = new Set(["os", "db"]);

export interface EngineHostsOptions extends DockerEngineSetOptions {
  /** Docker host URLs (see `parseDockerHost`). */
  hosts: string[];
  /** TLS folder (ca.pem, cert.pem, key.pem) of tcp:// hosts without their own `?cert-path=`. Default DOCKER_CERT_PATH. */
  certPath?: string;
}

/**
 * Family `name` over the engines of `engines.hosts` when it runs in containers (os, db), else
 * the plain family (the hosts do not concern it).
 */
export async function createTaskFamilyOnEngines(
  name: string,
  options: TaskFamilyOptions,
  engines: EngineHostsOptions,
  createFamily: EngineFamilyFactory,
): Promise<CurriculumTaskFamily> {
  if (!DOCKER_TASKS.has(name) || engines.hosts.length === 0) return createFamily(name, options);
  const specs = engines.hosts.map((host) => parseDockerHost(host, { certPath: engines.certPath }));
  return MultiEngineTaskFamily.create(
    name,
    options,
    new DockerEngineSet(specs, engines),
    createFamily,
  );
}

/**
 * A task family over many Docker engines (see the module comment). Create it with
 * `MultiEngineTaskFamily.create`.
 */
export class MultiEngineTaskFamily implements CurriculumTaskFamily {
  readonly name: string;
  readonly engines: DockerEngineSet;
  private readonly lanes = new Map<DockerEngine, Lane>();
  private readonly sessions = new Map<DockerEngine, Set<EngineSession>>();
  /** A family that answers indices and experts (they need no engine). */
  private reference!: CurriculumTaskFamily;
  private closed = false;

  private constructor(
    name: string,
    engines: DockerEngineSet,
    private readonly options: TaskFamilyOptions,
    private readonly createFamily: EngineFamilyFactory,
  ) {
    this.name = name;
    this.engines = engines;
  }

  /**
   * Family `name` on every engine of `engines` that answers (at least one must); the others
   * join when their probe succeeds. The set is started and, on `close`, stopped.
   */
  static async create(
    name: string,
    options: TaskFamilyOptions,
    engines: DockerEngineSet,
    createFamily: EngineFamilyFactory,
  ): Promise<MultiEngineTaskFamily> {
    if (name === "db") {
      const remote = engines.engines.filter((engine) => !engine.spec.local);
      if (remote.length)
        throw new DockerHostError(
          `task db needs engines on this machine (unix sockets): its MariaDB talks over a bind-mounted unix socket; not ${remote.map((e) => e.label).join(", ")}`,
        );
    }
    const family = new MultiEngineTaskFamily(name, engines, options, createFamily);
    engines.onDown((engine) => family.engineDown(engine));
    engines.onUp((engine) => family.engineUp(engine));
    await engines.start();
    const up = engines.engines.filter((engine) => engine.state === "up");
    if (up.length === 0) {
      engines.close();
      throw new DockerUnavailableError(
        `no Docker engine answers: ${engines.engines.map((e) => e.label).join(", ")}`,
      );
    }
    // An engine the family cannot use yet (e.g. without the image) is down until a probe finds it usable.
    for (const engine of up) {
      try {
        await family.openLane(engine);
      } catch (error) {
        await engines.markDown(engine, (error as Error).message);
      }
    }
    if (family.lanes.size === 0) {
      const reasons = engines.engines.map((e) => `${e.label}: ${e.reason ?? "down"}`).join("; ");
      await family.close();
      throw new DockerUnavailableError(`task ${name} cannot run on any Docker engine: ${reasons}`);
    }
    return family;
  }

  get difficulties(): Difficulty[] {
    return this.reference.difficulties;
  }

  indices(split: Split): number[] {
    return this.reference.indices(split);
  }

  indicesAt(split: Split, difficulty: Difficulty): number[] {
    return this.reference.indicesAt(split, difficulty);
  }

  expert(index: number): Expert {
    return this.reference.expert(index);
  }

  wrongExpert(index: number): Expert {
    if (!this.reference.wrongExpert)
      throw new EnvironmentError(`task ${this.name} has no wrong expert`);
    return this.reference.wrongExpert(index);
  }

  /** The engine a session runs on (tests, logs). */
  engineOf(session: TaskSession): DockerEngine | undefined {
    return session instanceof EngineSession ? session.engine : undefined;
  }

  /** Starts a session on the up engine with the most free slots. Throws when no engine is up. */
  async startSession(index: number): Promise<TaskSession> {
    if (this.closed) throw new EnvironmentError(`task ${this.name} over many engines is closed`);
    const engine = this.engines.pick();
    const lane = engine && this.lanes.get(engine);
    if (!engine || !lane) {
      const states = this.engines.engines
        .map((e) => `${e.label} (${e.state}${e.reason ? `: ${e.reason}` : ""})`)
        .join(", ");
      throw new EnvironmentError(`task ${this.name}: no Docker engine is up: ${states}`);
    }
    engine.active += 1;
    let inner: TaskSession;
    try {
      inner = await lane.family.startSession(index);
    } catch (error) {
      engine.active -= 1;
      await this.engines.check(engine, `starting a session failed: ${(error as Error).message}`);
      throw error;
    }
    if (engine.state === "down" || this.lanes.get(engine) !== lane) {
      engine.active -= 1;
      void inner.cancel().catch(() => undefined);
      throw new EnvironmentError(
        `task ${this.name}: Docker engine ${engine.label} went down while the session started`,
      );
    }
    const sessions = this.sessions.get(engine) ?? new Set();
    this.sessions.set(engine, sessions);
    const session = new EngineSession(inner, engine, () => {
      engine.active -= 1;
      sessions.delete(session);
    });
    sessions.add(session);
    return session;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.engines.close();
    for (const sessions of this.sessions.values())
      await Promise.all([...sessions].map((session) => session.cancel()));
    await Promise.all([...this.lanes.values()].map((lane) => closeLane(lane)));
    this.lanes.clear();
  }

  private async openLane(engine: DockerEngine): Promise<void> {
    const image =
      typeof this.options.image === "string"
        ? this.options.image
        : IMAGES[this.name as keyof typeof IMAGES]?.tag;
    if (image && (await imageHash(engine.docker, image)) === undefined) {
      throw new EnvironmentError(
        `image ${image} is missing: run agentrl env build --docker-host ${engine.label}`,
      );
    }
    const runtime = new DockerRuntime({ docker: engine.docker, cliEnv: engine.spec.cliEnv });
    try {
      const family = await this.createFamily(this.name, { ...this.options, runtime });
      this.reference ??= family;
      this.lanes.set(engine, { runtime, family });
    } catch (error) {
      await runtime.close();
      throw new EnvironmentError(
        `task ${this.name} could not start on Docker engine ${engine.label}: ${(error as Error).message}`,
      );
    }
  }

  /** Ends the engine's sessions with `task error` at once; frees what is left in the background. */
  private engineDown(engine: DockerEngine): void {
    const reason = `the Docker engine ${engine.label} stopped answering (${engine.reason ?? "down"})`;
    for (const session of this.sessions.get(engine) ?? []) session.engineFailed(reason);
  }

  /** A fresh family on an engine that is back; the old one's containers are removed first. */
  private async engineUp(engine: DockerEngine): Promise<void> {
    if (this.closed) return;
    const old = this.lanes.get(engine);
    this.lanes.delete(engine);
    if (old) await closeLane(old);
    await this.openLane(engine);
  }
}

/** Closes a lane's family and runtime (removing the runtime's containers); never throws. */
async function closeLane(lane: Lane): Promise<void> {
  await lane.family.close?.().catch(() => undefined);
  await lane.runtime.close().catch(() => undefined);
}

/** A session of one engine: ends with `task error` the moment its engine is marked down. */
class EngineSession implements TaskSession {
  readonly start: StartResult;
  private failure?: InteractResult;
  private failed?: (result: InteractResult) => void;
  private readonly failedOnce: Promise<InteractResult>;
  private ended = false;

  constructor(
    private readonly inner: TaskSession,
    readonly engine: DockerEngine,
    private readonly onEnd: () => void,
  ) {
    this.start = inner.start;
    this.failedOnce = new Promise((resolve) => {
      this.failed = resolve;
    });
  }

  async interact(message: AssistantMessage): Promise<InteractResult> {
    if (this.failure) return this.failure;
    const turn = this.inner.interact(message);
    turn.catch(() => undefined); // a turn abandoned by a failed engine may reject later, unobserved
    const result = await Promise.race([turn, this.failedOnce]);
    if (result.finish) this.end();
    return result;
  }

  async cancel(): Promise<void> {
    this.end();
    if (this.failure) return; // the engine is down: its cancel was sent already
    await this.inner.cancel();
  }

  /** Ends the session with `task error` (the worker calls it when a turn times out). */
  async fail(reason: string): Promise<void> {
    this.end();
    const failable = this.inner as TaskSession & { fail?: (reason: string) => Promise<void> };
    if (typeof failable.fail === "function") await failable.fail(reason);
    else await this.inner.cancel();
  }

  /** The engine went down: this session's turn (now or next) answers `task error`. */
  engineFailed(reason: string): void {
    if (this.failure) return;
    this.failure = {
      finish: true,
      reward: 0,
      status: "task error",
      messages: [{ role: "user", content: `The environment failed: ${reason}` }],
      metrics: {},
    };
    this.failed?.(this.failure);
    this.end();
    // Frees the family's slot; the containers go when the engine is back (its lane is closed then).
    void this.inner.cancel().catch(() => undefined);
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    this.onEnd();
  }
}
