/**
 * The whole model in one file: a decoder-only transformer of the Llama / Qwen2 family.
 *
 *   tokens ─► embed_tokens ─► N × [ x + attn(rmsnorm(x)); x + mlp(rmsnorm(x)) ] ─► norm ─► lm_head ─► logits
 *
 * - attention: rotary positions (HF "rotate_half" layout), grouped-query attention
 *   (numKeyValueHeads ≤ numAttentionHeads), optional q/k/v biases (Qwen2);
 * - MLP: SwiGLU, `down(silu(gate(x)) * up(x))`;
 * - LM head: tied to the embedding or its own matrix.
 *
 * Weights are tf.Variables keyed by their Hugging Face names. Linear weights are stored
 * TRANSPOSED relative to PyTorch ([in, out] instead of [out, in]) so every projection is a
 * plain rank-2 matmul without transpose flags (the fast path on wasm); `hfTensors()` and
 * `loadHfTensors()` convert at the boundary.
 *
 * Three ways to run it:
 * - `forward(inputIds)`: full causal pass over a right-padded batch, differentiable (training);
 * - `prefill(sequence, tokenIds)`: extends one sequence's KV cache, returns last-position logits;
 * - `decodeStep(sequences, tokenIds)`: one token for each of a batch of independent sequences
 *   (each with its own length), returns logits per sequence. Sequences may join and leave
 *   between steps for free: each sequence keeps its own cache in the kernel heap (one
 *   WebAssembly.Memory, not tfjs's), the projections and MLP of all sequences run as one
 *   rank-2 matmul each, and attention runs per sequence over its cache in a hand-written
 *   WebAssembly SIMD kernel, JS where SIMD is missing (see `KVSequence`,
 *   kernels/attention.ts, docs/decode.md).
 *
 * Inference (prefill, decodeStep) uses cached concatenations [Wq|Wk|Wv] and [Wgate|Wup]
 * (rebuilt after a weight update) and the cached transposed tied embedding; training
 * (forward) uses the variables directly. Optional LoRA adapters (`enableLora`) add
 * scale·(x·A)·B to each chosen projection.
 */
import * as tf from "@tensorflow/tfjs-core";
import { type ModelConfig, validateConfig } from "./config.js";
import { warnIfBackendNotInitialised } from "./backend.js";
import { AttentionRows, kernelHeap, type HeapBlock } from "./kernels/attention.js";

/** Something wrong with weights given to the model (missing, extra, mis-shaped). */
export class WeightsError extends Error {
  override name = "WeightsError";
}

/** A tensor in Hugging Face layout, as plain data (float32). */
export interface NamedWeight {
  name: string;
  shape: number[];
  data: Float32Array;
}

interface Linear {
  /** [in, out] */
  weight: tf.Variable;
  /** [out] */
  bias?: tf.Variable;
  /** LoRA adapter: output += scale · (x·A)·B, A [in, r], B [r, out]. */
  lora?: { a: tf.Variable; b: tf.Variable; scale: number };
}

/** Projections LoRA can adapt (HF module names). */
export type LoraTarget = "q_proj" | "k_proj" | "v_proj" | "o_proj" | "gate_proj" | "up_proj" | "down_proj";
export const LORA_TARGETS: readonly LoraTarget[] = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"];

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

/** Inference-only concatenations of a layer's weights. */
interface FusedLayer {
  /** [d, q + 2·kv] */
  qkv: tf.Tensor2D;
  /** [q + 2·kv], in JS memory: the decode path adds it to the read-back rows */
  qkvBias?: Float32Array;
  /** [d, 2·m] */
  gateUp: tf.Tensor2D;
}

interface Layer {
  inputNorm: tf.Variable;
  q: Linear;
  k: Linear;
  v: Linear;
  o: Linear;
  postNorm: tf.Variable;
  gate: Linear;
  up: Linear;
  down: Linear;
}

export interface ModelInitOptions {
  /** Seed of the random initialisation; default 0. */
  seed?: number;
  /** Variables take part in gradients; default true. */
  trainable?: boolean;
  /** Initial values in the model's own layout (from `cloneVariables()`); shared, not copied. */
  values?: Map<string, tf.Tensor>;
}

let nextModelId = 0;

/** Prefill feeds at most this many tokens per forward pass (bounds attention memory). */
export const PREFILL_CHUNK_TOKENS = 512;

export class Transformer {
  readonly config: ModelConfig;
  /** HF name → variable. Linear weights ([…]_proj.weight, lm_head.weight) are stored [in, out]. */
  readonly variables: Map<string, tf.Variable> = new Map();
  private readonly embedding: tf.Variable; // [V, d]
  private readonly layers: Layer[] = [];
  private readonly finalNorm: tf.Variable; // [d]
  private readonly lmHead?: tf.Variable; // [d, V], untied only
  private readonly ropeCos: tf.Tensor2D; // [maxPositions, headDim/2]
  private readonly ropeSin: tf.Tensor2D;
  /** The same tables in JS memory, for the decode path's rotary (applied to read-back rows). */
  private readonly ropeTables: { cos: Float32Array; sin: Float32Array };
  private headCache?: { source: object; transposed: tf.Tensor2D };
  private fusedCache?: { ids: (object | undefined)[]; layers: FusedLayer[] };
  /** HF weight name → its projection. */
  private readonly linears = new Map<string, Linear>();
  /** LoRA adapter variables by name (`<base>.lora_A.weight` [in, r], `<base>.lora_B.weight` [r, out]), when enabled. */
  private lora?: Map<string, tf.Variable>;
  private readonly baseTrainable: boolean;
  private readonly id = nextModelId++;
  private disposed = false;

