/**
 * Resuming a LoRA run: the learner's checkpoint holds the merged weights (policy/) and the
 * adapters alone (policy/adapter/); `Learner.restore` puts the adapters back onto the frozen
 * base (shared with the samplers, never assigned) instead of loading the merged weights, a
 * second copy of the model. The restored learner scores tokens as the saved one did, trains
 * the adapters only, and the base is what it was.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tf from "@tensorflow/tfjs-core";
import {
  ADAPTER_CONFIG_FILE,
  Policy,
  initBackend,
  presetConfig,
  tokenLogProbs,
} from "@agentrl/policy";
import { Learner } from "./learner.js";

let directory: string;
before(async () => {
  await initBackend({ log: null });
  directory = mkdtempSync(join(tmpdir(), "agentrl-lora-resume-"));
  const base = Policy.create(presetConfig("test", { vocabSize: 64 }), { seed: 5 });
  await base.save(join(directory, "base"));
  base.dispose();
  const adapter = join(directory, "lora");
  const config = {
    peft_type: "LORA",
    base_model_name_or_path: "../base",
    r: 2,
    lora_alpha: 4,
    target_modules: ["q_proj", "v_proj", "down_proj"],
  };
  mkdirSync(adapter);
  writeFileSync(join(adapter, ADAPTER_CONFIG_FILE), JSON.stringify(config));
});
after(async () => {
  await Policy.releaseSharedBases();
  rmSync(directory, { recursive: true, force: true });
});

/** Every log-prob of a fixed batch under the learner's policy. */
function scores(learner: Learner): Float32Array {
  return tf.tidy(() => {
    const ids = tf.tensor2d(
      [
        [1, 5, 9, 13, 2, 40],
        [7, 7, 30, 3, 12, 1],
      ],
      undefined,
      "int32",
    );
    return tokenLogProbs(learner.policy.model, ids).logProbs.dataSync() as Float32Array;
  });
}

/** A sum over the frozen base's weights (changes if anything assigns them). */
function baseChecksum(learner: Learner): number {
  let total = 0;
  for (const [name, variable] of learner.policy.model.variables)
    if (!name.includes("lora_")) total += tf.tidy(() => tf.sum(tf.abs(variable)).dataSync()[0]);
  return total;
}

test("a LoRA learner resumed from its checkpoint reloads its adapters onto the unchanged frozen base", async () => {
  const saved = await Learner.load(join(directory, "lora"));
  const checkpoint = join(directory, "checkpoint");
  let expected: Float32Array;
  let base: number;
  try {
    assert.ok(saved.policy.model.loraEnabled);
    base = baseChecksum(saved);
    // trained adapters: B away from 0, so they change the outputs
    for (const [name, variable] of saved.policy.model.trainableVariableMap())
      variable.assign(
        tf.randomNormal(
          variable.shape,
          0,
          name.endsWith("lora_B.weight") ? 0.3 : 0.5,
          "float32",
          7,
        ),
      );
    saved.step = 3;
    saved.policy.version = 3;
    expected = scores(saved);
    await saved.save(checkpoint);
  } finally {
    await saved.dispose();
  }

  const resumed = await Learner.load(join(directory, "lora"));
  try {
    const fresh = scores(resumed);
    assert.ok(
      fresh.some((value, i) => Math.abs(value - expected[i]) > 1e-3),
      "before restore the new adapters (B = 0) score differently",
    );
    await resumed.restore(checkpoint);
    assert.equal(resumed.step, 3);
    assert.equal(resumed.policy.version, 3);
    assert.ok(resumed.policy.model.loraEnabled);
    const trainable = [...resumed.policy.model.trainableVariableMap().keys()];
    assert.ok(trainable.length > 0 && trainable.every((name) => name.includes("lora_")));
    const got = scores(resumed);
    got.forEach((value, i) =>
      assert.ok(Math.abs(value - expected[i]) < 1e-4, `log-prob ${i}: ${value} vs ${expected[i]}`),
    );
    assert.ok(
      Math.abs(baseChecksum(resumed) - base) < 1e-3 * base,
      "the frozen base was not assigned",
    );
  } finally {
    await resumed.dispose();
  }
});
