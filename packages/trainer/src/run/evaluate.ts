/**
 * Evaluation: success and mean reward per task on a split, greedy or sampled (pass@k),
 * with the same episode runner as training.
 */
import PQueue from "p-queue";
import { TokenizerFileError, type Policy } from "@agentrl/policy";
import {
  PolicyPool,
  createPolicyEnginePool,
  defaultDecodeThreads,
  runEpisode,
  type ChatTokenizer,
  type EngineStats,
  type EpisodeOptions,
  type GenerationEngine,
  type Trajectory,
} from "@agentrl/rollout";
import type { EnvironmentClient, Split } from "@agentrl/envs";
import { answerSource, answerSources, isSuccess, type AnswerSource } from "../rl/success.js";

export interface EvaluationOptions {
  client: EnvironmentClient;
  /** The policy to evaluate (its tokenizer renders the conversations). */
  policy: Policy;
  tasks: string[];
  /** Split to evaluate on. Default `test`. */
  split?: Split;
  /** Instances per task at most (the first ones of the split). Default all. */
  limit?: number;
  /** Samples per instance; success@k counts an instance solved when any sample succeeds. Default 1. */
  samples?: number;
  /** 0 = greedy. Default 0. */
  temperature?: number;
  /** Episodes at once. Default 32. */
  concurrency?: number;
  /**
   * Engine threads decoding beside the main thread's engine, each with a copy of the policy's
   * weights (`createPolicyEnginePool`): an evaluation leaves the other cores idle otherwise.
   * Default `defaultDecodeThreads()` (one a further core); 0 decodes in the main thread only.
   */
  decodeThreads?: number;
  /**
   * An engine (pool) already started for `policy` with this evaluation's temperature, seed
   * and batch size, e.g. one whose threads loaded the weights while the environments opened;
   * `decodeThreads` is then unused. The caller closes it. Default: one started here.
   */
  engine?: GenerationEngine;
  /** Called once at the end with the engine's counts (decode and prefill time, batch sizes). */
  onEngineStats?: (stats: EngineStats) => void;
  episode?: EpisodeOptions;
  seed?: number;
  /** Called after each episode with the count done and the total. */
  onProgress?: (done: number, total: number) => void;
  /** Called with every finished episode (e.g. to print or save transcripts). */
  onEpisode?: (trajectory: Trajectory) => void;
  signal?: AbortSignal;
}

export interface TaskEvaluation {
  task: string;
  instances: number;
  episodes: number;
  /** Fraction of episodes that succeeded (environment reward ≥ 1, status completed). */
  success: number;
  /** Fraction of instances with at least one successful sample (pass@k, k = samples). */
  passAtK: number;
  meanReward: number;
  meanTurns: number;
  /**
   * Episodes that ended by an infrastructure fault (a container or engine that did not answer)
   * after their retries: counted as failures in `success`, so a result with any is a
   * measurement of the infrastructure as much as of the model. Absent in results stored
   * before it was counted.
   */
  infrastructureFaults?: number;
  /** The first such episode's error (say, a container the engine did not start); only when there are faults. */
  infrastructureFaultError?: string;
  /**
   * Successful episodes whose answer is a line or a field a command printed earlier in the
   * episode (the environment's `answerFromOutput` metric: OS): `answerSources.read`. Only for
   * families that report the metric.
   */
  successesFromOutput?: number;
  /**
   * The successes by where their answer came from (`answerSource`): read from an own
   * command's output, guessed (in no output), or other (a task graded on the system's state).
   * Only for families that say (OS).
   */
  answerSources?: Record<AnswerSource, number>;
  /** Seconds from the task's first episode start to its last episode's end (this run's wall time of the task). */
  seconds?: number;
}

/** The number of successful episodes of a result. */
export function successCount(result: Pick<TaskEvaluation, "success" | "episodes">): number {
  return Math.round(result.success * result.episodes);
}

/**
 * "of 51 successes 14 read, 35 guessed, 2 other (27 % read)", when the family reports where
 * its answers came from (results stored before `answerSources`: "14 of 51 successes read").
 */
export function fromOutputNote(result: TaskEvaluation): string | undefined {
  const successes = successCount(result);
  if (result.answerSources) {
    const { read, guessed, other } = result.answerSources;
    const share = successes > 0 ? ` (${Math.round((100 * read) / successes)} % read)` : "";
    return `of ${successes} successes ${read} read, ${guessed} guessed, ${other} other${share}`;
  }
  if (result.successesFromOutput === undefined) return undefined;
  return `${result.successesFromOutput} of ${successes} successes read`;
}

/** Successful episodes that read their answer from a command's output, when the family says (`answerFromOutput`). */
export function successesFromOutput(trajectories: readonly Trajectory[]): number | undefined {
  return answerSources(trajectories)?.read;
}

export { answerSource, answerSources, isSuccess, type AnswerSource };

