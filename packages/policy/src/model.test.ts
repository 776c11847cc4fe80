import { test, describe, before } from "node:test";
import assert from "node:assert/strict";
import * as tf from "@tensorflow/tfjs-core";
import { initBackend } from "./backend.js";
import { presetConfig, type ModelConfig } from "./config.js";
import { Transformer, PREFILL_CHUNK_TOKENS } from "./model.js";
import { generate } from "./generate.js";

const VOCAB = 97;
/** test preset (GQA 4 heads / 2 kv heads, q/k/v biases) with non-trivial biases and an untied variant. */
function makeModel(overrides: Partial<ModelConfig> = {}, seed = 3): Transformer {
  const model = new Transformer(
    presetConfig("test", { vocabSize: VOCAB, ...overrides }),
    undefined,
    { seed },
  );
  // Random biases (init is zero) so the bias path is exercised.
  for (const [name, variable] of model.variables) {
    if (name.endsWith(".bias"))
      variable.assign(tf.randomNormal(variable.shape, 0, 0.1, "float32", name.length));
  }
  return model;
}

function randomIds(count: number, seed: number): number[] {
  let x = seed;
  return Array.from({ length: count }, () => (x = (x * 1103515245 + 12345) % 2147483648) % VOCAB);
}

function fullLogits(model: Transformer, ids: number[]): Float32Array {
  const logits = tf.tidy(() => model.forward(tf.tensor2d([ids], [1, ids.length], "int32")));
  const data = logits.dataSync() as Float32Array;
  logits.dispose();
  return data;
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  assert.equal(a.length, b.length);
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i] - b[i]));
  return max;
}

before(async () => {
  await initBackend({ log: null });
});

