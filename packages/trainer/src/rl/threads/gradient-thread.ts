/**
 * The gradient thread: a second thread computing gradients for the learner (data-parallel
 * training, `LearnerOptions.gradientThreads: 2`).
 *
 * tfjs's wasm backend computes on one core per thread, so a learner alone trains on one core.
 * The gradient thread holds its own copy of the policy (and of the frozen reference when the
 * KL term is on). Each epoch of an update the learner sends it the current weights (flat
 * buffers in the model's own layout, tagged with the version) and the update's micro-batch
 * plan; both threads then claim micro-batches from one shared counter, longest first, until
 * none is left, so the faster thread simply takes more. The gradient thread returns the sum of
 * its gradients as transferred buffers; the learner adds them to its own and takes the one
 * clipped AdamW step (grpo.ts). Loss normalisation uses the whole batch's counts in both
 * threads, so the update equals the single-thread one up to the order of float additions.
 * Supervised steps (sft.ts) send one message per step and share the micro-batches in fixed
 * shares (every other one), so that a supervised run gives the same bits every time.
 */
import { AgentRLError } from "@agentrl/spec";
import type { Worker } from "node:worker_threads";
import * as tf from "@tensorflow/tfjs-core";
import type { NamedWeight, Transformer } from "@agentrl/policy";
import type { AccumulatedGradients } from "@agentrl/policy";
import type {
  BatchCounts,
  EpochWork,
  GradientPeer,
  GrpoDiagnostics,
  GrpoOptions,
  ShardGradients,
  TrainingRow,
} from "../grpo.js";
import type { SupervisedPeer, SupervisedRow, SupervisedWork, ThreadShare } from "../sft.js";
import { WorkerChannel, startWorker } from "./worker.js";

export class GradientThreadError extends AgentRLError {}

/** What the learner sends for one epoch. */
export interface GradientEpochMessage {
  kind: "epoch";
  id: number;
  /** The learner's trainable variables (model layout), the policy version they are. */
  weights: { version: number; tensors: NamedWeight[] };
  /** The update's micro-batches; sent with the first epoch only (the thread keeps them for the update). */
  plan?: TrainingRow[][];
  counts: BatchCounts;
  options: GrpoOptions;
  /** The shared claim counter (Int32Array of one element). */
  claims: SharedArrayBuffer;
  first: boolean;
  last: boolean;
}

/** What the gradient thread answers: its summed gradients (model layout, trainable variable names) and diagnostics. */
export interface GradientEpochResult {
  gradients: NamedWeight[];
  loss: number;
  diagnostics: GrpoDiagnostics;
  microBatches: number;
}

/** What the learner sends for one supervised step: its weights, the step's micro-batches and their loss normaliser. */
export interface GradientSupervisedMessage {
  kind: "supervised";
  id: number;
  weights: { version: number; tensors: NamedWeight[] };
  plan: SupervisedRow[][];
  total: number;
  share: ThreadShare;
}

/** What the gradient thread answers to a supervised step: its summed gradients and loss. */
export interface GradientSupervisedResult {
  gradients: NamedWeight[];
  loss: number;
  microBatches: number;
}

export type GradientMessage =
  GradientEpochMessage | GradientSupervisedMessage | { kind: "memory"; id: number };

/** The values of the model's trainable variables as flat buffers of their own (safe to transfer). */
export function trainableValues(model: Transformer): NamedWeight[] {
  return [...model.trainableVariableMap()].map(([name, variable]) => ({
    name,
    shape: variable.shape.slice(),
    data: ownCopy(variable.dataSync() as Float32Array),
  }));
}

/** Assigns `trainableValues` of an identical model to this model's trainable variables. */
export function assignTrainable(model: Transformer, values: readonly NamedWeight[]): void {
  const variables = model.trainableVariableMap();
  if (values.length !== variables.size)
    throw new GradientThreadError(
      `${values.length} weights for ${variables.size} trainable variables`,
    );
  for (const { name, shape, data } of values) {
    const variable = variables.get(name);
    if (!variable) throw new GradientThreadError(`weights for unknown variable ${name}`);
    tf.tidy(() => variable.assign(tf.tensor(data, shape, "float32")));
  }
}

