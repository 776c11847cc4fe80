import { test, before } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { initBackend } from "./backend.js";
import { MODEL_SHAPES, parameterCount, presetConfig, toHfConfig } from "./config.js";
import { Policy } from "./policy.js";
import { hfWeightShapes, writeRandomSafetensors } from "./random-weights.js";
import { SafetensorsReader } from "./safetensors.js";
import { Tokenizer } from "./tokenizer/tokenizer.js";
import { trainByteLevelBpe } from "./tokenizer/train-bpe.js";
import { syntheticCorpus } from "./tokenizer/test-corpus.js";

before(async () => {
  await initBackend({ log: null });
});

test("random BF16 weights of a config's shape load as a model, with the fresh model's statistics", async () => {
  const directory = await mkdtemp(join(tmpdir(), "agentrl-random-"));
  try {
    const config = presetConfig("test", { vocabSize: 300 });
    await writeFile(join(directory, "config.json"), JSON.stringify(toHfConfig(config)));
    await writeRandomSafetensors(directory, config, { seed: 5 });
    const reader = await SafetensorsReader.open(directory);
    const embedding = reader.read("model.embed_tokens.weight").data;
    const std = Math.sqrt(
      embedding.reduce((sum, value) => sum + value * value, 0) / embedding.length,
    );
    assert.ok(Math.abs(std - 0.02) < 0.002, `embedding σ ${std}`);
    assert.ok(reader.read("model.norm.weight").data.every((value) => value === 1));
    const policy = await Policy.load(directory);
    assert.equal(policy.model.parameterCount, parameterCount(config));
    const sequence = policy.model.createSequence();
    assert.ok(policy.model.prefill(sequence, [1, 2, 3]).every((value) => Number.isFinite(value)));
    sequence.dispose();
    policy.dispose();
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
});

test("real models' shapes give their parameter counts (Qwen2.5-0.5B 494,032,768; SmolLM2-135M 134,515,008)", () => {
  assert.equal(parameterCount(MODEL_SHAPES["qwen2.5-0.5b"].config), 494_032_768);
  assert.equal(parameterCount(MODEL_SHAPES["smollm2-135m"].config), 134_515_008);
  const shapes = hfWeightShapes(MODEL_SHAPES["qwen2.5-0.5b"].config);
  assert.deepEqual(shapes.get("model.layers.0.self_attn.k_proj.weight"), [128, 896]);
  assert.deepEqual(shapes.get("model.layers.0.mlp.down_proj.weight"), [896, 4864]);
});

test("a tokenizer filled with synthetic merges has exactly the asked id count and still round-trips text", () => {
  const files = trainByteLevelBpe(syntheticCorpus(10, 1000), {
    vocabSize: 400,
    fillToVocabSize: 5000,
  });
  const tokenizer = Tokenizer.fromJson(files.tokenizerJson, files.tokenizerConfig);
  assert.equal(tokenizer.vocabSize, 5000);
  const text = "Which tools do you have? <|im_end|> naïve café 123";
  assert.equal(tokenizer.decode(tokenizer.encode(text)), text);
});