/** The tasks of `results` with episodes ended by an infrastructure fault, as `os: 46 of 200 (e.g. "…")`. */
export function faultedTasks(results: Record<string, TaskEvaluation>): string[] {
  return Object.values(results)
    .filter((r) => (r.infrastructureFaults ?? 0) > 0)
    .map(
      (r) =>
        `${r.task}: ${r.infrastructureFaults} of ${r.episodes}${r.infrastructureFaultError ? ` (e.g. "${r.infrastructureFaultError.slice(0, 160)}")` : ""}`,
    );
}

/** The engine options of an evaluation (temperature, seed, batch size = concurrency), for an engine started ahead (`engine`). */
export function evaluationEngineOptions(
  options: Pick<EvaluationOptions, "temperature" | "seed" | "concurrency">,
) {
  return {
    temperature: options.temperature ?? 0,
    seed: options.seed ?? 0,
    maxBatchSize: options.concurrency ?? 32,
  };
}

export async function evaluate(
  options: EvaluationOptions,
): Promise<Record<string, TaskEvaluation>> {
  const tokenizer: ChatTokenizer | undefined = options.policy.tokenizer;
  if (!tokenizer)
    throw new TokenizerFileError("the policy has no tokenizer (its folder needs a tokenizer.json)");
  const samples = Math.max(1, options.samples ?? 1);
  const engine =
    options.engine ??
    (await createPolicyEnginePool(
      options.policy,
      evaluationEngineOptions(options),
      options.decodeThreads ?? defaultDecodeThreads(),
    ));
  const pool = new PolicyPool({ current: engine, seed: options.seed ?? 0 });
  const queue = new PQueue({ concurrency: options.concurrency ?? 32 });
  const results = new Map<string, Trajectory[][]>();
  const instances = new Map<string, number[]>();
  for (const task of options.tasks) {
    let indices = await options.client.getIndices(task, options.split ?? "test");
    if (options.limit !== undefined) indices = indices.slice(0, options.limit);
    results.set(
      task,
      indices.map(() => []),
    );
    instances.set(task, indices);
  }
  // The tasks take turns in the queue (each one's k-th instance, then the (k+1)-th), so that
  // episodes waiting on a Docker engine (OS, DB) overlap with the others' decoding instead of
  // filling the queue by themselves.
  const jobs: { task: string; index: number; sample: number; slot: number }[] = [];
  const longest = Math.max(0, ...[...instances.values()].map((indices) => indices.length));
  for (let slot = 0; slot < longest; slot++) {
    for (const [task, indices] of instances) {
      if (slot >= indices.length) continue;
      for (let sample = 0; sample < samples; sample++)
        jobs.push({ task, index: indices[slot], sample, slot });
    }
  }
  let done = 0;
  const spans = new Map<string, { start: number; end: number }>();
  try {
    await Promise.all(
      jobs.map((job) =>
        queue.add(async () => {
          const start = performance.now();
          const trajectory = await runEpisode(
            { client: options.client, tokenizer, pool },
            {
              task: job.task,
              index: job.index,
              groupId: `eval-${job.task}-${job.index}`,
              member: job.sample,
            },
            { ...options.episode, temperature: options.temperature ?? 0 },
            options.signal,
          );
          const span = spans.get(job.task);
          if (span) {
            span.start = Math.min(span.start, start);
            span.end = Math.max(span.end, performance.now());
          } else spans.set(job.task, { start, end: performance.now() });
          results.get(job.task)![job.slot].push(trajectory);
          options.onEpisode?.(trajectory);
          options.onProgress?.(++done, jobs.length);
        }),
      ),
    );
  } finally {
    options.onEngineStats?.(engine.stats());
    if (!options.engine) engine.close();
  }
  const out: Record<string, TaskEvaluation> = {};
  for (const [task, perInstance] of results) {
    const all = perInstance.flat();
    out[task] = {
      task,
      instances: perInstance.length,
      episodes: all.length,
      success: all.length ? all.filter(isSuccess).length / all.length : 0,
      passAtK: perInstance.length
        ? perInstance.filter((list) => list.some(isSuccess)).length / perInstance.length
        : 0,
      meanReward: all.length ? all.reduce((a, t) => a + t.environmentReward, 0) / all.length : 0,
      meanTurns: all.length ? all.reduce((a, t) => a + t.turns.length, 0) / all.length : 0,
      infrastructureFaults: all.filter((t) => t.endCause === "infrastructure").length,
      infrastructureFaultError: all
        .find((t) => t.endCause === "infrastructure" && t.error)
        ?.error?.slice(0, 300),
    };
    const span = spans.get(task);
    if (span) out[task].seconds = Math.round((span.end - span.start) / 100) / 10;
    const sources = answerSources(all);
    if (sources !== undefined) {
      out[task].successesFromOutput = sources.read;
      out[task].answerSources = sources;
    }
  }
  return out;
}