/**
 * `dataSync()` may hand out the backend's own storage (the cpu backend does; wasm copies out
 * of its heap), so every buffer that is transferred is copied once first.
 */
function ownCopy(data: Float32Array): Float32Array {
  return data.slice();
}

/** Flat buffers of the gradients (disposing the tensors), to transfer. */
export function flattenGradients(gradients: Map<string, tf.Tensor>): NamedWeight[] {
  const out: NamedWeight[] = [];
  for (const [name, gradient] of gradients) {
    out.push({
      name,
      shape: gradient.shape.slice(),
      data: ownCopy(gradient.dataSync() as Float32Array),
    });
    gradient.dispose();
  }
  return out;
}

/** The learner's handle on its gradient thread. */
export class GradientThread implements GradientPeer, SupervisedPeer {
  private readonly channel: WorkerChannel;

  private constructor(worker: Worker) {
    this.channel = new WorkerChannel(
      worker,
      "the gradient thread",
      (message) => new GradientThreadError(message),
    );
  }

  /** Starts a gradient thread on the model of `modelDirectory` (with a frozen reference copy when `reference` is true). */
  static async start(
    modelDirectory: string,
    options: { reference: boolean },
  ): Promise<GradientThread> {
    const worker = await startWorker(
      "gradient-worker",
      { modelDirectory, reference: options.reference },
      (message) => new GradientThreadError(`the gradient thread ${message}`),
    );
    return new GradientThread(worker);
  }

  async epoch(work: EpochWork): Promise<ShardGradients> {
    const tensors = trainableValues(work.policy.model);
    const message: Omit<GradientEpochMessage, "id"> = {
      kind: "epoch",
      weights: { version: work.policy.version, tensors },
      // Only what the loss reads, as compact copies (rows may be views into larger buffers).
      ...(work.first ? { plan: work.plan.map((rows) => rows.map(compactRow)) } : {}),
      counts: work.counts,
      options: work.options,
      claims: work.claims.buffer as SharedArrayBuffer,
      first: work.first,
      last: work.last,
    };
    const result = await this.channel.call<GradientEpochResult>(
      message,
      tensors.map((t) => t.data.buffer as ArrayBuffer),
    );
    const gradients = new Map(
      result.gradients.map((g) => [g.name, tf.tensor(g.data, g.shape, "float32")]),
    );
    return {
      gradients,
      loss: result.loss,
      diagnostics: result.diagnostics,
      microBatches: result.microBatches,
    };
  }

  async supervised(work: SupervisedWork): Promise<AccumulatedGradients> {
    const tensors = trainableValues(work.policy.model);
    const message: Omit<GradientSupervisedMessage, "id"> = {
      kind: "supervised",
      weights: { version: work.policy.version, tensors },
      plan: work.plan.map((rows) =>
        rows.map((row) => ({
          task: row.task,
          tokens: row.tokens.slice(),
          lossMask: row.lossMask.slice(),
        })),
      ),
      total: work.total,
      share: work.share,
    };
    const result = await this.channel.call<GradientSupervisedResult>(
      message,
      tensors.map((t) => t.data.buffer as ArrayBuffer),
    );
    return {
      gradients: new Map(
        result.gradients.map((g) => [g.name, tf.tensor(g.data, g.shape, "float32")]),
      ),
      loss: result.loss,
      microBatches: result.microBatches,
    };
  }

  /** tf.memory().numTensors in the gradient thread (tests). */
  numTensors(): Promise<number> {
    return this.channel.call<number>({ kind: "memory" });
  }

  async close(): Promise<void> {
    await this.channel.close("the gradient thread was closed");
  }
}

function compactRow(row: TrainingRow): TrainingRow {
  return {
    task: row.task,
    tokens: row.tokens.slice(),
    lossMask: row.lossMask.slice(),
    oldLogProbs: row.oldLogProbs.slice(),
    advantage: row.advantage,
    reward: row.reward,
  };
}
