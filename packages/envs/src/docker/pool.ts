/**
 * A warm pool of started containers of one spec, so a session does not wait for a container
 * to start. Reuse is bounded: a container goes back to the pool only while it has served
 * fewer than `maxUses` sessions and its `reset` succeeds; otherwise it is removed. With
 * `size: 0` the pool starts a container on demand (cold start).
 */
import type { ContainerSpec, DockerRuntime } from "./runtime.js";

export interface WarmPoolOptions {
  /** Started containers kept waiting. Default 0 (cold starts only). */
  size?: number;
  /** Sessions a container may serve before it is removed. Default 1 (no reuse). */
  maxUses?: number;
  /** Puts a used container back in a clean state; throwing removes it. Default: none. */
  reset?: (containerId: string) => Promise<void>;
}

/** A container lent to one session. */
export interface Lease {
  containerId: string;
  /** Sessions this container served before this one. */
  uses: number;
  /** True when it came from the pool (warm), false when started on demand (cold). */
  warm: boolean;
}

export class WarmPool {
  private readonly idle: Array<{ containerId: string; uses: number }> = [];
  private readonly uses = new Map<string, number>();
  private filling = 0;
  private closed = false;
  private readonly size: number;
  private readonly maxUses: number;

  constructor(
    private readonly runtime: DockerRuntime,
    private readonly spec: ContainerSpec,
    private readonly options: WarmPoolOptions = {},
  ) {
    this.size = Math.max(0, options.size ?? 0);
    this.maxUses = Math.max(1, options.maxUses ?? 1);
  }

  /** Containers waiting in the pool. */
  get idleCount(): number {
    return this.idle.length;
  }

  /** Ids of the containers waiting in the pool. */
  get idleIds(): string[] {
    return this.idle.map((entry) => entry.containerId);
  }

  /** Starts containers until `size` wait (in the background unless awaited). */
  async fill(): Promise<void> {
    const missing = this.size - this.idle.length - this.filling;
    if (missing <= 0 || this.closed) return;
    this.filling += missing;
    await Promise.all(
      Array.from({ length: missing }, async () => {
        try {
          const containerId = await this.runtime.start(this.spec);
          if (this.closed) await this.runtime.remove(containerId);
          else this.idle.push({ containerId, uses: 0 });
        } catch {
          // The next acquire starts one on demand and reports the error.
        } finally {
          this.filling -= 1;
        }
      }),
    );
  }

  /** A running container for one session: from the pool when one waits, else a new one. */
  async acquire(): Promise<Lease> {
    while (this.idle.length > 0) {
      const entry = this.idle.shift()!;
      void this.fill();
      if (await this.runtime.isRunning(entry.containerId)) {
        this.uses.set(entry.containerId, entry.uses);
        return { containerId: entry.containerId, uses: entry.uses, warm: true };
      }
      await this.runtime.remove(entry.containerId);
    }
    const containerId = await this.runtime.start(this.spec);
    this.uses.set(containerId, 0);
    void this.fill();
    return { containerId, uses: 0, warm: false };
  }

  /** Gives a container back after its session: back to the pool, or removed. */
  async release(containerId: string, options: { healthy?: boolean } = {}): Promise<void> {
    const uses = (this.uses.get(containerId) ?? 0) + 1;
    this.uses.delete(containerId);
    const reusable =
      !this.closed &&
      options.healthy !== false &&
      uses < this.maxUses &&
      this.idle.length < this.size;
    if (reusable) {
      try {
        await this.options.reset?.(containerId);
        if (await this.runtime.isRunning(containerId)) {
          this.idle.push({ containerId, uses });
          return;
        }
      } catch {
        // Could not reset: remove below.
      }
    }
    await this.runtime.remove(containerId);
    void this.fill();
  }

  /** Removes the waiting containers; later releases remove theirs. */
  async close(): Promise<void> {
    this.closed = true;
    const waiting = this.idle.splice(0);
    await Promise.all(waiting.map((entry) => this.runtime.remove(entry.containerId)));
  }
}
