/**
 * Learning: differentiable per-token log-probs, AdamW with global gradient-norm clipping,
 * and a training step over micro-batches with gradient accumulation.
 */
import * as tf from "@tensorflow/tfjs-core";
import type { Transformer } from "./model.js";
import { WeightsError } from "./weights.js";
import type { ModelConfig } from "./config.js";

export interface TokenLogProbOptions {
  /** Logits are divided by this before the softmax (the sampling temperature). Default 1. */
  temperature?: number;
  /** Also return the entropy of each position's (temperature-scaled) distribution. Default false. */
  entropy?: boolean;
  /**
   * [B, T-1]: score only the positions where mask > 0 (e.g. the loss mask). The others get
   * log-prob 0 (and entropy 0) and no gradient, and the LM head and its softmax run only over
   * the scored rows: the head is the costliest part of a small-model step, so pass the loss
   * mask whenever most positions are masked out. Read back once (a sync). Default: all.
   */
  mask?: tf.Tensor2D;
  /**
   * int32 [1, P]: tokens every sequence continues (a GRPO group's shared prompt), computed
   * once for the batch (`Transformer.hiddenStates`). The scores stay those of inputIds'
   * positions: inputIds[b, 0] is scored by nothing, so put the prefix's last token there.
   */
  prefix?: tf.Tensor2D;
}

export interface TokenLogProbs {
  /** [B, T-1]: log p(inputIds[b, t+1] | inputIds[b, ≤t]) under softmax(logits / temperature). */
  logProbs: tf.Tensor2D;
  /** [B, T-1] entropy in nats, when asked for. */
  entropy?: tf.Tensor2D;
}

/**
 * Scores given token sequences. inputIds: int32 [B, T], right-padded (mask the padded
 * positions out of the loss yourself, or pass them as `mask`). Differentiable with respect
 * to the model's variables. The chosen token's logit is picked with a flat gather inside a
 * hand-written gradient (gatherND has no gradient).
 */
export function tokenLogProbs(
  model: Transformer,
  inputIds: tf.Tensor2D,
  options: TokenLogProbOptions = {},
): TokenLogProbs {
  const temperature = options.temperature ?? 1;
  if (!(temperature > 0)) throw new RangeError(`temperature must be > 0, got ${temperature}`);
  const [batch, length] = inputIds.shape;
  if (length < 2) throw new RangeError("tokenLogProbs needs sequences of at least 2 tokens");
  if (options.mask && options.mask.shape.join() !== [batch, length - 1].join()) {
    throw new RangeError(
      `mask has shape [${options.mask.shape}] but the scored positions are [${batch}, ${length - 1}]`,
    );
  }
  const selected = options.mask ? selectedRows(options.mask) : undefined;
  return tf.tidy(() => {
    const targets = tf.reshape(
      tf.slice(inputIds, [0, 1], [batch, length - 1]),
      [-1],
    ) as tf.Tensor1D;
    let hidden = model.hiddenStates(
      tf.slice(inputIds, [0, 0], [batch, length - 1]) as tf.Tensor2D,
      options.prefix,
    ); // [B·(T-1), d]
    let chosen = tf.cast(targets, "int32") as tf.Tensor1D;
    if (selected) {
      const rows = tf.tensor1d(selected.rows, "int32");
      hidden = tf.gather(hidden, rows) as tf.Tensor2D;
      chosen = tf.gather(chosen, rows) as tf.Tensor1D;
    }
    const logits = model.headLogits(hidden); // [n, V]
    const scaled = temperature === 1 ? logits : (tf.div(logits, temperature) as tf.Tensor2D);
    // back to [B, T-1]: unscored positions read the appended 0
    const expand = (values: tf.Tensor1D) =>
      tf.reshape(
        selected
          ? tf.gather(tf.concat([values, tf.zeros([1])]), tf.tensor1d(selected.index, "int32"))
          : values,
        [batch, length - 1],
      ) as tf.Tensor2D;
    const logProbs = expand(chosenLogProbs(scaled, chosen) as tf.Tensor1D);
    if (!options.entropy) return { logProbs };
    const logSoftmax = tf.logSoftmax(scaled);
    const entropy = expand(
      tf.neg(tf.sum(tf.mul(tf.exp(logSoftmax), logSoftmax), -1)) as tf.Tensor1D,
    );
    return { logProbs, entropy };
  });
}

/**
 * Rows of a [B, T-1] mask that are > 0 (`rows`, in order), and for every position the index
 * of its row among them, or rows.length when it is not scored (`index`).
 */
