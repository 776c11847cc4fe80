import { test, before } from "node:test";
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, readdir, writeFile } from "node:fs/promises";
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

test("LoRA: samplers share the learner's frozen base (no copy), take adapter-only updates, and adapters saved in PEFT layout load back", async () => {
  const directory = await mkdtemp(join(tmpdir(), "agentrl-lora-share-"));
  const base = Policy.create(
    presetConfig("test", { vocabSize: 512, hiddenSize: 128, intermediateSize: 384, headDim: 32 }),
    { seed: 2 },
  );
  await base.save(join(directory, "base"));
  base.dispose();
  const learner = await Policy.load(join(directory, "base"), { memoryUse: "lora" });
  learner.enableLora({ rank: 2, alpha: 4 });
  const ids = tf.tensor2d(
    [
      [1, 2, 3, 4, 5, 6, 7, 8],
      [8, 7, 6, 5, 4, 3, 2, 1],
    ],
    undefined,
    "int32",
  );
  const logProbs = (p: Policy) =>
    tf.tidy(() => tokenLogProbs(p.model, ids).logProbs.dataSync() as Float32Array);
  const maxDiff = (a: Float32Array, b: Float32Array) =>
    a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);
  const dataId = (tensor: tf.Tensor) => (tensor as unknown as { dataId: object }).dataId;

  // a sampler on the same base: new buffers for its adapters (and rotary tables), none for the weights
  const before = tf.memory().numDataBuffers;
  const sampler = learner.shareBase();
  const added = tf.memory().numDataBuffers - before;
  const adapters = learner.model.trainableVariables().length;
  assert.ok(
    added <= adapters + 2,
    `sharing the base added ${added} buffers (${adapters} adapters, ${learner.model.variables.size} weights)`,
  );
  for (const [name, variable] of learner.model.variables)
    assert.equal(dataId(sampler.model.variables.get(name)!), dataId(variable), `${name} copied`);
  assert.ok(maxDiff(logProbs(sampler), logProbs(learner)) < 1e-6);

  const optimizer = learner.createOptimizer({ learningRate: 2e-2 });
  for (let step = 0; step < 10; step++)
    learner.trainStep(optimizer, [ids], (x) => nextTokenLoss(learner.model, x));
  const trained = logProbs(learner);
  assert.ok(
    maxDiff(trained, logProbs(sampler)) > 1e-3,
    "training moved the learner away from the sampler",
  );
  // the update the learner publishes is the adapters only
  const update = learner.exportWeights();
  assert.equal(update.tensors.length, 0);
  assert.equal(update.lora!.adapters.length, 2 * 7 * learner.config.numHiddenLayers);
  sampler.importWeights(update);
  assert.ok(
    maxDiff(logProbs(sampler), trained) < 1e-6,
    "the sampler equals the learner after the adapter update",
  );
  assert.equal(sampler.version, learner.version);

  // adapters in PEFT layout → a fresh load of the base + loadAdapters gives the trained model
  await learner.saveAdapters(join(directory, "adapters"));
  assert.deepEqual((await readdir(join(directory, "adapters"))).sort(), [
    "adapter_config.json",
    "adapter_model.safetensors",
  ]);
  const reloaded = await Policy.load(join(directory, "base"));
  assert.ok(maxDiff(logProbs(reloaded), trained) > 1e-3);
  await reloaded.loadAdapters(join(directory, "adapters"));
  assert.ok(maxDiff(logProbs(reloaded), trained) < 1e-5);
  // merged weights in HF layout give the same model without adapters
  await learner.save(join(directory, "merged"));
  const merged = await Policy.load(join(directory, "merged"));
  assert.equal(merged.model.loraEnabled, false);
  assert.ok(maxDiff(logProbs(merged), trained) < 1e-4);

  optimizer.dispose();
  for (const p of [learner, sampler, reloaded, merged]) p.dispose();
  ids.dispose();
  await rm(directory, { recursive: true });
});

test("a LoRA folder (adapter_config.json naming its base) loads the base once per process, frozen and shared, and saves merged weights plus adapter/", async () => {
  const directory = await mkdtemp(join(tmpdir(), "agentrl-lora-folder-"));
  const base = Policy.create(presetConfig("test", { vocabSize: 64 }), { seed: 3 });
  await base.save(join(directory, "base"));
  base.dispose();
  await mkdir(join(directory, "lora"));
  await writeFile(
    join(directory, "lora", "adapter_config.json"),
    JSON.stringify({
      peft_type: "LORA",
      base_model_name_or_path: "../base",
      r: 2,
      lora_alpha: 4,
      target_modules: ["q_proj", "v_proj"],
    }),
  );
  const ids = tf.tensor2d([[1, 2, 3, 4, 5, 6]], undefined, "int32");
  const logProbs = (p: Policy) =>
    tf.tidy(() => tokenLogProbs(p.model, ids).logProbs.dataSync() as Float32Array);
  const maxDiff = (a: Float32Array, b: Float32Array) =>
    a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);
  const dataId = (tensor: tf.Tensor) => (tensor as unknown as { dataId: object }).dataId;

  const learner = await Policy.load(join(directory, "lora"), { trainable: true });
  const sampler = await Policy.load(join(directory, "lora"), { trainable: false });
  assert.equal(learner.baseDirectory, join(directory, "base"));
  for (const [name, variable] of learner.model.variables) {
    assert.equal(
      dataId(sampler.model.variables.get(name)!),
      dataId(variable),
      `${name} loaded twice`,
    );
    assert.equal(variable.trainable, false);
  }
  assert.deepEqual(
    [...learner.model.trainableVariableMap().keys()].every((name) => /lora_[AB]/.test(name)),
    true,
  );
  const plain = await Policy.load(join(directory, "base"));
  assert.ok(
    maxDiff(logProbs(learner), logProbs(plain)) < 1e-6,
    "new adapters leave the base's outputs",
  );

  const optimizer = learner.createOptimizer({ learningRate: 5e-2 });
  for (let step = 0; step < 5; step++)
    learner.trainStep(optimizer, [ids], (x) => nextTokenLoss(learner.model, x));
  const trained = logProbs(learner);
  sampler.importWeights(learner.exportWeights());
  assert.ok(maxDiff(logProbs(sampler), trained) < 1e-6);
  await learner.save(join(directory, "checkpoint"));
  const merged = await Policy.load(join(directory, "checkpoint"));
  assert.equal(merged.model.loraEnabled, false);
  assert.ok(maxDiff(logProbs(merged), trained) < 1e-4);
  const adapters = await Policy.load(join(directory, "checkpoint", "adapter"));
  assert.ok(adapters.model.loraEnabled);
  assert.ok(maxDiff(logProbs(adapters), trained) < 1e-5);

  optimizer.dispose();
  for (const p of [learner, sampler, plain, merged, adapters]) p.dispose();
  await Policy.releaseSharedBases();
  ids.dispose();
  await rm(directory, { recursive: true });
});
