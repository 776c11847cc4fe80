/**
 * @agentrl/policy: a Llama / Qwen2-family transformer on TensorFlow.js that samples with a
 * KV cache and learns by gradient steps. See README.md for the API in one page.
 */
export {
  type BackendName,
  type InitBackendOptions,
  BackendUnavailableError,
  initBackend,
  setBackend,
} from "./backend.js";
export {
  type Architecture,
  type ModelConfig,
  type PresetName,
  ModelConfigError,
  PRESETS,
  PRESET_VOCAB_SIZES,
  MODEL_SHAPES,
  type ModelShapeName,
  parseHfConfig,
  toHfConfig,
  presetConfig,
  parameterCount,
} from "./config.js";
export {
  attentionKernel,
  setAttentionKernel,
  type AttentionKernelName,
  type HeapBlock,
} from "./kernels/attention.js";
export {
  Transformer,
  KVSequence,
  WeightsError,
  PREFILL_CHUNK_TOKENS,
  LORA_TARGETS,
  type LoraTarget,
  type LoraOptions,
  type NamedWeight,
  type ModelInitOptions,
  type WeightSource,
} from "./model.js";
export {
  type SafetensorsDtype,
  type SerializeOptions,
  type WriteDirectoryOptions,
  SafetensorsError,
  parseSafetensors,
  serializeSafetensors,
  readSafetensorsDirectory,
  SafetensorsReader,
} from "./safetensors.js";
export { Rng, type RngState } from "./rng.js";
export { type RandomWeightsOptions, writeRandomSafetensors } from "./random-weights.js";
export {
  type MemoryUse,
  type MemoryEstimate,
  ModelTooLargeError,
  checkModelFits,
} from "./memory.js";
export {
  type SamplingOptions,
  type GenerateOptions,
  type GenerationResult,
  type FinishReason,
  type SampledToken,
  type ModelSource,
  sampleToken,
  generate,
} from "./generate.js";
export {
  type TokenLogProbOptions,
  type TokenLogProbs,
  type AdamWOptions,
  type OptimizerState,
  type ApplyResult,
  type TrainStepOptions,
  type TrainStepResult,
  type MicroBatchOptions,
  AdamW,
  tokenLogProbs,
  nextTokenLoss,
  trainStep,
  accumulateGradients,
  addGradient,
  type AccumulatedGradients,
} from "./train.js";
export {
  type PolicyTokenizer,
  type PolicyGenerationConfig,
  type ExportedWeights,
  type LoadOptions,
  type SaveOptions,
  Policy,
  PolicySnapshot,
  ADAPTER_CONFIG_FILE,
} from "./policy.js";
export { snapshotFromFlat } from "./flat-weights.js";
export * from "./tokenizer/index.js";
