/**
 * The rollout scheduler: keeps many episodes running at once and turns them into complete
 * groups in the trajectory buffer.
 *
 * Its loop draws a task from the weighted mix (seeded), a sample index of that task, and
 * launches a GROUP of `groupSize` episodes of that instance. With `uninformativeWeight` < 1 the
 * mix leans toward tasks that still teach something: a task whose recent groups all had equal
 * rewards (every episode failed, or every one succeeded) gives GRPO zero advantages, so its
 * weight shrinks toward `uninformativeWeight` × weight while it stays that way. Episodes run through two
 * p-queues (one per task, one for all), so at most `concurrencyPerTask` / `maxConcurrentEpisodes`
 * run at once. New groups are only drawn while fewer than `groupSize` episodes wait for a slot
 * and the buffer has room for the groups in flight (back-pressure, no unbounded queue).
 *
 * Every episode ends (see `runEpisode`), so every group completes and reaches the buffer.
 */
import { AgentRLError } from "@agentrl/spec";
import { setMaxListeners } from "node:events";
import PQueue from "p-queue";
import type { EnvironmentClient, Split } from "@agentrl/envs";
import { Rng } from "@agentrl/policy";
import type { TrajectoryBuffer } from "./buffer.js";
import { runEpisode, type ChatTokenizer, type EpisodeOptions } from "./episode.js";
import { RolloutMetrics, type MetricsSnapshot } from "./metrics.js";
import type { PolicyPool } from "./pool.js";
import { isInformative, type Trajectory, type TrajectoryGroup } from "./types.js";
import type { InFlightGroup } from "./state.js";

export interface TaskMixEntry {
  /** Task name as the environment client knows it. */
  name: string;
  /** Relative weight in the mix. Default 1. */
  weight?: number;
  /** Split to draw indices from. Default `train`. */
  split?: Split;
  /** Explicit sample indices; default: `client.getIndices(name, split)`. */
  indices?: number[];
  /** Episodes of this task running at once at most. Default: no limit beyond the total. */
  concurrency?: number;
}

export interface RolloutSchedulerOptions {
  client: EnvironmentClient;
  tokenizer: ChatTokenizer;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- engines of any policy type
  pool: PolicyPool<any>;
  buffer: TrajectoryBuffer;
  tasks: TaskMixEntry[];
  /** Episodes per task instance (GRPO's n). Default 8. */
  groupSize?: number;
  /** Episodes running at once over all tasks. Default 64. */
  maxConcurrentEpisodes?: number;
  /** Seed of the task and index draws. Default 0. */
  seed?: number;
  /** Stop launching after this many groups (evaluation, tests). Default: unlimited. */
  maxGroups?: number;
  /** Per-episode limits and settings. */
  episode?: EpisodeOptions;
  /**
   * Share of its weight a task keeps while none of its recent groups was informative (rewards
   * not all equal). The effective weight is `weight × (u + (1 − u) × r)`, with r the informative
   * share of the task's last `informativeWindow` complete groups (1 until it has
   * `informativeWindow` / 2 of them). Default 1: the plain weighted mix.
   */
  uninformativeWeight?: number;
  /** Complete groups per task that `uninformativeWeight` looks back over. Default 16. */
  informativeWindow?: number;
  /**
   * Per task, whether each recent complete group was informative, oldest first. Pass the same
   * map to successive schedulers (sync mode makes one per step) to keep the history. Default: its own.
   */
  informativeHistory?: Map<string, boolean[]>;
  /**
   * Plays one episode instead of `runEpisode` (same arguments, same promise: a trajectory,
   * never a throw), e.g. an unmodified agent through the recording gateway. Default `runEpisode`.
   */
  playEpisode?: typeof runEpisode;
  /**
   * Task instances to play first, before any draw from the mix: the groups that were in flight
   * at the checkpoint a run resumes from (their partial episodes were lost), each played once.
   * Default none.
   */
  replay?: ReadonlyArray<{ task: string; index: number }>;
  /** Put before every group id (e.g. `s12.` after a resume from step 12, so ids stay unique over the run). Default "". */
  groupIdPrefix?: string;
  /** Called with each finished episode. */
  onEpisode?: (trajectory: Trajectory) => void;
  /** Called with each complete group, before it enters the buffer. */
  onGroup?: (group: TrajectoryGroup) => void;
}

export class SchedulerError extends AgentRLError {}

