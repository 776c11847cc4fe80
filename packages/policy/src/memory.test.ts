import { test, describe, before } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tf from "@tensorflow/tfjs-core";
import { initBackend } from "./backend.js";
import { type ModelConfig, presetConfig, toHfConfig } from "./config.js";
import {
  ModelTooLargeError,
  checkModelFits,
  estimateModelMemory,
  inferenceCachePlan,
} from "./memory.js";
import { Policy } from "./policy.js";
import { weightProduct } from "./model.js";
import { tokenLogProbs } from "./train.js";
import { Tokenizer } from "./tokenizer/tokenizer.js";
import { trainByteLevelBpe } from "./tokenizer/train-bpe.js";
import { syntheticCorpus } from "./tokenizer/test-corpus.js";

before(async () => {
  await initBackend({ log: null });
});

/** Qwen2.5's shapes: 0.5B and 1.5B (151,936-row vocabulary, tied embeddings at 0.5B). */
const qwenShape = (
  hidden: number,
  layers: number,
  heads: number,
  intermediate: number,
  tied: boolean,
): ModelConfig => ({
  architecture: "Qwen2ForCausalLM",
  vocabSize: 151_936,
  hiddenSize: hidden,
  intermediateSize: intermediate,
  numHiddenLayers: layers,
  numAttentionHeads: heads,
  numKeyValueHeads: 2,
  headDim: hidden / heads,
  maxPositionEmbeddings: 32_768,
  rmsNormEps: 1e-6,
  ropeTheta: 1e6,
  attentionBias: true,
  tieWordEmbeddings: tied,
});
const qwen05 = qwenShape(896, 24, 14, 4864, true);
const qwen15 = qwenShape(1536, 28, 12, 8960, true);

