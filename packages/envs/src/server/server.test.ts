/**
 * Acceptance tests of the controller, workers and both clients: real HTTP on 127.0.0.1 with
 * free ports, fast timers, and small task families defined here.
 */
import { test, describe, after } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { FunctionCallSession, type ToolReply } from "../session.js";
import type {
  AssistantMessage,
  InteractResult,
  Split,
  TaskFamily,
  TaskSession,
  ToolSpec,
} from "../types.js";
import { Controller, type ControllerOptions } from "./controller.js";
import { TaskWorker, serveWorker, type TaskWorkerOptions, type WorkerServer } from "./worker.js";
import { HttpEnvironmentClient } from "./client.js";
import { InProcessEnvironmentClient } from "./in-process.js";
import { EnvironmentApiError } from "./protocol.js";

// ── test families ───────────────────────────────────────────────────────────

const TOOLS: ToolSpec[] = [
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
  {
    type: "function",
    function: {
      name: "wait",
      description: "Waits this many milliseconds.",
      parameters: { type: "object", properties: { ms: { type: "integer" } }, required: ["ms"] },
    },
  },
  {
    type: "function",
    function: {
      name: "submit",
      description: "Submits the answer: twice the sample index.",
      parameters: {
        type: "object",
        properties: { answer: { type: "integer" } },
        required: ["answer"],
      },
    },
  },
];

/** Sample i asks for 2·i; `add` helps, `wait` sleeps, `submit` ends the episode. */
class DoublingSession extends FunctionCallSession {
  constructor(
    private readonly index: number,
    private readonly live: Set<DoublingSession>,
  ) {
    super(
      {
        messages: [
          { role: "system", content: "Answer with submit." },
          { role: "user", content: `What is twice ${index}?` },
        ],
        tools: TOOLS,
      },
      { maxTurns: 6 },
    );
    live.add(this);
  }
  protected async callTool(name: string, args: Record<string, unknown>): Promise<ToolReply> {
    if (name === "add") return { content: String((args.a as number) + (args.b as number)) };
    if (name === "wait") {
      await sleep(args.ms as number, undefined, { ref: false });
      return { content: "waited" };
    }
    const right = args.answer === 2 * this.index;
    return {
      content: right ? "correct" : "wrong",
      outcome: { reward: right ? 1 : 0, status: "completed" },
    };
  }
  protected override async release(): Promise<void> {
    this.live.delete(this);
  }
}

/** A family of `size` samples (even indices train, odd test); `startSession(13)` throws, `startSession(11)` takes 300 ms. */
function doublingFamily(name: string, size = 20): TaskFamily & { live: Set<DoublingSession> } {
  const live = new Set<DoublingSession>();
  const all = Array.from({ length: size }, (_, i) => i);
  return {
    name,
    live,
    indices: (split: Split) => all.filter((i) => (split === "train" ? i % 2 === 0 : i % 2 === 1)),
    async startSession(index: number): Promise<TaskSession> {
      if (index === 13) throw new Error("sample 13 is broken on purpose");
      if (index === 11) await sleep(300);
      return new DoublingSession(index, live);
    },
  };
}

function call(name: string, args: unknown, id = "c1"): AssistantMessage {
  return {
    role: "assistant",
    content: null,
    tool_calls: [
      {
        id,
        type: "function",
        function: { name, arguments: typeof args === "string" ? args : JSON.stringify(args) },
      },
    ],
  };
}

// ── a controller with HTTP workers ──────────────────────────────────────────

interface Stack {
  controller: Controller;
  url: string;
  workers: WorkerServer[];
  families: ReturnType<typeof doublingFamily>[];
  client: HttpEnvironmentClient;
  close(): Promise<void>;
}