function selectedRows(mask: tf.Tensor2D): { rows: Int32Array; index: Int32Array } {
  const values = mask.dataSync();
  const index = new Int32Array(values.length);
  const rows: number[] = [];
  for (let i = 0; i < values.length; i++) if (values[i] > 0) rows.push(i);
  let next = 0;
  for (let i = 0; i < values.length; i++) index[i] = values[i] > 0 ? next++ : rows.length;
  return { rows: Int32Array.from(rows), index };
}

/**
 * log softmax(scaled)[chosen] per row, with a hand-written gradient: d/dscaled = dy · (oneHot − softmax).
 * scaled [N, V], chosen int32 [N] → [N]. Uses wasm's native Softmax (one pass) instead of
 * exp/log over [N, V]: log Z = max − log(max softmax), exact since max softmax ≥ 1/V.
 * (Autodiff through logSumExp's max would run an element-wise Equal over [N, V], very slow on wasm.)
 */
const chosenLogProbs = tf.customGrad(((
  scaled: tf.Tensor2D,
  chosen: tf.Tensor1D,
  save: tf.GradSaveFunc,
) => {
  const [rows, vocab] = scaled.shape;
  const probabilities = tf.softmax(scaled);
  const flatChosen = tf.add(
    tf.mul(tf.range(0, rows, 1, "int32"), tf.scalar(vocab, "int32")),
    chosen,
  );
  const chosenLogits = tf.gather(tf.reshape(scaled, [-1]), flatChosen);
  const logNormalizer = tf.sub(tf.max(scaled, -1), tf.log(tf.max(probabilities, -1))); // [N]
  save([probabilities, flatChosen]);
  return {
    value: tf.sub(chosenLogits, logNormalizer),
    gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
      const [savedProbabilities, savedFlatChosen] = saved;
      const [n, v] = savedProbabilities.shape;
      const atChosen = tf.reshape(tf.scatterND(tf.reshape(savedFlatChosen, [n, 1]), dy, [n * v]), [
        n,
        v,
      ]);
      return [
        tf.sub(atChosen, tf.mul(savedProbabilities, tf.reshape(dy, [n, 1]))),
        tf.zerosLike(savedFlatChosen),
      ];
    },
  };
}) as unknown as Parameters<typeof tf.customGrad>[0]) as (
  scaled: tf.Tensor,
  chosen: tf.Tensor,
) => tf.Tensor;

/**
 * Supervised next-token loss: mean of -log p over positions where mask [B, T-1] is 1
 * (default: all). Returns a scalar.
 */
export function nextTokenLoss(
  model: Transformer,
  inputIds: tf.Tensor2D,
  mask?: tf.Tensor2D,
): tf.Scalar {
  return tf.tidy(() => {
    const { logProbs } = tokenLogProbs(model, inputIds, mask ? { mask } : {});
    if (!mask) return tf.neg(tf.mean(logProbs)) as tf.Scalar;
    return tf.div(tf.neg(tf.sum(tf.mul(logProbs, mask))), tf.maximum(tf.sum(mask), 1)) as tf.Scalar;
  });
}

export interface AdamWOptions {
  /** Step size. Default 1e-4 (mutable later via `optimizer.learningRate`). */
  learningRate?: number;
  /** Default 0.9. */
  beta1?: number;
  /** Default 0.999. */
  beta2?: number;
  /** Default 1e-8. */
  epsilon?: number;
  /** Decoupled weight decay (AdamW), applied as p ← p − lr·wd·p. Default 0. */
  weightDecay?: number;
  /** Clip the global gradient norm to this before the update; 0 or Infinity = off. Default 1. */
  maxGradNorm?: number;
}

/** Optimizer state as plain data, for checkpoints. Moments are in the variables' own layout. */
export interface OptimizerState {
  step: number;
  learningRate: number;
  moments: { name: string; shape: number[]; m: Float32Array; v: Float32Array }[];
}

export interface ApplyResult {
  /** Global L2 norm of the gradients before clipping. */
  gradNorm: number;
}

/** AdamW over a named set of variables (bias-corrected moments, decoupled weight decay). Pass `model.trainableVariableMap()`. */
export class AdamW {
  learningRate: number;
  readonly beta1: number;
  readonly beta2: number;
  readonly epsilon: number;
  readonly weightDecay: number;
  readonly maxGradNorm: number;
  /** Updates applied so far. */
  step = 0;
  private readonly variables: Map<string, tf.Variable>;
  private readonly first = new Map<string, tf.Variable>();
  private readonly second = new Map<string, tf.Variable>();

