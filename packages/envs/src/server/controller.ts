/**
 * The controller: one HTTP service (default port 5020, routes under `/api`) that knows the
 * workers of every task, sends each new session to the live worker with the most free slots,
 * and relays the session's interactions to it.
 *
 * Workers are remote (they register and heartbeat over HTTP, `env worker`) or local
 * (`TaskWorker`s in this process, added with `addLocalWorker`, as `env serve` does).
 * A session ends, and frees its worker's slot, when the episode finishes, on cancel, when it
 * sits idle too long (`cancelled`), when one interaction takes too long or its worker dies
 * (`task error`). Ended sessions are remembered for a while so that a late `interact` gets
 * the status they ended with.
 */
import type http from "node:http";
import { randomBytes } from "node:crypto";
import type { AssistantMessage, InteractResult, SampleStatus, StartResult } from "../types.js";
import {
  DEFAULT_CONTROLLER_PORT,
  EnvironmentApiError,
  SESSION_HEADER,
  ServerConfigError,
  TASK_NAME_ALIASES,
  heartbeatRequestSchema,
  parseAssistantTurn,
  parseRequest,
  sampleNumberOf,
  splitSchema,
  difficultySchema,
  startSampleRequestSchema,
  type DifficultyIndices,
  type HeartbeatRequest,
} from "./protocol.js";
import {
  ConnectionError,
  JsonRequester,
  closeServer,
  createJsonServer,
  errorMessageOf,
  isLoopbackHost,
  listen,
  sessionIdOf,
  type RouteRequest,
} from "./http.js";
import { type TaskWorker, sessionHeader, taskErrorResult } from "./worker.js";
import { agentBenchRoutes } from "./agentbench.js";
import { generateToken } from "./token.js";

export interface ControllerOptions {
  /** Address to bind. Default `127.0.0.1`; binding any other address requires `token`. */
  host?: string;
  /** Port to bind; 0 picks a free one. Default 5020. */
  port?: number;
  /**
   * Bearer token every request must carry, workers' heartbeats included (it is also sent to
   * workers). Default: a random one generated here, readable as `controller.token`.
   */
  token?: string;
  /** A remote worker silent for this long is dead, in ms. Default 11,000. */
  heartbeatTimeoutMs?: number;
  /** A session with no interaction for this long is cancelled, in ms. Default 300,000 (5 min). */
  idleTimeoutMs?: number;
  /** One interaction may take this long before the session ends with `task error`, in ms. Default 240,000 (4 min). */
  interactionTimeoutMs?: number;
  /** Extra time given to a remote worker beyond `interactionTimeoutMs` (it enforces that limit itself), in ms. Default 5,000. */
  workerGraceMs?: number;
  /** How long an ended session is remembered, in ms. Default 600,000 (10 min). */
  finishedRetentionMs?: number;
  /** How often dead workers and idle sessions are looked for, in ms. Default 1,000. */
  sweepIntervalMs?: number;
  /** Largest accepted request body in bytes (refused with 413 as soon as it is passed). Default 8 MiB. */
  maxBodyBytes?: number;
  /** Time a client has to send a whole request, in ms (not the time to answer it). Default 60,000. */
  requestTimeoutMs?: number;
  /** Time a client has to send the request headers, in ms. Default 20,000. */
  headersTimeoutMs?: number;
  /** Most open connections at once. Default 4,096. */
  maxConnections?: number;
  /** Where events (worker joined / died) go. Default: nowhere. */
  log?: (line: string) => void;
}

/** How the controller reaches a worker: directly (same process) or over HTTP. */
interface WorkerLink {
  start(sessionId: string, index: number): Promise<StartResult>;
  interact(
    sessionId: string,
    message: AssistantMessage,
    timeoutMs: number,
  ): Promise<InteractResult>;
  cancel(sessionId: string): Promise<void>;
  cancelAll(): Promise<void>;
}

type WorkerStatus = "alive" | "dead";

