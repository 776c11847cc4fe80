/**
 * The model's parameters and everything around them that is not the forward pass: the
 * tf.Variables keyed by their Hugging Face names and created from given weights or a random
 * initialisation, parameter bookkeeping (counts, trainable sets), LoRA adapters, and the
 * conversion to and from the Hugging Face layout.
 *
 * Linear weights are stored TRANSPOSED relative to PyTorch ([in, out] instead of [out, in])
 * so every projection is a plain rank-2 matmul without transpose flags (the fast path on
 * wasm); `hfTensors()` and `loadHfTensors()` convert at the boundary.
 */
import { AgentRLError } from "@agentrl/spec";
import * as tf from "@tensorflow/tfjs-core";
import type { ModelConfig } from "./config.js";
import { inferenceCachePlan } from "./memory.js";

/** Something wrong with weights given to the model (missing, extra, mis-shaped). */
export class WeightsError extends AgentRLError {}

/** A tensor in Hugging Face layout, as plain data (float32). */
export interface NamedWeight {
  name: string;
  shape: number[];
  data: Float32Array;
}

/** One projection y = x·W (+ b) (+ LoRA). */
export interface Linear {
  /** [in, out] */
  weight: tf.Variable;
  /** [out] */
  bias?: tf.Variable;
  /** LoRA adapter: output += scale · (x·A)·B, A [in, r], B [r, out]. */
  lora?: { a: tf.Variable; b: tf.Variable; scale: number };
}

/** One decoder block's parameters. */
export interface Layer {
  /** [d] */
  inputNorm: tf.Variable;
  q: Linear;
  k: Linear;
  v: Linear;
  o: Linear;
  /** [d] */
  postNorm: tf.Variable;
  gate: Linear;
  up: Linear;
  down: Linear;
}

/** Inference-only concatenations of a layer's weights. */
export interface FusedLayer {
  /** [d, q + 2·kv] */
  qkv: tf.Tensor2D;
  /** [q + 2·kv], in JS memory: the decode path adds it to the read-back rows */
  qkvBias?: Float32Array;
  /** [d, 2·m]; absent for large models (inferenceCachePlan: it would double the MLP weights) */
  gateUp?: tf.Tensor2D;
}

/**
 * Weights read one at a time (e.g. straight from safetensors bytes), so loading never holds
 * a second copy of the whole model in the backend: each tensor `load` returns is turned
 * into its variable and disposed before the next is read.
 */
export interface WeightSource {
  /** Every HF name available. */
  names(): string[];
  /** HF-layout shape of a name. */
  shape(name: string): number[];
  /** A new float tensor in HF layout; the model disposes it. */
  load(name: string): tf.Tensor;
}

/** Projections LoRA can adapt (HF module names). */
export type LoraTarget =
  "q_proj" | "k_proj" | "v_proj" | "o_proj" | "gate_proj" | "up_proj" | "down_proj";
export const LORA_TARGETS: readonly LoraTarget[] = [
  "q_proj",
  "k_proj",
  "v_proj",
  "o_proj",
  "gate_proj",
  "up_proj",
  "down_proj",
];

export interface LoraOptions {
  /** Adapter rank r. Default 8. */
  rank?: number;
  /** Scale α: the update is (α / r) · A·B. Default 16. */
  alpha?: number;
  /** Projections to adapt. Default all seven (attention and MLP). */
  targets?: readonly LoraTarget[];
  /** Seed of A's random init (B starts at zero, so the model is unchanged at first). Default 0. */
  seed?: number;
}

export interface ModelInitOptions {
  /** Seed of the random initialisation; default 0. */
  seed?: number;
  /** Variables take part in gradients; default true. */
  trainable?: boolean;
  /** Initial values in the model's own layout (from `cloneVariables()`); shared, not copied. */
  values?: Map<string, tf.Tensor>;
}