async function startStack(
  options: {
    workers?: number;
    controller?: ControllerOptions;
    worker?: TaskWorkerOptions;
    token?: string;
    name?: string;
  } = {},
): Promise<Stack> {
  const controller = new Controller({
    port: 0,
    sweepIntervalMs: 50,
    ...options.controller,
    token: options.token,
  });
  const url = await controller.listen();
  const workers: WorkerServer[] = [];
  const families: ReturnType<typeof doublingFamily>[] = [];
  for (let i = 0; i < (options.workers ?? 1); i++) {
    const family = doublingFamily(options.name ?? "double");
    families.push(family);
    workers.push(
      await serveWorker(new TaskWorker(family, { concurrency: 8, ...options.worker }), {
        controllerUrl: url,
        heartbeatIntervalMs: 100,
        token: controller.token,
        log: () => undefined,
      }),
    );
  }
  const client = new HttpEnvironmentClient({ url, token: controller.token });
  tokenOf.set(url, controller.token);
  for (const worker of workers) tokenOf.set(worker.address.replace(/\/api$/, ""), controller.token);
  return {
    controller,
    url,
    workers,
    families,
    client,
    async close() {
      await client.close();
      await Promise.all(workers.map((w) => w.close()));
      await controller.close();
    },
  };
}

/** A raw request, for bodies and headers no well-behaved client would send. */
/** The token each server (by base URL) of the running test requires: `raw` sends it unless told otherwise. */
const tokenOf = new Map<string, string>();

async function raw(
  url: string,
  path: string,
  init: { method?: string; body?: string; headers?: Record<string, string>; token?: string } = {},
): Promise<{ status: number; body: unknown }> {
  const token = init.token ?? tokenOf.get(url);
  const authorization: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  const response = await fetch(`${url}${path}`, {
    method: init.method ?? "POST",
    body: init.body,
    headers: { "content-type": "application/json", ...authorization, ...init.headers },
  });
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // keep text
  }
  return { status: response.status, body };
}

async function workerSessions(worker: WorkerServer): Promise<Record<string, number>> {
  return (await raw(worker.address.replace(/\/api$/, ""), "/api/get_sessions", { method: "GET" }))
    .body as Record<string, number>;
}

