import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, readdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Policy } from "@agentrl/policy";
import { initLora, initModel, initShape, modelInfo } from "./model.js";
import { generateCompletion } from "./generate.js";
import { defaultTokenizerCorpus } from "@agentrl/trainer";

test("model init writes a loadable test model; info describes it; generate completes a prompt", async () => {
  const directory = await mkdtemp(join(tmpdir(), "agentrl-cli-model-"));
  try {
    const result = await initModel({ preset: "test", out: directory, vocabSize: 400, seed: 1 });
    assert.ok(result.parameters > 10_000, `${result.parameters} parameters`);
    const files = await readdir(directory);
    for (const file of [
      "config.json",
      "generation_config.json",
      "model.safetensors",
      "tokenizer.json",
      "tokenizer_config.json",
    ])
      assert.ok(files.includes(file), file);

    const policy = await Policy.load(directory);
    assert.equal(policy.config.vocabSize, result.vocabSize);
    const ids = policy.tokenizer!.encode(
      '<tool_call>\n{"name": "bash_action", "arguments": {"script": "ls -la"}}\n</tool_call>',
    );
    assert.ok(ids.length > 0 && ids.every((id) => id < policy.config.vocabSize));
    assert.ok(policy.stopTokenIds.includes(policy.tokenizer!.eosTokenId));
    policy.dispose();

    const info = await modelInfo(directory);
    assert.ok(info.some((line) => line === "architecture: Qwen2ForCausalLM"));
    assert.ok(
      info.some((line) =>
        line.startsWith(`parameters: ${result.parameters.toLocaleString("en-US")}`),
      ),
    );
    assert.ok(info.some((line) => line.startsWith("dtype: F32")));

    const completion = await generateCompletion({
      model: directory,
      prompt: "List the files in /etc",
      maxNewTokens: 5,
      temperature: 0,
    });
    assert.ok(completion.tokens.length >= 1 && completion.tokens.length <= 5);
    assert.equal(typeof completion.text, "string");
    assert.ok(completion.promptTokens > 5, "the chat template wraps the prompt");
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
});

test("the default tokenizer corpus covers the chat format, tool calls, bash and SQL", () => {
  const text = defaultTokenizerCorpus().join("\n");
  for (const marker of [
    "<|im_start|>assistant",
    "<tool_call>",
    '"arguments"',
    "SELECT",
    "grep",
    "<tool_response>",
  ])
    assert.ok(text.includes(marker), marker);
  assert.ok(defaultTokenizerCorpus().length >= 300);
});

test("model init rejects an unknown preset and a missing corpus file", async () => {
  await assert.rejects(
    initModel({ preset: "huge" as never, out: "/tmp/never" }),
    /unknown preset "huge"/,
  );
  await assert.rejects(
    initModel({ preset: "test", out: "/tmp/never", corpus: ["/nonexistent/corpus.txt"] }),
    /cannot read corpus file/,
  );
});

test("model lora writes a LoRA folder on a base: it loads with the base frozen and only adapters trainable; bad targets fail", async () => {
  const directory = await mkdtemp(join(tmpdir(), "agentrl-cli-lora-"));
  try {
    await initModel({ preset: "test", out: join(directory, "base"), vocabSize: 400, seed: 1 });
    await initLora({
      base: join(directory, "base"),
      out: join(directory, "lora"),
      rank: 2,
      targets: ["q_proj", "down_proj"],
    });
    const policy = await Policy.load(join(directory, "lora"), { trainable: true });
    assert.ok(policy.model.loraEnabled);
    assert.equal(policy.model.trainableVariables().length, 2 * 2 * policy.config.numHiddenLayers);
    assert.ok(policy.tokenizer, "the tokenizer comes with the base");
    assert.deepEqual((await readdir(join(directory, "lora"))).sort(), [
      "adapter_config.json",
      "config.json",
      "generation_config.json",
      "tokenizer.json",
      "tokenizer_config.json",
    ]);
    policy.dispose();
    await Policy.releaseSharedBases();
    await assert.rejects(
      initLora({
        base: join(directory, "base"),
        out: join(directory, "bad"),
        targets: ["lm_head" as never],
      }),
      /unknown LoRA targets lm_head/,
    );
    await assert.rejects(
      initShape({ shape: "gpt-5" as never, out: join(directory, "shape") }),
      /unknown shape "gpt-5"/,
    );
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
});