/**
 * The parameters of one model. `weights` (HF layout, HF names, any float dtype) gives every
 * tensor; without it, weights are initialised randomly (normal σ 0.02, residual outputs
 * scaled by 1/√(2·layers), norms 1, biases 0). `scope` prefixes the tfjs variable names.
 */
export class ModelWeights {
  /** HF name → variable. Linear weights ([…]_proj.weight, lm_head.weight) are stored [in, out]. */
  readonly variables: Map<string, tf.Variable> = new Map();
  /** [V, d] */
  readonly embedding: tf.Variable;
  readonly layers: Layer[] = [];
  /** [d] */
  readonly finalNorm: tf.Variable;
  /** [d, V], untied only */
  readonly lmHead?: tf.Variable;
  /** HF weight name → its projection. */
  private readonly linears = new Map<string, Linear>();
  /** LoRA adapter variables by name (`<base>.lora_A.weight` [in, r], `<base>.lora_B.weight` [r, out]), when enabled. */
  private lora?: Map<string, tf.Variable>;
  /** The options adapters were attached with (to attach the same ones to a model sharing this base). */
  private loraSettings?: Required<Omit<LoraOptions, "targets">> & { targets: LoraTarget[] };
  private readonly baseTrainable: boolean;
  private headCache?: { source: object; transposed: tf.Tensor2D };
  private fusedCache?: { ids: (object | undefined)[]; layers: FusedLayer[] };

  constructor(
    private readonly config: ModelConfig,
    private readonly scope: string,
    given?: Map<string, tf.Tensor> | WeightSource,
    options: ModelInitOptions = {},
  ) {
    const { hiddenSize: d, intermediateSize: m, vocabSize: V, headDim } = config;
    const qWidth = config.numAttentionHeads * headDim;
    const kvWidth = config.numKeyValueHeads * headDim;
    const trainable = options.trainable ?? true;
    let seed = options.seed ?? 0;
    const residualStd = 0.02 / Math.sqrt(2 * config.numHiddenLayers);
    const weights = given instanceof Map ? mapSource(given) : given;
    if (weights) checkWeightNames(config, new Set(weights.names()));

    const make = (
      name: string,
      hfShape: number[],
      init: "normal" | "residual" | "ones" | "zeros",
      transposed = false,
    ): tf.Variable => {
      const storedShape = transposed ? [hfShape[1], hfShape[0]] : hfShape;
      const value = tf.tidy(() => {
        const own = options.values?.get(name);
        if (own) {
          if (own.shape.join() !== storedShape.join())
            throw new WeightsError(
              `${name}: shape [${own.shape}] but model stores [${storedShape}]`,
            );
          return tf.clone(own);
        }
        if (weights) {
          const shape = weights.shape(name);
          if (shape.join() !== hfShape.join())
            throw new WeightsError(`${name}: shape [${shape}] but config needs [${hfShape}]`);
          const loaded = weights.load(name); // a tensor made inside this tidy is freed at its end
          const float = loaded.dtype === "float32" ? loaded : tf.cast(loaded, "float32");
          return transposed ? tf.transpose(float) : tf.clone(float);
        }
        seed += 1;
        if (init === "ones") return tf.ones(storedShape);
        if (init === "zeros") return tf.zeros(storedShape);
        return tf.randomNormal(
          storedShape,
          0,
          init === "residual" ? residualStd : 0.02,
          "float32",
          seed,
        );
      });
      const variable = tf.variable(value, trainable, `${scope}/${name}`);
      value.dispose();
      this.variables.set(name, variable);
      return variable;
    };
    const linear = (
      name: string,
      inputs: number,
      outputs: number,
      bias: boolean,
      init: "normal" | "residual" = "normal",
    ): Linear => {
      const projection: Linear = {
        weight: make(`${name}.weight`, [outputs, inputs], init, true),
        ...(bias ? { bias: make(`${name}.bias`, [outputs], "zeros") } : {}),
      };
      this.linears.set(`${name}.weight`, projection);
      return projection;
    };
    this.baseTrainable = trainable;

    this.embedding = make("model.embed_tokens.weight", [V, d], "normal");
    for (let i = 0; i < config.numHiddenLayers; i++) {
      const prefix = `model.layers.${i}`;
      this.layers.push({
        inputNorm: make(`${prefix}.input_layernorm.weight`, [d], "ones"),
        q: linear(`${prefix}.self_attn.q_proj`, d, qWidth, config.attentionBias),
        k: linear(`${prefix}.self_attn.k_proj`, d, kvWidth, config.attentionBias),
        v: linear(`${prefix}.self_attn.v_proj`, d, kvWidth, config.attentionBias),
        o: linear(`${prefix}.self_attn.o_proj`, qWidth, d, false, "residual"),
        postNorm: make(`${prefix}.post_attention_layernorm.weight`, [d], "ones"),
        gate: linear(`${prefix}.mlp.gate_proj`, d, m, false),
        up: linear(`${prefix}.mlp.up_proj`, d, m, false),
        down: linear(`${prefix}.mlp.down_proj`, m, d, false, "residual"),
      });
    }
    this.finalNorm = make("model.norm.weight", [d], "ones");
    if (!config.tieWordEmbeddings) this.lmHead = make("lm_head.weight", [V, d], "normal", true);
  }

