/**
 * The options of `runTraining` (loop.ts), what a step returns, and the check of the
 * cross-policy pool's external member.
 */
import { AgentRLError } from "@agentrl/spec";
import type { Policy } from "@agentrl/policy";
import {
  ExternalChatModel,
  type EpisodeOptions,
  type ExternalChatModelOptions,
  type InferenceEngineOptions,
  type RolloutSchedulerOptions,
  type TaskMixEntry,
  type TrajectoryGroup,
} from "@agentrl/rollout";
import type { EnvironmentClient } from "@agentrl/envs";
import type { LearnerSettings } from "./learner.js";
import type { Metrics } from "./logging.js";
import type { TrajectoryLogOptions } from "./trajectory-log.js";

export interface TrainingRunOptions {
  /** Starting weights, Hugging Face layout (ignored when resuming from a checkpoint). */
  modelDirectory: string;
  /** Where checkpoints, metrics.jsonl and tensorboard/ go. */
  runDirectory: string;
  client: EnvironmentClient;
  tasks: TaskMixEntry[];
  /** `async` (default) or `sync`. */
  mode: "async" | "sync";
  /** Optimizer steps of the run. */
  steps: number;
  /** Complete groups per step. */
  batchGroups: number;
  /**
   * DAPO's dynamic sampling (async mode): a step draws up to this many further groups to
   * replace the groups of its batch whose rewards are all equal (they carry no GRPO signal).
   * The batch's success and reward metrics still count every group drawn. Default 0 (off).
   */
  dynamicSamplingGroups?: number;
  /** Episodes per task instance (GRPO's n). */
  groupSize: number;
  seed: number;
  learner: LearnerSettings;
  /** Run the learner in a worker thread. Default: true in async mode, false in sync mode. */
  learnerThread?: boolean;
  rollout: {
    /** Episodes running at once. */
    maxConcurrentEpisodes: number;
    /**
     * Engine settings of the samplers. `maxBatchSize` defaults to `maxConcurrentEpisodes`;
     * `keepCachesOnUpdate` defaults to true in async mode (episodes keep their KV caches
     * across the weight update of every step; the recorded log-probs stay exact) and false
     * in sync mode (no update happens while a batch is generated).
     */
    engine: InferenceEngineOptions;
    /**
     * Engine threads decoding besides the main thread's engine, on copies of the current
     * policy, each new version pushed to them (see decode-threads.ts). Default 0. Ignored
     * with `servers`; fewer when a large model's copies would not fit in memory.
     */
    decodeThreads?: number;
    episode: EpisodeOptions;
    /**
     * `agentrl serve` servers that generate the current policy's turns instead of a local
     * engine (balanced by in-flight sequences; each new version is pushed to all of them).
     * Default none (local engine).
     */
    servers?: { urls: string[]; apiKey?: string };
    /** Largest staleness (policy versions) of a group when taken; `Infinity` for none. */
    maxStaleness: number;
    /**
     * Plays each episode instead of the built-in runner (e.g. the user's agent through the
     * recording gateway: `trainAgent`). Default: the built-in runner.
     */
    playEpisode?: RolloutSchedulerOptions["playEpisode"];
    /** Buffer capacity in groups. Default 2 × batchGroups. */
    bufferGroups?: number;
    /** Share of its weight a task keeps while its recent groups all had equal rewards (see RolloutSchedulerOptions). Default 1. */
    uninformativeWeight?: number;
  };
  crossPolicy: {
    /** Probability that a turn comes from the stale policy; 0 turns cross-policy sampling off. */
    staleProbability: number;
    /** Steps between refreshes of the stale copy. Default 2 (the schema's `crossPolicy.refreshEvery`; AgentRL: 25 of 1,000). */
    refreshEvery?: number;
    /** An external model drawn per turn besides the stale copy (see ExternalPolicyMember). Default none. */
    external?: ExternalPolicyMember;
  };
  checkpoint: { every: number; keep: number };
  /** Resume from the newest checkpoint of the run directory, if any. */
  resume: boolean;
  /** Called with each step's batch of complete groups just before it is trained on; `step` is the number of the step it makes (as in its record and metrics, from 1). */
  onBatch?: (batch: { step: number; groups: readonly TrajectoryGroup[] }) => void;
  /** Record a sample of each step's episodes into `trajectories.jsonl` for the dashboard (see trajectory-log.ts). Default off. */
  trajectories?: TrajectoryLogOptions;
  /** Called after each step with its record; and every `evaluation.every` steps, the evaluation hook. */
  onStep?: (record: StepRecord) => void;
  evaluation?: { every: number; run: (policy: Policy, step: number) => Promise<Metrics> };
  /** Aborting stops the run after the current step, with a checkpoint. */
  signal?: AbortSignal;
  /** Where warnings go (one line each). Default `console.warn`. */
  log?: (line: string) => void;
}

/**
 * The external member of the cross-policy pool: a model behind an OpenAI-compatible
 * `POST {baseUrl}/chat/completions` (the rollout's ExternalChatModel), drawn for a turn with
 * `probability`; the stale copy keeps its own `staleProbability`, the current policy takes
 * the rest. Its answers are tokenized with the chat template and enter the trajectory with
 * loss mask 0 and policy id `external`, so they shape episodes but are never trained on, and
 * with version −1, so they never count against `maxStaleness`.
 *
 * `temperature` defaults to the rollout's sampling temperature (the episode's, else the
 * engine's) and `maxTokens` to the episode's `maxNewTokensPerTurn`, when those are set.
 */
export interface ExternalPolicyMember extends ExternalChatModelOptions {
  /** Probability that a turn comes from the external model; `staleProbability` + this must not exceed 1. */
  probability: number;
}

/** Thrown before anything loads when the run's options contradict each other. */
export class TrainingOptionsError extends AgentRLError {}

export interface StepRecord {
  step: number;
  version: number;
  metrics: Metrics;
}

/**
 * The external pool member of the run, when configured: its ExternalChatModel (temperature and
 * `max_tokens` defaulting to the rollout's) and probability. Throws TrainingOptionsError when
 * the probabilities do not fit in [0, 1].
 */
export function externalModel(
  options: TrainingRunOptions,
): { model: ExternalChatModel; probability: number } | undefined {
  const { staleProbability, external } = options.crossPolicy;
  if (!external) return undefined;
  const { probability, temperature: ownTemperature, maxTokens: ownMaxTokens, ...rest } = external;
  if (!(probability >= 0 && probability <= 1) || !(staleProbability + probability <= 1)) {
    throw new TrainingOptionsError(
      `crossPolicy.external.probability (${probability}) must lie in [0, 1] and, with crossPolicy.staleProbability (${staleProbability}), sum to at most 1`,
    );
  }
  const temperature =
    ownTemperature ?? options.rollout.episode.temperature ?? options.rollout.engine.temperature;
  const maxTokens = ownMaxTokens ?? options.rollout.episode.maxNewTokensPerTurn;
  // Options given as undefined must not override ExternalChatModel's own defaults.
  const given = Object.fromEntries(
    Object.entries(rest).filter(([, value]) => value !== undefined),
  ) as typeof rest;
  const model = new ExternalChatModel({
    ...given,
    ...(temperature !== undefined ? { temperature } : {}),
    ...(maxTokens !== undefined ? { maxTokens } : {}),
  });
  return { model, probability };
}
