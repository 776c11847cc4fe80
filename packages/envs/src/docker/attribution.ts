/**
 * Why a container died, from the engine's event stream: a `die` with no `kill` before it (or
 * an `oom` just before) is the container's own doing (`own`: its processes killed PID 1's
 * child, exhausted its memory), a `kill` first is from outside (`external`).
 */
import type Docker from "dockerode";
import type { DeathCause } from "./errors.js";
import { RUN_LABEL } from "./owner.js";

/** The engine events of one run's containers: deaths, and who caused them. */
export class ContainerDeaths {
  private readonly listeners = new Map<string, (death: DeathCause) => void>();
  private events: NodeJS.ReadableStream | undefined;
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

  constructor(
    private readonly docker: Docker,
    private readonly runId: string,
    /** Whether the runtime still owns the container (not removed by it). */
    private readonly isLive: (id: string) => boolean,
  ) {}

  /**
   * How a container of this run died, from the engine's events (waits up to `waitMs` for its
   * `die`); undefined when no `die` came (e.g. the engine does not answer).
   */
  async deathOf(id: string, waitMs: number): Promise<DeathCause | undefined> {
    if (!this.isLive(id)) return undefined; // removed by this runtime
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

  /**
   * Calls `listener` once when the container stops without `remove` (killed, out of memory,
   * crashed), from Docker's event stream. Returns a function that stops watching.
   */
  async onDeath(id: string, listener: (death: DeathCause) => void): Promise<() => void> {
    this.listeners.set(id, listener);
    await this.watch();
    return () => this.listeners.delete(id);
  }

  watch(): Promise<void> {
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
          if (!this.isLive(event.id)) continue; // removed by this runtime, or not ours
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
            const listener = this.listeners.get(event.id);
            if (listener) {
              this.listeners.delete(event.id);
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

  /** Forgets a container (removed by the runtime). */
  forget(id: string): void {
    this.listeners.delete(id);
    this.seen.delete(id);
  }

  /** Stops watching. */
  close(): void {
    this.listeners.clear();
    (this.events as unknown as { destroy?: () => void } | undefined)?.destroy?.();
    this.events = undefined;
    this.watching = undefined;
  }
}