  /** Number of parameters (adapters excluded). */
  get parameterCount(): number {
    let total = 0;
    for (const variable of this.variables.values()) total += variable.size;
    return total;
  }

  /** Name → trainable variable (LoRA adapters when enabled, else the weights that are trainable). */
  trainableVariableMap(): Map<string, tf.Variable> {
    if (this.lora) return new Map(this.lora);
    return new Map([...this.variables].filter(([, v]) => v.trainable));
  }

  // ---------------------------------------------------------------- LoRA

  /** True while LoRA adapters are attached (only they train). */
  get loraEnabled(): boolean {
    return this.lora !== undefined;
  }

  /**
   * Attaches LoRA adapters to the chosen projections and freezes every base weight.
   * A ~ N(0, 1/in), B = 0, so outputs do not change until the adapters train.
   */
  enableLora(options: LoraOptions = {}): void {
    if (this.lora) throw new WeightsError("LoRA is already enabled");
    const rank = options.rank ?? 8;
    this.loraSettings = {
      rank,
      alpha: options.alpha ?? 16,
      targets: [...(options.targets ?? LORA_TARGETS)],
      seed: options.seed ?? 0,
    };
    if (!Number.isInteger(rank) || rank <= 0)
      throw new RangeError(`LoRA rank must be a positive integer, got ${rank}`);
    const scale = (options.alpha ?? 16) / rank;
    const targets = new Set(options.targets ?? LORA_TARGETS);
    let seed = options.seed ?? 0;
    this.lora = new Map();
    for (const [name, linear] of this.linears) {
      const module = name.split(".").at(-2) as LoraTarget;
      if (!targets.has(module)) continue;
      const [inputs, outputs] = linear.weight.shape;
      const base = name.slice(0, -".weight".length);
      // tidy frees the initial values once the variables hold them (a later assign then frees the memory)
      const [a, b] = tf.tidy(() => [
        tf.variable(
          tf.randomNormal([inputs, rank], 0, 1 / Math.sqrt(inputs), "float32", ++seed),
          true,
          `${this.scope}/${base}.lora_A.weight`,
        ),
        tf.variable(tf.zeros([rank, outputs]), true, `${this.scope}/${base}.lora_B.weight`),
      ]);
      linear.lora = { a, b, scale };
      this.lora.set(`${base}.lora_A.weight`, a);
      this.lora.set(`${base}.lora_B.weight`, b);
    }
    for (const variable of this.variables.values()) variable.trainable = false;
  }