interface WorkerEntry {
  id: number;
  address: string;
  capacity: number;
  /** Sessions the controller has sent to this worker and not yet seen end. */
  current: number;
  /** Milliseconds since the epoch of the last heartbeat (local workers: always now). */
  lastVisit: number;
  status: WorkerStatus;
  local: boolean;
  link: WorkerLink;
}

interface TaskEntry {
  indices: number[];
  indexSet: Set<number>;
  splits?: { train: number[]; test: number[] };
  difficulties?: DifficultyIndices;
  workers: Map<number, WorkerEntry>;
  nextWorkerId: number;
}

interface SessionEntry {
  id: string;
  name: string;
  index: number;
  workerId: number;
  started: number;
  lastUpdate: number;
  busy: boolean;
  /** Set once the session has ended: what a later `interact` answers. */
  ended?: InteractResult;
  endedAt?: number;
}

/** A controller's HTTP link to a remote worker. */
class HttpWorkerLink implements WorkerLink {
  constructor(
    private readonly address: string,
    private readonly requester: JsonRequester,
    private readonly token: string | undefined,
    private readonly startTimeoutMs: number,
  ) {}

  private async call(
    path: string,
    body: unknown,
    sessionId: string | undefined,
    timeoutMs: number,
  ): Promise<unknown> {
    const response = await this.requester.request(`${this.address}${path}`, {
      method: "POST",
      body,
      timeoutMs,
      headers: {
        ...(sessionId ? sessionHeader(sessionId) : {}),
        ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
      },
    });
    if (response.status !== 200)
      throw new EnvironmentApiError(response.status, errorMessageOf(response.body));
    return response.body;
  }

  async start(sessionId: string, index: number): Promise<StartResult> {
    return (await this.call(
      "/start_sample",
      { index, session_id: sessionId },
      undefined,
      this.startTimeoutMs,
    )) as StartResult;
  }
  async interact(
    sessionId: string,
    message: AssistantMessage,
    timeoutMs: number,
  ): Promise<InteractResult> {
    return (await this.call(
      "/interact",
      { messages: [message] },
      sessionId,
      timeoutMs,
    )) as InteractResult;
  }
  async cancel(sessionId: string): Promise<void> {
    await this.call("/cancel", {}, sessionId, 10_000);
  }
  async cancelAll(): Promise<void> {
    await this.call("/cancel_all", {}, undefined, 30_000);
  }
}

/** A controller's direct link to a worker in the same process. */
class LocalWorkerLink implements WorkerLink {
  constructor(private readonly worker: TaskWorker) {}
  start(sessionId: string, index: number): Promise<StartResult> {
    return this.worker.start(sessionId, index);
  }
  interact(sessionId: string, message: AssistantMessage): Promise<InteractResult> {
    return this.worker.interact(sessionId, message);
  }
  cancel(sessionId: string): Promise<void> {
    return this.worker.cancel(sessionId);
  }
  async cancelAll(): Promise<void> {
    await this.worker.cancelAll();
  }
}

export class Controller {
  readonly options: Required<Omit<ControllerOptions, "log">> & Pick<ControllerOptions, "log">;
  private readonly tasks = new Map<string, TaskEntry>();
  private readonly sessions = new Map<string, SessionEntry>();
  private readonly requester = new JsonRequester();
  private readonly sessionPrefix = randomBytes(3).toString("hex");
  private nextSessionNumber = 0;
  private server?: http.Server;
  private sweeper?: NodeJS.Timeout;
  private boundPort?: number;

