import { test, describe, before } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tf from "@tensorflow/tfjs-core";
import { initBackend } from "./backend.js";
import { presetConfig, toHfConfig, parseHfConfig } from "./config.js";
import { Policy } from "./policy.js";
import { writeSafetensorsDirectory, floatToBfloat16 } from "./safetensors.js";
import { tokenLogProbs } from "./train.js";
import { type NamedWeight } from "./model.js";
import { writeFile } from "node:fs/promises";

before(async () => {
  await initBackend({ log: null });
});

const config = () => presetConfig("test", { vocabSize: 53, eosTokenId: 2 });

async function temporaryDirectory(): Promise<string> {
  return mkdtemp(join(tmpdir(), "agentrl-policy-"));
}

function sameBits(a: Float32Array, b: Float32Array): boolean {
  const x = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const y = new Uint32Array(b.buffer, b.byteOffset, b.length);
  return x.length === y.length && x.every((v, i) => v === y[i]);
}

describe("Policy weights on disk", () => {
  test("save → load is bit-exact (single file and sharded)", async () => {
    const directory = await temporaryDirectory();
    const policy = Policy.create({ ...config(), tieWordEmbeddings: false }, { seed: 4 });
    const original = policy.exportWeights();
    for (const maxShardBytes of [Infinity, 20_000]) {
      await policy.save(directory, { maxShardBytes });
      const files = await readdir(directory);
      assert.ok(
        files.includes(
          maxShardBytes === Infinity ? "model.safetensors" : "model.safetensors.index.json",
        ),
        files.join(),
      );
      const loaded = await Policy.load(directory);
      const reloaded = loaded.exportWeights();
      assert.deepEqual(
        reloaded.tensors.map((t) => t.name),
        original.tensors.map((t) => t.name),
      );
      reloaded.tensors.forEach((t, i) => {
        assert.deepEqual(t.shape, original.tensors[i].shape);
        assert.ok(sameBits(t.data, original.tensors[i].data), `${t.name} differs`);
      });
      assert.deepEqual(loaded.config, policy.config);
      assert.deepEqual(loaded.stopTokenIds, [2]);
      loaded.dispose();
      await rm(directory, { recursive: true });
    }
    policy.dispose();
  });

  test("a model written with HF names, sharded, in BF16, loads", async () => {
    const directory = await temporaryDirectory();
    const source = Policy.create(config(), { seed: 8 });
    const weights = source.exportWeights().tensors;
    // Write it the way transformers would: PyTorch [out, in] layout (exportWeights already is), BF16, 3 shards.
    const files = await writeSafetensorsDirectory(directory, weights, {
      dtype: "BF16",
      maxShardBytes: 8_000,
    });
    assert.ok(files.length >= 3, `expected several shards, got ${files.join()}`);
    assert.match(files[0], /^model-00001-of-000\d\d\.safetensors$/);
    await writeFile(
      join(directory, "config.json"),
      JSON.stringify({ ...toHfConfig(source.config), torch_dtype: "bfloat16" }),
    );
    const loaded = await Policy.load(directory);
    const bf16 = (x: number) =>
      new Float32Array(new Uint32Array([floatToBfloat16(x) << 16]).buffer)[0];
    const byName = new Map(loaded.exportWeights().tensors.map((t) => [t.name, t]));
    for (const weight of weights) {
      const got = byName.get(weight.name)!;
      assert.ok(got, weight.name);
      for (let i = 0; i < weight.data.length; i += 7)
        assert.equal(got.data[i], bf16(weight.data[i]), `${weight.name}[${i}]`);
    }
    // the loaded model runs and is close to the float32 one
    const ids = tf.tensor2d([[1, 4, 9, 16, 25]], undefined, "int32");
    const a = tokenLogProbs(source.model, ids).logProbs.dataSync();
    const b = tokenLogProbs(loaded.model, ids).logProbs.dataSync();
    a.forEach((x, i) => assert.ok(Math.abs(x - b[i]) < 0.05, `log-prob ${i}: ${x} vs ${b[i]}`));
    source.dispose();
    loaded.dispose();
    await rm(directory, { recursive: true });
  });

  test("config.json round-trips and rejects unsupported models", () => {
    const c = config();
    assert.deepEqual(parseHfConfig(toHfConfig(c)), c);
    assert.throws(
      () => parseHfConfig({ ...toHfConfig(c), architectures: ["GPT2LMHeadModel"] }),
      /not supported/,
    );
    assert.throws(() => parseHfConfig({ ...toHfConfig(c), num_key_value_heads: 3 }), /multiple of/);
    assert.throws(() => parseHfConfig({ ...toHfConfig(c), hidden_size: "big" }), /hidden_size/);
  });

  test("missing or mis-shaped weights are clear errors", async () => {
    const directory = await temporaryDirectory();
    const source = Policy.create(config(), { seed: 1 });
    const weights: NamedWeight[] = source.exportWeights().tensors;
    await writeFile(join(directory, "config.json"), JSON.stringify(toHfConfig(source.config)));
    await writeSafetensorsDirectory(
      directory,
      weights.filter((w) => w.name !== "model.norm.weight"),
    );
    await assert.rejects(Policy.load(directory), /missing weights: model\.norm\.weight/);
    source.dispose();
    await rm(directory, { recursive: true });
  });
});