export class RolloutScheduler {
  readonly groupSize: number;
  readonly maxConcurrentEpisodes: number;
  readonly metrics = new RolloutMetrics();
  private readonly options: RolloutSchedulerOptions;
  private readonly random: Rng;
  private readonly globalQueue: PQueue;
  private readonly taskQueues = new Map<string, PQueue>();
  private readonly indices = new Map<string, number[]>();
  private controller = new AbortController();
  private loop: Promise<void> | undefined;
  private groupsInFlight = 0;
  private groupsLaunched = 0;
  private waitingEpisodes = 0;
  private runningEpisodes = 0;
  private wakeLoop: (() => void) | undefined;
  private groupPromises = new Set<Promise<void>>();
  private readonly recentInformative: Map<string, boolean[]>;
  /** Groups launched and not yet complete, by id. */
  private readonly inFlight = new Map<string, InFlightGroup>();
  private readonly replay: Array<{ task: string; index: number }>;

  constructor(options: RolloutSchedulerOptions) {
    this.options = options;
    this.groupSize = options.groupSize ?? 8;
    this.maxConcurrentEpisodes = options.maxConcurrentEpisodes ?? 64;
    this.random = new Rng(options.seed ?? 0);
    this.recentInformative = options.informativeHistory ?? new Map();
    this.replay = [...(options.replay ?? [])];
    this.globalQueue = new PQueue({ concurrency: this.maxConcurrentEpisodes });
    // Every running episode listens to the stop signal.
    setMaxListeners(0, this.controller.signal);
    if (options.tasks.length === 0) throw new SchedulerError("the task mix is empty");
    if (!(this.groupSize >= 1))
      throw new SchedulerError(`groupSize must be ≥ 1, got ${this.groupSize}`);
    const uninformativeWeight = options.uninformativeWeight ?? 1;
    if (!(uninformativeWeight >= 0 && uninformativeWeight <= 1))
      throw new SchedulerError(`uninformativeWeight must be in [0, 1], got ${uninformativeWeight}`);
    for (const task of options.tasks) {
      this.taskQueues.set(task.name, new PQueue({ concurrency: task.concurrency ?? Infinity }));
    }
    const unknown = this.replay.find((entry) => !this.taskQueues.has(entry.task));
    if (unknown)
      throw new SchedulerError(
        `a group to replay is of task "${unknown.task}", which is not in the mix`,
      );
  }

  /** The groups launched and not yet complete (what a checkpoint saves to play again after a resume). */
  groupsInProgress(): InFlightGroup[] {
    return [...this.inFlight.values()].map((group) => ({ ...group }));
  }

  /** Starts the loop (idempotent). Resolves the returned promise when the loop ends (stop or maxGroups, all groups delivered). */
  start(): Promise<void> {
    this.loop ??= this.run();
    return this.loop;
  }

  /** Stops launching, cancels running episodes (they end `cancelled` and their groups still complete), and waits for them. */
  async stop(): Promise<void> {
    this.controller.abort(new SchedulerError("the rollout scheduler was stopped"));
    this.wakeLoop?.();
    await this.loop;
  }

  /** Whether `stop()` was called. */
  get stopped(): boolean {
    return this.controller.signal.aborted;
  }

  snapshot(): MetricsSnapshot {
    const engines: MetricsSnapshot["engines"] = { current: this.options.pool.current.stats() };
    if (this.options.pool.stale) engines.stale = this.options.pool.stale.stats();
    return this.metrics.snapshot({
      queuedEpisodes: this.waitingEpisodes,
      runningEpisodes: this.runningEpisodes,
      engines,
      buffer: this.options.buffer.stats(),
    });
  }

  private async run(): Promise<void> {
    await this.loadIndices();
    const maxGroups = this.options.maxGroups ?? Infinity;
    while (!this.stopped && this.groupsLaunched < maxGroups) {
      if (!this.hasRoom()) {
        await this.nextChange();
        continue;
      }
      this.launchGroup();
    }
    await Promise.all([...this.groupPromises]);
  }

  private hasRoom(): boolean {
    const bufferRoom =
      this.options.buffer.size + this.groupsInFlight < this.options.buffer.capacityGroups;
    return bufferRoom && this.waitingEpisodes < this.groupSize;
  }

  /** Resolves on the next episode start or end, buffer take, or stop. */
  private nextChange(): Promise<void> {
    return new Promise((resolve) => {
      const bufferSpace = this.options.buffer.waitUntilBelow(
        this.options.buffer.size,
        this.controller.signal,
      );
      this.wakeLoop = resolve;
      bufferSpace.then(resolve);
    });
  }

  private notify(): void {
    const wake = this.wakeLoop;
    this.wakeLoop = undefined;
    wake?.();
  }

  private async loadIndices(): Promise<void> {
    for (const task of this.options.tasks) {
      const indices =
        task.indices ?? (await this.options.client.getIndices(task.name, task.split ?? "train"));
      if (indices.length === 0)
        throw new SchedulerError(`task "${task.name}" has no sample indices`);
      this.indices.set(task.name, indices);
    }
  }

