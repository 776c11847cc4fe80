/**
 * The inference engine: types (types.ts), the KV budget (kv-budget.ts), the prefix cache
 * (prefix-cache.ts), the continuous-batching loop (engine.ts) and the engine over a policy
 * (policy-model.ts).
 */
export {
  ContextLimitError,
  EngineClosedError,
  type EngineModel,
  type EngineSequence,
  type EngineStats,
  type GenerationEngine,
  type GenerationRequest,
  type GenerationResult,
  type InferenceEngineOptions,
  type WeightUpdateMode,
} from "./types.js";
export { InferenceEngine } from "./engine.js";
export { createPolicyEngine, policyEngineModel, type PolicyWeights } from "./policy-model.js";
export { EngineThreadError, ThreadEngine, type ThreadWeights } from "./thread.js";
export {
  affordableDecodeThreads,
  createPolicyEnginePool,
  decodeThreadsFor,
  defaultDecodeThreads,
  EnginePool,
  startEngineThreads,
  WEIGHT_COPIES_MEMORY_SHARE,
} from "./engine-pool.js";
