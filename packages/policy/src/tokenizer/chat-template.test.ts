import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import {
  QWEN25_CHAT_TEMPLATE,
  COMPACT_CHAT_TEMPLATE,
  ChatTemplateError,
  prepareMessagesForTemplate,
  qwen25AssistantText,
  toJsonLikePython,
  renderChatTemplate,
  type ChatMessage,
  type ChatToolSpec,
} from "./chat-template.js";

const TOOLS: ChatToolSpec[] = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Get the current weather in a city.",
      parameters: {
        type: "object",
        properties: { city: { type: "string", description: "City name" } },
        required: ["city"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "convert_units",
      description: "Convert a temperature.",
      parameters: {
        type: "object",
        properties: { value: { type: "number" }, to: { type: "string", enum: ["C", "F"] } },
        required: ["value", "to"],
      },
    },
  },
];

const CONVERSATION: ChatMessage[] = [
  { role: "system", content: "You are a weather assistant." },
  { role: "user", content: "What's the weather in Paris, in Fahrenheit?" },
  {
    role: "assistant",
    content: null,
    tool_calls: [
      {
        id: "call_1",
        type: "function",
        function: { name: "get_weather", arguments: '{"city":"Paris"}' },
      },
    ],
  },
  { role: "tool", tool_call_id: "call_1", content: '{"temperature_c": 18}' },
  { role: "assistant", content: "It is 64.4 °F in Paris." },
];

/** Written by hand from the Qwen2.5 template's rules. */
const EXPECTED_WITH_TOOLS =
  "<|im_start|>system\n" +
  "You are a weather assistant.\n" +
  "\n" +
  "# Tools\n" +
  "\n" +
  "You may call one or more functions to assist with the user query.\n" +
  "\n" +
  "You are provided with function signatures within <tools></tools> XML tags:\n" +
  "<tools>\n" +
  '{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}}, "required": ["city"]}}}\n' +
  '{"type": "function", "function": {"name": "convert_units", "description": "Convert a temperature.", "parameters": {"type": "object", "properties": {"value": {"type": "number"}, "to": {"type": "string", "enum": ["C", "F"]}}, "required": ["value", "to"]}}}\n' +
  "</tools>\n" +
  "\n" +
  "For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" +
  "<tool_call>\n" +
  '{"name": <function-name>, "arguments": <args-json-object>}\n' +
  "</tool_call><|im_end|>\n" +
  "<|im_start|>user\n" +
  "What's the weather in Paris, in Fahrenheit?<|im_end|>\n" +
  "<|im_start|>assistant\n" +
  "<tool_call>\n" +
  '{"name": "get_weather", "arguments": {"city": "Paris"}}\n' +
  "</tool_call><|im_end|>\n" +
  "<|im_start|>user\n" +
  "<tool_response>\n" +
  '{"temperature_c": 18}\n' +
  "</tool_response><|im_end|>\n" +
  "<|im_start|>assistant\n" +
  "It is 64.4 °F in Paris.<|im_end|>\n";

/** Renders with Qwen2.5's template; `tools` default {@link TOOLS}, `null` for none. */
const render = (
  messages: ChatMessage[],
  addGenerationPrompt = false,
  tools: ChatToolSpec[] | null = TOOLS,
) =>
  renderChatTemplate(QWEN25_CHAT_TEMPLATE, messages, {
    tools: tools ?? undefined,
    addGenerationPrompt,
  });

