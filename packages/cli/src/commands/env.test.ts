/** The `env` commands on a small curriculum family defined here (the real families need data / Docker). */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import {
  FunctionCallSession,
  HttpEnvironmentClient,
  type AssistantMessage,
  type CurriculumTaskFamily,
  type Expert,
  type Message,
  type Split,
  type ToolReply,
  type ToolSpec,
} from "@agentrl/envs";
import {
  EnvCommandError,
  formatConversation,
  constantAnswerAgent,
  runEnvCheck,
  runEnvDemo,
  startEnvServer,
  startEnvWorker,
  type FamilyFactory,
} from "./env.js";

const TOOLS: ToolSpec[] = [
  {
    type: "function",
    function: {
      name: "add",
      description: "a + b",
      parameters: {
        type: "object",
        properties: { a: { type: "number" }, b: { type: "number" } },
        required: ["a", "b"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "submit_answer",
      description: "the answer",
      parameters: {
        type: "object",
        properties: { answer: { type: "integer" } },
        required: ["answer"],
      },
    },
  },
];

class Doubling extends FunctionCallSession {
  constructor(private readonly index: number) {
    super(
      { messages: [{ role: "user", content: `What is twice ${index}?` }], tools: TOOLS },
      { maxTurns: 4 },
    );
  }
  protected async callTool(name: string, args: Record<string, unknown>): Promise<ToolReply> {
    if (name === "add") return { content: String((args.a as number) + (args.b as number)) };
    const right = args.answer === 2 * this.index;
    return {
      content: right ? "correct" : "wrong",
      outcome: { reward: right ? 1 : 0, status: "completed" },
    };
  }
}

const call = (name: string, args: object): AssistantMessage => ({
  role: "assistant",
  content: null,
  tool_calls: [{ id: "c", type: "function", function: { name, arguments: JSON.stringify(args) } }],
});

/** Difficulty 0: indices 0-9 (answer at once); difficulty 1: 10-19 (add first). Even = train, odd = test. */
function curriculumFamily(name = "double"): CurriculumTaskFamily & { closed: number } {
  const all = Array.from({ length: 20 }, (_, i) => i);
  const family = {
    name,
    closed: 0,
    difficulties: [0, 1],
    indices: (split: Split) => all.filter((i) => (split === "train") === (i % 2 === 0)),
    indicesAt: (split: Split, difficulty: number) =>
      family.indices(split).filter((i) => (i >= 10 ? 1 : 0) === difficulty),
    async startSession(index: number) {
      return new Doubling(index);
    },
    expert(index: number): Expert {
      return {
        act(history: Message[]) {
          const turns = history.filter((m) => m.role === "assistant").length;
          if (index >= 10 && turns === 0) return call("add", { a: index, b: index });
          return call("submit_answer", { answer: 2 * index });
        },
      };
    },
    wrongExpert(index: number): Expert {
      return { act: () => call("submit_answer", { answer: 2 * index + 1 }) };
    },
    async close() {
      family.closed += 1;
    },
  };
  return family;
}

describe("env commands", () => {
  test("env check: success rate and mean turns per difficulty, and the wrong agent scores 0", async () => {
    const family = curriculumFamily();
    const lines: string[] = [];
    const report = await runEnvCheck(
      { task: "double", wrong: true, limit: 3 },
      async () => family,
      (line) => lines.push(line),
    );
    assert.deepEqual(
      report.rows.map((r) => [r.difficulty, r.episodes, r.successes, r.meanTurns]),
      [
        [0, 3, 3, 1],
        [1, 3, 3, 2],
        ["all", 6, 6, 1.5],
      ],
    );
    assert.deepEqual(report.wrong, { zero: 6, episodes: 6 });
    assert.ok(
      lines.some((line) => line.startsWith("| all | 6 | 100.0% |")),
      lines.join("\n"),
    );
    assert.equal(family.closed, 1, "the family is closed afterwards");
    const only = await runEnvCheck(
      { task: "double", difficulty: 1, split: "train", limit: 0 },
      async () => curriculumFamily(),
      () => undefined,
    );
    assert.deepEqual(
      only.rows.map((r) => r.episodes),
      [5, 5],
    );
  });

  test("env check --constant-answer: the guesser answers at once and scores where the guess is right", async () => {
    const lines: string[] = [];
    // Test indices at difficulty 0: 1, 3, 5, 7, 9; twice 3 is 6, so exactly one guess of "6" is right.
    const report = await runEnvCheck(
      { task: "double", difficulty: 0, constantAnswer: "6" },
      async () => curriculumFamily(),
      (line) => lines.push(line),
    );
    assert.deepEqual(report.constant, { answer: "6", successes: 1, episodes: 5 });
    assert.ok(
      lines.some((line) =>
        line.startsWith('constant answer "6" (no command run): 1 of 5 episodes scored 1 (20.0%)'),
      ),
      lines.join("\n"),
    );
    const none = await runEnvCheck(
      { task: "double", difficulty: 0, constantAnswer: "7" },
      async () => curriculumFamily(),
      () => undefined,
    );
    assert.equal(none.constant?.successes, 0);
  });

  test("constantAnswerAgent: an array parameter gets a list, a family without an answer tool is a clear error", () => {
    const arrayTool: ToolSpec = {
      type: "function",
      function: {
        name: "commit_final_answer",
        description: "",
        parameters: {
          type: "object",
          properties: { answers: { type: "array" } },
          required: ["answers"],
        },
      },
    };
    const message = constantAnswerAgent("3", "db").act(
      [],
      [TOOLS[0], arrayTool],
    ) as AssistantMessage;
    assert.deepEqual(JSON.parse(message.tool_calls![0].function.arguments), { answers: ["3"] });
    assert.throws(
      () => constantAnswerAgent("3", "webshop").act([], [TOOLS[0]]),
      /task webshop has no answer tool to guess with \(its tools: add\)/,
    );
  });

  test("a family that fails to start is a clear EnvCommandError", async () => {
    const failing: FamilyFactory = async () => {
      throw new Error("no data here");
    };
    await assert.rejects(
      runEnvCheck({ task: "broken" }, failing, () => undefined),
      (error: Error) =>
        error instanceof EnvCommandError &&
        /"broken" failed to start: no data here/.test(error.message),
    );
    await assert.rejects(
      startEnvServer({ tasks: ["double", "broken"], port: 0 }, async (name) =>
        name === "broken" ? failing(name, {}) : curriculumFamily(name),
      ),
      EnvCommandError,
    );
  });

  test("env demo prints the conversation readably", async () => {
    const lines: string[] = [];
    const record = await runEnvDemo(
      { task: "double", index: 12 },
      async () => curriculumFamily(),
      (line) => lines.push(line),
    );
    assert.equal(record.reward, 1);
    const text = lines.join("\n");
    assert.match(text, /── user ──\nWhat is twice 12\?/);
    assert.match(text, /→ add\(\{"a":12,"b":12\}\)/);
    assert.match(text, /── tool result ──\n24/);
    assert.match(text, /status: completed {3}reward: 1 {3}turns: 2/);
    assert.equal(formatConversation([{ role: "assistant", content: "hi" }]), "── assistant ──\nhi");
  });

  test("env serve and env worker: a controller with an in-process task and a remote worker of another", async () => {
    const server = await startEnvServer(
      { tasks: ["double"], port: 0, concurrency: 4 },
      async (name) => curriculumFamily(name),
    );
    await assert.rejects(
      startEnvWorker(
        { controller: server.url, task: "triple" },
        async (name) => curriculumFamily(name),
        () => undefined,
      ),
      /token/,
      "a worker registers only with the controller's token",
    );
    const worker = await startEnvWorker(
      { controller: server.url, task: "triple", heartbeat: 0.1, token: server.controller.token },
      async (name) => curriculumFamily(name),
      () => undefined,
    );
    const client = new HttpEnvironmentClient({ url: server.url, token: server.controller.token });
    try {
      for (const task of ["double", "triple"]) {
        const { sessionId } = await client.startSample(task, 3);
        const end = await client.interact(sessionId, call("submit_answer", { answer: 6 }));
        assert.equal(end.status, "completed", task);
        assert.equal(end.reward, 1, task);
      }
      const workers = await client.listWorkers();
      assert.deepEqual(Object.keys(workers).sort(), ["double", "triple"]);
    } finally {
      await client.close();
      await worker.close();
      await server.close();
    }
  });

  test("the agentrl binary exits 1 when a family cannot start", () => {
    const root = join(dirname(fileURLToPath(import.meta.url)), "../../../..");
    const run = spawnSync(
      process.execPath,
      [
        "--conditions=source",
        "--import",
        "tsx",
        "packages/cli/src/main.ts",
        "env",
        "check",
        "--task",
        "no-such-task",
      ],
      { cwd: root, encoding: "utf8", timeout: 60_000 },
    );
    assert.equal(run.status, 1, run.stderr);
    assert.match(run.stderr, /failed to start: unknown task family "no-such-task"/);
  });
});