  /** Folds the adapters into the base weights (W ← W + scale·A·B), removes them and unfreezes the weights. */
  mergeLora(): void {
    if (!this.lora) return;
    for (const linear of this.linears.values()) {
      if (!linear.lora) continue;
      linear.weight.assign(tf.tidy(() => effectiveWeight(linear)));
      linear.lora.a.dispose();
      linear.lora.b.dispose();
      delete linear.lora;
    }
    this.lora = undefined;
    this.loraSettings = undefined;
    for (const variable of this.variables.values()) variable.trainable = this.baseTrainable;
  }

  /** The options the adapters were attached with, while LoRA is enabled. */
  get loraOptions():
    (Required<Omit<LoraOptions, "targets">> & { targets: LoraTarget[] }) | undefined {
    return this.loraSettings
      ? { ...this.loraSettings, targets: [...this.loraSettings.targets] }
      : undefined;
  }

  /** Adapter values by name (`<base>.lora_A.weight` [in, r], `<base>.lora_B.weight` [r, out]), as plain data. */
  adapterWeights(): NamedWeight[] {
    if (!this.lora) throw new WeightsError("LoRA is not enabled");
    return [...this.lora].map(([name, variable]) => ({
      name,
      shape: variable.shape.slice(),
      data: variable.dataSync() as Float32Array,
    }));
  }

  /** Assigns adapter values (names and shapes as `adapterWeights` gives; all must be present). */
  assignAdapters(values: Map<string, tf.Tensor>): void {
    if (!this.lora) throw new WeightsError("LoRA is not enabled");
    for (const [name, variable] of this.lora) {
      const value = values.get(name);
      if (!value) throw new WeightsError(`missing adapter ${name}`);
      if (value.shape.join() !== variable.shape.join())
        throw new WeightsError(
          `${name}: shape [${value.shape}] but the adapter is [${variable.shape}]`,
        );
      variable.assign(value);
    }
  }

  /** The base variables' values (internal layout, adapters NOT merged), sharing storage. Caller disposes. */
  baseValues(): Map<string, tf.Tensor> {
    return new Map([...this.variables].map(([name, variable]) => [name, tf.clone(variable)]));
  }

  /** Zeroes every adapter's B, so the model equals its base weights. */
  private resetLoraUpdates(): void {
    for (const linear of this.linears.values())
      if (linear.lora) linear.lora.b.assign(tf.zerosLike(linear.lora.b));
  }

  // ---------------------------------------------------------------- weights in HF layout

  /** Every weight as a tensor in Hugging Face layout ([out, in] for linears), adapters merged. Caller disposes. */
  hfTensors(): Map<string, tf.Tensor> {
    const result = new Map<string, tf.Tensor>();
    for (const [name, variable] of this.variables) {
      const linear = this.linears.get(name);
      result.set(
        name,
        tf.tidy(() =>
          isStoredTransposed(name)
            ? tf.transpose(linear ? effectiveWeight(linear) : variable)
            : tf.clone(variable),
        ),
      );
    }
    return result;
  }

  /** Every weight as plain float32 data in HF layout. */
  exportHfWeights(): NamedWeight[] {
    // one tensor at a time: a 0.5B model's merged, transposed copy never sits in the backend whole
    const out: NamedWeight[] = [];
    for (const [name, variable] of this.variables) {
      const linear = this.linears.get(name);
      const tensor = tf.tidy(() =>
        isStoredTransposed(name)
          ? tf.transpose(linear ? effectiveWeight(linear) : variable)
          : tf.clone(variable),
      );
      out.push({ name, shape: tensor.shape.slice(), data: tensor.dataSync() as Float32Array });
      tensor.dispose();
    }
    return out;
  }

