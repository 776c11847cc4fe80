/** Worker-thread entry of the gradient thread (see gradient-thread.ts). */
import { parentPort, workerData } from "node:worker_threads";
import * as tf from "@tensorflow/tfjs-core";
import { Policy } from "@agentrl/policy";
import { claimFrom, GrpoShard } from "../grpo.js";
import { shareOf, supervisedGradients } from "../sft.js";
import {
  assignTrainable,
  flattenGradients,
  type GradientEpochResult,
  type GradientMessage,
  type GradientSupervisedResult,
} from "./gradient-thread.js";
import { describeError } from "./worker.js";

const port = parentPort!;
const { modelDirectory, reference: withReference } = workerData as {
  modelDirectory: string;
  reference: boolean;
};

try {
  const policy = await Policy.load(modelDirectory, { trainable: true, tokenizer: false });
  let reference: Policy | undefined;
  if (withReference) {
    const snapshot = policy.snapshot();
    reference = policy.fromSnapshot(snapshot);
    snapshot.dispose();
  }
  // The current update's micro-batches (from its first epoch to its last).
  let shard: { shard: GrpoShard; count: number } | undefined;
  // Each message is handled synchronously from start to end, so messages run one at a time, in order.
  port.on("message", (message: GradientMessage) => {
    try {
      if (message.kind === "memory") {
        port.postMessage({ id: message.id, result: tf.memory().numTensors });
        return;
      }
      if (message.kind === "supervised") {
        assignTrainable(policy.model, message.weights.tensors);
        policy.version = message.weights.version;
        const part = supervisedGradients(
          policy.model,
          message.plan,
          message.total,
          shareOf(message.share, message.plan.length),
        );
        const gradients = flattenGradients(part.gradients);
        const result: GradientSupervisedResult = {
          gradients,
          loss: part.loss,
          microBatches: part.microBatches,
        };
        port.postMessage(
          { id: message.id, result },
          gradients.map((g) => g.data.buffer as ArrayBuffer),
        );
        return;
      }
      if (message.first) {
        shard?.shard.dispose();
        shard = {
          shard: new GrpoShard(
            policy.model,
            reference?.model,
            message.plan!,
            message.options,
            message.counts,
          ),
          count: message.plan!.length,
        };
      }
      if (!shard) throw new Error("an epoch without its update's plan");
      assignTrainable(policy.model, message.weights.tensors);
      policy.version = message.weights.version;
      const part = shard.shard.gradients(claimFrom(new Int32Array(message.claims), shard.count));
      if (message.last) {
        shard.shard.dispose();
        shard = undefined;
      }
      const gradients = flattenGradients(part.gradients);
      const result: GradientEpochResult = {
        gradients,
        loss: part.loss,
        diagnostics: part.diagnostics,
        microBatches: part.microBatches,
      };
      port.postMessage(
        { id: message.id, result },
        gradients.map((g) => g.data.buffer as ArrayBuffer),
      );
    } catch (error) {
      port.postMessage({ id: message.id, error: describeError(error) });
    }
  });
  port.postMessage({ ready: true });
} catch (error) {
  port.postMessage({ error: describeError(error) });
}
