/**
 * The model: a decoder-only transformer of the Llama / Qwen2 family.
 *
 *   tokens ─► embed_tokens ─► N × [ x + attn(rmsnorm(x)); x + mlp(rmsnorm(x)) ] ─► norm ─► lm_head ─► logits
 *
 * - attention: rotary positions (HF "rotate_half" layout), grouped-query attention
 *   (numKeyValueHeads ≤ numAttentionHeads), optional q/k/v biases (Qwen2);
 * - MLP: SwiGLU, `down(silu(gate(x)) * up(x))`;
 * - LM head: tied to the embedding or its own matrix.
 *
 * This file is the network itself. Around it: weights.ts (the parameters: creation, names,
 * LoRA, Hugging Face layout; linear weights are stored [in, out]), kv-cache.ts (`KVSequence`),
 * attention.ts (rotary tables, the training pass's attention as rank-2 matmuls).
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
import { AttentionRows } from "./kernels/attention.js";
import { KVSequence } from "./kv-cache.js";
import { causalAttention, causalPlan, rotaryTables, type CausalPlan } from "./attention.js";
import { inferenceCachePlan } from "./memory.js";
import {
  ModelWeights,
  WeightsError,
  type FusedLayer,
  type Layer,
  type Linear,
  type LoraOptions,
  type ModelInitOptions,
  type NamedWeight,
  type WeightSource,
} from "./weights.js";

export { KVSequence } from "./kv-cache.js";
export { ATTENTION_CHUNK_POSITIONS } from "./attention.js";
export {
  WeightsError,
  expectedWeightNames,
  LORA_TARGETS,
  type LoraTarget,
  type LoraOptions,
  type NamedWeight,
  type ModelInitOptions,
  type WeightSource,
} from "./weights.js";

let nextModelId = 0;

/** Prefill feeds at most this many tokens per forward pass (bounds attention memory). */
export const PREFILL_CHUNK_TOKENS = 512;

export class Transformer {
  readonly config: ModelConfig;
  /** The parameters: variables by HF name, LoRA adapters, HF-layout conversion (weights.ts). */
  private readonly weights: ModelWeights;
  private readonly ropeCos: tf.Tensor2D; // [maxPositions, headDim/2]
  private readonly ropeSin: tf.Tensor2D;
  /** The same tables in JS memory, for the decode path's rotary (applied to read-back rows). */
  private readonly ropeTables: { cos: Float32Array; sin: Float32Array };
  private disposed = false;
  /** Ids below this can be sampled and scored (see `limitVocabulary`); config.vocabSize by default. */
  private usableVocabulary: number;

  /**
   * Builds a model. `weights` (HF layout, HF names, any float dtype) gives every tensor;
   * without it, weights are initialised randomly (normal σ 0.02, residual outputs scaled by
   * 1/√(2·layers), norms 1, biases 0).
   */
  constructor(
    config: ModelConfig,
    weights?: Map<string, tf.Tensor> | WeightSource,
    options: ModelInitOptions = {},
  ) {
    warnIfBackendNotInitialised();
    this.config = validateConfig(config);
    this.usableVocabulary = this.config.vocabSize;
    this.weights = new ModelWeights(
      this.config,
      `agentrl-model-${nextModelId++}`,
      weights,
      options,
    );
    const { maxPositionEmbeddings: positions, headDim } = this.config;
    this.ropeTables = rotaryTables(positions, headDim, this.config.ropeTheta);
    this.ropeCos = tf.tensor2d(this.ropeTables.cos, [positions, headDim / 2]);
    this.ropeSin = tf.tensor2d(this.ropeTables.sin, [positions, headDim / 2]);
  }

  /**
   * Large models (inferenceCachePlan: no fused MLP) multiply by their weights without letting
   * XNNPACK keep a packed copy of each matrix (see `weightProduct`): that cache would double
   * the weights in the wasm heap (a 0.5B model: +1.4 GB, past the 4 GiB limit).
   */
  private get unpackedWeights(): boolean {
    return !inferenceCachePlan(this.config).fusedMlp;
  }

  /** x [n, in] · W [in, out] (+ b) (+ LoRA), see `project`. */
  private project(x: tf.Tensor2D, linear: Linear): tf.Tensor2D {
    return project(x, linear, this.unpackedWeights, this.recomputing);
  }