  constructor(options: ControllerOptions = {}) {
    this.options = {
      host: options.host ?? "127.0.0.1",
      port: options.port ?? DEFAULT_CONTROLLER_PORT,
      token: options.token ?? generateToken(),
      heartbeatTimeoutMs: options.heartbeatTimeoutMs ?? 11_000,
      idleTimeoutMs: options.idleTimeoutMs ?? 300_000,
      interactionTimeoutMs: options.interactionTimeoutMs ?? 240_000,
      workerGraceMs: options.workerGraceMs ?? 5_000,
      finishedRetentionMs: options.finishedRetentionMs ?? 600_000,
      sweepIntervalMs: options.sweepIntervalMs ?? 1_000,
      maxBodyBytes: options.maxBodyBytes ?? 8 * 1024 * 1024,
      requestTimeoutMs: options.requestTimeoutMs ?? 60_000,
      headersTimeoutMs: options.headersTimeoutMs ?? 20_000,
      maxConnections: options.maxConnections ?? 4_096,
      log: options.log,
    };
    if (!isLoopbackHost(this.options.host) && !options.token) {
      throw new ServerConfigError(
        `binding ${this.options.host} exposes the controller beyond this machine: set a token (--token or AGENTRL_TOKEN) that its clients and workers know`,
      );
    }
  }

  /** The bearer token every request must carry (given, or generated at construction). */
  get token(): string {
    return this.options.token;
  }

  /** The base URL clients use, e.g. `http://127.0.0.1:5020` (after `listen`). */
  get url(): string {
    if (this.boundPort === undefined)
      throw new EnvironmentApiError(500, "the controller is not listening yet");
    const host =
      this.options.host === "0.0.0.0" || this.options.host === "::"
        ? "127.0.0.1"
        : this.options.host;
    return `http://${host.includes(":") ? `[${host}]` : host}:${this.boundPort}`;
  }

  /** Adds a worker that lives in this process: always alive, called without HTTP. */
  addLocalWorker(worker: TaskWorker): void {
    const task = this.taskFor(
      worker.name,
      worker.indices(),
      { train: worker.indices("train"), test: worker.indices("test") },
      worker.difficultyIndices(),
    );
    const id = task.nextWorkerId++;
    task.workers.set(id, {
      id,
      address: `local:${worker.name}#${id}`,
      capacity: worker.concurrency,
      current: 0,
      lastVisit: Date.now(),
      status: "alive",
      local: true,
      link: new LocalWorkerLink(worker),
    });
  }

  /** Starts serving; resolves with the base URL. */
  async listen(): Promise<string> {
    this.server = createJsonServer({
      routes: { ...this.routes(), ...agentBenchRoutes(this) },
      token: this.options.token,
      maxBodyBytes: this.options.maxBodyBytes,
      requestTimeoutMs: this.options.requestTimeoutMs,
      headersTimeoutMs: this.options.headersTimeoutMs,
      maxConnections: this.options.maxConnections,
    });
    this.boundPort = await listen(this.server, this.options.port, this.options.host);
    this.sweeper = setInterval(() => this.sweep(), this.options.sweepIntervalMs);
    this.sweeper.unref();
    return this.url;
  }

