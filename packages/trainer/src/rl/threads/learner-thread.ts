/**
 * The learner behind one async interface, in this thread or in a worker thread.
 *
 * tfjs's wasm backend computes on ONE core, so in `async` mode the learner runs in a worker
 * thread: generation (main thread) and training (worker) then use both cores. Trajectories
 * go to the worker by structured clone; new weights come back as versioned flat buffers whose
 * memory is transferred, not copied (never through disk on the hot path).
 */
import { AgentRLError } from "@agentrl/spec";
import type { Worker } from "node:worker_threads";
import type { ExportedWeights } from "@agentrl/policy";
import type { TrajectoryGroup } from "@agentrl/rollout";
import { Learner, type LearnerSettings, type LearnerUpdate } from "../learner.js";
import type { SupervisedRow, SupervisedStepResult } from "../sft.js";
import { WorkerChannel, startWorker } from "./worker.js";

export interface LearnerHandle {
  update(groups: readonly TrajectoryGroup[]): Promise<LearnerUpdate>;
  supervised(rows: readonly SupervisedRow[]): Promise<SupervisedStepResult>;
  exportWeights(): Promise<ExportedWeights>;
  save(folder: string): Promise<void>;
  restore(folder: string): Promise<void>;
  step(): Promise<number>;
  close(): Promise<void>;
}

/** The methods a worker answers, with their arguments. */
export type LearnerCall =
  | { method: "update"; groups: readonly TrajectoryGroup[] }
  | { method: "supervised"; rows: readonly SupervisedRow[] }
  | { method: "exportWeights" }
  | { method: "save"; folder: string }
  | { method: "restore"; folder: string }
  | { method: "step" };

/** Runs one call on a learner (shared by both handles, so they behave the same). */
export async function dispatchLearnerCall(learner: Learner, call: LearnerCall): Promise<unknown> {
  switch (call.method) {
    case "update":
      return learner.update(call.groups);
    case "supervised":
      return learner.supervised(call.rows);
    case "exportWeights":
      return learner.policy.exportWeights();
    case "save":
      return learner.save(call.folder);
    case "restore":
      return learner.restore(call.folder);
    case "step":
      return learner.step;
  }
}

/**
 * Detaches exported weights from the learner for a transfer: backends may hand out their
 * own storage from `dataSync()` (the cpu backend does), so each array is copied once into a
 * buffer of its own, which is then moved to the other thread without a second copy.
 */
export function prepareTransfer(weights: ExportedWeights): {
  weights: ExportedWeights;
  transfer: ArrayBuffer[];
} {
  const tensors = weights.tensors.map((t) => ({ ...t, data: t.data.slice() }));
  return {
    weights: { ...weights, tensors },
    transfer: tensors.map((t) => t.data.buffer as ArrayBuffer),
  };
}

/** The handle's methods, each one call of `call` (so both handles behave the same). */
abstract class LearnerCalls implements LearnerHandle {
  protected abstract call<T>(call: LearnerCall): Promise<T>;
  abstract close(): Promise<void>;
  update(groups: readonly TrajectoryGroup[]) {
    return this.call<LearnerUpdate>({ method: "update", groups });
  }
  supervised(rows: readonly SupervisedRow[]) {
    return this.call<SupervisedStepResult>({ method: "supervised", rows });
  }
  exportWeights() {
    return this.call<ExportedWeights>({ method: "exportWeights" });
  }
  save(folder: string) {
    return this.call<void>({ method: "save", folder });
  }
  restore(folder: string) {
    return this.call<void>({ method: "restore", folder });
  }
  step() {
    return this.call<number>({ method: "step" });
  }
}

class InThreadLearner extends LearnerCalls {
  constructor(private readonly learner: Learner) {
    super();
  }
  protected call<T>(call: LearnerCall): Promise<T> {
    return dispatchLearnerCall(this.learner, call) as Promise<T>;
  }
  async close() {
    await this.learner.dispose();
  }
}

export class LearnerWorkerError extends AgentRLError {}

class WorkerLearner extends LearnerCalls {
  private readonly channel: WorkerChannel;

  constructor(worker: Worker) {
    super();
    this.channel = new WorkerChannel(
      worker,
      "the learner thread",
      (message) => new LearnerWorkerError(message),
    );
  }
  protected call<T>(call: LearnerCall): Promise<T> {
    return this.channel.call<T>({ call });
  }
  async close() {
    await this.channel.close("the learner was closed");
  }
}

export interface OpenLearnerOptions {
  modelDirectory: string;
  learner?: LearnerSettings;
  /** Run the learner in a worker thread (default true). */
  thread?: boolean;
}

/** Opens a learner on `modelDirectory`, in a worker thread unless `thread` is false. */
export async function openLearner(options: OpenLearnerOptions): Promise<LearnerHandle> {
  if (options.thread === false)
    return new InThreadLearner(await Learner.load(options.modelDirectory, options.learner));
  const workerData = { modelDirectory: options.modelDirectory, learner: options.learner ?? {} };
  const worker = await startWorker(
    "learner-worker",
    workerData,
    (message) => new LearnerWorkerError(`the learner thread ${message}`),
  );
  return new WorkerLearner(worker);
}