  /**
   * True while a checkpointed block runs again in the backward pass: its ops are recorded on
   * the outer tape (`nestedGradients`), which keeps what they save until the whole backward
   * pass ends, so its products must not make transient weight copies (24 layers of a 0.5B
   * model: ~1.2 GB of copies plus XNNPACK's packed copy of each, past the 4 GiB heap).
   */
  private recomputing = false;

  // ---------------------------------------------------------------- vocabulary padding

  /**
   * Masks ids ≥ `size` out of every distribution the model gives: a config vocabulary is often
   * padded past its tokenizer's (Qwen2.5: 151,936 rows, 151,665 tokens), and an id the
   * tokenizer lacks must never be sampled. Inference logits keep length vocabSize with
   * -Infinity from `size` on (probability 0 at any temperature, top-k or top-p); training's
   * log-probs and entropies are over the first `size` ids only.
   */
  limitVocabulary(size: number): void {
    if (!Number.isInteger(size) || size < 1 || size > this.config.vocabSize) {
      throw new RangeError(
        `usable vocabulary ${size} must be an integer in [1, ${this.config.vocabSize}] (the config's vocab_size)`,
      );
    }
    this.usableVocabulary = size;
  }

  /** Ids below this can be sampled and scored. */
  get vocabularyLimit(): number {
    return this.usableVocabulary;
  }

  // ---------------------------------------------------------------- parameters (weights.ts)

  /** HF name → variable. Linear weights ([…]_proj.weight, lm_head.weight) are stored [in, out]. */
  get variables(): Map<string, tf.Variable> {
    return this.weights.variables;
  }

  /** Number of parameters. */
  get parameterCount(): number {
    return this.weights.parameterCount;
  }

  /** Trainable variables in a fixed order: the LoRA adapters when enabled, else the trainable weights. */
  trainableVariables(): tf.Variable[] {
    return [...this.trainableVariableMap().values()];
  }

  /** Name → trainable variable (LoRA adapters when enabled, else the weights that are trainable). */
  trainableVariableMap(): Map<string, tf.Variable> {
    return this.weights.trainableVariableMap();
  }

  /** True while LoRA adapters are attached (only they train). */
  get loraEnabled(): boolean {
    return this.weights.loraEnabled;
  }

  /** Attaches LoRA adapters (A random, B = 0: outputs unchanged) and freezes every base weight. */
  enableLora(options: LoraOptions = {}): void {
    this.weights.enableLora(options);
  }

  /** Folds the adapters into the base weights (W ← W + scale·A·B), removes them and unfreezes the weights. */
  mergeLora(): void {
    this.weights.mergeLora();
  }

  /** The options the LoRA adapters were attached with, while enabled. */
  get loraOptions(): LoraOptions | undefined {
    return this.weights.loraOptions;
  }

  /** LoRA adapter values (`<module>.lora_A.weight` [in, r], `.lora_B.weight` [r, out]) as plain data. */
  adapterWeights(): NamedWeight[] {
    return this.weights.adapterWeights();
  }

  /** Assigns LoRA adapter values (names and shapes as `adapterWeights` gives). */
  assignAdapters(values: Map<string, tf.Tensor>): void {
    this.weights.assignAdapters(values);
  }

  /** The base weights (internal layout, adapters not merged), sharing storage: a model built from them shares the frozen base. Caller disposes. */
  baseValues(): Map<string, tf.Tensor> {
    return this.weights.baseValues();
  }

  /** Every weight as a tensor in Hugging Face layout ([out, in] for linears). Caller disposes. */
  hfTensors(): Map<string, tf.Tensor> {
    return this.weights.hfTensors();
  }

  /** Every weight as plain float32 data in HF layout. */
  exportHfWeights(): NamedWeight[] {
    return this.weights.exportHfWeights();
  }

  /** Overwrites every weight from tensors in HF layout (all names must be present). LoRA adapters are reset (B = 0). */
  loadHfTensors(tensors: Map<string, tf.Tensor>): void {
    this.weights.loadHfTensors(tensors);
  }

  /** Raw variable values (internal layout; adapters merged), sharing storage until reassigned. Caller disposes. */
  cloneVariables(): Map<string, tf.Tensor> {
    return this.weights.cloneVariables();
  }