describe("memory needed at load", () => {
  test("a 0.5B model fits the wasm heap for sampling and LoRA; a 1.5B one does not, and the error says why and what to do", () => {
    assert.doesNotThrow(() => checkModelFits(qwen05, "wasm", "inference"));
    assert.doesNotThrow(() => checkModelFits(qwen05, "wasm", "lora"));
    // full fine-tuning of 0.5B: gradients and AdamW moments quadruple the weights
    assert.throws(
      () => checkModelFits(qwen05, "wasm", "full"),
      (error: Error) => error instanceof ModelTooLargeError && /LoRA/.test(error.message),
    );
    assert.throws(
      () => checkModelFits(qwen15, "wasm", "inference", "models/big"),
      (error: Error) =>
        error instanceof ModelTooLargeError &&
        /models\/big/.test(error.message) && // the model
        /4 GiB/.test(error.message) && // the limit
        /needs about [\d.]+ GiB/.test(error.message) && // its need
        /native backend/.test(error.message) &&
        /smaller model/.test(error.message), // what to do
    );
  });

  test("a large model keeps no second copy of its MLP or of its tied head", () => {
    const plan = inferenceCachePlan(qwen05);
    assert.deepEqual(plan, { fusedMlp: false, transposedHead: false });
    assert.deepEqual(inferenceCachePlan(presetConfig("tiny")), {
      fusedMlp: true,
      transposedHead: true,
    });
    const estimate = estimateModelMemory(qwen05);
    assert.ok(
      estimate.cacheBytes < 0.06 * estimate.weightBytes,
      `caches ${estimate.cacheBytes} of weights ${estimate.weightBytes}`,
    );
  });

  test("Policy.load refuses a model too large for the backend before reading any weight", async () => {
    const directory = await mkdtemp(join(tmpdir(), "agentrl-memory-"));
    try {
      // no safetensors at all: the error must come from the memory check, not the reader
      await writeFile(join(directory, "config.json"), JSON.stringify(toHfConfig(qwen15)));
      await assert.rejects(
        Policy.load(directory),
        (error: Error) => error instanceof ModelTooLargeError && error.message.includes(directory),
      );
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  });
});

describe("vocabulary padding", () => {
  // config vocabulary 400 rows, tokenizer 300 ids: random weights give the 100 padded ids ~25 % of the mass
  const tokenizerFiles = trainByteLevelBpe(syntheticCorpus(20, 1500), { vocabSize: 300 });
  const tokenizer = Tokenizer.fromJson(
    tokenizerFiles.tokenizerJson,
    tokenizerFiles.tokenizerConfig,
  );

  test("ids the tokenizer lacks are never sampled (temperature 1, 4,000 samples) and have no log-prob mass", () => {
    assert.equal(tokenizer.vocabSize, 300);
    const policy = Policy.create(presetConfig("test", { vocabSize: 400 }), { tokenizer, seed: 3 });
    try {
      assert.equal(policy.model.vocabularyLimit, 300);
      let sampled = 0;
      for (const seed of [1, 2, 3, 4]) {
        const prompts = Array.from({ length: 20 }, (_, i) => [i + 5, (i * 7) % 250]);
        for (const result of policy.generate(prompts, {
          maxNewTokens: 50,
          temperature: 1,
          seed,
          stopTokenIds: [],
        })) {
          for (const token of result.tokens) assert.ok(token < 300, `sampled padded id ${token}`);
          sampled += result.tokens.length;
        }
      }
      assert.equal(sampled, 4000);
      // inference logits keep the config's length, padded ids at -Infinity
      const sequence = policy.model.createSequence();
      const logits = policy.model.prefill(sequence, [5, 6, 7]);
      sequence.dispose();
      assert.equal(logits.length, 400);
      assert.ok(logits.subarray(300).every((value) => value === -Infinity));
      assert.ok(logits.subarray(0, 300).every((value) => Number.isFinite(value)));
      // training log-probs are over the 300 usable ids: they sum to 1 at every position
      tf.tidy(() => {
        const ids = tf.tensor2d([[5, 6, 7, 8]], [1, 4], "int32");
        const logitsTrain = policy.model.forward(ids);
        assert.deepEqual(logitsTrain.shape, [1, 4, 300]);
        const total = tf.sum(tf.exp(tf.logSoftmax(logitsTrain)), -1).dataSync();
        for (const value of total) assert.ok(Math.abs(value - 1) < 1e-4);
        const { logProbs } = tokenLogProbs(policy.model, ids);
        assert.ok([...logProbs.dataSync()].every((value) => Number.isFinite(value) && value < 0));
      });
    } finally {
      policy.dispose();
    }
  });

  test("the same model without the limit does sample padded ids (the test above can fail)", () => {
    const policy = Policy.create(presetConfig("test", { vocabSize: 400 }), { seed: 3 });
    try {
      const results = policy.generate(
        [
          [5, 6],
          [7, 8],
        ],
        { maxNewTokens: 100, temperature: 1, seed: 1, stopTokenIds: [] },
      );
      assert.ok(results.some((result) => result.tokens.some((token) => token >= 300)));
    } finally {
      policy.dispose();
    }
  });
});

describe("products with large models' weights", () => {
  test("unpacked products (few rows: transposed-operand kernel; many: a transient copy) equal the plain matmul, values and gradients", () => {
    tf.tidy(() => {
      const weight = tf.randomNormal([48, 40], 0, 1, "float32", 1) as tf.Tensor2D;
      for (const rows of [3, 100]) {
        const x = tf.randomNormal([rows, 48], 0, 1, "float32", rows) as tf.Tensor2D;
        const plain = weightProduct(x, weight, false);
        const gradient = (flag: boolean, direct = false) =>
          tf.grads((a: tf.Tensor, w: tf.Tensor) =>
            tf.sum(tf.square(weightProduct(a as tf.Tensor2D, w as tf.Tensor2D, flag, direct))),
          )([x, weight]);
        const [dxPlain, dwPlain] = gradient(false);
        // direct: the transposed-operand kernel at any number of rows (a checkpointed recompute)
        for (const direct of [false, true]) {
          const unpacked = weightProduct(x, weight, true, direct);
          assert.ok(tf.max(tf.abs(tf.sub(plain, unpacked))).dataSync()[0] < 1e-4, `rows ${rows}`);
          const [dxUnpacked, dwUnpacked] = gradient(true, direct);
          assert.ok(tf.max(tf.abs(tf.sub(dxPlain, dxUnpacked))).dataSync()[0] < 1e-3);
          assert.ok(tf.max(tf.abs(tf.sub(dwPlain, dwUnpacked))).dataSync()[0] < 1e-3);
        }
      }
    });
  });
});

describe("gradient checkpointing", () => {
  test("a checkpointed backward pass holds one block's tensors at a time: its peak is well below the plain pass's", async () => {
    // 8 blocks, a 200-token row: the plain pass keeps every block's activations until its backward
    const policy = Policy.create(presetConfig("test", { vocabSize: 64, numHiddenLayers: 8 }), {
      seed: 9,
    });
    policy.enableLora({ rank: 2, alpha: 4 });
    const ids = tf.tensor2d(
      [Array.from({ length: 200 }, (_, i) => (i * 7) % 64)],
      undefined,
      "int32",
    );
    const variables = policy.model.trainableVariables();
    const peak = async (checkpointing: boolean) => {
      policy.model.gradientCheckpointing = checkpointing;
      const profile = await tf.profile(() => {
        const { value, grads } = tf.variableGrads(
          () => tf.neg(tf.mean(tokenLogProbs(policy.model, ids).logProbs)) as tf.Scalar,
          variables,
        );
        tf.dispose([value, ...Object.values(grads)]);
      });
      return profile.peakBytes;
    };
    try {
      const plain = await peak(false);
      const checkpointed = await peak(true);
      // measured: 77 MB plain, 11 MB checkpointed (118 MB when recomputed blocks stayed on the outer tape)
      assert.ok(
        checkpointed < 0.5 * plain,
        `checkpointed peak ${checkpointed} B, plain ${plain} B`,
      );
    } finally {
      ids.dispose();
      policy.dispose();
    }
  });

  test("checkpointed blocks give the same loss and gradients (LoRA adapters and full weights) as the plain pass", () => {
    for (const lora of [true, false]) {
      const policy = Policy.create(presetConfig("test", { vocabSize: 64 }), { seed: 9 });
      if (lora) {
        policy.enableLora({ rank: 2, alpha: 4 });
        // B = 0 gives A no gradient: move B first
        for (const [name, variable] of policy.model.trainableVariableMap())
          if (name.endsWith("lora_B.weight"))
            variable.assign(tf.randomNormal(variable.shape, 0, 0.1, "float32", 4));
      }
      const ids = tf.tensor2d(
        [
          [1, 2, 3, 4, 5, 6, 7],
          [7, 6, 5, 4, 3, 2, 1],
        ],
        undefined,
        "int32",
      );
      const variables = policy.model.trainableVariables();
      const gradients = (checkpointing: boolean) => {
        policy.model.gradientCheckpointing = checkpointing;
        const { value, grads } = tf.variableGrads(
          () => tf.neg(tf.mean(tokenLogProbs(policy.model, ids).logProbs)) as tf.Scalar,
          variables,
        );
        const result = {
          loss: value.dataSync()[0],
          grads: variables.map((v) => grads[v.name].dataSync() as Float32Array),
        };
        tf.dispose([value, ...Object.values(grads)]);
        return result;
      };
      const plain = gradients(false);
      const checkpointed = gradients(true);
      const tensors = tf.memory().numTensors;
      gradients(true);
      assert.equal(tf.memory().numTensors, tensors, "a checkpointed step leaves no tensor behind");
      assert.ok(Math.abs(plain.loss - checkpointed.loss) < 1e-5);
      let largest = 0;
      plain.grads.forEach((g, i) =>
        g.forEach(
          (value, j) => (largest = Math.max(largest, Math.abs(value - checkpointed.grads[i][j]))),
        ),
      );
      assert.ok(largest < 1e-4, `lora ${lora}: gradients differ by ${largest}`);
      assert.ok(
        plain.grads.some((g) => g.some((value) => value !== 0)),
        "gradients are not all zero",
      );
      ids.dispose();
      policy.dispose();
    }
  });
});