describe("Policy versions", () => {
  test("snapshot, stale copy, restore, export → import", () => {
    const policy = Policy.create(config(), { seed: 2 });
    const optimizer = policy.createOptimizer({ learningRate: 1e-2 });
    const ids = tf.tensor2d([[1, 2, 3, 4, 5, 6]], undefined, "int32");
    const score = (p: Policy) =>
      tf.tidy(() => tf.sum(tokenLogProbs(p.model, ids).logProbs).dataSync()[0]);
    const loss = () => tf.neg(tf.sum(tokenLogProbs(policy.model, ids).logProbs)) as tf.Scalar;
    const before = score(policy);
    const snapshot = policy.snapshot();
    assert.equal(snapshot.version, 0);
    policy.trainStep(optimizer, [0], loss);
    assert.equal(policy.version, 1);
    const after = score(policy);
    assert.ok(after > before, "training should raise the log-prob");
    const stale = policy.fromSnapshot(snapshot);
    assert.equal(stale.version, 0);
    assert.equal(score(stale), before);
    assert.equal(stale.tokenizer, policy.tokenizer);
    const exported = policy.exportWeights();
    assert.equal(exported.version, 1);
    stale.importWeights(exported);
    assert.equal(stale.version, 1);
    assert.equal(score(stale), after);
    policy.restore(snapshot);
    assert.equal(policy.version, 0);
    assert.equal(score(policy), before);
    snapshot.dispose();
    stale.dispose();
    optimizer.dispose();
    ids.dispose();
    policy.dispose();
  });

  test("tf.memory().numTensors is the same before and after 50 generate + train steps", () => {
    const policy = Policy.create(config(), { seed: 3 });
    const optimizer = policy.createOptimizer({ learningRate: 1e-3 });
    const step = (i: number) => {
      const results = policy.generate(
        [
          [1, 2, 3],
          [4, 5],
          [6, 7, 8, 9],
        ],
        { maxNewTokens: 6, temperature: 1, seed: i },
      );
      const rows = results.map((r) => [1, ...r.tokens, 0, 0, 0, 0, 0, 0].slice(0, 8));
      const batch = tf.tensor2d(rows, undefined, "int32");
      policy.trainStep(
        optimizer,
        [
          [0, 2],
          [2, 1],
        ],
        ([start, rows]) => {
          const mb = tf.slice(batch, [start, 0], [rows, 8]);
          const { logProbs, entropy } = tokenLogProbs(policy.model, mb as tf.Tensor2D, {
            temperature: 0.8,
            entropy: true,
          });
          return tf.add(tf.neg(tf.mean(logProbs)), tf.mul(tf.mean(entropy!), 0.01)) as tf.Scalar;
        },
      );
      tf.dispose(batch);
    };
    step(0); // first step creates lasting caches (LM-head transpose)
    const before = tf.memory().numTensors;
    for (let i = 1; i <= 50; i++) step(i);
    assert.equal(tf.memory().numTensors, before);
    assert.equal(policy.version, 51);
    optimizer.dispose();
    policy.dispose();
  });
});
