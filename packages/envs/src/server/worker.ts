/**
 * A task worker: runs the sessions of one task family, with a slot limit, an idle expiry and
 * a time limit per interaction, and guarantees that every session it starts is freed —
 * when the episode ends, on cancel, on expiry, on a time-out, or when the worker closes.
 *
 * `TaskWorker` is the logic with no HTTP (the in-process client and `env serve` call it
 * directly); `serveWorker` puts it behind HTTP and heartbeats to a controller (`env worker`).
 */
import type http from "node:http";
import type {
  AssistantMessage,
  CurriculumTaskFamily,
  InteractResult,
  SampleStatus,
  Split,
  StartResult,
  TaskFamily,
  TaskSession,
} from "../types.js";
import {
  EnvironmentApiError,
  SESSION_HEADER,
  ServerConfigError,
  parseAssistantTurn,
  parseRequest,
  splitSchema,
  workerStartRequestSchema,
  difficultySchema,
  type DifficultyIndices,
} from "./protocol.js";
import {
  JsonRequester,
  closeServer,
  createJsonServer,
  errorMessageOf,
  isLoopbackHost,
  listen,
  sessionIdOf,
} from "./http.js";

export interface TaskWorkerOptions {
  /** Sessions that may run at once; one more is refused with 406. Default 16. */
  concurrency?: number;
  /** A session with no interaction for this long is cancelled, in ms. Default 300,000 (5 min). */
  idleTimeoutMs?: number;
  /** One `startSession` or `interact` may take this long before the session ends with `task error`, in ms. Default 240,000 (4 min). */
  interactionTimeoutMs?: number;
  /** How often idle sessions are looked for, in ms. Default: a quarter of `idleTimeoutMs`, at most 10,000. */
  sweepIntervalMs?: number;
  /** Called once whenever a session leaves the worker, with how it ended (`messages` empty unless the worker ended it). */
  onSessionEnd?: (sessionId: string, end: InteractResult) => void;
}

interface RunningSession {
  index: number;
  session: TaskSession;
  /** Milliseconds since the epoch of the last start / interaction. */
  lastActive: number;
  busy: boolean;
}

/** The answer given when a task fails from outside a turn (time-out, lost worker). */
export function taskErrorResult(reason: string): InteractResult {
  return {
    finish: true,
    reward: 0,
    status: "task error",
    messages: [{ role: "user", content: `The environment failed: ${reason}` }],
    metrics: {},
  };
}

/** The answer for a session that ended outside a turn, with an optional note to the agent. */
export function endedResult(status: SampleStatus, note?: string): InteractResult {
  return {
    finish: true,
    reward: 0,
    status,
    messages: note ? [{ role: "user", content: note }] : [],
    metrics: {},
  };
}

/** Resolves with `promise`, or rejects after `ms` with a 504 error (the promise keeps running). */
function withTimeLimit<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new EnvironmentApiError(504, `${what} took longer than ${ms} ms`)),
      ms,
    );
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

/** Ends a session that misbehaved: `fail` (status `task error`) when it has one, else `cancel`. Never throws. */
async function abandon(session: TaskSession, reason: string): Promise<void> {
  try {
    const failable = session as TaskSession & { fail?: (reason: string) => Promise<void> };
    if (typeof failable.fail === "function")
      await withTimeLimit(failable.fail(reason), 30_000, "ending the session");
    else await withTimeLimit(session.cancel(), 30_000, "cancelling the session");
  } catch {
    // The session is gone from the worker either way; its family frees what is left on close.
  }
}

export class TaskWorker {
  readonly family: TaskFamily;
  readonly concurrency: number;
  readonly idleTimeoutMs: number;
  readonly interactionTimeoutMs: number;
  private readonly sessions = new Map<string, RunningSession>();
  /** Sessions started since the worker began (what `GET /api/worker_status` reports as `started`). */
  started = 0;
  /** Slots held by sessions that are still starting. */
  private starting = new Set<string>();
  private readonly sweeper: NodeJS.Timeout;
  private readonly onSessionEnd?: (sessionId: string, end: InteractResult) => void;
  private splitIndices?: { train: number[]; test: number[]; all: Set<number> };
  /** undefined: not computed yet; null: the family has no curriculum. */
  private byDifficulty?: DifficultyIndices | null;
  private closed = false;

