/**
 * Every default of the RL core, written once as plain constants. The library (`DEFAULT_GRPO`,
 * `DEFAULT_SCHEDULE`, `DEFAULT_OPTIMIZER`, the loop, the warm start) and the YAML schema of
 * ../run/config.ts both read them from here, so a value changes in one place; the reasons for
 * each value are in the schema's descriptions (docs/config.md).
 */

const rlDefaults = {
  mode: "async" as "async" | "sync",
  steps: 100,
  batchGroups: 4,
  groupSize: 8,
  learningRate: 1e-4,
  warmupSteps: 0,
  schedule: "cosine" as "constant" | "cosine",
  minLearningRateRatio: 0.1,
  weightDecay: 0,
  adamEpsilon: 1e-4,
  maxGradNorm: 1,
  clipLow: 0.2,
  clipHigh: 0.2,
  dualClip: 3,
  policyLoss: "ppo_clip" as string,
  importanceCap: 2,
  importanceRatioLow: 0.5,
  importanceRatioHigh: 2,
  mismatchKlAlarm: 0.05,
  klCoefficient: 0.05,
  entropyCoefficient: 0,
  reduction: "token-mean" as "token-mean" | "sequence-mean",
  advantageEstimator: "grpo" as string,
  taskAdvantageNormalization: true,
  negativeAdvantageScale: 1,
  ppoEpochs: 1,
  skipUniformGroups: true,
  dynamicSamplingGroups: 0,
  microBatchTokens: 4096,
  gradientThreads: "auto" as 1 | 2 | "auto",
  temperature: 0.8,
  maxStaleness: 4 as number | "infinite",
};

/** The `rl.*` settings, as the library reads them (the schema's `rl` section has this shape). */
export type RlSettings = typeof rlDefaults;

/** Defaults of the `rl.*` section: the GRPO loss, the schedule, the optimizer and the loop. */
export const RL_DEFAULTS: Readonly<RlSettings> = Object.freeze(rlDefaults);

/** Defaults of cross-policy sampling (`crossPolicy.*`). */
export const CROSS_POLICY_DEFAULTS: Readonly<{ staleProbability: number; refreshEvery: number }> =
  Object.freeze({
    staleProbability: 0.25,
    refreshEvery: 2,
  });

/**
 * Defaults of the supervised warm start (`warmStart.*` of the schema and `runWarmStart`'s
 * options): optimizer steps (also the cosine schedule's length), peak learning rate and expert
 * episodes per step. The recipes of `agentrl sft --preset` (../run/warmstart.ts) state their
 * own values explicitly: they record how a shipped checkpoint was made.
 */
export const WARM_START_DEFAULTS: Readonly<{
  steps: number;
  learningRate: number;
  batchEpisodes: number;
}> = Object.freeze({
  steps: 400,
  learningRate: 2e-3,
  batchEpisodes: 8,
});
