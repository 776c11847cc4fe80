import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { formatToolCalls, parseToolCalls } from "./toolcall.js";

describe("parseToolCalls", () => {
  test("parses one Qwen/Hermes call and keeps the text around it as content", () => {
    const parsed = parseToolCalls(
      'Let me look.\n<tool_call>\n{"name": "get_relations", "arguments": {"variable": "#0"}}\n</tool_call>',
    );
    assert.equal(parsed.formatError, undefined);
    assert.equal(parsed.toolCalls, 1);
    assert.equal(parsed.message.content, "Let me look.");
    assert.deepEqual(parsed.message.tool_calls, [
      {
        id: "call_0",
        type: "function",
        function: { name: "get_relations", arguments: '{"variable":"#0"}' },
      },
    ]);
  });

  test("parses several calls, string arguments and missing arguments; content null when only calls", () => {
    const text =
      formatToolCalls([{ name: "a", arguments: { x: 1 } }]) +
      '\n<tool_call>{"name": "b", "arguments": "{\\"y\\": 2}"}</tool_call><tool_call>{"name":"c"}</tool_call>';
    const parsed = parseToolCalls(text, { idPrefix: "t3" });
    assert.equal(parsed.toolCalls, 3);
    assert.equal(parsed.message.content, null);
    assert.deepEqual(
      parsed.message.tool_calls?.map((call) => [
        call.id,
        call.function.name,
        call.function.arguments,
      ]),
      [
        ["t3_0", "a", '{"x":1}'],
        ["t3_1", "b", '{"y": 2}'],
        ["t3_2", "c", "{}"],
      ],
    );
  });

  test("plain text is a content-only message without a format error", () => {
    const parsed = parseToolCalls("The answer is 42.");
    assert.deepEqual(parsed.message, { role: "assistant", content: "The answer is 42." });
    assert.equal(parsed.formatError, undefined);
  });

  for (const [name, text, expected] of [
    ["bad JSON", '<tool_call>{"name": "a", "arguments": {</tool_call>', /not valid JSON/],
    ["no name", '<tool_call>{"arguments": {}}</tool_call>', /must be/],
    [
      "arguments not an object",
      '<tool_call>{"name": "a", "arguments": [1]}</tool_call>',
      /must be/,
    ],
    ["unclosed block", '<tool_call>{"name": "a", "arguments": {}}', /not closed/],
    ["stray closing tag", "hello</tool_call>", /without an opening/],
  ] as const) {
    test(`a malformed call (${name}) becomes content only, with a format error`, () => {
      const parsed = parseToolCalls(text);
      assert.match(parsed.formatError ?? "", expected);
      assert.equal(parsed.message.tool_calls, undefined);
      assert.equal(parsed.message.content, text.trim());
      assert.equal(parsed.toolCalls, 0);
    });
  }
});