  constructor(variables: Map<string, tf.Variable>, options: AdamWOptions = {}) {
    this.variables = new Map([...variables].filter(([, v]) => v.trainable));
    this.learningRate = options.learningRate ?? 1e-4;
    this.beta1 = options.beta1 ?? 0.9;
    this.beta2 = options.beta2 ?? 0.999;
    this.epsilon = options.epsilon ?? 1e-8;
    this.weightDecay = options.weightDecay ?? 0;
    this.maxGradNorm = options.maxGradNorm ?? 1;
    for (const [name, variable] of this.variables) {
      this.first.set(name, tf.variable(tf.zerosLike(variable), false));
      this.second.set(name, tf.variable(tf.zerosLike(variable), false));
    }
  }

  /** Clips (global norm) and applies gradients keyed by variable name. Does not dispose them. */
  applyGradients(gradients: Map<string, tf.Tensor>): ApplyResult {
    for (const name of gradients.keys())
      if (!this.variables.has(name))
        throw new WeightsError(`gradient for unknown variable ${name}`);
    const normTensor = tf.tidy(() =>
      tf.sqrt(tf.addN([...gradients.values()].map((g) => tf.sum(tf.square(g))))),
    );
    const gradNorm = normTensor.dataSync()[0];
    normTensor.dispose();
    const clip =
      this.maxGradNorm > 0 && Number.isFinite(this.maxGradNorm) && gradNorm > this.maxGradNorm
        ? this.maxGradNorm / (gradNorm + 1e-6)
        : 1;
    this.step += 1;
    const correction1 = 1 - Math.pow(this.beta1, this.step);
    const correction2 = 1 - Math.pow(this.beta2, this.step);
    const stepSize = this.learningRate / correction1;
    tf.tidy(() => {
      for (const [name, gradient] of gradients) {
        const variable = this.variables.get(name)!;
        const m = this.first.get(name)!;
        const v = this.second.get(name)!;
        const g = clip === 1 ? gradient : tf.mul(gradient, clip);
        m.assign(tf.add(tf.mul(m, this.beta1), tf.mul(g, 1 - this.beta1)));
        v.assign(tf.add(tf.mul(v, this.beta2), tf.mul(tf.square(g), 1 - this.beta2)));
        const denominator = tf.add(tf.sqrt(tf.div(v, correction2)), this.epsilon);
        let updated = tf.sub(variable, tf.mul(tf.div(m, denominator), stepSize));
        if (this.weightDecay > 0)
          updated = tf.sub(updated, tf.mul(variable, this.learningRate * this.weightDecay));
        variable.assign(updated);
      }
    });
    return { gradNorm };
  }

  exportState(): OptimizerState {
    const moments = [...this.variables.keys()].map((name) => ({
      name,
      shape: this.first.get(name)!.shape.slice(),
      m: this.first.get(name)!.dataSync() as Float32Array,
      v: this.second.get(name)!.dataSync() as Float32Array,
    }));
    return { step: this.step, learningRate: this.learningRate, moments };
  }

  importState(state: OptimizerState): void {
    for (const { name, shape, m, v } of state.moments) {
      const first = this.first.get(name);
      if (!first) throw new WeightsError(`optimizer state has unknown variable ${name}`);
      if (first.shape.join() !== shape.join())
        throw new WeightsError(
          `optimizer state ${name}: shape [${shape}] but variable is [${first.shape}]`,
        );
      tf.tidy(() => {
        first.assign(tf.tensor(m, shape));
        this.second.get(name)!.assign(tf.tensor(v, shape));
      });
    }
    this.step = state.step;
    this.learningRate = state.learningRate;
  }

  dispose(): void {
    for (const t of this.first.values()) t.dispose();
    for (const t of this.second.values()) t.dispose();
  }
}

export interface TrainStepOptions {
  /** "sum": gradients of the micro-batch losses are added (each loss is its share of the batch loss). "mean": averaged. Default "sum". */
  reduction?: "sum" | "mean";
}

export interface TrainStepResult {
  /** Sum (or mean) of the micro-batch losses. */
  loss: number;
  /** Global gradient norm before clipping. */
  gradNorm: number;
}

export interface AccumulatedGradients {
  /** Trainable variable name (as in `model.trainableVariableMap()`) → the summed gradient. Empty when no micro-batch ran. The caller disposes them. */
  gradients: Map<string, tf.Tensor>;
  /** Sum of the micro-batch losses. */
  loss: number;
  /** Micro-batches that ran. */
  microBatches: number;
}

/**
 * Gradients of the sum of `lossFn(microBatch)` over `microBatches` with respect to the
 * model's trainable variables, accumulated micro-batch after micro-batch. `microBatches` may
 * be any iterable (e.g. one that claims work shared with another thread). Every other tensor
 * made here is disposed.
 */
