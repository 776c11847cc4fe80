import { test } from "node:test";
import assert from "node:assert/strict";
import { Policy, Tokenizer, presetConfig, setBackend, trainByteLevelBpe } from "@agentrl/policy";
import type { Message, ToolSpec } from "@agentrl/envs";
import { expertSequence, supervisedStep } from "./sft.js";

await setBackend("cpu", { log: null });

const tools: ToolSpec[] = [
  {
    type: "function",
    function: {
      name: "add",
      description: "Adds two numbers.",
      parameters: {
        type: "object",
        properties: { a: { type: "number" }, b: { type: "number" } },
        required: ["a", "b"],
      },
    },
  },
];
const conversation: Message[] = [
  { role: "user", content: "What is 2 plus 3?" },
  {
    role: "assistant",
    content: null,
    tool_calls: [
      { id: "c1", type: "function", function: { name: "add", arguments: '{"a": 2, "b": 3}' } },
    ],
  },
  { role: "tool", tool_call_id: "c1", content: "5" },
  { role: "assistant", content: "The answer is 5." },
];

function makeTokenizer(): Tokenizer {
  const corpus = Array.from(
    { length: 50 },
    (_, i) =>
      `What is ${i} plus ${i + 1}? The answer is ${2 * i + 1}. <tool_call> {"name": "add", "arguments": {"a": ${i}}} You are Qwen, created by Alibaba Cloud. You are a helpful assistant. function tools`,
  );
  const { tokenizerJson, tokenizerConfig } = trainByteLevelBpe(corpus, { vocabSize: 512 });
  return Tokenizer.fromJson(tokenizerJson, tokenizerConfig);
}

test("an expert conversation becomes the templated sequence, with the loss on the assistant's tokens only", () => {
  const tokenizer = makeTokenizer();
  const row = expertSequence(tokenizer, "calc", conversation, tools);
  assert.equal(row.tokens.length, row.lossMask.length);
  // The template ends the last turn with "<|im_end|>\n"; the trajectory ends at the marker.
  assert.equal(
    tokenizer.decode(Array.from(row.tokens)) + "\n",
    tokenizer.applyChatTemplate(conversation, { tools }),
    "same text as the template of the whole conversation",
  );
  const trained = tokenizer.decode(Array.from(row.tokens).filter((_, i) => row.lossMask[i] === 1));
  assert.match(
    trained,
    /^<tool_call>\n\{"name": "add", "arguments": \{"a": 2, "b": 3\}\}\n<\/tool_call><\|im_end\|>The answer is 5\.<\|im_end\|>$/,
  );
});

test("an expert turn marked `untrained` (a mistake the next turn recovers from) is in the sequence but not in the loss", () => {
  const tokenizer = makeTokenizer();
  const mistaken: Message[] = [
    conversation[0],
    {
      role: "assistant",
      content: null,
      untrained: true,
      tool_calls: [
        { id: "c0", type: "function", function: { name: "add", arguments: '{"a": 2, "b": 4}' } },
      ],
    },
    { role: "tool", tool_call_id: "c0", content: "6" },
    ...conversation.slice(1),
  ];
  const row = expertSequence(tokenizer, "calc", mistaken, tools);
  const text = tokenizer.decode(Array.from(row.tokens));
  assert.ok(text.includes('{"a": 2, "b": 4}'), "the mistake is shown");
  const trainedText = (tokens: Int32Array, mask: Uint8Array) =>
    tokenizer.decode(Array.from(tokens).filter((_, i) => mask[i] === 1));
  const plain = expertSequence(tokenizer, "calc", conversation, tools);
  assert.equal(
    trainedText(row.tokens, row.lossMask),
    trainedText(plain.tokens, plain.lossMask),
    "the trained tokens are those of the conversation without the mistake",
  );
});

test("supervised steps lower the loss on expert tokens", () => {
  const tokenizer = makeTokenizer();
  const policy = Policy.create(presetConfig("test", { vocabSize: tokenizer.vocabSize }), {
    seed: 1,
  });
  const optimizer = policy.createOptimizer({ learningRate: 1e-2 });
  const rows = [expertSequence(tokenizer, "calc", conversation, [])];
  const first = supervisedStep(policy, optimizer, rows);
  let last = first;
  for (let i = 0; i < 12; i++) last = supervisedStep(policy, optimizer, rows);
  assert.ok(last.loss < first.loss * 0.7, `${first.loss} → ${last.loss}`);
  assert.equal(
    first.tokens,
    rows[0].lossMask.reduce((a, b) => a + b, 0),
  );
});