  /** Overwrites every weight from tensors in HF layout (all names must be present). LoRA adapters are reset (B = 0). */
  loadHfTensors(tensors: Map<string, tf.Tensor>): void {
    this.resetLoraUpdates();
    checkWeightNames(this.config, new Set(tensors.keys()));
    for (const [name, variable] of this.variables) {
      const given = tensors.get(name)!;
      const expected = isStoredTransposed(name)
        ? [variable.shape[1], variable.shape[0]]
        : variable.shape;
      if (given.shape.join() !== expected.join())
        throw new WeightsError(`${name}: shape [${given.shape}] but model has [${expected}]`);
      tf.tidy(() => {
        const float = given.dtype === "float32" ? given : tf.cast(given, "float32");
        variable.assign(isStoredTransposed(name) ? tf.transpose(float) : float);
      });
    }
  }

  /**
   * Raw variable values (internal layout), cheap: shares storage until a variable is
   * reassigned. With LoRA, adapted weights are merged copies. Caller disposes.
   */
  cloneVariables(): Map<string, tf.Tensor> {
    const out = new Map<string, tf.Tensor>();
    for (const [name, variable] of this.variables) {
      const linear = this.linears.get(name);
      out.set(name, linear?.lora ? tf.tidy(() => effectiveWeight(linear)) : tf.clone(variable));
    }
    return out;
  }

  /** Assigns raw variable values (internal layout, from cloneVariables). LoRA adapters are reset (B = 0). */
  assignVariables(values: Map<string, tf.Tensor>): void {
    this.resetLoraUpdates();
    for (const [name, variable] of this.variables) {
      const value = values.get(name);
      if (!value) throw new WeightsError(`missing ${name}`);
      variable.assign(value);
    }
  }

  // ---------------------------------------------------------------- derived inference caches

  /**
   * Inference-only fused weights per layer ([Wq|Wk|Wv], [Wgate|Wup]): fewer, wider matmuls
   * and one rotary pass. Rebuilt when any source weight changes; none while LoRA is on.
   */
  fusedLayers(): FusedLayer[] | undefined {
    if (this.lora) return undefined;
    const { fusedMlp } = inferenceCachePlan(this.config);
    const sources = this.layers.flatMap((l) => [
      l.q.weight,
      l.k.weight,
      l.v.weight,
      l.q.bias,
      l.k.bias,
      l.v.bias,
      l.gate.weight,
      l.up.weight,
    ]);
    const ids = sources.map((v) => (v as unknown as { dataId: object } | undefined)?.dataId);
    if (this.fusedCache && this.fusedCache.ids.every((id, i) => id === ids[i]))
      return this.fusedCache.layers;
    this.disposeFused();
    const layers = this.layers.map((l): FusedLayer => {
      const bias =
        l.q.bias && l.k.bias && l.v.bias ? tf.concat([l.q.bias, l.k.bias, l.v.bias]) : undefined;
      const qkvBias = bias?.dataSync() as Float32Array | undefined;
      bias?.dispose();
      return {
        qkv: tf.concat([l.q.weight, l.k.weight, l.v.weight], 1) as tf.Tensor2D,
        ...(qkvBias ? { qkvBias } : {}),
        ...(fusedMlp ? { gateUp: tf.concat([l.gate.weight, l.up.weight], 1) as tf.Tensor2D } : {}),
      };
    });
    this.fusedCache = { ids, layers };
    return layers;
  }

  private disposeFused(): void {
    for (const layer of this.fusedCache?.layers ?? [])
      tf.dispose([layer.qkv, ...(layer.gateUp ? [layer.gateUp] : [])]);
    this.fusedCache = undefined;
  }

