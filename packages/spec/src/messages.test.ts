import { test } from "node:test";
import assert from "node:assert/strict";
import type { AssistantMessage, ChatToolSpec, Message, Role, ToolSpec } from "./messages.js";

test("messages: a tool round trip is a Message[], every ToolSpec is a ChatToolSpec", () => {
  const tool: ToolSpec = {
    type: "function",
    function: {
      name: "bash",
      description: "Runs a command.",
      parameters: {
        type: "object",
        properties: { script: { type: "string" } },
        required: ["script"],
      },
    },
  };
  const call: AssistantMessage = {
    role: "assistant",
    content: null,
    tool_calls: [
      { id: "c1", type: "function", function: { name: "bash", arguments: '{"script":"ls"}' } },
    ],
  };
  const conversation: Message[] = [
    { role: "system", content: "You are an agent." },
    { role: "user", content: "List the files." },
    call,
    { role: "tool", tool_call_id: "c1", content: "a b", name: "bash" },
  ];
  const offered: readonly ChatToolSpec[] = [tool]; // compiles: the strict spec fits the template's
  const record: Record<string, unknown> = conversation[0]; // compiles: messages are plain JSON objects
  const roles: Role[] = conversation.map((message) => message.role);
  assert.deepEqual(roles, ["system", "user", "assistant", "tool"]);
  assert.equal(offered[0].function.name, "bash");
  assert.equal(record.role, "system");
  assert.deepEqual(JSON.parse(JSON.stringify(conversation)), conversation);
});