describe("controller with HTTP workers", () => {
  test("a full session: start, tool call, answer, ended", async () => {
    const stack = await startStack();
    try {
      const indices = await stack.client.getIndices("double");
      assert.equal(indices.length, 20);
      assert.deepEqual(
        await stack.client.getIndices("double", "test"),
        [1, 3, 5, 7, 9, 11, 13, 15, 17, 19],
      );
      const { sessionId, messages, tools } = await stack.client.startSample("double", 4);
      assert.match(sessionId, /^[0-9a-f]+-\d+$/);
      assert.equal(messages[1].content, "What is twice 4?");
      assert.deepEqual(
        tools.map((t) => t.function.name),
        ["add", "wait", "submit"],
      );
      assert.deepEqual(Object.keys(await stack.client.listSessions()), [sessionId]);

      const sum = await stack.client.interact(sessionId, call("add", { a: 4, b: 4 }));
      assert.equal(sum.finish, false);
      assert.equal(sum.status, "running");
      assert.deepEqual(sum.messages, [{ role: "tool", tool_call_id: "c1", content: "8" }]);

      const end = await stack.client.interact(sessionId, call("submit", { answer: 8 }, "c2"));
      assert.equal(end.finish, true);
      assert.equal(end.status, "completed");
      assert.equal(end.reward, 1);
      assert.equal(end.metrics.turns, 2);

      assert.deepEqual(await stack.client.listSessions(), {});
      assert.deepEqual(await workerSessions(stack.workers[0]), {});
      assert.equal(stack.families[0].live.size, 0, "the session released its resources");
      const late = await stack.client.interact(sessionId, call("add", { a: 1, b: 1 }));
      assert.equal(late.finish, true, "an ended session keeps answering with its end");
      assert.equal(late.status, "completed");
    } finally {
      await stack.close();
    }
  });

  test("200 sessions at once over two workers all finish and leave both workers empty", async () => {
    const stack = await startStack({ workers: 2, worker: { concurrency: 150 } });
    try {
      const indices = Array.from({ length: 200 }, (_, i) => (i % 20 === 13 ? 12 : i % 20));
      const results = await Promise.all(
        indices.map(async (index) => {
          const { sessionId } = await stack.client.startSample("double", index);
          await stack.client.interact(sessionId, call("add", { a: index, b: index }));
          return stack.client.interact(sessionId, call("submit", { answer: 2 * index }, "c2"));
        }),
      );
      assert.equal(
        results.filter((r) => r.finish && r.status === "completed" && r.reward === 1).length,
        200,
      );
      const workers = (await stack.client.listWorkers()).double as {
        workers: Record<string, { current: number }>;
      };
      assert.deepEqual(
        Object.values(workers.workers).map((w) => w.current),
        [0, 0],
      );
      for (const worker of stack.workers) assert.deepEqual(await workerSessions(worker), {});
      for (const family of stack.families) assert.equal(family.live.size, 0);
      assert.deepEqual(await stack.client.listSessions(), {});
    } finally {
      await stack.close();
    }
  });

  test("dispatch goes to the worker with the most free slots; a full controller answers 406", async () => {
    const stack = await startStack({ workers: 2, worker: { concurrency: 3 } });
    try {
      const ids = [];
      for (let i = 0; i < 4; i++) ids.push((await stack.client.startSample("double", i)).sessionId);
      const perWorker = await Promise.all(stack.workers.map(workerSessions));
      assert.deepEqual(
        perWorker.map((s) => Object.keys(s).length),
        [2, 2],
        "two on each",
      );
      for (let i = 4; i < 6; i++) ids.push((await stack.client.startSample("double", i)).sessionId);
      await assert.rejects(
        stack.client.startSample("double", 7),
        (error: EnvironmentApiError) => error.status === 406 && /free slot/.test(error.message),
      );
      await stack.client.cancel(ids[0]);
      assert.ok((await stack.client.startSample("double", 7)).sessionId, "a cancel frees a slot");
    } finally {
      await stack.close();
    }
  });

  test("a worker that stops heart-beating is dropped and its sessions end with task error", async () => {
    const stack = await startStack({ workers: 1, controller: { heartbeatTimeoutMs: 300 } });
    try {
      const { sessionId } = await stack.client.startSample("double", 2);
      stack.workers[0].stopHeartbeats();
      await sleep(600);
      const workers = (await stack.client.listWorkers()).double as {
        workers: Record<string, { status: string }>;
      };
      assert.equal(workers.workers[0].status, "dead");
      const result = await stack.client.interact(sessionId, call("add", { a: 1, b: 1 }));
      assert.equal(result.finish, true);
      assert.equal(result.status, "task error");
      assert.match(String(result.messages[0]?.content), /no heartbeat/);
      await assert.rejects(
        stack.client.startSample("double", 2),
        (error: EnvironmentApiError) => error.status === 406,
      );
      // It comes back: alive again, and the sessions it still held are cleared.
      await stack.workers[0].heartbeat();
      await sleep(100);
      assert.deepEqual(await workerSessions(stack.workers[0]), {});
      assert.ok((await stack.client.startSample("double", 2)).sessionId);
    } finally {
      await stack.close();
    }
  });

  test("an idle session expires (cancelled) and the worker frees it", async () => {
    const stack = await startStack({ controller: { idleTimeoutMs: 200 } });
    try {
      const { sessionId } = await stack.client.startSample("double", 1);
      await sleep(450);
      assert.deepEqual(await stack.client.listSessions(), {});
      const result = await stack.client.interact(sessionId, call("add", { a: 1, b: 1 }));
      assert.equal(result.finish, true);
      assert.equal(result.status, "cancelled");
      assert.match(String(result.messages[0]?.content), /expired/);
      assert.deepEqual(await workerSessions(stack.workers[0]), {});
      assert.equal(stack.families[0].live.size, 0);
    } finally {
      await stack.close();
    }
  });

  test("an interaction over the time limit ends the session with task error", async () => {
    const stack = await startStack({ worker: { interactionTimeoutMs: 200 } });
    try {
      const { sessionId } = await stack.client.startSample("double", 3);
      const began = Date.now();
      const result = await stack.client.interact(sessionId, call("wait", { ms: 5_000 }));
      assert.ok(
        Date.now() - began < 2_000,
        "answered at the time limit, not when the tool finished",
      );
      assert.equal(result.finish, true);
      assert.equal(result.status, "task error");
      assert.match(String(result.messages[0]?.content), /longer than 200 ms/);
      await sleep(50);
      assert.deepEqual(await workerSessions(stack.workers[0]), {});
      assert.equal(stack.families[0].live.size, 0, "the timed-out session was released");
      const workers = (await stack.client.listWorkers()).double as {
        workers: Record<string, { current: number }>;
      };
      assert.equal(workers.workers[0].current, 0);
    } finally {
      await stack.close();
    }
  });

  test("a session cancelled while it starts is freed on the worker once started", async () => {
    const stack = await startStack();
    try {
      const starting = stack.client.startSample("double", 11);
      await sleep(100);
      const [sessionId] = Object.keys(await stack.client.listSessions());
      assert.ok(sessionId, "listed while starting");
      await stack.client.cancel(sessionId);
      const started = await starting;
      assert.equal(started.sessionId, sessionId);
      const result = await stack.client.interact(sessionId, call("add", { a: 1, b: 1 }));
      assert.equal(result.status, "cancelled");
      await sleep(100);
      assert.deepEqual(await workerSessions(stack.workers[0]), {});
      assert.equal(stack.families[0].live.size, 0);
    } finally {
      await stack.close();
    }
  });

  test("a worker that hangs on an interaction: the controller's own limit ends the session with task error", async () => {
    const controller = new Controller({ port: 0, interactionTimeoutMs: 150, workerGraceMs: 50 });
    const url = await controller.listen();
    // A fake worker: starts sessions, then never answers an interaction.
    const hung = new Set<import("node:http").ServerResponse>();
    const fake = (await import("node:http")).createServer((request, response) => {
      request.resume();
      request.on("end", () => {
        if (request.url === "/api/start_sample")
          response.end(
            JSON.stringify({ messages: [{ role: "user", content: "go" }], tools: TOOLS }),
          );
        else if (request.url === "/api/interact") hung.add(response);
        else response.end("{}");
      });
    });
    await new Promise<void>((resolve) => fake.listen(0, "127.0.0.1", resolve));
    const port = (fake.address() as import("node:net").AddressInfo).port;
    controller.receiveHeartbeat({
      name: "hang",
      address: `http://127.0.0.1:${port}/api`,
      concurrency: 4,
      indices: [0, 1],
    });
    const client = new HttpEnvironmentClient({ url, token: controller.token });
    try {
      const { sessionId } = await client.startSample("hang", 0);
      const began = Date.now();
      const result = await client.interact(sessionId, call("add", { a: 1, b: 1 }));
      assert.ok(Date.now() - began < 3_000);
      assert.equal(result.status, "task error");
      assert.match(String(result.messages[0]?.content), /longer than 200 ms/);
      const workers = (await client.listWorkers()).hang as {
        workers: Record<string, { status: string; current: number }>;
      };
      assert.deepEqual(
        [workers.workers[0].status, workers.workers[0].current],
        ["alive", 0],
        "slow is not dead; the slot is freed",
      );
    } finally {
      for (const response of hung) response.destroy();
      await client.close();
      await controller.close();
      fake.closeAllConnections();
      fake.close();
    }
  });

  test("a family that throws in startSession gives a clear 500 and frees the slot", async () => {
    const stack = await startStack({ worker: { concurrency: 1 } });
    try {
      await assert.rejects(
        stack.client.startSample("double", 13),
        (error: EnvironmentApiError) =>
          error.status === 500 && /broken on purpose/.test(error.message),
      );
      const { sessionId } = await stack.client.startSample("double", 12);
      assert.ok(sessionId, "the only slot is free again");
    } finally {
      await stack.close();
    }
  });

  test("30+ malformed requests and tool calls each get a 4xx or an agent message; the server keeps serving", async () => {
    const stack = await startStack({ controller: { maxBodyBytes: 64 * 1024 } });
    try {
      const { url, client } = stack;
      const { sessionId } = await client.startSample("double", 6);
      const session = { session_id: sessionId };
      const turn = (message: unknown) => JSON.stringify({ messages: [message] });
      const httpCases: [
        string,
        string,
        { method?: string; body?: string; headers?: Record<string, string> },
        number,
      ][] = [
        ["bad JSON body", "/api/start_sample", { body: "{name: os" }, 400],
        ["empty body", "/api/start_sample", { body: "" }, 400],
        ["null body", "/api/start_sample", { body: "null" }, 400],
        ["array body", "/api/start_sample", { body: "[]" }, 400],
        ["missing name", "/api/start_sample", { body: JSON.stringify({ index: 1 }) }, 400],
        ["missing index", "/api/start_sample", { body: JSON.stringify({ name: "double" }) }, 400],
        // AgentBench's SampleIndex may be a string: "1" names sample 1 (issue 19); a non-numeric one names none.
        [
          "index as a non-numeric string",
          "/api/start_sample",
          { body: JSON.stringify({ name: "double", index: "one" }) },
          400,
        ],
        [
          "fractional index",
          "/api/start_sample",
          { body: JSON.stringify({ name: "double", index: 1.5 }) },
          400,
        ],
        [
          "name as number",
          "/api/start_sample",
          { body: JSON.stringify({ name: 7, index: 1 }) },
          400,
        ],
        [
          "unknown task",
          "/api/start_sample",
          { body: JSON.stringify({ name: "nope", index: 1 }) },
          404,
        ],
        [
          "index out of range",
          "/api/start_sample",
          { body: JSON.stringify({ name: "double", index: 999 }) },
          400,
        ],
        [
          "negative index",
          "/api/start_sample",
          { body: JSON.stringify({ name: "double", index: -1 }) },
          400,
        ],
        [
          "interact without session header",
          "/api/interact",
          { body: turn(call("add", { a: 1, b: 2 })) },
          400,
        ],
        [
          "interact on unknown session",
          "/api/interact",
          { body: turn(call("add", { a: 1, b: 2 })), headers: { session_id: "nope-1" } },
          404,
        ],
        ["interact body not JSON", "/api/interact", { body: "messages", headers: session }, 400],
        ["interact without messages", "/api/interact", { body: "{}", headers: session }, 400],
        [
          "interact with empty messages",
          "/api/interact",
          { body: JSON.stringify({ messages: [] }), headers: session },
          400,
        ],
        [
          "messages not an array",
          "/api/interact",
          { body: JSON.stringify({ messages: "hi" }), headers: session },
          400,
        ],
        [
          "a user message as the turn",
          "/api/interact",
          { body: turn({ role: "user", content: "hi" }), headers: session },
          400,
        ],
        [
          "tool_calls not an array",
          "/api/interact",
          { body: turn({ role: "assistant", content: "", tool_calls: "add" }), headers: session },
          400,
        ],
        [
          "tool call without a function name",
          "/api/interact",
          {
            body: turn({
              role: "assistant",
              content: null,
              tool_calls: [{ id: "x", function: { arguments: "{}" } }],
            }),
            headers: session,
          },
          400,
        ],
        [
          "content as a number",
          "/api/interact",
          { body: turn({ role: "assistant", content: 5 }), headers: session },
          400,
        ],
        ["cancel without session header", "/api/cancel", { body: "{}" }, 400],
        [
          "cancel of unknown session",
          "/api/cancel",
          { body: "{}", headers: { session_id: "nope-2" } },
          404,
        ],
        ["get_indices without name", "/api/get_indices", { method: "GET" }, 400],
        [
          "get_indices with a bad split",
          "/api/get_indices?name=double&split=dev",
          { method: "GET" },
          400,
        ],
        ["get_indices of unknown task", "/api/get_indices?name=nope", { method: "GET" }, 404],
        ["unknown route", "/api/nothing", { body: "{}" }, 404],
        ["wrong method", "/api/start_sample", { method: "GET" }, 405],
        [
          "heartbeat with missing fields",
          "/api/receive_heartbeat",
          { body: JSON.stringify({ name: "x" }) },
          400,
        ],
        [
          "heartbeat with a bad address",
          "/api/receive_heartbeat",
          {
            body: JSON.stringify({ name: "x", address: "not a url", concurrency: 1, indices: [] }),
          },
          400,
        ],
        [
          "heartbeat with other indices for a known task",
          "/api/receive_heartbeat",
          {
            body: JSON.stringify({
              name: "double",
              address: "http://127.0.0.1:9/api",
              concurrency: 1,
              indices: [1],
            }),
          },
          409,
        ],
        [
          "body over the size limit",
          "/api/start_sample",
          { body: JSON.stringify({ name: "double", index: 1, custom_task: "x".repeat(100_000) }) },
          413,
        ],
      ];
      for (const [what, path, init, status] of httpCases) {
        const response = await raw(url, path, init);
        assert.equal(
          response.status,
          status,
          `${what}: expected ${status}, got ${response.status} ${JSON.stringify(response.body)}`,
        );
        assert.ok(
          typeof (response.body as { error?: string }).error === "string" &&
            (response.body as { error: string }).error.length > 5,
          `${what}: the error says what is wrong`,
        );
      }

      // Raw garbage on the socket: 400, and the server survives.
      const port = new URL(url).port;
      const garbage = await new Promise<string>((resolve) => {
        const socket: net.Socket = net.connect(Number(port), "127.0.0.1", () =>
          socket.write("THIS IS NOT HTTP\r\n\r\n"),
        );
        let text = "";
        socket.on("data", (d: Buffer) => (text += d));
        socket.on("close", () => resolve(text));
        socket.on("error", () => resolve(text));
      });
      assert.match(garbage, /400/);

      // Agent mistakes: a message to the agent; the session goes on.
      const agentCases: [string, AssistantMessage, RegExp][] = [
        ["unknown tool", call("multiply", { a: 1 }), /Unknown tool "multiply"/],
        ["non-JSON arguments", call("add", "{a: 1,"), /not valid JSON/],
        ["missing required field", call("add", { a: 1 }), /missing the required argument "b"/],
        ["wrong argument type", call("add", { a: "1", b: 2 }), /must be of type number/],
        ["arguments not an object", call("add", "[1, 2]"), /must be a JSON object/],
        ["unknown argument", call("add", { a: 1, b: 2, c: 3 }), /has no argument "c"/],
        ["empty turn", { role: "assistant", content: "" }, /empty/],
        ["huge content", { role: "assistant", content: "x".repeat(20_000) }, /too long/],
        [
          "plain text, no tool call",
          { role: "assistant", content: "I think it is 12." },
          /No executable tool calls/,
        ],
      ];
      const cheap = new HttpEnvironmentClient({ url, token: stack.controller.token });
      let turns = 0;
      for (const [what, message, expected] of agentCases) {
        // A fresh session every few turns keeps clear of the turn limit (6).
        const { sessionId: id } = await cheap.startSample("double", 8);
        const result: InteractResult = await cheap.interact(id, message);
        turns += 1;
        assert.equal(result.status, "running", `${what}: the session goes on`);
        assert.match(String(result.messages[0]?.content), expected, what);
        await cheap.cancel(id);
      }
      assert.equal(turns, agentCases.length);
      await cheap.close();

      // Still serving: the first session plays to its end.
      const end = await client.interact(sessionId, call("submit", { answer: 12 }));
      assert.equal(end.status, "completed");
      assert.equal(end.reward, 1);
      assert.deepEqual(await workerSessions(stack.workers[0]), {});
    } finally {
      await stack.close();
    }
  });

  test("with a token, every request needs it (401 without or wrong); workers use it too", async () => {
    const stack = await startStack({ token: "s3cret" });
    try {
      const noToken = await raw(stack.url, "/api/get_indices?name=double", {
        method: "GET",
        token: "",
      });
      assert.equal(noToken.status, 401);
      const wrong = await raw(stack.url, "/api/list_workers", {
        method: "GET",
        headers: { authorization: "Bearer nope!!" },
      });
      assert.equal(wrong.status, 401);
      const start = await raw(stack.url, "/api/start_sample", {
        body: JSON.stringify({ name: "double", index: 0 }),
        token: "",
      });
      assert.equal(start.status, 401);
      const toWorker = await raw(
        stack.workers[0].address.replace(/\/api$/, ""),
        "/api/get_sessions",
        { method: "GET", token: "" },
      );
      assert.equal(toWorker.status, 401, "the worker requires the token too");
      // The worker registered with the token, so the client with the token plays a session.
      const { sessionId } = await stack.client.startSample("double", 0);
      const end = await stack.client.interact(sessionId, call("submit", { answer: 0 }));
      assert.equal(end.status, "completed");
      process.env.AGENTRL_TOKEN = "s3cret";
      const fromEnvironment = new HttpEnvironmentClient({ url: stack.url });
      delete process.env.AGENTRL_TOKEN;
      assert.equal(
        (await fromEnvironment.getIndices("double")).length,
        20,
        "the client reads AGENTRL_TOKEN",
      );
      await fromEnvironment.close();
      assert.throws(() => new Controller({ host: "0.0.0.0", port: 0 }), /token/);
      await assert.rejects(
        serveWorker(new TaskWorker(doublingFamily("x")), { host: "0.0.0.0" }),
        /token/,
      );
    } finally {
      await stack.close();
    }
  });
});