describe("Qwen2.5 chat template", () => {
  test("renders system + tools + tool call + tool response + answer exactly", () => {
    assert.equal(render(CONVERSATION), EXPECTED_WITH_TOOLS);
  });

  test("without tools and without a system message it uses the default system prompt", () => {
    const text = render([{ role: "user", content: "Hi" }], true, null);
    assert.equal(
      text,
      "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n" +
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    );
    assert.equal(
      renderChatTemplate(QWEN25_CHAT_TEMPLATE, [{ role: "user", content: "Hi" }], { tools: [] }),
      text.slice(0, -"<|im_start|>assistant\n".length),
    );
  });

  test("content before tool calls, two calls in one turn, consecutive tool results share one user turn", () => {
    const messages: ChatMessage[] = [
      { role: "user", content: "Compare." },
      {
        role: "assistant",
        content: "Checking both.",
        tool_calls: [
          {
            id: "a",
            type: "function",
            function: { name: "get_weather", arguments: '{"city": "Oslo"}' },
          },
          {
            id: "b",
            type: "function",
            function: { name: "get_weather", arguments: '{"city": "Rome"}' },
          },
        ],
      },
      { role: "tool", tool_call_id: "a", content: "5" },
      { role: "tool", tool_call_id: "b", content: "25" },
    ];
    const text = render(messages, true, null);
    assert.ok(
      text.endsWith(
        "<|im_start|>assistant\nChecking both.\n" +
          '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>\n' +
          '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call><|im_end|>\n' +
          "<|im_start|>user\n<tool_response>\n5\n</tool_response>\n<tool_response>\n25\n</tool_response><|im_end|>\n" +
          "<|im_start|>assistant\n",
      ),
      text,
    );
  });

  test("JSON-string arguments are parsed to objects; invalid JSON stays a (quoted) string", () => {
    const prepared = prepareMessagesForTemplate([
      {
        role: "assistant",
        content: null,
        tool_calls: [
          {
            id: "1",
            type: "function",
            function: { name: "f", arguments: '{"n": [1, 2], "s": "é"}' },
          },
          { id: "2", type: "function", function: { name: "g", arguments: "not json" } },
        ],
      },
    ]);
    const calls = prepared[0].tool_calls as { function: { arguments: unknown } }[];
    assert.deepEqual(calls[0].function.arguments, { n: [1, 2], s: "é" });
    assert.equal(calls[1].function.arguments, "not json");
    assert.equal(prepared[0].content, "");
    const text = render(
      [{ role: "user", content: "x" }, prepared[0] as unknown as ChatMessage],
      false,
      null,
    );
    assert.ok(text.includes('{"name": "f", "arguments": {"n": [1, 2], "s": "é"}}'), text);
    assert.ok(text.includes('{"name": "g", "arguments": "not json"}'), text);
  });

  test("toJsonLikePython writes json.dumps' separators", () => {
    assert.equal(
      toJsonLikePython({ a: [1, "x", null, true], b: { c: 1.5 } }),
      '{"a": [1, "x", null, true], "b": {"c": 1.5}}',
    );
    assert.equal(toJsonLikePython([]), "[]");
    assert.equal(toJsonLikePython({}), "{}");
  });

  test("a template that does not parse raises ChatTemplateError", () => {
    assert.throws(
      () => renderChatTemplate("{% if %}", [{ role: "user", content: "x" }]),
      ChatTemplateError,
    );
  });
});

describe("compact chat template", () => {
  test("lists each tool as one signature line and renders the turns exactly as Qwen2.5 does", () => {
    const compact = renderChatTemplate(COMPACT_CHAT_TEMPLATE, CONVERSATION, { tools: TOOLS });
    const header =
      "<|im_start|>system\n" +
      "You are a weather assistant.\n" +
      "\n" +
      "# Tools\n" +
      "\n" +
      "get_weather(city)\n" +
      "convert_units(value, to)\n" +
      "\n" +
      "Call a tool with <tool_call>\n" +
      '{"name": <function-name>, "arguments": <args-json-object>}\n' +
      "</tool_call><|im_end|>\n";
    assert.ok(compact.startsWith(header), compact);
    // After the system turn, both templates render every message identically.
    const qwenTurns = EXPECTED_WITH_TOOLS.slice(EXPECTED_WITH_TOOLS.indexOf("<|im_start|>user"));
    assert.equal(compact.slice(header.length), qwenTurns);
  });

  test("without tools it is Qwen2.5's rendering", () => {
    const messages = CONVERSATION.filter(
      (message) => message.role !== "tool" && !(message.role === "assistant" && message.tool_calls),
    );
    assert.equal(
      renderChatTemplate(COMPACT_CHAT_TEMPLATE, messages, { addGenerationPrompt: true }),
      render(messages, true, null),
    );
  });
});