describe("KV cache", () => {
  for (const variant of [
    { name: "tied, GQA, biases", overrides: {} },
    {
      name: "untied, MHA, Llama",
      overrides: {
        tieWordEmbeddings: false,
        numKeyValueHeads: 4,
        attentionBias: false,
        architecture: "LlamaForCausalLM" as const,
      },
    },
    {
      name: "GQA 4 query heads per kv head",
      overrides: { numAttentionHeads: 8, numKeyValueHeads: 2, headDim: 4 },
    },
  ]) {
    test(`prefill + decode steps give the full forward's logits (${variant.name})`, () => {
      const model = makeModel(variant.overrides);
      const ids = randomIds(40, 7);
      const full = fullLogits(model, ids);
      const sequence = model.createSequence();
      const checked: number[] = [];
      // prefill 10, decode 10, prefill 5 more (an environment reply), decode the rest
      let logits = model.prefill(sequence, ids.slice(0, 10));
      checked.push(maxAbsDiff(logits, full.subarray(9 * VOCAB, 10 * VOCAB)));
      for (let t = 10; t < 20; t++) {
        [logits] = model.decodeStep([sequence], [ids[t]]);
        checked.push(maxAbsDiff(logits, full.subarray(t * VOCAB, (t + 1) * VOCAB)));
      }
      logits = model.prefill(sequence, ids.slice(20, 25));
      checked.push(maxAbsDiff(logits, full.subarray(24 * VOCAB, 25 * VOCAB)));
      for (let t = 25; t < 40; t++) {
        [logits] = model.decodeStep([sequence], [ids[t]]);
        checked.push(maxAbsDiff(logits, full.subarray(t * VOCAB, (t + 1) * VOCAB)));
      }
      assert.equal(sequence.length, 40);
      const worst = Math.max(...checked);
      assert.ok(worst <= 1e-4, `max abs diff ${worst}`);
      sequence.dispose();
      model.dispose();
    });
  }

  test("sequences of different lengths decoded in one batch, joining and leaving, match each alone", () => {
    const model = makeModel();
    const prompts = [randomIds(3, 1), randomIds(17, 2), randomIds(9, 3), randomIds(1, 4)];
    const steps = 12;
    // Reference: each sequence alone, teacher-forced with a fixed continuation.
    const continuation = prompts.map((_, i) => randomIds(steps + 8, 100 + i));
    const alone = prompts.map((prompt, i) => fullLogits(model, [...prompt, ...continuation[i]]));
    const sequences = prompts.map(() => model.createSequence());
    const fed = prompts.map(() => 0);
    let worst = 0;
    const check = (i: number, logits: Float32Array) => {
      const position = prompts[i].length + fed[i] - 1;
      worst = Math.max(
        worst,
        maxAbsDiff(logits, alone[i].subarray(position * VOCAB, (position + 1) * VOCAB)),
      );
    };
    sequences.forEach((s, i) => check(i, model.prefill(s, prompts[i])));
    for (let step = 0; step < steps; step++) {
      // sequence 3 joins late, sequence 1 leaves for two steps (an environment turn) and comes back with a prefill
      const members = [0, 1, 2, 3].filter(
        (i) => !(i === 3 && step < 4) && !(i === 1 && (step === 5 || step === 6)),
      );
      if (step === 7) {
        fed[1] += 3;
        check(1, model.prefill(sequences[1], continuation[1].slice(fed[1] - 3, fed[1])));
      }
      const tokens = members.map((i) => continuation[i][fed[i]]);
      members.forEach((i) => fed[i]++);
      const logits = model.decodeStep(
        members.map((i) => sequences[i]),
        tokens,
      );
      members.forEach((i, k) => check(i, logits[k]));
    }
    assert.ok(worst <= 1e-4, `max abs diff ${worst}`);
    for (const s of sequences) s.dispose();
    model.dispose();
  });

  test("greedy generation of a batch equals each prompt generated alone", () => {
    const model = makeModel();
    const prompts = [randomIds(5, 11), randomIds(23, 12), randomIds(2, 13), randomIds(11, 14)];
    const together = generate(model, prompts, { temperature: 0, maxNewTokens: 16 });
    prompts.forEach((prompt, i) => {
      const [single] = generate(model, [prompt], { temperature: 0, maxNewTokens: 16 });
      assert.deepEqual(together[i].tokens, single.tokens, `prompt ${i}`);
      assert.equal(together[i].tokens.length, 16);
    });
    model.dispose();
  });

  test("prefillBatch of prompts and replies of different lengths equals each prefilled alone", () => {
    const model = makeModel();
    const histories = [
      randomIds(7, 31),
      randomIds(PREFILL_CHUNK_TOKENS + 20, 32),
      randomIds(1, 33),
      randomIds(40, 34),
    ];
    const sequences = histories.map(() => model.createSequence());
    model.prefill(sequences[3], histories[3].slice(0, 25)); // one has a past: its list is a reply
    const lists = histories.map((ids, i) => (i === 3 ? ids.slice(25) : ids));
    const logits = model.prefillBatch(sequences, lists);
    let worst = 0;
    histories.forEach((ids, i) => {
      const full = fullLogits(model, ids);
      const last = ids.length - 1;
      worst = Math.max(
        worst,
        maxAbsDiff(logits[i], full.subarray(last * VOCAB, (last + 1) * VOCAB)),
      );
      assert.equal(sequences[i].length, ids.length);
    });
    // and decoding continues from the batch-prefilled caches
    const next = model.decodeStep(
      sequences,
      histories.map(() => 5),
    );
    histories.forEach((ids, i) => {
      const full = fullLogits(model, [...ids, 5]);
      worst = Math.max(
        worst,
        maxAbsDiff(next[i], full.subarray(ids.length * VOCAB, (ids.length + 1) * VOCAB)),
      );
    });
    assert.ok(worst <= 1e-4, `max abs diff ${worst}`);
    assert.throws(
      () => model.prefillBatch([sequences[0], sequences[0]], [[1], [2]]),
      /appears twice/,
    );
    assert.throws(() => model.prefillBatch([sequences[0]], [[]]), /at least one token/);
    for (const sequence of sequences) sequence.dispose();
    model.dispose();
  });

  test("a prompt longer than one prefill chunk matches the full forward", () => {
    const model = makeModel();
    const ids = randomIds(PREFILL_CHUNK_TOKENS + 77, 5);
    const full = fullLogits(model, ids);
    const sequence = model.createSequence();
    const logits = model.prefill(sequence, ids);
    const last = ids.length - 1;
    const difference = maxAbsDiff(logits, full.subarray(last * VOCAB, (last + 1) * VOCAB));
    assert.ok(difference <= 1e-4, `max abs diff ${difference}`);
    assert.equal(sequence.length, ids.length);
    sequence.dispose();
    model.dispose();
  });

  test("a forked sequence continues independently and matches decoding alone", () => {
    const model = makeModel();
    const prompt = randomIds(12, 21);
    const [continuationA, continuationB] = [randomIds(6, 22), randomIds(6, 23)];
    const fullA = fullLogits(model, [...prompt, ...continuationA]);
    const fullB = fullLogits(model, [...prompt, ...continuationB]);
    const parent = model.createSequence();
    model.prefill(parent, prompt);
    model.decodeStep([parent], [continuationA[0]]); // parent now sits in a block of its own width
    const child = model.createSequence();
    child.dispose();
    const forked = parent.fork();
    assert.equal(forked.length, parent.length);
    let worst = 0;
    for (let t = 1; t < 6; t++) {
      const [a, b] = model.decodeStep([parent, forked], [continuationA[t], continuationA[t]]);
      const position = prompt.length + t;
      worst = Math.max(
        worst,
        maxAbsDiff(a, fullA.subarray(position * VOCAB, (position + 1) * VOCAB)),
        maxAbsDiff(b, a),
      );
    }
    // a fork taken right after the prompt, fed another continuation
    const fresh = model.createSequence();
    model.prefill(fresh, prompt);
    const branch = fresh.fork();
    fresh.dispose();
    for (let t = 0; t < 6; t++) {
      const [b] = model.decodeStep([branch], [continuationB[t]]);
      const position = prompt.length + t;
      worst = Math.max(
        worst,
        maxAbsDiff(b, fullB.subarray(position * VOCAB, (position + 1) * VOCAB)),
      );
    }
    assert.ok(worst <= 1e-4, `max abs diff ${worst}`);
    for (const s of [parent, forked, branch]) s.dispose();
    model.dispose();
  });

  test("decoding and disposing sequences keeps the tensor count flat (caches are plain memory)", () => {
    const model = makeModel();
    const warmUp = model.createSequence(); // creates the cached LM-head transpose, which stays
    model.prefill(warmUp, [1]);
    model.decodeStep([warmUp], [2]);
    warmUp.dispose();
    const before = tf.memory().numTensors;
    const sequences = [model.createSequence(), model.createSequence()];
    model.prefill(sequences[0], [1, 2, 3]);
    model.prefill(sequences[1], [4, 5]);
    for (let i = 0; i < 70; i++) model.decodeStep(sequences, [6, 7]); // past the first 64-position capacity
    model.decodeStep([sequences[1]], [8]);
    const forked = sequences[0].fork();
    model.prefill(forked, [9, 10]);
    assert.equal(tf.memory().numTensors, before);
    assert.deepEqual([sequences[0].length, sequences[1].length, forked.length], [73, 73, 75]);
    for (const s of [...sequences, forked]) s.dispose();
    assert.ok(sequences.every((s) => s.isDisposed));
    assert.throws(() => model.decodeStep([sequences[0]], [1]), /disposed/);
    model.dispose();
  });

  test("rejects misuse with clear errors", () => {
    const model = makeModel();
    const sequence = model.createSequence();
    assert.throws(() => model.decodeStep([sequence], [1]), /prefill it first/);
    model.prefill(sequence, [1]);
    assert.throws(() => model.decodeStep([sequence, sequence], [1, 2]), /appears twice/);
    sequence.dispose();
    assert.throws(() => model.prefill(sequence, [1]), /disposed/);
    model.dispose();
  });
});
