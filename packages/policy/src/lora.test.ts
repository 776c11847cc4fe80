import { test, before } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tf from "@tensorflow/tfjs-core";
import { initBackend } from "./backend.js";
import { presetConfig } from "./config.js";
import { Policy } from "./policy.js";
import { nextTokenLoss, tokenLogProbs } from "./train.js";

before(async () => {
  await initBackend({ log: null });
});

test("LoRA trains only the adapters, and save/export/merge carry the merged weights", async () => {
  const policy = Policy.create(presetConfig("test", { vocabSize: 31 }), { seed: 6 });
  const ids = tf.tensor2d(
    [
      [1, 2, 3, 4, 5, 6, 7, 8],
      [8, 7, 6, 5, 4, 3, 2, 1],
    ],
    undefined,
    "int32",
  );
  const logProbs = (p: Policy) =>
    tf.tidy(() => tokenLogProbs(p.model, ids).logProbs.dataSync() as Float32Array); // log-probs are float32
  const maxDiff = (a: Float32Array, b: Float32Array) =>
    a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);
  const initial = logProbs(policy);
  const baseBefore = policy.exportWeights().tensors;

  policy.enableLora({ rank: 4, alpha: 8, targets: ["q_proj", "v_proj", "up_proj", "down_proj"] });
  assert.ok(policy.model.loraEnabled);
  assert.ok(maxDiff(logProbs(policy), initial) < 1e-6, "B = 0: outputs unchanged");
  const trainable = [...policy.model.trainableVariableMap().keys()];
  assert.equal(trainable.length, 2 * 4 * policy.config.numHiddenLayers);
  assert.ok(trainable.every((name) => /\.lora_[AB]\.weight$/.test(name)));

  const optimizer = policy.createOptimizer({ learningRate: 1e-2 });
  let first = 0;
  let last = 0;
  for (let step = 0; step < 20; step++) {
    last = policy.trainStep(optimizer, [ids], (x) => nextTokenLoss(policy.model, x)).loss;
    if (step === 0) first = last;
  }
  assert.ok(last < first - 0.1, `loss ${first} → ${last}`);
  // base variables themselves did not move
  for (const name of ["model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight"]) {
    const variable = policy.model.variables.get(name)!;
    const original = baseBefore.find((t) => t.name === name)!;
    const current = name.endsWith("proj.weight")
      ? tf.tidy(() => tf.transpose(variable).dataSync())
      : variable.dataSync();
    assert.deepEqual(current, original.data, `${name} changed`);
  }
  const trained = logProbs(policy);

  // save (merged) → load: same outputs without adapters
  const directory = await mkdtemp(join(tmpdir(), "agentrl-lora-"));
  await policy.save(directory);
  const loaded = await Policy.load(directory);
  assert.equal(loaded.model.loraEnabled, false);
  assert.ok(maxDiff(logProbs(loaded), trained) < 1e-4);
  // a stale copy from a snapshot carries the merged weights too
  const snapshot = policy.snapshot();
  const stale = policy.fromSnapshot(snapshot);
  assert.ok(maxDiff(logProbs(stale), trained) < 1e-4);
  snapshot.dispose();
  // merging in place keeps the outputs and makes the weights trainable again
  policy.mergeLora();
  assert.equal(policy.model.loraEnabled, false);
  assert.ok(maxDiff(logProbs(policy), trained) < 1e-4);
  assert.ok([...policy.model.trainableVariableMap().keys()].includes("model.embed_tokens.weight"));

  optimizer.dispose();
  for (const p of [policy, loaded, stale]) p.dispose();
  ids.dispose();
  await rm(directory, { recursive: true });
});
