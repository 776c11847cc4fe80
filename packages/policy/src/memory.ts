/**
 * How much memory a model needs on a backend, checked before any weight is read.
 *
 * The wasm backend keeps every tensor in one WebAssembly.Memory, which cannot grow past
 * 4 GiB (32-bit addresses). A model whose float32 weights, inference caches and working
 * tensors need more than that fails at load with `ModelTooLargeError`, naming the limit, the
 * model's need and what to do (the native backend, LoRA instead of full fine-tuning, a
 * smaller model), instead of answering its first request with "memory access out of bounds".
 *
 * What the model keeps beside its float32 weights (see weights.ts) depends on its size:
 * - the fused [Wq|Wk|Wv] of each layer: always (small);
 * - the fused [Wgate|Wup] of each layer: only while all weights take ≤ FUSED_MLP_MAX_WEIGHT_BYTES
 *   (for a 0.5B model it would be another ~0.9 GB);
 * - XNNPACK's packed copy of every matrix a matmul multiplies by: small models only (large
 *   ones multiply without it, model.ts `weightProduct`);
 * - the transposed tied embedding as LM head [d, V]: only while it takes ≤
 *   TRANSPOSED_HEAD_MAX_BYTES (for Qwen2.5's 151,936 × 896 it would be 0.54 GB); otherwise
 *   the head reads the embedding as it is (a matmul with transposed operand).
 */
import { AgentRLError } from "@agentrl/spec";
import { totalmem } from "node:os";
import { type ModelConfig, parameterCount } from "./config.js";

/** A model that cannot fit the backend's memory (said at load, before any request). */
export class ModelTooLargeError extends AgentRLError {}

/** Largest WebAssembly.Memory of tfjs's wasm backend (32-bit addresses). */
export const WASM_HEAP_LIMIT_BYTES = 4 * 2 ** 30;
/** The heap is allocated by malloc in pieces: plan to use at most this share of it. */
export const WASM_HEAP_USABLE_SHARE = 0.9;
/** Fuse [Wgate|Wup] only while all weights take at most this much (float32). */
export const FUSED_MLP_MAX_WEIGHT_BYTES = 2 ** 30;
/** Cache the tied embedding transposed as LM head only while it takes at most this much. */
export const TRANSPOSED_HEAD_MAX_BYTES = 256 * 2 ** 20;

const FLOAT_BYTES = 4;
/** Tokens of one training micro-batch the estimate assumes (rl.microBatchTokens). */
export const TRAINING_TOKENS = 256;

/** Which inference caches a model of this config keeps (see the file comment). */
export function inferenceCachePlan(config: ModelConfig): {
  fusedMlp: boolean;
  transposedHead: boolean;
} {
  return {
    fusedMlp: parameterCount(config) * FLOAT_BYTES <= FUSED_MLP_MAX_WEIGHT_BYTES,
    transposedHead:
      config.tieWordEmbeddings &&
      config.vocabSize * config.hiddenSize * FLOAT_BYTES <= TRANSPOSED_HEAD_MAX_BYTES,
  };
}

/** How the model will be used: sampling only, LoRA adapters training, or every weight training (AdamW). */
export type MemoryUse = "inference" | "lora" | "full";

export interface MemoryEstimate {
  /** float32 weights */
  weightBytes: number;
  /** fused projections and the transposed head */
  cacheBytes: number;
  /** gradients and AdamW moments (full fine-tuning) */
  trainingStateBytes: number;
  /** working tensors of one prefill chunk or training micro-batch (an estimate) */
  workingBytes: number;
  totalBytes: number;
}

/** Bytes a model of this config needs in the backend's memory for a use. */
export function estimateModelMemory(
  config: ModelConfig,
  use: MemoryUse = "inference",
  trainingTokens = TRAINING_TOKENS,
): MemoryEstimate {
  const {
    hiddenSize: d,
    intermediateSize: m,
    vocabSize: V,
    numHiddenLayers: layers,
    headDim,
  } = config;
  const qkvWidth = (config.numAttentionHeads + 2 * config.numKeyValueHeads) * headDim;
  const weightBytes = parameterCount(config) * FLOAT_BYTES;
  const plan = inferenceCachePlan(config);
  // small models also let XNNPACK keep a packed copy of every matrix they multiply by (≈ the linear weights)
  const linearWeights =
    layers * (d * qkvWidth + config.numAttentionHeads * headDim * d + 3 * d * m);
  const packed = plan.fusedMlp ? linearWeights + (plan.transposedHead ? V * d : 0) : 0;
  const cacheBytes =
    (layers * d * qkvWidth +
      (plan.fusedMlp ? layers * d * 2 * m : 0) +
      (plan.transposedHead ? V * d : 0) +
      packed) *
    FLOAT_BYTES;
  const trainingStateBytes = use === "full" ? 3 * weightBytes : 0;
  // a prefill chunk of 512 rows through one layer, and the logits of 64 sequences at once
  const inferenceWorking = (512 * (6 * d + 4 * m + qkvWidth) + 64 * V) * FLOAT_BYTES;
  // a training micro-batch: per layer ~(12d + 6m) saved activations per token, then the
  // logits, their softmax and its gradient
  const trainingWorking =
    use === "inference"
      ? 0
      : (trainingTokens * layers * (12 * d + 6 * m) + 3 * trainingTokens * V) * FLOAT_BYTES;
  const workingBytes = Math.max(inferenceWorking, trainingWorking) + 64 * 2 ** 20;
  return {
    weightBytes,
    cacheBytes,
    trainingStateBytes,
    workingBytes,
    totalBytes: weightBytes + cacheBytes + trainingStateBytes + workingBytes,
  };
}

