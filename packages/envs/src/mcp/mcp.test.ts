/**
 * MCP as an environment, both ways, with the official SDK: a task family over the tools of an
 * MCP server the test starts (the prices fixture, over stdio and over streamable HTTP), with
 * a task list and a reward function; and the KG family played through its MCP wrapper by an
 * MCP client (the KG expert's moves sent as MCP tool calls), with KG's own rewards.
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { createTaskFamily } from "../registry.js";
import type { AssistantMessage, CurriculumTaskFamily, Message, TaskFamily } from "../types.js";
import {
  createMcpTaskFamily,
  createTaskMcpServer,
  mcpResultText,
  type McpServerSpec,
} from "./index.js";

const FIXTURE = fileURLToPath(new URL("./fixtures/prices-server.ts", import.meta.url));
const TSX = fileURLToPath(
  new URL("../../../../node_modules/tsx/dist/esm/index.mjs", import.meta.url),
);

const TASKS = [
  { prompt: "What do three apples cost?", answer: 6 },
  { prompt: "What do two melons cost?", answer: 10 },
];

function pricesFamily(server: McpServerSpec, connectionPerEpisode = false): TaskFamily {
  return createMcpTaskFamily({
    name: "prices",
    server,
    tasks: TASKS,
    reward: (task, { answer, calls }) =>
      answer.trim() === String(task.answer) &&
      calls.some((call) => call.name === "price" && !call.isError)
        ? 1
        : 0,
    maxTurns: 6,
    connectionPerEpisode,
  });
}

const call = (name: string, args: Record<string, unknown>): AssistantMessage => ({
  role: "assistant",
  content: null,
  tool_calls: [
    { id: `c_${name}`, type: "function", function: { name, arguments: JSON.stringify(args) } },
  ],
});

/** Plays task `index` with scripted moves; returns the end and the transcript. */
async function playPrices(
  family: TaskFamily,
  index: number,
  item: string,
  count: number,
  answer: (product: string) => string,
) {
  const session = await family.startSession(index);
  assert.deepEqual(session.start.tools.map((tool) => tool.function.name).sort(), [
    "multiply",
    "price",
  ]);
  assert.deepEqual(
    session.start.tools.find((tool) => tool.function.name === "price")?.function.parameters
      .required,
    ["item"],
  );
  const transcript: Message[] = [...session.start.messages];
  const unknown = await session.interact(call("price", { item: "durian" }));
  assert.match(String(unknown.messages[0].content), /^Error: no item durian/);
  const invalid = await session.interact(call("price", {}));
  assert.match(String(invalid.messages[0].content), /missing the required argument "item"/);
  const price = await session.interact(call("price", { item }));
  const product = await session.interact(
    call("multiply", { a: Number(price.messages[0].content), b: count }),
  );
  const end = await session.interact({
    role: "assistant",
    content: answer(String(product.messages[0].content)),
  });
  transcript.push(...price.messages, ...product.messages, ...end.messages);
  return { end, transcript };
}

describe("MCP tools as a task family", () => {
  test("over stdio: the server's tools, the user's tasks and reward function", async () => {
    const family = pricesFamily({ command: process.execPath, args: ["--import", TSX, FIXTURE] });
    try {
      assert.deepEqual(family.indices("train"), [0, 1]);
      const right = await playPrices(family, 0, "apple", 3, (product) => product);
      assert.equal(right.end.finish, true);
      assert.equal(right.end.status, "completed");
      assert.equal(right.end.reward, 1);
      const wrong = await playPrices(family, 1, "melon", 2, () => "11");
      assert.equal(wrong.end.reward, 0);
      assert.equal(wrong.end.status, "completed");
    } finally {
      await family.close?.();
    }
  });

  test("over streamable HTTP, a connection per episode; the turn limit ends an episode", async () => {
    const child = spawn(process.execPath, ["--import", TSX, FIXTURE, "--http", "0"], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    try {
      const port = await new Promise<number>((resolve, reject) => {
        child.stdout.on("data", (data: Buffer) => {
          const match = /listening (\d+)/.exec(data.toString());
          if (match) resolve(Number(match[1]));
        });
        child.once("exit", (code) => reject(new Error(`the fixture server exited (${code})`)));
      });
      const family = pricesFamily({ url: `http://127.0.0.1:${port}/mcp` }, true);
      const played = await playPrices(family, 1, "melon", 2, (product) => product);
      assert.equal(played.end.reward, 1);
      const session = await family.startSession(0);
      let last;
      for (let turn = 0; turn < 6; turn++)
        last = await session.interact(call("price", { item: "pear" }));
      assert.equal(last?.status, "task limit reached");
      assert.equal(last?.reward, 0);
    } finally {
      child.kill();
    }
  });

  test("an unreachable server is an environment error", async () => {
    const family = pricesFamily({ url: "http://127.0.0.1:9/mcp" });
    await assert.rejects(family.startSession(0), /could not connect to the MCP server/);
  });
});

describe("a project family as an MCP server", () => {
  test("an MCP client plays KG through the wrapper: the expert's moves earn 1, the wrong expert's 0", async () => {
    const family = (await createTaskFamily("kg", { seed: 0 })) as CurriculumTaskFamily;
    const server = await createTaskMcpServer(family);
    const [clientTransport, serverTransport] = InMemoryTransport.createLinkedPair();
    await server.connect(serverTransport);
    const client = new Client({ name: "agent", version: "1.0.0" });
    await client.connect(clientTransport);
    try {
      const listed = await client.listTools();
      const names = listed.tools.map((tool) => tool.name);
      assert.ok(
        names.includes("start_task") &&
          names.includes("submit_answer") &&
          names.includes("get_relations"),
        names.join(", "),
      );
      assert.ok(
        (
          listed.tools.find((tool) => tool.name === "get_relations")?.inputSchema.required ?? []
        ).includes("session"),
      );
      const rewards: number[] = [];
      for (const [index, expert] of [
        [family.indicesAt("train", 1)[0], family.expert(family.indicesAt("train", 1)[0])],
        [family.indicesAt("train", 1)[1], family.wrongExpert!(family.indicesAt("train", 1)[1])],
      ] as const) {
        const started = await client.callTool({ name: "start_task", arguments: { index } });
        const { session, messages } = started.structuredContent as {
          session: string;
          messages: Message[];
        };
        const history: Message[] = [...messages];
        const tools = (await family.startSession(index)).start.tools;
        let reward: number | undefined;
        for (let turn = 0; turn < 12 && reward === undefined; turn++) {
          const move = await expert.act(history, tools);
          history.push(move);
          const calls = move.tool_calls ?? [];
          const result =
            calls.length > 0
              ? await client.callTool({
                  name: calls[0].function.name,
                  arguments: { session, ...JSON.parse(calls[0].function.arguments) },
                })
              : await client.callTool({
                  name: "submit_answer",
                  arguments: { session, answer: move.content ?? "" },
                });
          const end = result.structuredContent as { finished: boolean; reward: number };
          history.push(
            calls.length > 0
              ? { role: "tool", tool_call_id: calls[0].id, content: mcpResultText(result) }
              : { role: "user", content: mcpResultText(result) },
          );
          if (end.finished) reward = end.reward;
        }
        rewards.push(reward ?? Number.NaN);
      }
      assert.deepEqual(rewards, [1, 0]);
      const stale = await client.callTool({
        name: "get_relations",
        arguments: { session: "nope", variable: "x" },
      });
      assert.equal(stale.isError, true);
      assert.match(mcpResultText(stale), /no open episode/);
    } finally {
      await client.close();
      await family.close?.();
    }
  });
});
