/**
 * Rollout metrics: throughput, episode outcomes per task, engine occupancy, queue depths,
 * staleness. `RolloutMetrics` accumulates episodes; `snapshot()` joins them with the
 * engines' and the buffer's own counters.
 */
import type { BufferStats } from "./buffer.js";
import type { EngineStats } from "./engine/index.js";
import type { Trajectory } from "./types.js";

export interface TaskMetrics {
  episodes: number;
  /** Share of episodes that ended `completed` with reward > 0. */
  successRate: number;
  meanReward: number;
  meanTurns: number;
  /** Episodes per status. */
  statuses: Record<string, number>;
}

export interface MetricsSnapshot {
  elapsedSeconds: number;
  episodes: number;
  groups: number;
  /** Policy-generated tokens (loss mask 1) per second of wall time. */
  generatedTokensPerSecond: number;
  episodesPerSecond: number;
  meanTurns: number;
  /** Turns where the template was not prefix-stable (fallback used), over all episodes. */
  templateFallbacks: number;
  /** Turns whose text did not parse into tool calls. */
  formatErrors: number;
  /** Plays of an episode thrown away for an infrastructure fault and played again. */
  infrastructureRetries: number;
  /** Episodes that still ended by an infrastructure fault after their retries, masked out of the loss. */
  maskedEpisodes: number;
  /** Turns drawn from each pool member. */
  turnsByPolicy: Record<string, number>;
  perTask: Record<string, TaskMetrics>;
  /** Episodes waiting for a slot in the scheduler, and running. */
  queuedEpisodes: number;
  runningEpisodes: number;
  engines: Record<string, EngineStats>;
  buffer?: BufferStats;
}

interface TaskAccumulator {
  episodes: number;
  successes: number;
  rewardSum: number;
  turnSum: number;
  statuses: Record<string, number>;
}

export class RolloutMetrics {
  private started = performance.now();
  private episodes = 0;
  private groups = 0;
  private generatedTokens = 0;
  private turnSum = 0;
  private templateFallbacks = 0;
  private formatErrors = 0;
  private infrastructureRetries = 0;
  private maskedEpisodes = 0;
  private turnsByPolicy: Record<string, number> = {};
  private tasks = new Map<string, TaskAccumulator>();

  /** Restarts the clock and the counts. */
  reset(): void {
    this.started = performance.now();
    this.episodes =
      this.groups =
      this.generatedTokens =
      this.turnSum =
      this.templateFallbacks =
      this.formatErrors =
      this.infrastructureRetries =
      this.maskedEpisodes =
        0;
    this.turnsByPolicy = {};
    this.tasks.clear();
  }

  recordEpisode(trajectory: Trajectory): void {
    this.episodes += 1;
    this.generatedTokens += trajectory.metrics.generatedTokens ?? 0;
    this.turnSum += trajectory.turns.length;
    this.templateFallbacks += trajectory.metrics.templateFallbacks ?? 0;
    this.formatErrors += trajectory.metrics.formatErrors ?? 0;
    this.infrastructureRetries += trajectory.metrics.infrastructureRetries ?? 0;
    this.maskedEpisodes += trajectory.masked ? 1 : 0;
    for (const turn of trajectory.turns)
      this.turnsByPolicy[turn.policy] = (this.turnsByPolicy[turn.policy] ?? 0) + 1;
    const task = this.tasks.get(trajectory.task) ?? {
      episodes: 0,
      successes: 0,
      rewardSum: 0,
      turnSum: 0,
      statuses: {},
    };
    task.episodes += 1;
    task.successes += trajectory.status === "completed" && trajectory.environmentReward > 0 ? 1 : 0;
    task.rewardSum += trajectory.reward;
    task.turnSum += trajectory.turns.length;
    task.statuses[trajectory.status] = (task.statuses[trajectory.status] ?? 0) + 1;
    this.tasks.set(trajectory.task, task);
  }

  recordGroup(): void {
    this.groups += 1;
  }

  snapshot(extra: {
    queuedEpisodes: number;
    runningEpisodes: number;
    engines: Record<string, EngineStats>;
    buffer?: BufferStats;
  }): MetricsSnapshot {
    const elapsedSeconds = Math.max(1e-9, (performance.now() - this.started) / 1000);
    const perTask: Record<string, TaskMetrics> = {};
    for (const [name, task] of this.tasks) {
      perTask[name] = {
        episodes: task.episodes,
        successRate: task.successes / task.episodes,
        meanReward: task.rewardSum / task.episodes,
        meanTurns: task.turnSum / task.episodes,
        statuses: { ...task.statuses },
      };
    }
    return {
      elapsedSeconds,
      episodes: this.episodes,
      groups: this.groups,
      generatedTokensPerSecond: this.generatedTokens / elapsedSeconds,
      episodesPerSecond: this.episodes / elapsedSeconds,
      meanTurns: this.episodes > 0 ? this.turnSum / this.episodes : 0,
      templateFallbacks: this.templateFallbacks,
      formatErrors: this.formatErrors,
      infrastructureRetries: this.infrastructureRetries,
      maskedEpisodes: this.maskedEpisodes,
      turnsByPolicy: { ...this.turnsByPolicy },
      perTask,
      ...extra,
    };
  }
}