  /** Cancels every session, stops the sweep and the server. */
  async close(): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
    await this.cancelAll(undefined);
    this.requester.close();
    if (this.server) await closeServer(this.server);
  }

  // ── routes ────────────────────────────────────────────────────────────────

  private routes(): Record<
    string,
    (request: RouteRequest) => Promise<{ body: unknown; headers?: Record<string, string> }>
  > {
    return {
      "POST /api/start_sample": async (request) => {
        const { name, index } = parseRequest(
          startSampleRequestSchema,
          request.body,
          "start_sample body",
        );
        const { sessionId, start } = await this.startSample(name, index);
        return { body: start, headers: { [SESSION_HEADER]: sessionId } };
      },
      "POST /api/interact": async (request) => {
        const sessionId = sessionIdOf(request);
        this.sessionOrThrow(sessionId);
        return { body: await this.interact(sessionId, parseAssistantTurn(request.body)) };
      },
      "POST /api/cancel": async (request) => {
        const sessionId = sessionIdOf(request);
        await this.cancel(sessionId);
        return { body: { session_id: sessionId } };
      },
      "POST /api/cancel_all": async (request) => {
        const name = request.query.get("name") ?? undefined;
        return { body: { cancelled: await this.cancelAll(name) } };
      },
      "GET /api/list_workers": async () => ({ body: this.listWorkers() }),
      "GET /api/list_sessions": async () => ({ body: this.listSessions() }),
      "GET /api/get_indices": async (request) => {
        const name = request.query.get("name");
        if (!name)
          throw new EnvironmentApiError(
            400,
            "missing query parameter name (e.g. /api/get_indices?name=os)",
          );
        const split = request.query.get("split");
        const difficulty = request.query.get("difficulty");
        if (difficulty !== null)
          return {
            body: this.getIndicesAt(
              name,
              parseRequest(splitSchema, split ?? "", "split"),
              Number(parseRequest(difficultySchema, difficulty, "difficulty")),
            ),
          };
        return {
          body: this.getIndices(
            name,
            split === null ? undefined : parseRequest(splitSchema, split, "split"),
          ),
        };
      },
      "POST /api/receive_heartbeat": async (request) => {
        this.receiveHeartbeat(parseRequest(heartbeatRequestSchema, request.body, "heartbeat body"));
        return { body: { ok: true } };
      },
    };
  }

  // ── the API, also callable in-process ─────────────────────────────────────

  /**
   * Dispatches a new session to the live worker of `name` (or its FC alias, e.g. `kg-std`)
   * with the most free slots. `index` may be a numeric string, as AgentBench allows.
   */
  async startSample(
    requestedName: string,
    requestedIndex: number | string,
  ): Promise<{ sessionId: string; start: StartResult }> {
    const name = this.resolveTaskName(requestedName);
    const task = name === undefined ? undefined : this.tasks.get(name);
    if (!task || name === undefined)
      throw new EnvironmentApiError(
        404,
        `unknown task "${requestedName}"; known: ${this.taskNames().join(", ") || "none (no worker registered)"}`,
      );
    const index = sampleNumberOf(requestedIndex) ?? Number.NaN;
    if (!task.indexSet.has(index))
      throw new EnvironmentApiError(
        400,
        `index ${JSON.stringify(requestedIndex)} is not a sample of task ${name} (it has ${task.indices.length} samples; see /api/get_indices?name=${name})`,
      );
    const worker = this.pickWorker(task);
    if (!worker)
      throw new EnvironmentApiError(406, `no live worker of task ${name} has a free slot`);
    worker.current += 1;
    const sessionId = `${this.sessionPrefix}-${this.nextSessionNumber++}`;
    const now = Date.now();
    const session: SessionEntry = {
      id: sessionId,
      name,
      index,
      workerId: worker.id,
      started: now,
      lastUpdate: now,
      busy: true,
    };
    this.sessions.set(sessionId, session);
    try {
      const start = await worker.link.start(sessionId, index);
      session.busy = false;
      session.lastUpdate = Date.now();
      // Cancelled (or its worker declared dead) while starting: free it on the worker now.
      if (session.ended && worker.status === "alive")
        void worker.link.cancel(sessionId).catch(() => undefined);
      return { sessionId, start };
    } catch (error) {
      this.sessions.delete(sessionId);
      worker.current = Math.max(0, worker.current - 1);
      if (error instanceof ConnectionError)
        this.markDead(name, worker, `it did not answer: ${error.message}`);
      if (error instanceof EnvironmentApiError)
        throw new EnvironmentApiError(
          error.status,
          `worker ${worker.id} of task ${name}: ${error.message}`,
        );
      throw new EnvironmentApiError(
        500,
        `worker ${worker.id} of task ${name} failed to start sample ${index}: ${(error as Error).message}`,
      );
    }
  }

  /** Relays one assistant turn. Worker failures end the session with `task error` (never throw). */
  async interact(sessionId: string, message: AssistantMessage): Promise<InteractResult> {
    const session = this.sessionOrThrow(sessionId);
    if (session.ended) return session.ended;
    if (session.busy)
      throw new EnvironmentApiError(
        409,
        `session ${sessionId} is still busy with the previous interaction`,
      );
    const worker = this.tasks.get(session.name)?.workers.get(session.workerId);
    if (!worker) return this.endSession(session, taskErrorResult("its worker is gone"));
    session.busy = true;
    session.lastUpdate = Date.now();
    let result: InteractResult;
    try {
      result = await worker.link.interact(
        sessionId,
        message,
        this.options.interactionTimeoutMs + this.options.workerGraceMs,
      );
    } catch (error) {
      session.busy = false;
      if (session.ended) return session.ended;
      if (error instanceof ConnectionError && error.status !== 504)
        this.markDead(session.name, worker, error.message);
      void worker.link.cancel(sessionId).catch(() => undefined);
      return this.endSession(
        session,
        taskErrorResult(`the worker of task ${session.name} failed: ${(error as Error).message}`),
      );
    }
    session.busy = false;
    session.lastUpdate = Date.now();
    if (session.ended) return session.ended;
    if (result.finish) this.endSession(session, { ...result, messages: [] });
    return result;
  }

  /**
   * Cancels a session; it ends with `status` (default `cancelled`; the v0.2 protocol ends one
   * with `agent context limit`). 404 for an id the controller never gave or has forgotten.
   */
  async cancel(sessionId: string, status: SampleStatus = "cancelled"): Promise<void> {
    const session = this.sessionOrThrow(sessionId);
    if (session.ended) return;
    this.endSession(session, { finish: true, reward: 0, status, messages: [], metrics: {} });
    const worker = this.tasks.get(session.name)?.workers.get(session.workerId);
    if (worker && worker.status === "alive")
      await worker.link.cancel(sessionId).catch(() => undefined);
  }

  /** Cancels every running session (of task `name`, when given); resolves with the count. */
  async cancelAll(name: string | undefined): Promise<number> {
    const task = name === undefined ? undefined : (this.resolveTaskName(name) ?? name);
    const running = [...this.sessions.values()].filter(
      (s) => !s.ended && (task === undefined || s.name === task),
    );
    await Promise.all(running.map((s) => this.cancel(s.id)));
    return running.length;
  }

  /** Sample indices of `name`: one split, or all (the original's answer). */
  getIndices(requestedName: string, split?: "train" | "test"): number[] {
    const name = this.resolveTaskName(requestedName);
    const task = name === undefined ? undefined : this.tasks.get(name);
    if (!task)
      throw new EnvironmentApiError(
        404,
        `unknown task "${requestedName}"; known: ${this.taskNames().join(", ") || "none"}`,
      );
    if (!split) return task.indices;
    if (!task.splits)
      throw new EnvironmentApiError(
        400,
        `the workers of task ${name} did not report splits; ask without ?split`,
      );
    return task.splits[split];
  }

  /** Sample indices of `name`'s split at one difficulty (as its workers reported them). */
  getIndicesAt(requestedName: string, split: "train" | "test", difficulty: number): number[] {
    const name = this.resolveTaskName(requestedName);
    const task = name === undefined ? undefined : this.tasks.get(name);
    if (!task)
      throw new EnvironmentApiError(
        404,
        `unknown task "${requestedName}"; known: ${this.taskNames().join(", ") || "none"}`,
      );
    if (!task.difficulties)
      throw new EnvironmentApiError(
        400,
        `the workers of task ${name} did not report difficulties; ask without ?difficulty`,
      );
    const entry = task.difficulties[String(difficulty)];
    if (!entry)
      throw new EnvironmentApiError(
        400,
        `task ${name} has no difficulty ${difficulty} (its difficulties: ${Object.keys(task.difficulties).join(", ")})`,
      );
    return entry[split];
  }

  listWorkers(): Record<
    string,
    {
      index_count: number;
      workers: Record<number, Omit<WorkerEntry, "link" | "lastVisit"> & { last_visit: number }>;
    }
  > {
    return Object.fromEntries(
      [...this.tasks].map(([name, task]) => [
        name,
        {
          index_count: task.indices.length,
          workers: Object.fromEntries(
            [...task.workers].map(([id, w]) => [
              id,
              {
                id,
                address: w.address,
                capacity: w.capacity,
                current: w.current,
                status: w.status,
                local: w.local,
                last_visit: (w.local ? Date.now() : w.lastVisit) / 1000,
              },
            ]),
          ),
        },
      ]),
    );
  }

  /** The running sessions (ended ones are not listed). Times in seconds since the epoch, as the original. */
  listSessions(): Record<
    string,
    {
      name: string;
      index: number;
      worker_id: number;
      start: number;
      last_update: number;
      busy: boolean;
    }
  > {
    const listed: ReturnType<Controller["listSessions"]> = {};
    for (const s of this.sessions.values()) {
      if (!s.ended)
        listed[s.id] = {
          name: s.name,
          index: s.index,
          worker_id: s.workerId,
          start: s.started / 1000,
          last_update: s.lastUpdate / 1000,
          busy: s.busy,
        };
    }
    return listed;
  }

  /** Registers a remote worker or refreshes it; a worker that was dead comes back empty. */
  receiveHeartbeat(beat: HeartbeatRequest): void {
    const task = this.taskFor(beat.name, beat.indices, beat.splits, beat.difficulties);
    const existing = [...task.workers.values()].find((w) => w.address === beat.address && !w.local);
    if (existing) {
      existing.lastVisit = Date.now();
      existing.capacity = beat.concurrency;
      if (existing.status === "dead") {
        // Its sessions were ended while it was silent: clear them on the worker before reuse.
        existing.status = "alive";
        existing.current = 0;
        void existing.link.cancelAll().catch(() => undefined);
        this.options.log?.(
          `[controller] worker ${existing.id} of task ${beat.name} is back (${beat.address})`,
        );
      }
      return;
    }
    const id = task.nextWorkerId++;
    task.workers.set(id, {
      id,
      address: beat.address,
      capacity: beat.concurrency,
      current: 0,
      lastVisit: Date.now(),
      status: "alive",
      local: false,
      link: new HttpWorkerLink(
        beat.address.replace(/\/+$/, ""),
        this.requester,
        this.options.token,
        this.options.interactionTimeoutMs + this.options.workerGraceMs,
      ),
    });
    this.options.log?.(
      `[controller] worker ${id} of task ${beat.name} joined (${beat.address}, ${beat.concurrency} slots)`,
    );
  }

  /** The served task a name means: itself, or the task an FC alias (`os-std`, …) stands for. */
  resolveTaskName(name: string): string | undefined {
    if (this.tasks.has(name)) return name;
    const alias = Object.hasOwn(TASK_NAME_ALIASES, name) ? TASK_NAME_ALIASES[name] : undefined;
    return alias !== undefined && this.tasks.has(alias) ? alias : undefined;
  }

  /** Names of the tasks some worker serves. */
  taskNames(): string[] {
    return [...this.tasks.keys()];
  }

  /** True while the session runs (started, not ended). */
  isRunning(sessionId: string): boolean {
    const session = this.sessions.get(sessionId);
    return session !== undefined && !session.ended;
  }

  /** The int a session id carries (`<prefix>-<n>` → n): the session id of the v0.2 protocol. */
  sessionNumberOf(sessionId: string): number {
    return Number(sessionId.slice(this.sessionPrefix.length + 1));
  }

  /** The session id of a v0.2 int session id. */
  sessionIdOfNumber(sessionNumber: number): string {
    return `${this.sessionPrefix}-${sessionNumber}`;
  }

  // ── internals ─────────────────────────────────────────────────────────────

  private taskFor(
    name: string,
    indices: number[],
    splits: { train: number[]; test: number[] } | undefined,
    difficulties?: DifficultyIndices,
  ): TaskEntry {
    const existing = this.tasks.get(name);
    if (existing) {
      const same =
        existing.indices.length === indices.length &&
        indices.every((index) => existing.indexSet.has(index));
      if (!same)
        throw new EnvironmentApiError(
          409,
          `task ${name} is already served with different indices (${existing.indices.length} vs ${indices.length}); start its workers with the same data and seed`,
        );
      if (!existing.splits && splits) existing.splits = splits;
      if (!existing.difficulties && difficulties) existing.difficulties = difficulties;
      return existing;
    }
    const task: TaskEntry = {
      indices,
      indexSet: new Set(indices),
      splits,
      difficulties,
      workers: new Map(),
      nextWorkerId: 0,
    };
    this.tasks.set(name, task);
    return task;
  }

  private pickWorker(task: TaskEntry): WorkerEntry | undefined {
    let best: WorkerEntry | undefined;
    for (const worker of task.workers.values()) {
      if (worker.status !== "alive") continue;
      const free = worker.capacity - worker.current;
      if (free > 0 && (!best || free > best.capacity - best.current)) best = worker;
    }
    return best;
  }

  private sessionOrThrow(sessionId: string): SessionEntry {
    const session = this.sessions.get(sessionId);
    if (!session)
      throw new EnvironmentApiError(
        404,
        `unknown session ${JSON.stringify(sessionId)} (never started, or ended more than ${this.options.finishedRetentionMs / 1000} s ago)`,
      );
    return session;
  }

  /** Marks a session ended with `result` (once) and frees its worker's slot. */
  private endSession(session: SessionEntry, result: InteractResult): InteractResult {
    if (session.ended) return session.ended;
    session.ended = result;
    session.endedAt = Date.now();
    const worker = this.tasks.get(session.name)?.workers.get(session.workerId);
    if (worker) worker.current = Math.max(0, worker.current - 1);
    return result;
  }

  private markDead(name: string, worker: WorkerEntry, reason: string): void {
    if (worker.status === "dead" || worker.local) return;
    worker.status = "dead";
    this.options.log?.(`[controller] worker ${worker.id} of task ${name} is dead: ${reason}`);
    for (const session of this.sessions.values()) {
      if (session.name === name && session.workerId === worker.id && !session.ended) {
        this.endSession(
          session,
          taskErrorResult(`worker ${worker.id} of task ${name} died (${reason})`),
        );
      }
    }
    worker.current = 0;
  }

  /** Declares silent workers dead, expires idle sessions, forgets old ended ones. */
  private sweep(): void {
    const now = Date.now();
    for (const [name, task] of this.tasks) {
      for (const worker of task.workers.values()) {
        if (
          !worker.local &&
          worker.status === "alive" &&
          now - worker.lastVisit > this.options.heartbeatTimeoutMs
        ) {
          this.markDead(
            name,
            worker,
            `no heartbeat for ${Math.round((now - worker.lastVisit) / 1000)} s`,
          );
        }
      }
    }
    for (const session of this.sessions.values()) {
      if (session.ended) {
        if (now - (session.endedAt ?? now) > this.options.finishedRetentionMs)
          this.sessions.delete(session.id);
      } else if (!session.busy && now - session.lastUpdate > this.options.idleTimeoutMs) {
        this.expire(session);
      }
    }
  }

  private expire(session: SessionEntry): void {
    const status: SampleStatus = "cancelled";
    const reason = `The session expired after ${Math.round(this.options.idleTimeoutMs / 1000)} s without interaction.`;
    this.endSession(session, {
      finish: true,
      reward: 0,
      status,
      messages: [{ role: "user", content: reason }],
      metrics: {},
    });
    const worker = this.tasks.get(session.name)?.workers.get(session.workerId);
    if (worker && worker.status === "alive")
      void worker.link.cancel(session.id).catch(() => undefined);
  }
}