  /**
   * Logits [n, columns] of hidden rows [n, d] over the first `columns` vocabulary entries
   * (ids past the tokenizer's are cut from the logits: they can never be sampled nor scored). Untied: the
   * [d, V] head. Tied: the embedding transposed, cached outside training while small
   * (inferenceCachePlan), else the embedding read as it is (a matmul with transposed operand:
   * no [d, V] copy). Differentiable when `differentiable`.
   */
  headLogits(hidden: tf.Tensor2D, columns: number, differentiable: boolean): tf.Tensor2D {
    return tf.tidy(() => {
      const { lmHead, embedding } = this;
      const V = this.config.vocabSize;
      const keepColumns = (logits: tf.Tensor2D) =>
        columns < V
          ? (tf.slice(logits, [0, 0], [logits.shape[0], columns]) as tf.Tensor2D)
          : logits;
      if (lmHead) return keepColumns(tf.matMul(hidden, lmHead as tf.Tensor2D));
      if (!inferenceCachePlan(this.config).transposedHead)
        return keepColumns(tf.matMul(hidden, embedding as tf.Tensor2D, false, true));
      if (differentiable)
        return keepColumns(tf.matMul(hidden, tf.transpose(embedding) as tf.Tensor2D));
      const source = (embedding as unknown as { dataId: object }).dataId;
      if (this.headCache?.source !== source) {
        this.headCache?.transposed.dispose();
        this.headCache = { source, transposed: tf.keep(tf.transpose(embedding)) as tf.Tensor2D };
      }
      return keepColumns(tf.matMul(hidden, this.headCache.transposed));
    });
  }

  dispose(): void {
    for (const variable of this.variables.values()) variable.dispose();
    for (const variable of this.lora?.values() ?? []) variable.dispose();
    this.headCache?.transposed.dispose();
    this.disposeFused();
  }
}

/** W + scale·A·B ([in, out]), or a copy of W. */
function effectiveWeight(linear: Linear): tf.Tensor {
  if (!linear.lora) return tf.clone(linear.weight);
  return tf.add(linear.weight, tf.mul(tf.matMul(linear.lora.a, linear.lora.b), linear.lora.scale));
}

function isStoredTransposed(name: string): boolean {
  return name.endsWith("_proj.weight") || name === "lm_head.weight";
}

/** HF names the config needs, in order. */
export function expectedWeightNames(config: ModelConfig): string[] {
  const names = ["model.embed_tokens.weight"];
  for (let i = 0; i < config.numHiddenLayers; i++) {
    const p = `model.layers.${i}`;
    names.push(`${p}.input_layernorm.weight`);
    for (const proj of ["q", "k", "v"]) {
      names.push(`${p}.self_attn.${proj}_proj.weight`);
      if (config.attentionBias) names.push(`${p}.self_attn.${proj}_proj.bias`);
    }
    names.push(`${p}.self_attn.o_proj.weight`, `${p}.post_attention_layernorm.weight`);
    for (const proj of ["gate", "up", "down"]) names.push(`${p}.mlp.${proj}_proj.weight`);
  }
  names.push("model.norm.weight");
  if (!config.tieWordEmbeddings) names.push("lm_head.weight");
  return names;
}

/** A map of caller-owned tensors as a WeightSource (clones share storage; the map is not disposed). */
function mapSource(tensors: Map<string, tf.Tensor>): WeightSource {
  return {
    names: () => [...tensors.keys()],
    shape: (name) => tensors.get(name)!.shape,
    load: (name) => tf.clone(tensors.get(name)!),
  };
}

function checkWeightNames(config: ModelConfig, weights: Set<string>): void {
  const expected = expectedWeightNames(config);
  const missing = expected.filter((name) => !weights.has(name));
  if (missing.length > 0)
    throw new WeightsError(
      `missing weights: ${missing.slice(0, 5).join(", ")}${missing.length > 5 ? ` (+${missing.length - 5} more)` : ""}`,
    );
  const known = new Set(expected);
  // A tied model may still ship lm_head.weight (a copy); rotary inv_freq buffers are derived.
  const extra = [...weights.keys()].filter(
    (name) =>
      !known.has(name) && name !== "lm_head.weight" && !name.endsWith("rotary_emb.inv_freq"),
  );
  if (extra.length > 0)
    throw new WeightsError(`unexpected weights: ${extra.slice(0, 5).join(", ")}`);
}