  /**
   * Builds a model. `weights` (HF layout, HF names, any float dtype) gives every tensor;
   * without it, weights are initialised randomly (normal σ 0.02, residual outputs scaled by
   * 1/√(2·layers), norms 1, biases 0).
   */
  constructor(config: ModelConfig, weights?: Map<string, tf.Tensor>, options: ModelInitOptions = {}) {
    warnIfBackendNotInitialised();
    this.config = validateConfig(config);
    const { hiddenSize: d, intermediateSize: m, vocabSize: V, headDim } = config;
    const qWidth = config.numAttentionHeads * headDim;
    const kvWidth = config.numKeyValueHeads * headDim;
    const trainable = options.trainable ?? true;
    let seed = options.seed ?? 0;
    const residualStd = 0.02 / Math.sqrt(2 * config.numHiddenLayers);
    if (weights) checkWeightNames(config, weights);

    const make = (name: string, hfShape: number[], init: "normal" | "residual" | "ones" | "zeros", transposed = false): tf.Variable => {
      const storedShape = transposed ? [hfShape[1], hfShape[0]] : hfShape;
      const value = tf.tidy(() => {
        const own = options.values?.get(name);
        if (own) {
          if (own.shape.join() !== storedShape.join()) throw new WeightsError(`${name}: shape [${own.shape}] but model stores [${storedShape}]`);
          return tf.clone(own);
        }
        const given = weights?.get(name);
        if (given) {
          if (given.shape.join() !== hfShape.join()) throw new WeightsError(`${name}: shape [${given.shape}] but config needs [${hfShape}]`);
          const float = given.dtype === "float32" ? given : tf.cast(given, "float32");
          return transposed ? tf.transpose(float) : tf.clone(float);
        }
        seed += 1;
        if (init === "ones") return tf.ones(storedShape);
        if (init === "zeros") return tf.zeros(storedShape);
        return tf.randomNormal(storedShape, 0, init === "residual" ? residualStd : 0.02, "float32", seed);
      });
      const variable = tf.variable(value, trainable, `agentrl-model-${this.id}/${name}`);
      value.dispose();
      this.variables.set(name, variable);
      return variable;
    };
    const linear = (name: string, inputs: number, outputs: number, bias: boolean, init: "normal" | "residual" = "normal"): Linear => {
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
    this.ropeTables = rotaryTables(config.maxPositionEmbeddings, headDim, config.ropeTheta);
    this.ropeCos = tf.tensor2d(this.ropeTables.cos, [config.maxPositionEmbeddings, headDim / 2]);
    this.ropeSin = tf.tensor2d(this.ropeTables.sin, [config.maxPositionEmbeddings, headDim / 2]);
  }

  /** Number of parameters. */
  get parameterCount(): number {
    let total = 0;
    for (const variable of this.variables.values()) total += variable.size;
    return total;
  }

  /** Trainable variables in a fixed order: the LoRA adapters when enabled, else the trainable weights. */
  trainableVariables(): tf.Variable[] {
    return [...this.trainableVariableMap().values()];
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
    if (this.lora) throw new Error("LoRA is already enabled");
    const rank = options.rank ?? 8;
    if (!Number.isInteger(rank) || rank <= 0) throw new RangeError(`LoRA rank must be a positive integer, got ${rank}`);
    const scale = (options.alpha ?? 16) / rank;
    const targets = new Set(options.targets ?? LORA_TARGETS);
    let seed = options.seed ?? 0;
    this.lora = new Map();
    for (const [name, linear] of this.linears) {
      const module = name.split(".").at(-2) as LoraTarget;
      if (!targets.has(module)) continue;
      const [inputs, outputs] = linear.weight.shape;
      const base = name.slice(0, -".weight".length);
      const a = tf.variable(tf.randomNormal([inputs, rank], 0, 1 / Math.sqrt(inputs), "float32", ++seed), true, `agentrl-model-${this.id}/${base}.lora_A.weight`);
      const b = tf.variable(tf.zeros([rank, outputs]), true, `agentrl-model-${this.id}/${base}.lora_B.weight`);
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
      linear.weight.assign(tf.tidy(() => this.effectiveWeight(linear)));
      linear.lora.a.dispose();
      linear.lora.b.dispose();
      delete linear.lora;
    }
    this.lora = undefined;
    for (const variable of this.variables.values()) variable.trainable = this.baseTrainable;
  }

  /** W + scale·A·B ([in, out]), or W. */
  private effectiveWeight(linear: Linear): tf.Tensor {
    if (!linear.lora) return tf.clone(linear.weight);
    return tf.add(linear.weight, tf.mul(tf.matMul(linear.lora.a, linear.lora.b), linear.lora.scale));
  }

  // ---------------------------------------------------------------- full forward (training)

  /**
   * Causal forward pass. inputIds: int32 [B, T], right-padded (padding only ever follows
   * real tokens, so it cannot change them). Returns logits float32 [B, T, V]. Differentiable.
   */
  forward(inputIds: tf.Tensor2D): tf.Tensor3D {
    return tf.tidy(() => {
      const [batch, length] = inputIds.shape;
      const logits = this.headLogits(this.hiddenStates(inputIds));
      return tf.reshape(logits, [batch, length, this.config.vocabSize]);
    });
  }

  /** LM head over final-norm hidden rows [n, d] → logits [n, V]. Differentiable. */
  headLogits(hidden: tf.Tensor2D): tf.Tensor2D {
    return tf.matMul(hidden, this.headWeight(true));
  }

  /** Final-norm hidden states [B·T, d] of a causal pass (no cache). */
  hiddenStates(inputIds: tf.Tensor2D): tf.Tensor2D {
    return tf.tidy(() => {
      const [batch, length] = inputIds.shape;
      if (length > this.config.maxPositionEmbeddings) throw new WeightsError(`sequence of ${length} tokens exceeds max_position_embeddings ${this.config.maxPositionEmbeddings}`);
      let x = tf.gather(this.embedding, tf.reshape(inputIds, [-1])) as tf.Tensor2D;
      const half = this.config.headDim / 2;
      const rotary = {
        cos: tf.reshape(tf.slice(this.ropeCos, [0, 0], [length, half]), [1, length, 1, half]),
        sin: tf.reshape(tf.slice(this.ropeSin, [0, 0], [length, half]), [1, length, 1, half]),
      };
      const plan = causalPlan(length, this.config.numAttentionHeads / this.config.numKeyValueHeads);
      for (const layer of this.layers) x = this.trainingBlock(layer, x, batch, length, rotary, plan);
      return rmsNorm(x, this.finalNorm, this.config.rmsNormEps);
    });
  }

  // ---------------------------------------------------------------- one transformer block

  /**
   * One block of the full causal pass over rows x [B·S, d] (B sequences of S tokens).
   * Queries are pre-scaled by 1/√headDim; attention runs per (sequence, kv head) as rank-2
   * matmuls (see `causalAttention`).
   */
  private trainingBlock(layer: Layer, x: tf.Tensor2D, batch: number, steps: number, rotary: { cos: tf.Tensor; sin: tf.Tensor }, plan: CausalPlan): tf.Tensor2D {
    const { numAttentionHeads: heads, numKeyValueHeads: kvHeads, headDim } = this.config;
    const normed = rmsNorm(x, layer.inputNorm, this.config.rmsNormEps);
    const heads4d = (t: tf.Tensor2D, count: number) => tf.reshape(t, [batch, steps, count, headDim]) as tf.Tensor4D;
    const q = applyRotary(heads4d(tf.mul(project(normed, layer.q), 1 / Math.sqrt(headDim)), heads), rotary);
    const keys = applyRotary(heads4d(project(normed, layer.k), kvHeads), rotary);
    const values = heads4d(project(normed, layer.v), kvHeads);
    return this.finishBlock(layer, x, causalAttention(q, keys, values, plan));
  }

  /**
   * q, k and v of rows `normed` [rows, d] as one matrix [rows, q + 2kv], no rotary yet. With
   * fused weights the biases are NOT added (the caller adds `fused.qkvBias` in JS).
   */
  private qkvRows(layer: Layer, normed: tf.Tensor2D, fused?: FusedLayer): tf.Tensor2D {
    if (!fused) return tf.concat([project(normed, layer.q), project(normed, layer.k), project(normed, layer.v)], 1) as tf.Tensor2D;
    return tf.matMul(normed, fused.qkv);
  }

  /** The rest of a block after attention: x + o(attended), then the MLP with its residual. [rows, d]. */
  private finishBlock(layer: Layer, x: tf.Tensor2D, attended: tf.Tensor2D, fused?: FusedLayer): tf.Tensor2D {
    const afterAttention = tf.add(x, project(attended, layer.o)) as tf.Tensor2D;
    const normed = rmsNorm(afterAttention, layer.postNorm, this.config.rmsNormEps);
    let gate: tf.Tensor2D;
    let up: tf.Tensor2D;
    if (fused) [gate, up] = tf.split(tf.matMul(normed, fused.gateUp), 2, 1) as tf.Tensor2D[];
    else [gate, up] = [project(normed, layer.gate), project(normed, layer.up)];
    const mlp = project(tf.mul(tf.mul(gate, tf.sigmoid(gate)), up) as tf.Tensor2D, layer.down);
    return tf.add(afterAttention, mlp) as tf.Tensor2D;
  }

  /**
   * Inference-only fused weights per layer ([Wq|Wk|Wv], [Wgate|Wup]): fewer, wider matmuls
   * and one rotary pass. Rebuilt when any source weight changes; none while LoRA is on.
   */
  private fusedLayers(): FusedLayer[] | undefined {
    if (this.lora) return undefined;
    const sources = this.layers.flatMap((l) => [l.q.weight, l.k.weight, l.v.weight, l.q.bias, l.k.bias, l.v.bias, l.gate.weight, l.up.weight]);
    const ids = sources.map((v) => (v as unknown as { dataId: object } | undefined)?.dataId);
    if (this.fusedCache && this.fusedCache.ids.every((id, i) => id === ids[i])) return this.fusedCache.layers;
    this.disposeFused();
    const layers = this.layers.map((l): FusedLayer => {
      const bias = l.q.bias && l.k.bias && l.v.bias ? tf.concat([l.q.bias, l.k.bias, l.v.bias]) : undefined;
      const qkvBias = bias?.dataSync() as Float32Array | undefined;
      bias?.dispose();
      return {
        qkv: tf.concat([l.q.weight, l.k.weight, l.v.weight], 1) as tf.Tensor2D,
        ...(qkvBias ? { qkvBias } : {}),
        gateUp: tf.concat([l.gate.weight, l.up.weight], 1) as tf.Tensor2D,
      };
    });
    this.fusedCache = { ids, layers };
    return layers;
  }

  private disposeFused(): void {
    for (const layer of this.fusedCache?.layers ?? []) tf.dispose([layer.qkv, layer.gateUp]);
    this.fusedCache = undefined;
  }

  /** LM head [d, V]: the untied matrix, or the embedding transposed (cached outside training). */
  private headWeight(differentiable: boolean): tf.Tensor2D {
    if (this.lmHead) return this.lmHead as tf.Tensor2D;
    if (differentiable) return tf.transpose(this.embedding) as tf.Tensor2D;
    const source = (this.embedding as unknown as { dataId: object }).dataId;
    if (this.headCache?.source !== source) {
      this.headCache?.transposed.dispose();
      this.headCache = { source, transposed: tf.keep(tf.transpose(this.embedding)) as tf.Tensor2D };
    }
    return this.headCache.transposed;
  }

  // ---------------------------------------------------------------- inference with a KV cache

  /** A new, empty sequence (its KV cache). Dispose it when done. */
  createSequence(): KVSequence {
    this.assertAlive();
    return new KVSequence(this);
  }

  /**
   * Appends tokenIds to the sequence's cache (a prompt, or an environment reply mid-episode).
   * Returns the logits [V] after the last new token.
   */
  prefill(sequence: KVSequence, tokenIds: number[]): Float32Array {
    this.assertAlive();
    sequence.assertUsable(this);
    if (tokenIds.length === 0) throw new RangeError("prefill needs at least one token");
    if (sequence.length + tokenIds.length > this.config.maxPositionEmbeddings) {
      throw new RangeError(`sequence would reach ${sequence.length + tokenIds.length} tokens, over max_position_embeddings ${this.config.maxPositionEmbeddings}`);
    }
    // Long inputs go in chunks: attention scores of one chunk are [heads, chunk, length].
    let logits: Float32Array | undefined;
    for (let offset = 0; offset < tokenIds.length; offset += PREFILL_CHUNK_TOKENS) {
      logits = this.prefillChunk(sequence, tokenIds.slice(offset, offset + PREFILL_CHUNK_TOKENS));
    }
    return logits!;
  }

  private prefillChunk(sequence: KVSequence, tokenIds: number[]): Float32Array {
    return this.feedRows([sequence], [tokenIds])[0];
  }

  /**
   * Prefills several sequences at once (prompts of a group, environment replies arriving
   * together): tokenLists[i] is appended to sequences[i]; returns the logits [V] after each
   * list's last token. Rows of all sequences share the matmuls (packed into calls of at most
   * PREFILL_CHUNK_TOKENS rows); attention stays per sequence. Equals prefilling each alone.
   */
  prefillBatch(sequences: KVSequence[], tokenLists: number[][]): Float32Array[] {
    this.assertAlive();
    if (sequences.length !== tokenLists.length) throw new RangeError(`${sequences.length} sequences but ${tokenLists.length} token lists`);
    if (new Set(sequences).size !== sequences.length) throw new RangeError("a sequence appears twice in one prefill batch");
    sequences.forEach((sequence, i) => {
      sequence.assertUsable(this);
      if (tokenLists[i].length === 0) throw new RangeError("prefill needs at least one token");
      if (sequence.length + tokenLists[i].length > this.config.maxPositionEmbeddings) {
        throw new RangeError(`sequence would reach ${sequence.length + tokenLists[i].length} tokens, over max_position_embeddings ${this.config.maxPositionEmbeddings}`);
      }
    });
    const results: Float32Array[] = new Array(sequences.length);
    let group: { index: number; tokens: number[] }[] = [];
    let groupRows = 0;
    const flush = () => {
      if (group.length === 0) return;
      const logits = this.feedRows(group.map((item) => sequences[item.index]), group.map((item) => item.tokens));
      group.forEach((item, k) => (results[item.index] = logits[k]));
      group = [];
      groupRows = 0;
    };
    tokenLists.forEach((tokens, index) => {
      for (let offset = 0; offset < tokens.length; offset += PREFILL_CHUNK_TOKENS) {
        const chunk = tokens.slice(offset, offset + PREFILL_CHUNK_TOKENS);
        // a sequence's chunks go to successive calls (each needs the previous one cached)
        if (groupRows + chunk.length > PREFILL_CHUNK_TOKENS || group.some((item) => item.index === index)) flush();
        group.push({ index, tokens: chunk });
        groupRows += chunk.length;
      }
    });
    flush();
    return results;
  }

  /**
   * The one inference path: appends tokenLists[i] to sequences[i] (distinct sequences) and
   * returns the logits [V] after each list's last token. Per layer: q/k/v of all rows as one
   * matmul [rows, d]×[d, q+2kv], one read-back [rows, q+2kv], then per row (`AttentionRows`,
   * kernels/attention.ts): biases, rotary, its key/value written into its sequence's cache,
   * causal attention (a row at position p sees positions ≤ p of its own sequence); then
   * o-projection and MLP batched again.
   */
  private feedRows(sequences: KVSequence[], tokenLists: number[][]): Float32Array[] {
    const { numAttentionHeads: heads, numKeyValueHeads: kvHeads, headDim } = this.config;
    const qWidth = heads * headDim;
    const owners: KVSequence[] = [];
    const positions: number[] = [];
    const tokens: number[] = [];
    const lastRows: number[] = [];
    tokenLists.forEach((list, i) => {
      const sequence = sequences[i];
      sequence.reserve(sequence.length + list.length);
      list.forEach((token, t) => {
        owners.push(sequence);
        positions.push(sequence.length + t);
        tokens.push(token);
      });
      lastRows.push(tokens.length - 1);
    });
    const rows = tokens.length;
    const capacities = owners.map((owner) => owner.capacity);
    const keyOffsets = new Array<number>(rows);
    const valueOffsets = new Array<number>(rows);
    const fused = this.fusedLayers();
    const attention = new AttentionRows(rows, heads, kvHeads, headDim, positions, this.ropeTables);
    const logits = tf.tidy(() => {
      let x = tf.gather(this.embedding, tf.tensor1d(tokens, "int32")) as tf.Tensor2D;
      this.layers.forEach((layer, i) => {
        const normed = rmsNorm(x, layer.inputNorm, this.config.rmsNormEps);
        // one read-back per layer: rows [q (heads·hd) | k (kvH·hd) | v (kvH·hd)]; biases,
        // rotary, the cache writes and attention then run per row in the kernel module
        // (WebAssembly SIMD, or JS), not as ~15 small tfjs ops of reshapes, splits and products
        const data = this.qkvRows(layer, normed, fused?.[i]).dataSync() as Float32Array;
        for (let row = 0; row < rows; row++) {
          keyOffsets[row] = owners[row].keyOffset(i);
          valueOffsets[row] = owners[row].valueOffset(i);
        }
        const context = attention.layer(data, fused?.[i].qkvBias, keyOffsets, valueOffsets, capacities);
        x = this.finishBlock(layer, x, tf.tensor2d(context, [rows, qWidth]), fused?.[i]);
      });
      const last = rows === sequences.length ? x : (tf.gather(x, tf.tensor1d(lastRows, "int32")) as tf.Tensor2D);
      return tf.matMul(rmsNorm(last, this.finalNorm, this.config.rmsNormEps), this.headWeight(false));
    });
    tokenLists.forEach((list, i) => sequences[i].setLength(sequences[i].length + list.length));
    const all = logits.dataSync() as Float32Array;
    logits.dispose();
    const V = this.config.vocabSize;
    return sequences.map((_, i) => all.subarray(i * V, (i + 1) * V));
  }

  /**
   * One decoding step for a batch of independent sequences: feeds tokenIds[i] to sequences[i]
   * and returns logits [V] for each (in the same order). Each sequence must have been
   * prefilled. Per layer: one matmul [B, d]×[d, q+2kv] for all sequences, one read-back of
   * the new queries/keys/values, each sequence's new key/value appended to its cache in place
   * and its attention computed by `AttentionRows` (no tensor holds a cache, so nothing is copied when the
   * batch changes), then o-projection and MLP as batched matmuls again.
   */
  decodeStep(sequences: KVSequence[], tokenIds: number[]): Float32Array[] {
    this.assertAlive();
    if (sequences.length !== tokenIds.length) throw new RangeError(`${sequences.length} sequences but ${tokenIds.length} tokens`);
    if (sequences.length === 0) return [];
    if (new Set(sequences).size !== sequences.length) throw new RangeError("a sequence appears twice in one decode step");
    for (const sequence of sequences) {
      sequence.assertUsable(this);
      if (sequence.length === 0) throw new RangeError("decodeStep on an empty sequence: prefill it first");
      if (sequence.length >= this.config.maxPositionEmbeddings) throw new RangeError(`sequence is at max_position_embeddings ${this.config.maxPositionEmbeddings}`);
    }
    return this.feedRows(sequences, tokenIds.map((token) => [token]));
  }

  // ---------------------------------------------------------------- weights in HF layout

  /** Every weight as a tensor in Hugging Face layout ([out, in] for linears). Caller disposes. */
  hfTensors(): Map<string, tf.Tensor> {
    const result = new Map<string, tf.Tensor>();
    for (const [name, variable] of this.variables) {
      const linear = this.linears.get(name);
      result.set(name, tf.tidy(() => (isStoredTransposed(name) ? tf.transpose(linear ? this.effectiveWeight(linear) : variable) : tf.clone(variable))));
    }
    return result;
  }

  /** Every weight as plain float32 data in HF layout. */
  exportHfWeights(): NamedWeight[] {
    const out: NamedWeight[] = [];
    for (const [name, tensor] of this.hfTensors()) {
      out.push({ name, shape: tensor.shape.slice(), data: tensor.dataSync() as Float32Array });
      tensor.dispose();
    }
    return out;
  }

  /** Overwrites every weight from tensors in HF layout (all names must be present). LoRA adapters are reset (B = 0). */
  loadHfTensors(tensors: Map<string, tf.Tensor>): void {
    this.resetLoraUpdates();
    checkWeightNames(this.config, tensors);
    for (const [name, variable] of this.variables) {
      const given = tensors.get(name)!;
      const expected = isStoredTransposed(name) ? [variable.shape[1], variable.shape[0]] : variable.shape;
      if (given.shape.join() !== expected.join()) throw new WeightsError(`${name}: shape [${given.shape}] but model has [${expected}]`);
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
      out.set(name, linear?.lora ? tf.tidy(() => this.effectiveWeight(linear)) : tf.clone(variable));
    }
    return out;
  }

  /** Zeroes every adapter's B, so the model equals its base weights. */
  private resetLoraUpdates(): void {
    for (const linear of this.linears.values()) if (linear.lora) linear.lora.b.assign(tf.zerosLike(linear.lora.b));
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

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const variable of this.variables.values()) variable.dispose();
    for (const variable of this.lora?.values() ?? []) variable.dispose();
    this.ropeCos.dispose();
    this.ropeSin.dispose();
    this.headCache?.transposed.dispose();
    this.disposeFused();
  }

