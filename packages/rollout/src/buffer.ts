/**
 * The trajectory buffer between rollout and trainer: bounded, first in first out, and
 * holding only COMPLETE groups. Every group is tagged with its task, index and the lowest
 * and highest policy version of its current-pool turns; at `take` time, groups older than
 * `maxStaleness` versions are dropped (or down-weighted) and counted.
 *
 * Staleness = current policy version − lowest version of the group's CURRENT-pool turns.
 * Turns drawn on purpose from the stale pool (cross-policy sampling) or from an external
 * model do not count against it.
 */
import { AgentRLError } from "@agentrl/spec";
import type { TrajectoryGroup } from "./types.js";

export class BufferClosedError extends AgentRLError {}

export interface TrajectoryBufferOptions {
  /** Most groups held at once; a `put` beyond it drops the OLDEST group (counted). Default 64. */
  capacityGroups?: number;
  /** Largest staleness (policy versions) a group may have when taken. Default `Infinity` (no limit). */
  maxStaleness?: number;
  /** What happens to a group beyond `maxStaleness`: `drop` it, or `downweight` its stale samples. Default `drop`. */
  staleAction?: "drop" | "downweight";
  /** With `downweight`: weight = factor ^ (staleness − maxStaleness). Default 0.5. */
  downweightFactor?: number;
}

export interface BufferStats {
  /** Groups waiting to be taken. */
  size: number;
  capacityGroups: number;
  groupsPut: number;
  groupsTaken: number;
  /** Groups and samples dropped for staleness. */
  droppedStaleGroups: number;
  droppedStaleSamples: number;
  /** Samples whose weight was reduced for staleness. */
  downweightedSamples: number;
  /** Groups dropped because the buffer was full. */
  droppedOverflowGroups: number;
  /** staleness (versions) → number of samples handed out with it. */
  stalenessHistogram: Record<number, number>;
}

interface Waiter {
  count: number;
  resolve: (groups: TrajectoryGroup[]) => void;
  reject: (error: Error) => void;
}

export class TrajectoryBuffer {
  readonly capacityGroups: number;
  readonly maxStaleness: number;
  readonly staleAction: "drop" | "downweight";
  readonly downweightFactor: number;
  private groups: TrajectoryGroup[] = [];
  private policyVersion = 0;
  private waiters: Waiter[] = [];
  private spaceListeners: (() => void)[] = [];
  private closed = false;
  private counters = {
    groupsPut: 0,
    groupsTaken: 0,
    droppedStaleGroups: 0,
    droppedStaleSamples: 0,
    downweightedSamples: 0,
    droppedOverflowGroups: 0,
  };
  private histogram = new Map<number, number>();

  constructor(options: TrajectoryBufferOptions = {}) {
    this.capacityGroups = options.capacityGroups ?? 64;
    this.maxStaleness = options.maxStaleness ?? Infinity;
    this.staleAction = options.staleAction ?? "drop";
    this.downweightFactor = options.downweightFactor ?? 0.5;
    if (!(this.capacityGroups >= 1))
      throw new RangeError(`capacityGroups must be ≥ 1, got ${this.capacityGroups}`);
    if (!(this.maxStaleness >= 0))
      throw new RangeError(`maxStaleness must be ≥ 0, got ${this.maxStaleness}`);
  }

  /** Number of complete groups waiting. */
  get size(): number {
    return this.groups.length;
  }

  /** The current policy version staleness is measured against (the trainer sets it after each update). */
  get currentVersion(): number {
    return this.policyVersion;
  }

  setPolicyVersion(version: number): void {
    this.policyVersion = version;
    this.serveWaiters();
  }

  /** Adds a complete group. Beyond capacity the oldest group is dropped (and counted). */
  put(group: TrajectoryGroup): void {
    if (this.closed) throw new BufferClosedError("the trajectory buffer is closed");
    this.groups.push(group);
    this.counters.groupsPut += 1;
    while (this.groups.length > this.capacityGroups) {
      this.groups.shift();
      this.counters.droppedOverflowGroups += 1;
    }
    this.serveWaiters();
  }

