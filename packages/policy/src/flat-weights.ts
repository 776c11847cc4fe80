/**
 * A snapshot's weights as flat buffers and back: how another thread (an engine thread of
 * `@agentrl/rollout`) gets a copy of a policy's weights without the HF layout's transposes.
 */
import * as tf from "@tensorflow/tfjs-core";
import { PolicySnapshot } from "./policy.js";
import { WeightsError, type NamedWeight } from "./weights.js";

/** The snapshot's values (the model's own layout) as flat Float32Arrays (copies, safe to send). */
export function snapshotToFlat(snapshot: PolicySnapshot): NamedWeight[] {
  if (snapshot.isDisposed) throw new WeightsError("snapshot is disposed");
  return [...snapshot.values].map(([name, tensor]) => ({
    name,
    shape: tensor.shape.slice(),
    data: tensor.dataSync() as Float32Array,
  }));
}

/** A snapshot holding `snapshotToFlat`'s buffers again (for `Policy.restore` / `fromSnapshot` of an identical model). Dispose it. */
export function snapshotFromFlat(version: number, weights: readonly NamedWeight[]): PolicySnapshot {
  return new PolicySnapshot(
    version,
    new Map(weights.map(({ name, shape, data }) => [name, tf.tensor(data, shape, "float32")])),
  );
}