export function accumulateGradients<MicroBatch>(
  model: Transformer,
  microBatches: Iterable<MicroBatch>,
  lossFn: (microBatch: MicroBatch) => tf.Scalar,
): AccumulatedGradients {
  const trainable = model.trainableVariableMap();
  const variables = [...trainable.values()];
  const nameOf = new Map<string, string>();
  for (const [name, variable] of trainable) nameOf.set(variable.name, name);
  const gradients = new Map<string, tf.Tensor>();
  let loss = 0;
  let count = 0;
  for (const microBatch of microBatches) {
    const { value, grads } = tf.variableGrads(() => lossFn(microBatch), variables);
    loss += value.dataSync()[0];
    value.dispose();
    count += 1;
    for (const [variableName, gradient] of Object.entries(grads))
      addGradient(gradients, nameOf.get(variableName)!, gradient);
  }
  return { gradients, loss, microBatches: count };
}

/** Adds `gradient` into `sums` under `name` (taking ownership of it; the previous sum is disposed). */
export function addGradient(sums: Map<string, tf.Tensor>, name: string, gradient: tf.Tensor): void {
  const previous = sums.get(name);
  if (!previous) {
    sums.set(name, gradient);
    return;
  }
  sums.set(name, tf.add(previous, gradient));
  previous.dispose();
  gradient.dispose();
}

/**
 * One optimizer step: for each micro-batch, loss = lossFn(microBatch) (a scalar built from
 * the model, e.g. with tokenLogProbs), gradients accumulated; then reduced, clipped and
 * applied with AdamW. Every tensor made here is disposed; the caller owns microBatches.
 */
export function trainStep<MicroBatch>(
  model: Transformer,
  optimizer: AdamW,
  microBatches: MicroBatch[],
  lossFn: (microBatch: MicroBatch) => tf.Scalar,
  options: TrainStepOptions = {},
): TrainStepResult {
  if (microBatches.length === 0) throw new RangeError("trainStep needs at least one micro-batch");
  const accumulated = accumulateGradients(model, microBatches, lossFn);
  const gradients = accumulated.gradients;
  let loss = accumulated.loss;
  if (options.reduction === "mean" && microBatches.length > 1) {
    for (const [name, gradient] of gradients) {
      gradients.set(name, tf.div(gradient, microBatches.length));
      gradient.dispose();
    }
    loss /= microBatches.length;
  }
  try {
    const { gradNorm } = optimizer.applyGradients(gradients);
    return { loss, gradNorm };
  } finally {
    for (const gradient of gradients.values()) gradient.dispose();
  }
}

export interface MicroBatchOptions {
  /** Activation memory one micro-batch may use, in bytes. Default 2 GiB (the wasm heap is capped at 4 GiB and never shrinks). */
  memoryBudgetBytes?: number;
}

/**
 * Rough activation memory of one training token (forward + backward) at a given sequence
 * length, in bytes: logits-sized tensors (≈6 × vocab), attention scores (≈6 × heads ×
 * length per layer) and layer activations (≈20 × hidden + 6 × MLP width per layer), times
 * 2.3 for allocator overhead. Calibrated on wasm: d 256, 4 layers, vocab 4096, batch
 * 16 × 256 peaked at 3.85 GiB.
 */
export function trainingBytesPerToken(config: ModelConfig, sequenceLength: number): number {
  const perLayer =
    6 * config.numAttentionHeads * sequenceLength +
    20 * config.hiddenSize +
    6 * config.intermediateSize;
  return 4 * 2.3 * (6 * config.vocabSize + config.numHiddenLayers * perLayer);
}

/** Most rows of `sequenceLength` tokens one micro-batch should hold (at least 1). */
export function maxMicroBatchRows(
  config: ModelConfig,
  sequenceLength: number,
  options: MicroBatchOptions = {},
): number {
  const budget = options.memoryBudgetBytes ?? 2 * 1024 ** 3;
  return Math.max(
    1,
    Math.floor(budget / (trainingBytesPerToken(config, sequenceLength) * sequenceLength)),
  );
}

/** Splits `rows` into consecutive chunks of at most `size`. */
export function splitIntoMicroBatches<Row>(rows: readonly Row[], size: number): Row[][] {
  if (!(size >= 1)) throw new RangeError(`micro-batch size must be >= 1, got ${size}`);
  const out: Row[][] = [];
  for (let i = 0; i < rows.length; i += size) out.push(rows.slice(i, i + size));
  return out;
}