  constructor(family: TaskFamily, options: TaskWorkerOptions = {}) {
    this.family = family;
    this.concurrency = options.concurrency ?? 16;
    this.idleTimeoutMs = options.idleTimeoutMs ?? 300_000;
    this.interactionTimeoutMs = options.interactionTimeoutMs ?? 240_000;
    this.onSessionEnd = options.onSessionEnd;
    if (!(this.concurrency >= 1))
      throw new ServerConfigError(`worker concurrency must be at least 1, got ${this.concurrency}`);
    const sweepIntervalMs =
      options.sweepIntervalMs ?? Math.min(10_000, Math.max(10, this.idleTimeoutMs / 4));
    this.sweeper = setInterval(() => this.expireIdle(), sweepIntervalMs);
    this.sweeper.unref();
  }

  get name(): string {
    return this.family.name;
  }

  /** Sessions running or starting now. */
  get current(): number {
    return this.sessions.size + this.starting.size;
  }

  /** Sample indices: of one split, or all of them (train then test) as the original. */
  indices(split?: Split): number[] {
    if (!this.splitIndices) {
      const train = this.family.indices("train");
      const test = this.family.indices("test");
      this.splitIndices = { train, test, all: new Set([...train, ...test]) };
    }
    return split
      ? this.splitIndices[split]
      : [...this.splitIndices.train, ...this.splitIndices.test];
  }

  /**
   * The indices of each split at each difficulty, when the family has a curriculum
   * (`difficulties` and `indicesAt`), else undefined: what a trainer selects its instances by.
   */
  difficultyIndices(): DifficultyIndices | undefined {
    if (this.byDifficulty !== undefined) return this.byDifficulty ?? undefined;
    const family = this.family as Partial<Pick<CurriculumTaskFamily, "difficulties" | "indicesAt">>;
    if (!Array.isArray(family.difficulties) || typeof family.indicesAt !== "function") {
      this.byDifficulty = null;
      return undefined;
    }
    const indicesAt = family.indicesAt.bind(this.family);
    this.byDifficulty = Object.fromEntries(
      family.difficulties.map((difficulty) => [
        String(difficulty),
        { train: indicesAt("train", difficulty), test: indicesAt("test", difficulty) },
      ]),
    );
    return this.byDifficulty;
  }

  /** Indices of a split at one difficulty; 400 when the family has no such difficulty (or no curriculum). */
  indicesAtDifficulty(split: Split, difficulty: number): number[] {
    const table = this.difficultyIndices();
    if (!table)
      throw new EnvironmentApiError(
        400,
        `task ${this.name} has no difficulties; ask without ?difficulty`,
      );
    const entry = table[String(difficulty)];
    if (!entry)
      throw new EnvironmentApiError(
        400,
        `task ${this.name} has no difficulty ${difficulty} (its difficulties: ${Object.keys(table).join(", ")})`,
      );
    return entry[split];
  }

  /** `session id → sample index` of the running sessions. */
  listSessions(): Record<string, number> {
    return Object.fromEntries([...this.sessions].map(([id, running]) => [id, running.index]));
  }

  /** Starts sample `index` as session `sessionId`. 406 when full, 409 on a reused id, 400 on a bad index, 500 when the family fails. */
  async start(sessionId: string, index: number): Promise<StartResult> {
    if (this.closed) throw new EnvironmentApiError(503, `worker of task ${this.name} is closed`);
    if (this.sessions.has(sessionId) || this.starting.has(sessionId))
      throw new EnvironmentApiError(409, `session ${sessionId} already exists on this worker`);
    if (this.current >= this.concurrency)
      throw new EnvironmentApiError(
        406,
        `worker of task ${this.name} is full (${this.concurrency} sessions)`,
      );
    this.indices();
    if (!this.splitIndices!.all.has(index))
      throw new EnvironmentApiError(400, `index ${index} is not a sample of task ${this.name}`);
    this.starting.add(sessionId);
    const pending = Promise.resolve().then(() => this.family.startSession(index));
    let session: TaskSession;
    try {
      session = await withTimeLimit(
        pending,
        this.interactionTimeoutMs,
        `starting sample ${index} of task ${this.name}`,
      );
    } catch (error) {
      this.starting.delete(sessionId);
      // A start that finishes after its time-out must not leak: cancel it when it arrives.
      pending.then(
        (late) => abandon(late, "started after its time limit"),
        () => undefined,
      );
      if (error instanceof EnvironmentApiError) throw error;
      throw new EnvironmentApiError(
        500,
        `task ${this.name} failed to start sample ${index}: ${(error as Error).message ?? error}`,
      );
    }
    this.starting.delete(sessionId);
    if (this.closed) {
      await abandon(session, "the worker closed");
      throw new EnvironmentApiError(503, `worker of task ${this.name} closed while starting`);
    }
    this.sessions.set(sessionId, { index, session, lastActive: Date.now(), busy: false });
    this.started += 1;
    return { messages: session.start.messages, tools: session.start.tools };
  }