describe("prefix stability (what the rollout engine relies on)", () => {
  const generatedText = qwen25AssistantText;

  const LONG_CONVERSATION: ChatMessage[] = [
    ...CONVERSATION,
    { role: "user", content: "And Rome and Oslo?" },
    {
      role: "assistant",
      content: "Let me check.",
      tool_calls: [
        {
          id: "c",
          type: "function",
          function: { name: "get_weather", arguments: '{"city":"Rome"}' },
        },
        {
          id: "d",
          type: "function",
          function: { name: "get_weather", arguments: '{"city":"Oslo","days":[1,2]}' },
        },
      ],
    },
    { role: "tool", tool_call_id: "c", content: "22" },
    { role: "tool", tool_call_id: "d", content: "3" },
    { role: "assistant", content: "Rome 71.6 °F, Oslo 37.4 °F." },
  ];

  test("prompt + generated + <|im_end|>\\n is a prefix of the rendering with the assistant message", () => {
    let checked = 0;
    for (let k = 0; k + 1 < LONG_CONVERSATION.length; k++) {
      const next = LONG_CONVERSATION[k + 1];
      if (next.role !== "assistant") continue;
      const prompt = render(LONG_CONVERSATION.slice(0, k + 1), true);
      const withAnswer = render(LONG_CONVERSATION.slice(0, k + 2));
      const continued = prompt + generatedText(next) + "<|im_end|>\n";
      assert.ok(
        withAnswer.startsWith(continued),
        `turn ${k + 1}:\n${continued}\n---\n${withAnswer}`,
      );
      checked++;
    }
    assert.equal(checked, 4);
  });

  test("the rendering up to an assistant turn is a prefix of every later rendering (env replies are appended)", () => {
    for (let k = 0; k < LONG_CONVERSATION.length; k++) {
      if (LONG_CONVERSATION[k].role !== "assistant") continue;
      const upToAssistant = render(LONG_CONVERSATION.slice(0, k + 1));
      for (let later = k + 1; later <= LONG_CONVERSATION.length; later++) {
        // Later prefixes that end inside a run of tool messages are not meaningful (see below).
        if (later < LONG_CONVERSATION.length && LONG_CONVERSATION[later]?.role === "tool") continue;
        assert.ok(
          render(LONG_CONVERSATION.slice(0, later), true).startsWith(upToAssistant),
          `k=${k} later=${later}`,
        );
      }
    }
  });

  test("documented exceptions: a split run of tool messages, non-canonical generated JSON", () => {
    // messages[0..7] ends with the first of two tool results: its user turn is closed early.
    const split = render(LONG_CONVERSATION.slice(0, 8), false);
    const whole = render(LONG_CONVERSATION.slice(0, 9), false);
    assert.ok(!whole.startsWith(split));
    // A model that writes compact JSON: the template re-writes it with ", " and ": ".
    const prompt = render(CONVERSATION.slice(0, 2), true);
    const compact =
      '<tool_call>\n{"name":"get_weather","arguments":{"city":"Paris"}}\n</tool_call><|im_end|>\n';
    assert.ok(!render(CONVERSATION.slice(0, 3)).startsWith(prompt + compact));
  });
});

describe("agreement with Python Jinja2 (as transformers renders)", () => {
  const python = spawnSync("python3", ["-c", "import jinja2"], { encoding: "utf8" });
  const hasJinja2 = python.status === 0;
  test(
    "renders byte-identical output",
    { skip: hasJinja2 ? false : "python3 with jinja2 is not installed" },
    () => {
      // transformers: Environment(trim_blocks=True, lstrip_blocks=True), tojson = json.dumps(ensure_ascii=False).
      const script = `
import json, sys
import jinja2
data = json.load(sys.stdin)
env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
env.filters["tojson"] = lambda x, indent=None, separators=None, sort_keys=False: json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)
out = []
for case in data["cases"]:
    kwargs = {"messages": case["messages"], "add_generation_prompt": case["add_generation_prompt"]}
    if case["tools"]:
        kwargs["tools"] = case["tools"]
    out.append(env.from_string(data["template"]).render(**kwargs))
sys.stdout.write(json.dumps(out))
`;
      const cases = [
        { messages: CONVERSATION, tools: TOOLS, add_generation_prompt: false },
        { messages: CONVERSATION.slice(0, 4), tools: TOOLS, add_generation_prompt: true },
        { messages: CONVERSATION.slice(1, 2), tools: null, add_generation_prompt: true },
        { messages: CONVERSATION.slice(1), tools: null, add_generation_prompt: false },
      ];
      const input = JSON.stringify({
        template: QWEN25_CHAT_TEMPLATE,
        cases: cases.map((c) => ({ ...c, messages: prepareMessagesForTemplate(c.messages) })),
      });
      const result = spawnSync("python3", ["-c", script], { input, encoding: "utf8" });
      assert.equal(result.status, 0, result.stderr);
      const expected = JSON.parse(result.stdout) as string[];
      cases.forEach((c, index) => {
        assert.equal(
          render(c.messages, c.add_generation_prompt, c.tools),
          expected[index],
          `case ${index}`,
        );
      });
      assert.equal(expected[0], EXPECTED_WITH_TOOLS);
    },
  );
});

test("the compact template is, character for character, the one in the shipped models/warmstart (models carry their template; evaluation memos hash it)", async (t) => {
  const { existsSync, readFileSync } = await import("node:fs");
  const file = new URL("../../../../models/warmstart/tokenizer_config.json", import.meta.url);
  if (!existsSync(file)) return t.skip("no models/warmstart in this checkout");
  const { chat_template: shipped } = JSON.parse(readFileSync(file, "utf8")) as {
    chat_template: string;
  };
  const { COMPACT_CHAT_TEMPLATE } = await import("./chat-template.js");
  assert.equal(shipped, COMPACT_CHAT_TEMPLATE);
});
