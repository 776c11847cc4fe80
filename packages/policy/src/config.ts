/**
 * Model configuration: the Hugging Face `config.json` of `LlamaForCausalLM` and
 * `Qwen2ForCausalLM`, validated with zod and turned into one camel-case `ModelConfig`.
 */
import { AgentRLError } from "@agentrl/spec";
import { z } from "zod";

export type Architecture = "LlamaForCausalLM" | "Qwen2ForCausalLM";

export interface ModelConfig {
  architecture: Architecture;
  /** Number of token ids (rows of the embedding). */
  vocabSize: number;
  /** Model width d. */
  hiddenSize: number;
  /** Width of the SwiGLU MLP. */
  intermediateSize: number;
  numHiddenLayers: number;
  numAttentionHeads: number;
  /** Grouped-query attention: each key/value head serves numAttentionHeads / numKeyValueHeads query heads. */
  numKeyValueHeads: number;
  /** Width of one head; hiddenSize / numAttentionHeads unless the config says otherwise. */
  headDim: number;
  /** Longest sequence the rotary tables cover. */
  maxPositionEmbeddings: number;
  rmsNormEps: number;
  /** Rotary base θ. */
  ropeTheta: number;
  /** q/k/v projections carry biases (Qwen2: true). */
  attentionBias: boolean;
  /** LM head shares the embedding matrix. */
  tieWordEmbeddings: boolean;
  bosTokenId?: number;
  eosTokenId?: number | number[];
  padTokenId?: number;
}

/** A config.json that does not describe a model we can run. */
export class ModelConfigError extends AgentRLError {}

const positiveInt = z.number().int().positive();
const tokenId = z.number().int().nonnegative();

const HfConfigSchema = z
  .object({
    architectures: z.array(z.string()).optional(),
    model_type: z.string().optional(),
    vocab_size: positiveInt,
    hidden_size: positiveInt,
    intermediate_size: positiveInt,
    num_hidden_layers: positiveInt,
    num_attention_heads: positiveInt,
    num_key_value_heads: positiveInt.optional(),
    head_dim: positiveInt.optional(),
    max_position_embeddings: positiveInt.default(2048),
    rms_norm_eps: z.number().positive().default(1e-6),
    rope_theta: z.number().positive().default(10000),
    rope_scaling: z.unknown().optional(),
    attention_bias: z.boolean().optional(),
    mlp_bias: z.boolean().optional(),
    hidden_act: z.string().default("silu"),
    tie_word_embeddings: z.boolean().default(false),
    bos_token_id: tokenId.nullable().optional(),
    eos_token_id: z
      .union([tokenId, z.array(tokenId)])
      .nullable()
      .optional(),
    pad_token_id: tokenId.nullable().optional(),
  })
  .loose();