  /** Assigns raw variable values (internal layout, from cloneVariables). LoRA adapters are reset (B = 0). */
  assignVariables(values: Map<string, tf.Tensor>): void {
    this.weights.assignVariables(values);
  }

  /**
   * Causal forward pass. inputIds: int32 [B, T], right-padded (padding only ever follows
   * real tokens, so it cannot change them). Returns logits float32 [B, T, V]. Differentiable.
   */
  forward(inputIds: tf.Tensor2D): tf.Tensor3D {
    return tf.tidy(() => {
      const [batch, length] = inputIds.shape;
      const logits = this.headLogits(this.hiddenStates(inputIds));
      return tf.reshape(logits, [batch, length, logits.shape[1]]);
    });
  }

  /** LM head over final-norm hidden rows [n, d] → logits [n, vocabularyLimit]. Differentiable. */
  headLogits(hidden: tf.Tensor2D): tf.Tensor2D {
    return this.weights.headLogits(hidden, this.usableVocabulary, true);
  }

  /**
   * Final-norm hidden states [B·T, d] of a causal pass (no cache). With `prefixIds` [1, P]:
   * the B sequences all continue those P tokens (their positions are P … P+T−1), which are
   * computed once for all of them; only the sequences' own rows are returned. Same values
   * and gradients as B passes over the concatenations (up to float summation order).
   */
  hiddenStates(inputIds: tf.Tensor2D, prefixIds?: tf.Tensor2D): tf.Tensor2D {
    return tf.tidy(() => {
      const [batch, length] = inputIds.shape;
      const prefix = prefixIds ? prefixIds.shape[1] : 0;
      if (prefixIds && prefixIds.shape[0] !== 1)
        throw new RangeError(`prefixIds must be [1, P], got [${prefixIds.shape}]`);
      if (prefix + length > this.config.maxPositionEmbeddings)
        throw new WeightsError(
          `sequence of ${prefix + length} tokens exceeds max_position_embeddings ${this.config.maxPositionEmbeddings}`,
        );
      const ids = tf.reshape(inputIds, [-1]);
      let x = tf.gather(
        this.weights.embedding,
        prefixIds ? tf.concat([tf.reshape(prefixIds, [-1]), ids]) : ids,
      ) as tf.Tensor2D;
      if (this.gradientCheckpointing) {
        for (const layer of this.weights.layers)
          x = this.checkpointedBlock(layer, x, batch, length, prefix);
      } else {
        const tables = this.blockTables(length, prefix);
        for (const layer of this.weights.layers)
          x = this.trainingBlock(layer, x, batch, length, tables);
      }
      if (prefix) x = tf.slice(x, [prefix, 0], [batch * length, x.shape[1]]);
      return rmsNorm(x, this.weights.finalNorm, this.config.rmsNormEps);
    });
  }

  /**
   * Gradient checkpointing of the training pass: each block keeps only its input for the
   * backward pass and runs again inside it, so activations take one block's worth plus
   * [tokens, d] per layer instead of every block's (a 0.5B model's LoRA step on a ~1,000-token
   * row would otherwise need ~3 GB of saved activations). Same values and gradients, ~1.3×
   * the compute. Default: on for large models (inferenceCachePlan), off otherwise.
   */
  get gradientCheckpointing(): boolean {
    return this.checkpointing ?? !inferenceCachePlan(this.config).fusedMlp;
  }

  set gradientCheckpointing(on: boolean) {
    this.checkpointing = on;
  }

  private checkpointing: boolean | undefined;

  /**
   * Rotary tables and causal attention plans of a pass over `length` positions that follow
   * `prefix` shared positions (0: none): the sequences' (positions prefix … prefix+length−1)
   * and, with a prefix, the prefix's own (positions 0 … prefix−1).
   */
  private blockTables(length: number, prefix = 0): BlockTables {
    const half = this.config.headDim / 2;
    const group = this.config.numAttentionHeads / this.config.numKeyValueHeads;
    const rotary = (first: number, count: number) => ({
      cos: tf.reshape(tf.slice(this.ropeCos, [first, 0], [count, half]), [1, count, 1, half]),
      sin: tf.reshape(tf.slice(this.ropeSin, [first, 0], [count, half]), [1, count, 1, half]),
    });
    return {
      rotary: rotary(prefix, length),
      plan: causalPlan(length, group, undefined, prefix),
      prefix: prefix
        ? { length: prefix, rotary: rotary(0, prefix), plan: causalPlan(prefix, group) }
        : undefined,
    };
  }