  get isDisposed(): boolean {
    return this.disposed;
  }

  private assertAlive(): void {
    if (this.disposed) throw new Error("model is disposed");
  }
}

// -------------------------------------------------------------------- building blocks

/** x [n, in] · W [in, out] (+ b). */
function project(x: tf.Tensor2D, linear: Linear): tf.Tensor2D {
  let y: tf.Tensor2D = tf.matMul(x, linear.weight as tf.Tensor2D);
  if (linear.bias) y = tf.add<tf.Tensor2D>(y, linear.bias as tf.Tensor);
  if (linear.lora) y = tf.add<tf.Tensor2D>(y, tf.mul(tf.matMul(tf.matMul(x, linear.lora.a as tf.Tensor2D), linear.lora.b as tf.Tensor2D), linear.lora.scale));
  return y;
}

/** RMSNorm over the last axis: x / √(mean(x²) + ε) · w. */
function rmsNorm(x: tf.Tensor2D, weight: tf.Tensor, epsilon: number): tf.Tensor2D {
  const meanSquare = tf.mean(tf.square(x), -1, true);
  return tf.mul(tf.mul(x, tf.rsqrt(tf.add(meanSquare, epsilon))), weight);
}

/** cos/sin tables [positions, headDim/2] for θ_i = base^(-2i/headDim). */
function rotaryTables(positions: number, headDim: number, base: number): { cos: Float32Array; sin: Float32Array } {
  const half = headDim / 2;
  const cos = new Float32Array(positions * half);
  const sin = new Float32Array(positions * half);
  for (let p = 0; p < positions; p++) {
    for (let i = 0; i < half; i++) {
      const angle = p / Math.pow(base, (2 * i) / headDim);
      cos[p * half + i] = Math.cos(angle);
      sin[p * half + i] = Math.sin(angle);
    }
  }
  return { cos, sin };
}