describe("controller with in-process workers", () => {
  test("a local worker serves sessions without HTTP between controller and worker", async () => {
    const family = doublingFamily("local");
    const worker = new TaskWorker(family, { concurrency: 2 });
    const controller = new Controller({ port: 0 });
    controller.addLocalWorker(worker);
    const url = await controller.listen();
    const client = new HttpEnvironmentClient({ url, token: controller.token });
    try {
      const { sessionId } = await client.startSample("local", 5);
      const end = await client.interact(sessionId, call("submit", { answer: 10 }));
      assert.equal(end.status, "completed");
      assert.equal(worker.current, 0);
      assert.equal(family.live.size, 0);
    } finally {
      await client.close();
      await controller.close();
      await worker.close();
    }
  });
});

describe("in-process client", () => {
  const family = doublingFamily("double");
  const client = new InProcessEnvironmentClient([family], {
    concurrency: 2,
    interactionTimeoutMs: 200,
    idleTimeoutMs: 200,
    sweepIntervalMs: 20,
  });
  after(() => client.close());

  test("same semantics: ids, slots (406), cancel, unknown ids (404), indices by split", async () => {
    assert.deepEqual(
      await client.getIndices("double", "train"),
      [0, 2, 4, 6, 8, 10, 12, 14, 16, 18],
    );
    assert.equal((await client.getIndices("double")).length, 20);
    const a = await client.startSample("double", 2);
    const b = await client.startSample("double", 3);
    assert.notEqual(a.sessionId, b.sessionId);
    await assert.rejects(
      client.startSample("double", 4),
      (error: EnvironmentApiError) => error.status === 406,
    );
    await assert.rejects(
      client.startSample("nope", 0),
      (error: EnvironmentApiError) => error.status === 404,
    );
    const end = await client.interact(a.sessionId, call("submit", { answer: 4 }));
    assert.equal(end.reward, 1);
    const late = await client.interact(a.sessionId, call("submit", { answer: 4 }));
    assert.deepEqual(
      [late.finish, late.status, late.reward],
      [true, "completed", 1],
      "an ended session answers with its end",
    );
    await client.cancel(b.sessionId);
    await client.cancel(b.sessionId);
    assert.equal(
      (await client.interact(b.sessionId, call("add", { a: 1, b: 1 }))).status,
      "cancelled",
    );
    await assert.rejects(
      client.cancel("double-999"),
      (error: EnvironmentApiError) => error.status === 404,
    );
    await assert.rejects(
      client.interact("double-999", call("add", { a: 1, b: 1 })),
      (error: EnvironmentApiError) => error.status === 404,
    );
    assert.deepEqual(client.listSessions(), []);
    assert.equal(family.live.size, 0);
    await assert.rejects(
      client.startSample("double", 13),
      (error: EnvironmentApiError) =>
        error.status === 500 && /broken on purpose/.test(error.message),
    );
    assert.equal(client.worker("double").current, 0);
    await assert.rejects(
      client.startSample("double", 99),
      (error: EnvironmentApiError) => error.status === 400,
    );
  });

  test("interaction time limit and idle expiry", async () => {
    const slow = await client.startSample("double", 0);
    const result = await client.interact(slow.sessionId, call("wait", { ms: 5_000 }));
    assert.equal(result.status, "task error");
    const idle = await client.startSample("double", 0);
    await sleep(350);
    const expired = await client.interact(idle.sessionId, call("add", { a: 1, b: 1 }));
    assert.equal(expired.status, "cancelled");
    assert.match(String(expired.messages[0]?.content), /expired/);
    assert.deepEqual(client.listSessions(), []);
    await sleep(20);
    assert.equal(family.live.size, 0);
  });
});