  /**
   * Resolves with `count` complete groups, oldest first, once enough fresh ones are there.
   * Rejects with the signal's reason on abort, or BufferClosedError on close.
   */
  take(count: number, options: { signal?: AbortSignal } = {}): Promise<TrajectoryGroup[]> {
    if (!(count >= 1)) return Promise.reject(new RangeError(`take needs count ≥ 1, got ${count}`));
    if (this.closed)
      return Promise.reject(new BufferClosedError("the trajectory buffer is closed"));
    const { signal } = options;
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const waiter: Waiter = { count, resolve, reject };
      const onAbort = () => {
        this.waiters = this.waiters.filter((other) => other !== waiter);
        reject(signal!.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      waiter.resolve = (groups) => {
        signal?.removeEventListener("abort", onAbort);
        resolve(groups);
      };
      this.waiters.push(waiter);
      this.serveWaiters();
    });
  }

  /** The groups waiting now, oldest first, without taking them (what a checkpoint saves). */
  waitingGroups(): TrajectoryGroup[] {
    return [...this.groups];
  }

  /** Takes whatever fresh groups are there now (at most `count`), without waiting. */
  takeAvailable(count = Infinity): TrajectoryGroup[] {
    this.pruneStale();
    return this.handOut(Math.min(count, this.groups.length));
  }

  /** Resolves when fewer than `limit` groups are held (the scheduler's back-pressure). */
  async waitUntilBelow(limit: number, signal?: AbortSignal): Promise<void> {
    while (this.groups.length >= limit && !this.closed) {
      if (signal?.aborted) return;
      await new Promise<void>((resolve) => {
        const done = () => {
          signal?.removeEventListener("abort", done);
          resolve();
        };
        this.spaceListeners.push(done);
        signal?.addEventListener("abort", done, { once: true });
      });
    }
  }

  /** Rejects pending `take`s and refuses further puts. */
  close(): void {
    this.closed = true;
    for (const waiter of this.waiters)
      waiter.reject(new BufferClosedError("the trajectory buffer was closed"));
    this.waiters = [];
    this.notifySpace();
  }

  stats(): BufferStats {
    return {
      size: this.groups.length,
      capacityGroups: this.capacityGroups,
      ...this.counters,
      stalenessHistogram: Object.fromEntries(
        [...this.histogram.entries()].sort((a, b) => a[0] - b[0]),
      ),
    };
  }

  /** Staleness of a group in versions (0 when it has no current-pool turns). */
  staleness(group: TrajectoryGroup): number {
    return group.minVersion < 0 ? 0 : Math.max(0, this.policyVersion - group.minVersion);
  }

  private serveWaiters(): void {
    this.pruneStale();
    while (this.waiters.length > 0 && this.groups.length >= this.waiters[0].count) {
      const waiter = this.waiters.shift()!;
      waiter.resolve(this.handOut(waiter.count));
    }
  }

  private handOut(count: number): TrajectoryGroup[] {
    const taken = this.groups.splice(0, count);
    for (const group of taken) {
      for (const trajectory of group.trajectories) {
        const staleness =
          trajectory.minVersion < 0 ? 0 : Math.max(0, this.policyVersion - trajectory.minVersion);
        if (this.staleAction === "downweight" && staleness > this.maxStaleness) {
          trajectory.weight = Math.pow(this.downweightFactor, staleness - this.maxStaleness);
          this.counters.downweightedSamples += 1;
        }
        this.histogram.set(staleness, (this.histogram.get(staleness) ?? 0) + 1);
      }
    }
    this.counters.groupsTaken += taken.length;
    if (taken.length > 0) this.notifySpace();
    return taken;
  }

  private pruneStale(): void {
    if (this.staleAction !== "drop" || !Number.isFinite(this.maxStaleness)) return;
    const before = this.groups.length;
    this.groups = this.groups.filter((group) => {
      if (this.staleness(group) <= this.maxStaleness) return true;
      this.counters.droppedStaleGroups += 1;
      this.counters.droppedStaleSamples += group.trajectories.length;
      return false;
    });
    if (this.groups.length < before) this.notifySpace();
  }

  private notifySpace(): void {
    const listeners = this.spaceListeners;
    this.spaceListeners = [];
    for (const listener of listeners) listener();
  }
}
