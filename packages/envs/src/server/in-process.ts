/**
 * `InProcessEnvironmentClient`: the same `EnvironmentClient` as the HTTP one, for when the
 * task families run in the rollout's own process — no sockets, no JSON, but the same
 * session ids, slot limits (406 when full), idle expiry, interaction time limit, cancel and
 * `getIndices` semantics, because it drives one `TaskWorker` per family.
 */
import type {
  AssistantMessage,
  EnvironmentClient,
  InteractResult,
  Split,
  StartResult,
  TaskFamily,
} from "../types.js";
import { EnvironmentApiError, TASK_NAME_ALIASES } from "./protocol.js";
import { TaskWorker, type TaskWorkerOptions } from "./worker.js";

export interface InProcessEnvironmentClientOptions extends Omit<TaskWorkerOptions, "onSessionEnd"> {
  /** When true, `close()` also closes every family. Default false (the caller owns them). */
  ownFamilies?: boolean;
  /** How long an ended session is remembered (a later `interact` gets how it ended), in ms. Default 600,000 (10 min). */
  finishedRetentionMs?: number;
}

export class InProcessEnvironmentClient implements EnvironmentClient {
  private readonly workers = new Map<string, TaskWorker>();
  /** session id → the worker running it, while it runs. */
  private readonly running = new Map<string, TaskWorker>();
  /** session id → how it ended and when (ms since the epoch), oldest first. */
  private readonly ended = new Map<string, { end: InteractResult; at: number }>();
  private readonly ownFamilies: boolean;
  private readonly finishedRetentionMs: number;
  private nextSessionNumber = 0;

  constructor(families: TaskFamily[], options: InProcessEnvironmentClientOptions = {}) {
    this.ownFamilies = options.ownFamilies ?? false;
    this.finishedRetentionMs = options.finishedRetentionMs ?? 600_000;
    for (const family of families) {
      if (this.workers.has(family.name))
        throw new EnvironmentApiError(500, `two task families are named "${family.name}"`);
      this.workers.set(
        family.name,
        new TaskWorker(family, {
          ...options,
          onSessionEnd: (sessionId, end) => this.remember(sessionId, end),
        }),
      );
    }
  }

  /** The worker of each family (slot counts, running sessions); FC aliases (`kg-std`, …) name their family. */
  worker(name: string): TaskWorker {
    const worker =
      this.workers.get(name) ??
      (Object.hasOwn(TASK_NAME_ALIASES, name)
        ? this.workers.get(TASK_NAME_ALIASES[name])
        : undefined);
    if (!worker)
      throw new EnvironmentApiError(
        404,
        `unknown task "${name}"; known: ${[...this.workers.keys()].join(", ") || "none"}`,
      );
    return worker;
  }

  async startSample(name: string, index: number): Promise<{ sessionId: string } & StartResult> {
    const worker = this.worker(name);
    const sessionId = `${worker.name}-${this.nextSessionNumber++}`;
    const start = await worker.start(sessionId, index);
    this.running.set(sessionId, worker);
    return { sessionId, ...start };
  }

  /** Plays one turn; a session that has ended answers with how it ended (as the controller does). */
  async interact(sessionId: string, message: AssistantMessage): Promise<InteractResult> {
    const ended = this.ended.get(sessionId);
    if (ended) return ended.end;
    return this.workerOf(sessionId).interact(sessionId, message);
  }

  /** Cancels a running session; a no-op for one that has ended; 404 for an unknown id. */
  async cancel(sessionId: string): Promise<void> {
    if (this.ended.has(sessionId)) return;
    await this.workerOf(sessionId).cancel(sessionId);
  }

  async getIndices(name: string, split?: Split): Promise<number[]> {
    return this.worker(name).indices(split);
  }

  /** Session ids that are running now. */
  listSessions(): string[] {
    return [...this.running.keys()];
  }

  async close(): Promise<void> {
    await Promise.all([...this.workers.values()].map((worker) => worker.close()));
    if (this.ownFamilies)
      await Promise.all([...this.workers.values()].map((worker) => worker.family.close?.()));
  }

  private workerOf(sessionId: string): TaskWorker {
    const worker = this.running.get(sessionId);
    if (!worker)
      throw new EnvironmentApiError(
        404,
        `unknown session ${JSON.stringify(sessionId)} (never started, or ended more than ${this.finishedRetentionMs / 1000} s ago)`,
      );
    return worker;
  }

  private remember(sessionId: string, end: InteractResult): void {
    this.running.delete(sessionId);
    const now = Date.now();
    this.ended.set(sessionId, { end, at: now });
    for (const [id, { at }] of this.ended) {
      if (now - at <= this.finishedRetentionMs) break;
      this.ended.delete(id);
    }
  }
}