/** HF rotate_half rotary embedding of x [B, heads, S, headDim]; cos/sin broadcast to [B, 1, S, headDim/2]. */
function applyRotary(x: tf.Tensor4D, rotary: { cos: tf.Tensor; sin: tf.Tensor }): tf.Tensor4D {
  const half = x.shape[3] / 2;
  const [first, second] = tf.split(x, [half, half], 3);
  return tf.concat(
    [tf.sub(tf.mul(first, rotary.cos), tf.mul(second, rotary.sin)), tf.add(tf.mul(second, rotary.cos), tf.mul(first, rotary.sin))],
    3,
  ) as tf.Tensor4D;
}

/** Query positions per attention chunk: a chunk of queries only meets the keys up to its last position. */
export const ATTENTION_CHUNK_POSITIONS = 128;

/**
 * How `causalAttention` cuts S positions into query chunks, with one additive mask per
 * chunk: chunk [start, end) has rows (position-major, the g query heads of a kv head
 * adjacent) [(end − start)·g, end], −1e9 where a key lies after the row's position.
 */
interface CausalPlan {
  chunks: { start: number; end: number; mask: tf.Tensor2D }[];
}

function causalPlan(steps: number, group: number, chunkPositions = ATTENTION_CHUNK_POSITIONS): CausalPlan {
  const chunks: CausalPlan["chunks"] = [];
  for (let start = 0; start < steps; start += chunkPositions) {
    const end = Math.min(steps, start + chunkPositions);
    const data = new Float32Array((end - start) * group * end);
    for (let position = start; position < end; position++) {
      for (let member = 0; member < group; member++) {
        const row = ((position - start) * group + member) * end;
        data.fill(-1e9, row + position + 1, row + end);
      }
    }
    chunks.push({ start, end, mask: tf.tensor2d(data, [(end - start) * group, end]) });
  }
  return { chunks };
}

