/**
 * `@agentrl/trainer/internal`: the plumbing of the trainer's threads, checkpoints and
 * micro-batches that benches and tests may reach for, outside the public API of the package
 * entry (./index.ts). No stability promise.
 */
export { EPSILON, stopGradient } from "./rl/algorithms.js";
export {
  checkpointName,
  writeFileDurably,
  writeJson,
  COMPLETE_MARKER,
  trimMetrics,
} from "./rl/checkpoint.js";
export { crc32c } from "./rl/logging.js";
export {
  type BatchCounts,
  claimFrom,
  type EpochWork,
  type GradientPeer,
  microBatchBudget,
  type MicroBatchTensors,
  type ShardGradients,
  toTensors,
  EMPTY_UPDATE_METRICS,
} from "./rl/grpo.js";
export { supervisedGradients, type SupervisedPeer, type SupervisedWork } from "./rl/sft.js";
export {
  dispatchLearnerCall,
  type LearnerCall,
  prepareTransfer,
} from "./rl/threads/learner-thread.js";
export { createOrExplain, familyOptions } from "./run/env-check.js";