  private launchGroup(): void {
    // Replayed instances first (no draw from the mix), then the weighted mix.
    const replayed = this.replay.shift();
    let task: TaskMixEntry;
    let index: number;
    if (replayed) {
      task = this.options.tasks.find((entry) => entry.name === replayed.task)!;
      index = replayed.index;
    } else {
      const tasks = this.options.tasks;
      task =
        tasks[
          weightedIndex(
            this.random,
            tasks.map((entry) => this.effectiveWeight(entry)),
          )
        ];
      const indices = this.indices.get(task.name)!;
      index = indices[this.random.nextInt(indices.length)];
    }
    const groupId = `${this.options.groupIdPrefix ?? ""}${task.name}-${index}-g${this.groupsLaunched}${replayed ? "-replay" : ""}`;
    this.groupsLaunched += 1;
    this.groupsInFlight += 1;
    this.inFlight.set(groupId, { groupId, task: task.name, index });
    const episodes = Array.from({ length: this.groupSize }, (_, member) =>
      this.scheduleEpisode(task.name, index, groupId, member),
    );
    const group = Promise.all(episodes).then((trajectories) =>
      this.completeGroup(groupId, task.name, index, trajectories),
    );
    this.groupPromises.add(group);
    group.finally(() => this.groupPromises.delete(group));
  }

  /** The task's weight in the next draw: its configured weight, scaled down while its recent groups taught nothing. */
  effectiveWeight(task: TaskMixEntry): number {
    const weight = task.weight ?? 1;
    const floor = this.options.uninformativeWeight ?? 1;
    const recent = this.recentInformative.get(task.name) ?? [];
    if (floor >= 1 || recent.length < Math.ceil(this.informativeWindow / 2)) return weight;
    const informativeShare = recent.filter(Boolean).length / recent.length;
    return weight * (floor + (1 - floor) * informativeShare);
  }

  private get informativeWindow(): number {
    return this.options.informativeWindow ?? 16;
  }

  private scheduleEpisode(
    task: string,
    index: number,
    groupId: string,
    member: number,
  ): Promise<Trajectory> {
    this.waitingEpisodes += 1;
    const taskQueue = this.taskQueues.get(task)!;
    const episode = taskQueue.add(() =>
      this.globalQueue.add(async () => {
        this.waitingEpisodes -= 1;
        this.runningEpisodes += 1;
        this.notify();
        try {
          const trajectory = await (this.options.playEpisode ?? runEpisode)(
            {
              client: this.options.client,
              tokenizer: this.options.tokenizer,
              pool: this.options.pool,
            },
            { task, index, groupId, member },
            this.options.episode,
            this.controller.signal,
          );
          this.metrics.recordEpisode(trajectory);
          this.options.onEpisode?.(trajectory);
          return trajectory;
        } finally {
          this.runningEpisodes -= 1;
          this.notify();
        }
      }),
    );
    return episode as Promise<Trajectory>;
  }

  private completeGroup(
    groupId: string,
    task: string,
    index: number,
    trajectories: Trajectory[],
  ): void {
    this.groupsInFlight -= 1;
    this.inFlight.delete(groupId);
    const versions = trajectories.filter((t) => t.minVersion >= 0);
    const group: TrajectoryGroup = {
      groupId,
      task,
      index,
      trajectories,
      minVersion: versions.length > 0 ? Math.min(...versions.map((t) => t.minVersion)) : -1,
      maxVersion: versions.length > 0 ? Math.max(...versions.map((t) => t.maxVersion)) : -1,
    };
    this.metrics.recordGroup();
    const recent = this.recentInformative.get(task) ?? [];
    recent.push(isInformative(group));
    if (recent.length > this.informativeWindow) recent.shift();
    this.recentInformative.set(task, recent);
    this.options.onGroup?.(group);
    try {
      this.options.buffer.put(group);
    } catch {
      // A closed buffer (shutdown) drops the group; the scheduler stops on its own.
    }
    this.notify();
  }
}

/**
 * An index into `weights`, drawn with probability proportional to its weight (negative
 * weights count as 0). Throws SchedulerError when no weight is positive.
 */
function weightedIndex(random: Rng, weights: readonly number[]): number {
  const total = weights.reduce((sum, weight) => sum + Math.max(0, weight), 0);
  if (!(total > 0)) throw new SchedulerError("the task mix needs a task with a positive weight");
  let target = random.next() * total;
  for (let index = 0; index < weights.length; index++) {
    target -= Math.max(0, weights[index]);
    if (target < 0) return index;
  }
  return weights.length - 1;
}