/**
 * Causal grouped-query attention for training, as rank-2 matmuls only (the fast path of
 * wasm; its batched matmul runs at ~2 GFLOP/s). q [B, S, H, hd] (already scaled by
 * 1/√hd), keys/values [B, S, kvH, hd]. For each (sequence, kv head), the g = H/kvH query
 * heads that share it form one matrix [S·g, hd] (position-major) against keysᵀ [hd, S]; the
 * queries go in chunks of positions so the keys after a chunk's last position are never
 * computed (about half the work at long S). Returns [B·S, H·hd] (query head h uses kv head
 * ⌊h/g⌋, as HF repeat_kv).
 */
function causalAttention(q: tf.Tensor4D, keys: tf.Tensor4D, values: tf.Tensor4D, plan: CausalPlan): tf.Tensor2D {
  const [batch, steps, heads, headDim] = q.shape;
  const kvHeads = keys.shape[2];
  const group = heads / kvHeads;
  const blocks = batch * kvHeads;
  // per-block matrices by splitting rank-2 views along rows (wasm's Unpack is slower)
  const queries = tf.split(tf.reshape(tf.transpose(tf.reshape(q, [batch, steps, kvHeads, group * headDim]), [0, 2, 1, 3]), [blocks * steps * group, headDim]), blocks, 0);
  const keysT = tf.split(tf.reshape(tf.transpose(keys, [0, 2, 3, 1]), [blocks * headDim, steps]), blocks, 0);
  const valueBlocks = tf.split(tf.reshape(tf.transpose(values, [0, 2, 1, 3]), [blocks * steps, headDim]), blocks, 0);
  const { chunks } = plan;
  const contexts = queries.map((query, block) => {
    const queryChunks = chunks.length === 1 ? [query] : tf.split(query, chunks.map((c) => (c.end - c.start) * group), 0);
    const outputs = queryChunks.map((chunkQueries, i) => {
      const { end, mask } = chunks[i];
      const chunkKeys = end === steps ? keysT[block] : tf.slice(keysT[block], [0, 0], [headDim, end]);
      const chunkValues = end === steps ? valueBlocks[block] : tf.slice(valueBlocks[block], [0, 0], [end, headDim]);
      const probabilities = tf.softmax(tf.add(tf.matMul(chunkQueries as tf.Tensor2D, chunkKeys as tf.Tensor2D), mask));
      return tf.matMul(probabilities, chunkValues as tf.Tensor2D);
    });
    return outputs.length === 1 ? outputs[0] : tf.concat(outputs, 0);
  });
  const stacked = tf.reshape(contexts.length === 1 ? contexts[0] : tf.concat(contexts, 0), [batch, kvHeads, steps, group * headDim]);
  return tf.reshape(tf.transpose(stacked, [0, 2, 1, 3]), [batch * steps, heads * headDim]);
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

function checkWeightNames(config: ModelConfig, weights: Map<string, unknown>): void {
  const expected = expectedWeightNames(config);
  const missing = expected.filter((name) => !weights.has(name));
  if (missing.length > 0) throw new WeightsError(`missing weights: ${missing.slice(0, 5).join(", ")}${missing.length > 5 ? ` (+${missing.length - 5} more)` : ""}`);
  const known = new Set(expected);
  // A tied model may still ship lm_head.weight (a copy); rotary inv_freq buffers are derived.
  const extra = [...weights.keys()].filter((name) => !known.has(name) && name !== "lm_head.weight" && !name.endsWith("rotary_emb.inv_freq"));
  if (extra.length > 0) throw new WeightsError(`unexpected weights: ${extra.slice(0, 5).join(", ")}`);
}


// -------------------------------------------------------------------- KV cache

/** Frees the heap block of a sequence that was garbage-collected without `dispose()`. */
const unreleasedCaches = new FinalizationRegistry<HeapBlock>((block) => kernelHeap().release(block));

/**
 * One sequence's KV cache, in the kernel heap (kernels/attention.ts: one WebAssembly.Memory
 * shared by all sequences, separate from tfjs's heap). The sequence owns one block laid out
 * per layer as keys [kvHeads, capacity, headDim] then values [kvHeads, capacity, headDim]
 * (the first `length` positions used). Decode steps append one position in place; when
 * full, the capacity doubles (a new block, the used positions copied, the old block back to
 * the heap's free list: amortised O(1)). Attention reads the cache where it is, so sequences
 * join and leave a batch for free. `dispose()` gives the block back (a sequence garbage-
 * collected without it is freed by a FinalizationRegistry, later).
 */
export class KVSequence {
  /** @internal Positions the cache holds per kv head. */
  capacity = 0;
  /** The heap block (byte offset, size); {0, 0} before the first token. Shared with the finalizer. */
  private readonly block: HeapBlock = { offset: 0, bytes: 0 };
  private tokenCount = 0;
  private disposed = false;

  constructor(private readonly model: Transformer) {}

  /** Tokens in the cache. */
  get length(): number {
    return this.tokenCount;
  }

  get isDisposed(): boolean {
    return this.disposed;
  }

  /** Frees this sequence's cache. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.freeBlock();
    this.capacity = 0;
  }

  private freeBlock(): void {
    if (this.block.bytes === 0) return;
    unreleasedCaches.unregister(this);
    kernelHeap().release({ ...this.block });
    this.block.offset = 0;
    this.block.bytes = 0;
  }

  /** @internal */
  assertUsable(model: Transformer): void {
    if (this.disposed) throw new Error("sequence is disposed");
    if (model !== this.model) throw new Error("sequence belongs to another model");
  }

  /** @internal Float offset in `kernelHeap().f32` of a layer's keys (kv head 0). */
  keyOffset(layer: number): number {
    return cacheOffset(this.model.config, this.block.offset / 4, this.capacity, layer, 0);
  }

  /** @internal Float offset in `kernelHeap().f32` of a layer's values (kv head 0). */
  valueOffset(layer: number): number {
    return cacheOffset(this.model.config, this.block.offset / 4, this.capacity, layer, 1);
  }

  /**
   * A new sequence holding a copy of this one's cache (e.g. one prompt prefilled once, then
   * sampled n times). Copies only the used positions.
   */
  fork(): KVSequence {
    if (this.disposed) throw new Error("sequence is disposed");
    const copy = new KVSequence(this.model);
    if (this.tokenCount > 0) {
      copy.reserve(this.tokenCount);
      copyPositions(this.model.config, this.block.offset / 4, this.capacity, copy.block.offset / 4, copy.capacity, this.tokenCount);
      copy.tokenCount = this.tokenCount;
    }
    return copy;
  }

  /**
   * @internal Makes room for `positions` positions in total: capacity doubles from 64 (and
   * takes whatever else fits in the power-of-two block).
   */
  reserve(positions: number): void {
    if (positions <= this.capacity) return;
    const { numHiddenLayers: layers, numKeyValueHeads: kvHeads, headDim } = this.model.config;
    const bytesPerPosition = 2 * layers * kvHeads * headDim * 4;
    let wanted = Math.max(64, 2 * this.capacity);
    while (wanted < positions) wanted *= 2;
    const heap = kernelHeap();
    const block = heap.allocate(wanted * bytesPerPosition); // may grow the heap
    const capacity = Math.floor(block.bytes / bytesPerPosition);
    if (this.tokenCount > 0) copyPositions(this.model.config, this.block.offset / 4, this.capacity, block.offset / 4, capacity, this.tokenCount);
    this.freeBlock();
    this.block.offset = block.offset;
    this.block.bytes = block.bytes;
    this.capacity = capacity;
    unreleasedCaches.register(this, this.block, this);
  }

  /** @internal */
  setLength(length: number): void {
    this.tokenCount = length;
  }
}

/** Float offset of a layer's keys (part 0) or values (part 1) in a cache block starting at float `base`. */
function cacheOffset(config: ModelConfig, base: number, capacity: number, layer: number, part: 0 | 1): number {
  return base + (2 * layer + part) * config.numKeyValueHeads * capacity * config.headDim;
}

/** Copies the first `positions` positions of every layer's keys and values between two cache blocks of the heap. */
function copyPositions(config: ModelConfig, fromBase: number, fromCapacity: number, toBase: number, toCapacity: number, positions: number): void {
  const { numHiddenLayers: layers, numKeyValueHeads: kvHeads, headDim } = config;
  const cache = kernelHeap().f32;
  for (let layer = 0; layer < layers; layer++) {
    for (const part of [0, 1] as const) {
      const source = cacheOffset(config, fromBase, fromCapacity, layer, part);
      const target = cacheOffset(config, toBase, toCapacity, layer, part);
      for (let head = 0; head < kvHeads; head++) {
        const start = source + head * fromCapacity * headDim;
        cache.copyWithin(target + head * toCapacity * headDim, start, start + positions * headDim);
      }
    }
  }
}