  /** One block whose backward pass recomputes it from its saved input (see `gradientCheckpointing`). */
  private checkpointedBlock(
    layer: Layer,
    x: tf.Tensor2D,
    batch: number,
    length: number,
    prefix: number,
  ): tf.Tensor2D {
    const block = (input: tf.Tensor2D) =>
      this.trainingBlock(layer, input, batch, length, this.blockTables(length, prefix));
    // the variables that train take part as inputs, so the gradient reaches them through this op
    const trainable = layerVariables(layer).filter((variable) => variable.trainable);
    const run = tf.customGrad(((...args: unknown[]) => {
      const save = args[args.length - 1] as tf.GradSaveFunc;
      const input = args[0] as tf.Tensor2D;
      save([input]);
      return {
        // this runs outside the tape: without a tidy every block's intermediates (for a large
        // model also each product's transient weight copy, and XNNPACK's packed copy of it)
        // would stay alive until the whole forward pass ends
        value: tf.tidy(() => block(input)),
        gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
          this.recomputing = true;
          try {
            return nestedGradients(() =>
              tf.grads((...xs: tf.Tensor[]) => block(xs[0] as tf.Tensor2D))(
                [saved[0], ...trainable],
                dy,
              ),
            );
          } finally {
            this.recomputing = false;
          }
        },
      };
    }) as unknown as Parameters<typeof tf.customGrad>[0]) as (...inputs: tf.Tensor[]) => tf.Tensor;
    return run(x, ...trainable) as tf.Tensor2D;
  }

  // ---------------------------------------------------------------- one transformer block

  /**
   * One block of the full causal pass over rows x [B·S, d] (B sequences of S tokens), or with
   * a shared prefix [P + B·S, d] (the prefix's P rows first). Queries are pre-scaled by
   * 1/√headDim; attention runs per (sequence, kv head) as rank-2 matmuls (see
   * `causalAttention`); the projections and the MLP run over all rows at once.
   */
  private trainingBlock(
    layer: Layer,
    x: tf.Tensor2D,
    batch: number,
    steps: number,
    tables: BlockTables,
  ): tf.Tensor2D {
    const { numAttentionHeads: heads, numKeyValueHeads: kvHeads, headDim } = this.config;
    const normed = rmsNorm(x, layer.inputNorm, this.config.rmsNormEps);
    const q = tf.mul(this.project(normed, layer.q), 1 / Math.sqrt(headDim)) as tf.Tensor2D;
    const k = this.project(normed, layer.k);
    const v = this.project(normed, layer.v);
    // queries, keys (rotary applied) and values of `length` positions of `sequences` rows each
    const attentionInputs = (
      [qRows, kRows, vRows]: tf.Tensor2D[],
      sequences: number,
      length: number,
      rotary: BlockTables["rotary"],
    ) => {
      const heads4d = (t: tf.Tensor2D, count: number) =>
        tf.reshape(t, [sequences, length, count, headDim]) as tf.Tensor4D;
      return {
        queries: applyRotary(heads4d(qRows, heads), rotary),
        keys: applyRotary(heads4d(kRows, kvHeads), rotary),
        values: heads4d(vRows, kvHeads),
      };
    };
    let attended: tf.Tensor2D;
    if (!tables.prefix) {
      const own = attentionInputs([q, k, v], batch, steps, tables.rotary);
      attended = causalAttention(own.queries, own.keys, own.values, tables.plan);
    } else {
      // the prefix's P rows come first: its own causal pass, then the rows attend to its keys too
      const { length: prefix, rotary: prefixRotary, plan: prefixPlan } = tables.prefix;
      const parts = [q, k, v].map((t) => tf.split(t, [prefix, batch * steps], 0) as tf.Tensor2D[]);
      const shared = attentionInputs(
        parts.map(([first]) => first),
        1,
        prefix,
        prefixRotary,
      );
      const own = attentionInputs(
        parts.map(([, rest]) => rest),
        batch,
        steps,
        tables.rotary,
      );
      attended = tf.concat([
        causalAttention(shared.queries, shared.keys, shared.values, prefixPlan),
        causalAttention(own.queries, own.keys, own.values, tables.plan, shared),
      ]) as tf.Tensor2D;
    }
    return this.finishBlock(layer, x, attended);
  }

  /**
   * q, k and v of rows `normed` [rows, d] as one matrix [rows, q + 2kv], no rotary yet. With
   * fused weights the biases are NOT added (the caller adds `fused.qkvBias` in JS).
   */
  private qkvRows(layer: Layer, normed: tf.Tensor2D, fused?: FusedLayer): tf.Tensor2D {
    if (!fused)
      return tf.concat(
        [
          this.project(normed, layer.q),
          this.project(normed, layer.k),
          this.project(normed, layer.v),
        ],
        1,
      ) as tf.Tensor2D;
    return weightProduct(normed, fused.qkv, this.unpackedWeights);
  }

  /** The rest of a block after attention: x + o(attended), then the MLP with its residual. [rows, d]. */
  private finishBlock(
    layer: Layer,
    x: tf.Tensor2D,
    attended: tf.Tensor2D,
    fused?: FusedLayer,
  ): tf.Tensor2D {
    const afterAttention = tf.add(x, this.project(attended, layer.o)) as tf.Tensor2D;
    const normed = rmsNorm(afterAttention, layer.postNorm, this.config.rmsNormEps);
    let gate: tf.Tensor2D;
    let up: tf.Tensor2D;
    if (fused?.gateUp)
      [gate, up] = tf.split(
        weightProduct(normed, fused.gateUp, this.unpackedWeights),
        2,
        1,
      ) as tf.Tensor2D[];
    else [gate, up] = [this.project(normed, layer.gate), this.project(normed, layer.up)];
    const mlp = this.project(tf.mul(tf.mul(gate, tf.sigmoid(gate)), up) as tf.Tensor2D, layer.down);
    return tf.add(afterAttention, mlp) as tf.Tensor2D;
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
      throw new RangeError(
        `sequence would reach ${sequence.length + tokenIds.length} tokens, over max_position_embeddings ${this.config.maxPositionEmbeddings}`,
      );
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
    if (sequences.length !== tokenLists.length)
      throw new RangeError(`${sequences.length} sequences but ${tokenLists.length} token lists`);
    if (new Set(sequences).size !== sequences.length)
      throw new RangeError("a sequence appears twice in one prefill batch");
    sequences.forEach((sequence, i) => {
      sequence.assertUsable(this);
      if (tokenLists[i].length === 0) throw new RangeError("prefill needs at least one token");
      if (sequence.length + tokenLists[i].length > this.config.maxPositionEmbeddings) {
        throw new RangeError(
          `sequence would reach ${sequence.length + tokenLists[i].length} tokens, over max_position_embeddings ${this.config.maxPositionEmbeddings}`,
        );
      }
    });
    const results: Float32Array[] = new Array(sequences.length);
    let group: { index: number; tokens: number[] }[] = [];
    let groupRows = 0;
    const flush = () => {
      if (group.length === 0) return;
      const logits = this.feedRows(
        group.map((item) => sequences[item.index]),
        group.map((item) => item.tokens),
      );
      group.forEach((item, k) => (results[item.index] = logits[k]));
      group = [];
      groupRows = 0;
    };
    tokenLists.forEach((tokens, index) => {
      for (let offset = 0; offset < tokens.length; offset += PREFILL_CHUNK_TOKENS) {
        const chunk = tokens.slice(offset, offset + PREFILL_CHUNK_TOKENS);
        // a sequence's chunks go to successive calls (each needs the previous one cached)
        if (
          groupRows + chunk.length > PREFILL_CHUNK_TOKENS ||
          group.some((item) => item.index === index)
        )
          flush();
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
    const fused = this.weights.fusedLayers();
    const attention = new AttentionRows(rows, heads, kvHeads, headDim, positions, this.ropeTables);
    const logits = tf.tidy(() => {
      let x = tf.gather(this.weights.embedding, tf.tensor1d(tokens, "int32")) as tf.Tensor2D;
      // each layer in its own tidy: only the residual stream outlives it (a 0.5B model's 24 layers
      // of a 300-row prefill would otherwise hold ~1 GB of intermediates until the end)
      this.weights.layers.forEach((layer, i) => {
        const previous = x;
        x = tf.tidy(() =>
          this.feedLayer(
            layer,
            i,
            previous,
            fused?.[i],
            rows,
            qWidth,
            owners,
            keyOffsets,
            valueOffsets,
            capacities,
            attention,
          ),
        );
        if (i > 0) previous.dispose();
      });
      const last =
        rows === sequences.length
          ? x
          : (tf.gather(x, tf.tensor1d(lastRows, "int32")) as tf.Tensor2D);
      return this.weights.headLogits(
        rmsNorm(last, this.weights.finalNorm, this.config.rmsNormEps),
        this.usableVocabulary,
        false,
      );
    });
    tokenLists.forEach((list, i) => sequences[i].setLength(sequences[i].length + list.length));
    const all = logits.dataSync() as Float32Array;
    logits.dispose();
    const V = this.config.vocabSize;
    const usable = this.usableVocabulary;
    if (usable === V) return sequences.map((_, i) => all.subarray(i * V, (i + 1) * V));
    // padded ids: -Infinity, probability 0 under any sampling setting
    return sequences.map((_, i) => {
      const row = new Float32Array(V).fill(-Infinity);
      row.set(all.subarray(i * usable, (i + 1) * usable));
      return row;
    });
  }

  /** One layer of `feedRows` over rows x [rows, d]; returns the new residual stream. */
  private feedLayer(
    layer: Layer,
    i: number,
    x: tf.Tensor2D,
    fused: FusedLayer | undefined,
    rows: number,
    qWidth: number,
    owners: KVSequence[],
    keyOffsets: number[],
    valueOffsets: number[],
    capacities: number[],
    attention: AttentionRows,
  ): tf.Tensor2D {
    const normed = rmsNorm(x, layer.inputNorm, this.config.rmsNormEps);
    // one read-back per layer: rows [q (heads·hd) | k (kvH·hd) | v (kvH·hd)]; biases,
    // rotary, the cache writes and attention then run per row in the kernel module
    // (WebAssembly SIMD, or JS), not as ~15 small tfjs ops of reshapes, splits and products
    const data = this.qkvRows(layer, normed, fused).dataSync() as Float32Array;
    for (let row = 0; row < rows; row++) {
      keyOffsets[row] = owners[row].keyOffset(i);
      valueOffsets[row] = owners[row].valueOffset(i);
    }
    const context = attention.layer(data, fused?.qkvBias, keyOffsets, valueOffsets, capacities);
    return this.finishBlock(layer, x, tf.tensor2d(context, [rows, qWidth]), fused);
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
    if (sequences.length !== tokenIds.length)
      throw new RangeError(`${sequences.length} sequences but ${tokenIds.length} tokens`);
    if (sequences.length === 0) return [];
    if (new Set(sequences).size !== sequences.length)
      throw new RangeError("a sequence appears twice in one decode step");
    for (const sequence of sequences) {
      sequence.assertUsable(this);
      if (sequence.length === 0)
        throw new RangeError("decodeStep on an empty sequence: prefill it first");
      if (sequence.length >= this.config.maxPositionEmbeddings)
        throw new RangeError(
          `sequence is at max_position_embeddings ${this.config.maxPositionEmbeddings}`,
        );
    }
    return this.feedRows(
      sequences,
      tokenIds.map((token) => [token]),
    );
  }

  // ---------------------------------------------------------------- weights in HF layout

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.weights.dispose();
    this.ropeCos.dispose();
    this.ropeSin.dispose();
  }

  get isDisposed(): boolean {
    return this.disposed;
  }

  private assertAlive(): void {
    if (this.disposed) throw new Error("model is disposed");
  }
}

// -------------------------------------------------------------------- building blocks

/** x [n, in] · W [in, out] (+ b); `direct`: see `weightProduct`. */
/** Rotary tables and attention plans of one training pass (`Transformer.blockTables`). */
interface BlockTables {
  rotary: { cos: tf.Tensor; sin: tf.Tensor };
  plan: CausalPlan;
  /** The shared prefix's own: its length, rotary tables (positions 0 … length−1) and plan. */
  prefix?: { length: number; rotary: { cos: tf.Tensor; sin: tf.Tensor }; plan: CausalPlan };
}

function project(x: tf.Tensor2D, linear: Linear, unpacked: boolean, direct = false): tf.Tensor2D {
  let y: tf.Tensor2D = weightProduct(x, linear.weight as tf.Tensor2D, unpacked, direct);
  if (linear.bias) y = tf.add<tf.Tensor2D>(y, linear.bias as tf.Tensor);
  if (linear.lora)
    y = tf.add<tf.Tensor2D>(
      y,
      tf.mul(
        tf.matMul(tf.matMul(x, linear.lora.a as tf.Tensor2D), linear.lora.b as tf.Tensor2D),
        linear.lora.scale,
      ),
    );
  return y;
}

/**
 * Runs a gradient computation inside another one's backward pass. tfjs 4.22's engine starts a
 * fresh tape whenever its gradient depth is 0, which it is during a backward pass, and at its
 * end frees that tape's saved tensors and drops the engine's reference to the active tape: the
 * outer computation, which frees its own tape the same way when it ends, then finds none. So
 * the inner computation runs on a tape of its own (freed as soon as it ends: one block's
 * tensors at a time) and the outer tape is put back afterwards. (Recording the inner one onto
 * the outer tape instead kept every recomputed block's tensors until the whole backward pass
 * ended: ~0.5 GB a block for a 0.5B model's 280-token row, past the 4 GiB heap in 3 blocks.)
 */
function nestedGradients<T>(compute: () => T): T {
  const state = (tf.engine() as unknown as { state: { activeTape: unknown } }).state;
  const outerTape = state.activeTape;
  try {
    return compute();
  } finally {
    state.activeTape = outerTape;
  }
}

/** Every variable of a block: norms, weights, biases and LoRA adapters. */
function layerVariables(layer: Layer): tf.Variable[] {
  const linears = [layer.q, layer.k, layer.v, layer.o, layer.gate, layer.up, layer.down];
  return [
    layer.inputNorm,
    layer.postNorm,
    ...linears.flatMap((linear) => [
      linear.weight,
      ...(linear.bias ? [linear.bias] : []),
      ...(linear.lora ? [linear.lora.a, linear.lora.b] : []),
    ]),
  ];
}

/** Below this many rows an unpacked product takes the transposed-operand kernel; above, a packed transient copy. */
const UNPACKED_DIRECT_ROWS = 32;

/**
 * x [n, in] · W [in, out]. Packed (the default): a plain matmul, which XNNPACK runs fastest
 * but for which it keeps a packed copy of W for as long as W lives (keyed by the tensor).
 * Unpacked (large models): few rows (decoding) go through the transposed-operand kernel
 * (Wᵀ·xᵀ)ᵀ, which packs nothing; many rows (prefill, training) multiply a transient copy of W,
 * whose packed copy goes when the copy is freed; `direct` (a checkpointed block's recompute,
 * whose saved tensors live until the backward pass ends) takes the transposed-operand kernel
 * for any number of rows. Same values either way.
 */
export function weightProduct(
  x: tf.Tensor2D,
  weight: tf.Tensor2D,
  unpacked: boolean,
  direct = false,
): tf.Tensor2D {
  if (!unpacked) return tf.matMul(x, weight);
  return tf.tidy(() => {
    if (direct || x.shape[0] <= UNPACKED_DIRECT_ROWS)
      return tf.transpose(tf.matMul(weight, x, true, true)) as tf.Tensor2D;
    return tf.matMul(x, tf.mul(weight, tf.scalar(1)) as tf.Tensor2D);
  });
}

/** RMSNorm over the last axis: x / √(mean(x²) + ε) · w. */
function rmsNorm(x: tf.Tensor2D, weight: tf.Tensor, epsilon: number): tf.Tensor2D {
  const meanSquare = tf.mean(tf.square(x), -1, true);
  return tf.mul(tf.mul(x, tf.rsqrt(tf.add(meanSquare, epsilon))), weight);
}

/** HF rotate_half rotary embedding of x [B, heads, S, headDim]; cos/sin broadcast to [B, 1, S, headDim/2]. */
function applyRotary(x: tf.Tensor4D, rotary: { cos: tf.Tensor; sin: tf.Tensor }): tf.Tensor4D {
  const half = x.shape[3] / 2;
  const [first, second] = tf.split(x, [half, half], 3);
  return tf.concat(
    [
      tf.sub(tf.mul(first, rotary.cos), tf.mul(second, rotary.sin)),
      tf.add(tf.mul(second, rotary.cos), tf.mul(first, rotary.sin)),
    ],
    3,
  ) as tf.Tensor4D;
}