  /** Plays one assistant turn. A session that ends (for any reason) leaves the worker. */
  async interact(sessionId: string, message: AssistantMessage): Promise<InteractResult> {
    const running = this.sessions.get(sessionId);
    if (!running)
      throw new EnvironmentApiError(
        404,
        `no session ${sessionId} on the worker of task ${this.name}`,
      );
    if (running.busy)
      throw new EnvironmentApiError(
        409,
        `session ${sessionId} is still busy with the previous interaction`,
      );
    running.busy = true;
    running.lastActive = Date.now();
    let result: InteractResult;
    try {
      result = await withTimeLimit(
        Promise.resolve().then(() => running.session.interact(message)),
        this.interactionTimeoutMs,
        "the interaction",
      );
    } catch (error) {
      const reason = (error as Error).message ?? String(error);
      const end = taskErrorResult(reason);
      this.remove(sessionId, running, end);
      void abandon(running.session, reason);
      return end;
    }
    running.busy = false;
    running.lastActive = Date.now();
    if (result.finish) this.remove(sessionId, running, { ...result, messages: [] });
    return result;
  }

  /** Cancels a session (404 when the worker does not have it). */
  async cancel(sessionId: string): Promise<void> {
    const running = this.sessions.get(sessionId);
    if (!running)
      throw new EnvironmentApiError(
        404,
        `no session ${sessionId} on the worker of task ${this.name}`,
      );
    this.remove(sessionId, running, endedResult("cancelled"));
    try {
      await withTimeLimit(running.session.cancel(), 30_000, "cancelling");
    } catch {
      // Already removed; a cancel that fails must not keep the slot.
    }
  }

  /** Cancels every session; resolves with how many there were. */
  async cancelAll(): Promise<number> {
    const ids = [...this.sessions.keys()];
    await Promise.all(ids.map((id) => this.cancel(id).catch(() => undefined)));
    return ids.length;
  }

  /** Cancels everything and stops the idle sweep (the family itself is closed by its owner). */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweeper);
    await this.cancelAll();
  }

  private remove(sessionId: string, running: RunningSession, end: InteractResult): void {
    if (this.sessions.get(sessionId) !== running) return;
    this.sessions.delete(sessionId);
    this.onSessionEnd?.(sessionId, end);
  }

  private expireIdle(): void {
    const now = Date.now();
    for (const [id, running] of this.sessions) {
      if (running.busy || now - running.lastActive < this.idleTimeoutMs) continue;
      this.remove(
        id,
        running,
        endedResult(
          "cancelled",
          `The session expired after ${Math.round(this.idleTimeoutMs / 1000)} s without interaction.`,
        ),
      );
      void Promise.resolve()
        .then(() => running.session.cancel())
        .catch(() => undefined);
    }
  }
}

/** The HTTP routes of a worker (under `/api`), as the controller calls them. */
export function workerRoutes(
  worker: TaskWorker,
): Record<string, (request: import("./http.js").RouteRequest) => Promise<{ body: unknown }>> {
  return {
    "POST /api/start_sample": async (request) => {
      const { index, session_id } = parseRequest(
        workerStartRequestSchema,
        request.body,
        "start_sample body",
      );
      return { body: await worker.start(session_id, index) };
    },
    "POST /api/interact": async (request) => {
      const sessionId = sessionIdOf(request);
      return { body: await worker.interact(sessionId, parseAssistantTurn(request.body)) };
    },
    "POST /api/cancel": async (request) => {
      const sessionId = sessionIdOf(request);
      await worker.cancel(sessionId);
      return { body: { session_id: sessionId } };
    },
    "POST /api/cancel_all": async () => ({ body: { cancelled: await worker.cancelAll() } }),
    "GET /api/get_sessions": async () => ({ body: worker.listSessions() }),
    "GET /api/worker_status": async () => ({
      body: {
        name: worker.name,
        concurrency: worker.concurrency,
        current: worker.current,
        started: worker.started,
      },
    }),
    "GET /api/get_indices": async (request) => {
      const split = request.query.get("split");
      const difficulty = request.query.get("difficulty");
      if (difficulty !== null)
        return {
          body: worker.indicesAtDifficulty(
            parseRequest(splitSchema, split ?? "", "split"),
            Number(parseRequest(difficultySchema, difficulty, "difficulty")),
          ),
        };
      return {
        body: worker.indices(
          split === null ? undefined : parseRequest(splitSchema, split, "split"),
        ),
      };
    },
  };
}