/** The memory a backend can give tensors: the wasm heap's limit, else the machine's RAM. */
export function backendMemoryLimit(backend: string): { bytes: number; what: string } {
  if (backend === "wasm")
    return {
      bytes: WASM_HEAP_LIMIT_BYTES * WASM_HEAP_USABLE_SHARE,
      what: `the wasm backend's heap (4 GiB, ${Math.round(WASM_HEAP_USABLE_SHARE * 100)} % usable)`,
    };
  return { bytes: totalmem(), what: `this machine's memory (${formatBytes(totalmem())})` };
}

/**
 * Throws ModelTooLargeError when a model of this config cannot fit the backend for the
 * given use; returns the estimate otherwise.
 */
export function checkModelFits(
  config: ModelConfig,
  backend: string,
  use: MemoryUse = "inference",
  source = "the model",
  trainingTokens = TRAINING_TOKENS,
): MemoryEstimate {
  const estimate = estimateModelMemory(config, use, trainingTokens);
  const limit = backendMemoryLimit(backend);
  if (estimate.totalBytes <= limit.bytes) return estimate;
  const parameters = parameterCount(config);
  const advice: string[] = [];
  if (
    use !== "inference" &&
    trainingTokens > 64 &&
    estimateModelMemory(config, use, 64).totalBytes <= limit.bytes
  )
    advice.push(`train on fewer tokens per micro-batch (${trainingTokens} now)`);
  if (
    use === "full" &&
    estimateModelMemory(config, "lora", trainingTokens).totalBytes <= limit.bytes
  )
    advice.push("train LoRA adapters instead of every weight (frozen base, a few MB of adapters)");
  if (backend === "wasm")
    advice.push(
      "use the native backend (npm install @tensorflow/tfjs-node@4.22.0, AGENTRL_BACKEND=tensorflow), which has no 4 GiB limit",
    );
  advice.push(
    `use a smaller model (on ${backend}, models up to ~${Math.floor(maxParametersFor(config, limit.bytes, use) / 1e6)}M parameters of this shape fit ${use === "inference" ? "for sampling" : `for ${use} training`})`,
  );
  throw new ModelTooLargeError(
    `${source} (${(parameters / 1e6).toFixed(0)}M parameters, ${describeUse(use)}) needs about ${formatBytes(estimate.totalBytes)} ` +
      `(weights ${formatBytes(estimate.weightBytes)} as float32, caches ${formatBytes(estimate.cacheBytes)}` +
      `${estimate.trainingStateBytes > 0 ? `, gradients and AdamW moments ${formatBytes(estimate.trainingStateBytes)}` : ""}, working tensors${use === "inference" ? "" : ` of ${trainingTokens}-token micro-batches`} ${formatBytes(estimate.workingBytes)}), ` +
      `more than ${limit.what}: ${formatBytes(limit.bytes)}. To run it: ${advice.join("; or ")}.`,
  );
}

function describeUse(use: MemoryUse): string {
  return use === "inference" ? "sampling" : use === "lora" ? "LoRA training" : "full fine-tuning";
}

/** Parameters of a model scaled in depth from this config that still fit (for the advice). */
function maxParametersFor(config: ModelConfig, limitBytes: number, use: MemoryUse): number {
  let layers = config.numHiddenLayers;
  while (
    layers > 1 &&
    estimateModelMemory({ ...config, numHiddenLayers: layers }, use).totalBytes > limitBytes
  )
    layers -= 1;
  return parameterCount({ ...config, numHiddenLayers: layers });
}

export function formatBytes(bytes: number): string {
  if (bytes >= 2 ** 30) return `${(bytes / 2 ** 30).toFixed(2)} GiB`;
  return `${(bytes / 2 ** 20).toFixed(0)} MiB`;
}