/** Parses and checks a Hugging Face `config.json` object. Throws ModelConfigError. */
export function parseHfConfig(json: unknown): ModelConfig {
  const parsed = HfConfigSchema.safeParse(json);
  if (!parsed.success) {
    throw new ModelConfigError(
      `invalid config.json: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
    );
  }
  const c = parsed.data;
  const architecture = architectureOf(c.architectures, c.model_type);
  if (c.hidden_act !== "silu")
    throw new ModelConfigError(`hidden_act '${c.hidden_act}' is not supported (only silu)`);
  if (c.mlp_bias) throw new ModelConfigError("mlp_bias=true is not supported");
  if (c.rope_scaling !== undefined && c.rope_scaling !== null)
    throw new ModelConfigError("rope_scaling is not supported");
  const config: ModelConfig = {
    architecture,
    vocabSize: c.vocab_size,
    hiddenSize: c.hidden_size,
    intermediateSize: c.intermediate_size,
    numHiddenLayers: c.num_hidden_layers,
    numAttentionHeads: c.num_attention_heads,
    numKeyValueHeads: c.num_key_value_heads ?? c.num_attention_heads,
    headDim: c.head_dim ?? c.hidden_size / c.num_attention_heads,
    maxPositionEmbeddings: c.max_position_embeddings,
    rmsNormEps: c.rms_norm_eps,
    ropeTheta: c.rope_theta,
    attentionBias: c.attention_bias ?? architecture === "Qwen2ForCausalLM",
    tieWordEmbeddings: c.tie_word_embeddings,
    ...(c.bos_token_id != null ? { bosTokenId: c.bos_token_id } : {}),
    ...(c.eos_token_id != null ? { eosTokenId: c.eos_token_id } : {}),
    ...(c.pad_token_id != null ? { padTokenId: c.pad_token_id } : {}),
  };
  return validateConfig(config);
}

function architectureOf(
  architectures: string[] | undefined,
  modelType: string | undefined,
): Architecture {
  const name =
    architectures?.[0] ??
    (modelType === "qwen2"
      ? "Qwen2ForCausalLM"
      : modelType === "llama"
        ? "LlamaForCausalLM"
        : undefined);
  if (name === "LlamaForCausalLM" || name === "Qwen2ForCausalLM") return name;
  throw new ModelConfigError(
    `architecture '${name ?? "missing"}' is not supported (LlamaForCausalLM or Qwen2ForCausalLM)`,
  );
}

/** Checks the shape constraints between fields. Returns the config unchanged. */
export function validateConfig(config: ModelConfig): ModelConfig {
  const fail = (message: string): never => {
    throw new ModelConfigError(message);
  };
  if (!Number.isInteger(config.headDim) || config.headDim % 2 !== 0)
    fail(`head_dim ${config.headDim} must be an even integer`);
  if (config.numAttentionHeads % config.numKeyValueHeads !== 0) {
    fail(
      `num_attention_heads ${config.numAttentionHeads} must be a multiple of num_key_value_heads ${config.numKeyValueHeads}`,
    );
  }
  return config;
}

/** The Hugging Face `config.json` object for a config (round-trips through parseHfConfig). */
export function toHfConfig(config: ModelConfig): Record<string, unknown> {
  const qwen = config.architecture === "Qwen2ForCausalLM";
  return {
    architectures: [config.architecture],
    model_type: qwen ? "qwen2" : "llama",
    vocab_size: config.vocabSize,
    hidden_size: config.hiddenSize,
    intermediate_size: config.intermediateSize,
    num_hidden_layers: config.numHiddenLayers,
    num_attention_heads: config.numAttentionHeads,
    num_key_value_heads: config.numKeyValueHeads,
    head_dim: config.headDim,
    max_position_embeddings: config.maxPositionEmbeddings,
    rms_norm_eps: config.rmsNormEps,
    rope_theta: config.ropeTheta,
    ...(qwen ? {} : { attention_bias: config.attentionBias }),
    hidden_act: "silu",
    tie_word_embeddings: config.tieWordEmbeddings,
    torch_dtype: "float32",
    ...(config.bosTokenId !== undefined ? { bos_token_id: config.bosTokenId } : {}),
    ...(config.eosTokenId !== undefined ? { eos_token_id: config.eosTokenId } : {}),
    ...(config.padTokenId !== undefined ? { pad_token_id: config.padTokenId } : {}),
  };
}

export type PresetName = "test" | "tiny" | "small";

/**
 * Fresh-model presets (Qwen2 layout: q/k/v biases, tied embeddings).
 * - `test`: ~0.1M parameters at vocab 512, for unit tests (milliseconds per step).
 * - `tiny`: d 256, 4 layers, 8 heads / 2 kv heads, MLP 688: 3.8M parameters at vocab 4096.
 * - `small`: d 512, 8 layers, 8 heads / 2 kv heads, MLP 1376: ~26M parameters at vocab 8192.
 */
export const PRESETS: Record<PresetName, Omit<ModelConfig, "vocabSize">> = {
  test: {
    architecture: "Qwen2ForCausalLM",
    hiddenSize: 32,
    intermediateSize: 64,
    numHiddenLayers: 2,
    numAttentionHeads: 4,
    numKeyValueHeads: 2,
    headDim: 8,
    maxPositionEmbeddings: 1024,
    rmsNormEps: 1e-6,
    ropeTheta: 10000,
    attentionBias: true,
    tieWordEmbeddings: true,
  },
  tiny: {
    architecture: "Qwen2ForCausalLM",
    hiddenSize: 256,
    intermediateSize: 688,
    numHiddenLayers: 4,
    numAttentionHeads: 8,
    numKeyValueHeads: 2,
    headDim: 32,
    maxPositionEmbeddings: 4096,
    rmsNormEps: 1e-6,
    ropeTheta: 10000,
    attentionBias: true,
    tieWordEmbeddings: true,
  },
  small: {
    architecture: "Qwen2ForCausalLM",
    hiddenSize: 512,
    intermediateSize: 1376,
    numHiddenLayers: 8,
    numAttentionHeads: 8,
    numKeyValueHeads: 2,
    headDim: 64,
    maxPositionEmbeddings: 8192,
    rmsNormEps: 1e-6,
    ropeTheta: 1000000,
    attentionBias: true,
    tieWordEmbeddings: true,
  },
};

/** Default vocabulary size of each preset's tokenizer. */
export const PRESET_VOCAB_SIZES: Record<PresetName, number> = {
  test: 512,
  tiny: 4096,
  small: 8192,
};

export function presetConfig(name: PresetName, overrides: Partial<ModelConfig> = {}): ModelConfig {
  const preset = PRESETS[name];
  if (!preset)
    throw new ModelConfigError(`unknown preset '${name}' (${Object.keys(PRESETS).join(", ")})`);
  return validateConfig({ ...preset, vocabSize: PRESET_VOCAB_SIZES[name], ...overrides });
}

/** Number of parameters (tied embeddings counted once). */
export function parameterCount(config: ModelConfig): number {
  const d = config.hiddenSize;
  const q = config.numAttentionHeads * config.headDim;
  const kv = config.numKeyValueHeads * config.headDim;
  const attention = d * q + 2 * d * kv + q * d + (config.attentionBias ? q + 2 * kv : 0);
  const mlp = 3 * d * config.intermediateSize;
  const layer = attention + mlp + 2 * d;
  const embeddings = config.vocabSize * d * (config.tieWordEmbeddings ? 1 : 2);
  return embeddings + config.numHiddenLayers * layer + d;
}

export type ModelShapeName = "qwen2.5-0.5b" | "smollm2-135m";

/**
 * Real models' exact shapes, for random folders of the same size (`agentrl model init
 * --shape`): tests and benchmarks of memory and speed without downloading weights.
 * `tokenizerSize` is the tokenizer's id count (Qwen2.5 pads its 151,665 ids to 151,936 rows).
 */
export const MODEL_SHAPES: Record<ModelShapeName, { config: ModelConfig; tokenizerSize: number }> =
  {
    "qwen2.5-0.5b": {
      config: {
        architecture: "Qwen2ForCausalLM",
        vocabSize: 151_936,
        hiddenSize: 896,
        intermediateSize: 4864,
        numHiddenLayers: 24,
        numAttentionHeads: 14,
        numKeyValueHeads: 2,
        headDim: 64,
        maxPositionEmbeddings: 32_768,
        rmsNormEps: 1e-6,
        ropeTheta: 1_000_000,
        attentionBias: true,
        tieWordEmbeddings: true,
      },
      tokenizerSize: 151_665,
    },
    "smollm2-135m": {
      config: {
        architecture: "LlamaForCausalLM",
        vocabSize: 49_152,
        hiddenSize: 576,
        intermediateSize: 1536,
        numHiddenLayers: 30,
        numAttentionHeads: 9,
        numKeyValueHeads: 3,
        headDim: 64,
        maxPositionEmbeddings: 8192,
        rmsNormEps: 1e-5,
        ropeTheta: 100_000,
        attentionBias: false,
        tieWordEmbeddings: true,
      },
      tokenizerSize: 49_152,
    },
  };