export interface WorkerServerOptions {
  /** Address to bind. Default `127.0.0.1`; any other needs `token`. */
  host?: string;
  /** Port to bind; 0 picks a free one. Default 0. */
  port?: number;
  /** Bearer token required on every request and sent with heartbeats; required with `controllerUrl` (the controller's token). Default: none. */
  token?: string;
  /** Controller base URL (e.g. `http://127.0.0.1:5020`) to register with; none = no heartbeats. */
  controllerUrl?: string;
  /** URL the controller should call this worker at, ending in `/api`. Default `http://<host>:<port>/api`. */
  advertisedAddress?: string;
  /** Time between heartbeats in ms. Default 8,000. */
  heartbeatIntervalMs?: number;
  /** Where warnings go (failed heartbeats). Default `console.warn`. */
  log?: (line: string) => void;
}

export interface WorkerServer {
  /** The URL the controller calls, ending in `/api`. */
  readonly address: string;
  readonly port: number;
  readonly server: http.Server;
  /** Sends one heartbeat now (resolves when the controller answered, rejects on failure). */
  heartbeat(): Promise<void>;
  /** Stops heartbeats (the controller will declare the worker dead); the server keeps answering. */
  stopHeartbeats(): void;
  /** Stops heartbeats, cancels every session and closes the server. */
  close(): Promise<void>;
}

/** Puts `worker` behind HTTP and, with `controllerUrl`, registers it and keeps heart-beating. */
export async function serveWorker(
  worker: TaskWorker,
  options: WorkerServerOptions = {},
): Promise<WorkerServer> {
  const host = options.host ?? "127.0.0.1";
  if (!isLoopbackHost(host) && !options.token) {
    throw new ServerConfigError(
      `binding ${host} exposes the worker beyond this machine: set a token (--token or AGENTRL_TOKEN)`,
    );
  }
  if (options.controllerUrl && !options.token) {
    throw new ServerConfigError(
      `a worker registers with its controller only with the controller's token: pass it (--token, AGENTRL_TOKEN or the token file env serve wrote)`,
    );
  }
  const server = createJsonServer({ routes: workerRoutes(worker), token: options.token });
  const port = await listen(server, options.port ?? 0, host);
  const shownHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host;
  const address =
    options.advertisedAddress ??
    `http://${shownHost.includes(":") ? `[${shownHost}]` : shownHost}:${port}/api`;
  const requester = new JsonRequester({ maxSockets: 4 });
  const log = options.log ?? ((line: string) => console.warn(line));
  const controller = options.controllerUrl ? controllerBase(options.controllerUrl) : undefined;

  async function heartbeat(): Promise<void> {
    if (!controller)
      throw new EnvironmentApiError(400, "this worker has no controller to send heartbeats to");
    const response = await requester.request(`${controller}/api/receive_heartbeat`, {
      method: "POST",
      timeoutMs: 10_000,
      headers: options.token ? { authorization: `Bearer ${options.token}` } : {},
      body: {
        name: worker.name,
        address,
        concurrency: worker.concurrency,
        indices: worker.indices(),
        splits: { train: worker.indices("train"), test: worker.indices("test") },
        ...(worker.difficultyIndices() ? { difficulties: worker.difficultyIndices() } : {}),
      },
    });
    if (response.status !== 200)
      throw new EnvironmentApiError(
        response.status,
        `controller refused the heartbeat: ${errorMessageOf(response.body)}`,
      );
  }

  let timer: NodeJS.Timeout | undefined;
  let beating = Boolean(controller);
  const beat = (): void => {
    if (!beating) return;
    heartbeat()
      .catch((error) =>
        log(`[worker ${worker.name}] heartbeat failed: ${(error as Error).message}`),
      )
      .finally(() => {
        if (beating) timer = setTimeout(beat, options.heartbeatIntervalMs ?? 8_000);
      });
  };
  if (controller)
    await heartbeat().catch((error) =>
      log(`[worker ${worker.name}] first heartbeat failed: ${(error as Error).message}`),
    );
  if (controller) timer = setTimeout(beat, options.heartbeatIntervalMs ?? 8_000);

  const stopHeartbeats = (): void => {
    beating = false;
    if (timer) clearTimeout(timer);
  };
  return {
    address,
    port,
    server,
    heartbeat,
    stopHeartbeats,
    async close() {
      stopHeartbeats();
      await worker.close();
      requester.close();
      await closeServer(server);
    },
  };
}

/** `http://host:port`, `http://host:port/`, `http://host:port/api` → `http://host:port`. */
export function controllerBase(url: string): string {
  return url.replace(/\/+$/, "").replace(/\/api$/, "");
}

/** The session-id header as sent to a worker or controller. */
export function sessionHeader(sessionId: string): Record<string, string> {
  return { [SESSION_HEADER]: sessionId };
}
