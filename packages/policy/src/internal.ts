/**
 * `@agentrl/policy/internal`: what benches and tests reach for besides the public API of the
 * package entry (./index.ts, what the README documents). No stability promise.
 */
export { BACKEND_NAMES, availableBackends, installGradientFixes } from "./backend.js";
export { validateConfig } from "./config.js";
export { simdAttentionAvailable, kernelHeap, KernelHeap } from "./kernels/attention.js";
export { expectedWeightNames } from "./model.js";
export {
  SAFETENSORS_FILE,
  SAFETENSORS_INDEX_FILE,
  writeSafetensorsDirectory,
  floatToBfloat16,
  floatToHalf,
} from "./safetensors.js";
export { hfWeightShapes } from "./random-weights.js";
export {
  WASM_HEAP_LIMIT_BYTES,
  TRAINING_TOKENS,
  estimateModelMemory,
  backendMemoryLimit,
  inferenceCachePlan,
  formatBytes,
} from "./memory.js";
export { trainingBytesPerToken, maxMicroBatchRows, splitIntoMicroBatches } from "./train.js";
export { ADAPTER_WEIGHTS_FILE } from "./policy.js";
export { snapshotToFlat } from "./flat-weights.js";
