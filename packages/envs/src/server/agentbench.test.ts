/**
 * AgentBench's v0.2 protocol on our controller, driven exactly as AgentBench's `TaskClient`
 * (`src/client/task.py`) does: its requests and its reading of the answers, with the request
 * and response shapes of `src/typings/*.py`. The agent sees only the v0.2 text history; its
 * moves come from the task's expert (the text it writes is parsed back into tool calls).
 * The OS part needs a Docker engine, the agentrl/os image and the AgentBench data; it skips
 * with the reason when one is missing.
 */
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import Docker from "dockerode";
import type { CurriculumTaskFamily, Message, ToolCall } from "../types.js";
import { createTaskFamily } from "../registry.js";
import { hasAgentBenchData } from "../docker/agentbench.js";
import { imageUnavailable } from "../docker/images.js";
import { Controller } from "./controller.js";
import { TaskWorker } from "./worker.js";
import { HttpEnvironmentClient } from "./client.js";
import { InProcessEnvironmentClient } from "./in-process.js";
import {
  AGENTBENCH_SAMPLE_STATUSES,
  parseTextAction,
  type ChatHistoryItem,
  type TaskOutput,
} from "./agentbench.js";

const docker = new Docker();
const osSkip = !hasAgentBenchData("os_interaction")
  ? "no AgentBench data in ../shared/data/agentbench (see docs/tasks.md)"
  : await imageUnavailable("os", docker);

// ── a TypeScript rendering of AgentBench's src/client/task.py ──────────────

/** `TaskError` of task.py. */
const TaskError = {
  START_FAILED: "START_FAILED",
  INTERACT_FAILED: "INTERACT_FAILED",
  AGENT_FAILED: "AGENT_FAILED",
  NETWORK_ERROR: "NETWORK_ERROR",
  NOT_AVAILABLE: "NOT_AVAILABLE",
} as const;

/** `WorkerStatus.ALIVE` of status.py (an IntEnum). */
const WORKER_ALIVE = 0;

class AgentContextLimitException extends Error {}

/** `AgentBenchException` raised by get_indices on a non-200 answer. */
class AgentBenchException extends Error {
  constructor(
    readonly text: string,
    readonly status: number,
  ) {
    super(`${status}: ${text}`);
  }
}

interface Agent {
  inference(history: ChatHistoryItem[]): Promise<string>;
}

interface TaskClientOutput {
  error?: string;
  info?: string;
  output?: TaskOutput | { session_id: number; output: TaskOutput };
}

/** What `requests.post(url, json=…)` / `requests.get(url, params=…)` do, as far as task.py depends on it. */
async function post(
  url: string,
  json: unknown,
): Promise<{ status: number; text: string; json(): any }> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(json),
  });
  const text = await response.text();
  return { status: response.status, text, json: () => JSON.parse(text) };
}
async function get(
  url: string,
  params: Record<string, string> = {},
): Promise<{ status: number; text: string; json(): any }> {
  const query = Object.keys(params).length ? `?${new URLSearchParams(params)}` : "";
  const response = await fetch(`${url}${query}`);
  const text = await response.text();
  return { status: response.status, text, json: () => JSON.parse(text) };
}

/** `SampleStatus(value)` of Python: raises on a value v0.2 does not know. */
function sampleStatus(value: unknown): string {
  assert.ok(
    (AGENTBENCH_SAMPLE_STATUSES as readonly unknown[]).includes(value),
    `${JSON.stringify(value)} is not a valid SampleStatus`,
  );
  return value as string;
}

class TaskClient {
  constructor(
    readonly name: string,
    readonly controllerAddress: string,
  ) {}

  async getIndices(): Promise<(number | string)[]> {
    const result = await get(this.controllerAddress + "/get_indices", { name: this.name });
    if (result.status !== 200) throw new AgentBenchException(result.text, result.status);
    return result.json();
  }

  async getConcurrency(): Promise<number> {
    const response = await get(this.controllerAddress + "/list_workers");
    if (response.status !== 200) throw new AgentBenchException(response.text, response.status);
    const result = response.json();
    if (!(this.name in result)) return 0;
    let concurrency = 0;
    for (const worker of Object.values(result[this.name].workers) as {
      status: number;
      capacity: number;
      current: number;
    }[]) {
      if (worker.status === WORKER_ALIVE) concurrency += worker.capacity - worker.current;
    }
    return concurrency;
  }

  async runSample(index: number | string, agent: Agent): Promise<TaskClientOutput> {
    const start = await post(this.controllerAddress + "/start_sample", { name: this.name, index });
    if (start.status === 406) return { error: TaskError.NOT_AVAILABLE, info: start.text };
    if (start.status !== 200) return { error: TaskError.START_FAILED, info: start.text };
    let result = start.json();
    const sid = result.session_id;
    assert.ok(
      Number.isInteger(sid),
      `session_id must be an int (pydantic CancelRequest/InteractRequest), got ${JSON.stringify(sid)}`,
    );
    let latestResult = result;
    while (sampleStatus(result.output.status) === "running") {
      let response: { status: string; content: string | null; length: number };
      try {
        response = {
          status: "normal",
          content: await agent.inference(result.output.history),
          length: 0,
        };
      } catch (error) {
        if (error instanceof AgentContextLimitException)
          response = { status: "agent context limit", content: null, length: 0 };
        else {
          await post(this.controllerAddress + "/cancel", { session_id: sid });
          return { error: TaskError.AGENT_FAILED, info: String(error), output: latestResult };
        }
      }
      const interact = await post(this.controllerAddress + "/interact", {
        session_id: sid,
        agent_response: response,
      });
      if (interact.status !== 200) {
        await post(this.controllerAddress + "/cancel", { session_id: sid });
        return { error: TaskError.INTERACT_FAILED, info: interact.text, output: latestResult };
      }
      result = interact.json();
      latestResult = result;
    }
    return { output: result.output };
  }

  async calculateOverall(
    results: TaskOutput[],
  ): Promise<{ total: number; validation: Record<string, number>; custom: any }> {
    const validation: Record<string, number> = Object.fromEntries(
      AGENTBENCH_SAMPLE_STATUSES.map((status) => [status, 0]),
    );
    for (const result of results) validation[sampleStatus(result.status)] += 1 / results.length;
    const lengths = results.map((result) => result.history?.length ?? 0);
    validation.average_history_length = lengths.reduce((a, b) => a + b, 0) / results.length;
    validation.max_history_length = Math.max(...lengths);
    validation.min_history_length = Math.min(...lengths);
    const response = await post(this.controllerAddress + "/calculate_overall", {
      name: this.name,
      results,
    });
    if (response.status !== 200) throw new Error(`TaskNetworkException: ${response.text}`);
    return { total: results.length, validation, custom: response.json() };
  }
}

// ── an agent that writes the expert's moves as text ─────────────────────────

/**
 * Sees only the v0.2 history; keeps its own function-call view of it (the first `user` item
 * as the task message, each later one as the result of its last call) for the expert, and
 * writes the expert's calls as `<tool_call>` text.
 */
function expertTextAgent(family: CurriculumTaskFamily, index: number): Agent & { turns: number } {
  const expert = family.expert(index);
  const mirror: Message[] = [];
  let lastCall: ToolCall | undefined;
  let seen = 0;
  return {
    turns: 0,
    async inference(history) {
      for (const item of history.slice(seen)) {
        if (item.role !== "user") continue;
        mirror.push(
          lastCall
            ? { role: "tool", tool_call_id: lastCall.id, content: item.content }
            : { role: "user", content: item.content },
        );
      }
      seen = history.length + 1;
      const action = await expert.act(mirror, []);
      mirror.push(action);
      lastCall = action.tool_calls?.[0];
      this.turns += 1;
      const calls = (action.tool_calls ?? []).map(
        (call) =>
          `<tool_call>${JSON.stringify({ name: call.function.name, arguments: JSON.parse(call.function.arguments) })}</tool_call>`,
      );
      return [action.content ?? "", ...calls].filter(Boolean).join("\n");
    },
  };
}

// ── the tests ───────────────────────────────────────────────────────────────

describe("AgentBench v0.2 TaskClient against the controller", () => {
  let controller: Controller;
  let kg: CurriculumTaskFamily;
  let os: CurriculumTaskFamily | undefined;
  const workers: TaskWorker[] = [];
  let base: string;
  let address: string;
  const results: TaskOutput[] = [];

  before(async () => {
    kg = await createTaskFamily("kg");
    if (!osSkip) os = await createTaskFamily("os");
    controller = new Controller({ port: 0 });
    for (const family of [kg, os]) {
      if (!family) continue;
      const worker = new TaskWorker(family, { concurrency: 4 });
      workers.push(worker);
      controller.addLocalWorker(worker);
    }
    base = await controller.listen();
    // The client takes one base address and sends no headers: the token rides in the path.
    address = `${base}/t/${controller.token}/v0.2/api`;
  });

  after(async () => {
    // No session is left open, on the controller nor on a worker.
    assert.deepEqual(controller.listSessions(), {});
    for (const worker of workers)
      assert.equal(worker.current, 0, `worker ${worker.name} has no session left`);
    await controller.close();
    for (const worker of workers) await worker.close();
    await kg.close?.();
    await os?.close?.();
  });

  test("get_indices and get_concurrency (list_workers in v0.2's shape), under the FC task names", async () => {
    const client = new TaskClient("kg-std", address);
    assert.deepEqual(await client.getIndices(), controller.getIndices("kg"));
    assert.equal(await client.getConcurrency(), 4);
    const workersBody = (await get(address + "/list_workers")).json();
    assert.ok(Array.isArray(workersBody.kg.indices));
    assert.equal(workersBody.kg.workers["0"].status, WORKER_ALIVE);
    assert.equal(await new TaskClient("nope", address).getConcurrency(), 0);
    await assert.rejects(
      new TaskClient("nope", address).getIndices(),
      (error: AgentBenchException) => error.status === 400,
    );
    const noToken = await get(`${base}/v0.2/api/get_indices`, { name: "kg" });
    assert.equal(noToken.status, 401, "the token is required on the v0.2 routes too");
    const basic = await fetch(`${base}/v0.2/api/get_indices?name=kg`, {
      headers: {
        authorization: `Basic ${Buffer.from(`agentbench:${controller.token}`).toString("base64")}`,
      },
    });
    assert.equal(
      basic.status,
      200,
      "Basic auth with the token as password (a ~/.netrc entry) works",
    );
  });

  test("a full kg sample to completed with a reward (index sent as a string)", async () => {
    const index = kg.indicesAt("test", kg.difficulties[0])[0];
    const agent = expertTextAgent(kg, index);
    const { error, output } = await new TaskClient("kg-std", address).runSample(
      String(index),
      agent,
    );
    assert.equal(error, undefined);
    const task = output as TaskOutput;
    assert.equal(task.status, "completed");
    assert.equal(task.index, index);
    assert.equal((task.result as { reward: number }).reward, 1);
    assert.ok(agent.turns >= 2, "the expert took several turns");
    assert.equal(task.history?.[0].role, "user");
    assert.match(
      task.history![0].content,
      /<tool_call>/,
      "the first item tells how to call the tools",
    );
    assert.deepEqual(
      task.history!.slice(1).map((item) => item.role),
      task.history!.slice(1).map((_, position) => (position % 2 === 0 ? "agent" : "user")),
    );
    results.push(task);
  });

  test("a full os sample to completed with a reward", { skip: osSkip }, async () => {
    const family = os!;
    const index = family.indicesAt("test", family.difficulties[0])[0];
    const { error, info, output } = await new TaskClient("os-std", address).runSample(
      index,
      expertTextAgent(family, index),
    );
    assert.equal(error, undefined, info);
    const task = output as TaskOutput;
    assert.equal(task.status, "completed");
    assert.equal((task.result as { reward: number }).reward, 1);
    results.push(task);
  });

  test("agent failures: context limit ends the sample, an agent error cancels it (the client's cancel path)", async () => {
    const index = kg.indices("test")[0];
    const limited = await new TaskClient("kg", address).runSample(index, {
      async inference() {
        throw new AgentContextLimitException();
      },
    });
    assert.equal(limited.error, undefined);
    assert.equal((limited.output as TaskOutput).status, "agent context limit");
    results.push(limited.output as TaskOutput);

    const failed = await new TaskClient("kg", address).runSample(index, {
      async inference() {
        throw new Error("the model server is down");
      },
    });
    assert.equal(failed.error, TaskError.AGENT_FAILED);
    const sid = (failed.output as { session_id: number }).session_id;
    const again = await post(address + "/cancel", { session_id: sid });
    assert.equal(again.status, 400, "the cancelled session no longer exists");
    const late = await post(address + "/interact", {
      session_id: sid,
      agent_response: { status: "normal", content: "hi", length: 0 },
    });
    assert.equal(late.status, 400);
  });

  test("cancel of a running session, and the error answers of v0.2", async () => {
    const start = await post(address + "/start_sample", {
      name: "kg",
      index: kg.indices("test")[1],
    });
    assert.equal(start.status, 200);
    const { session_id } = start.json();
    const cancelled = await post(address + "/cancel", { session_id });
    assert.deepEqual([cancelled.status, cancelled.json()], [200, { session_id }]);

    const unknownTask = await new TaskClient("no-such-task", address).runSample(0, {
      inference: async () => "",
    });
    assert.equal(unknownTask.error, TaskError.NOT_AVAILABLE, "unknown task → 406 → NOT_AVAILABLE");
    const outOfRange = await new TaskClient("kg", address).runSample(999_999, {
      inference: async () => "",
    });
    assert.equal(outOfRange.error, TaskError.START_FAILED, "index out of bounds → 400");
    assert.equal(
      (await post(address + "/start_sample", { name: "kg", index: "not-an-index" })).status,
      400,
    );
    assert.equal(
      (await post(address + "/interact", { session_id: 123_456, agent_response: { content: "x" } }))
        .status,
      400,
      "unknown session → 400",
    );
    assert.equal(
      (await post(address + "/interact", { session_id: 1, agent_response: { status: "normal" } }))
        .status,
      422,
      "NORMAL without content → 422",
    );
    assert.equal(
      (await post(address + "/calculate_overall", { name: "nope", results: [] })).status,
      400,
    );
  });

  test("calculate_overall: v0.2's validation figures and the task's own (success rate, reward, metrics)", async () => {
    const overall = await new TaskClient("kg-std", address).calculateOverall(results);
    const solved = results.filter((result) => result.status === "completed").length;
    assert.equal(overall.total, results.length);
    assert.equal(overall.custom.total, results.length);
    assert.ok(Math.abs(overall.custom.success_rate - solved / results.length) < 1e-9);
    assert.ok(Math.abs(overall.validation["agent context limit"] - 1 / results.length) < 1e-9);
    assert.equal(typeof overall.custom.metrics, "object");
  });

  test("the FC protocol takes the FC task names and string indices too", async () => {
    const client = new HttpEnvironmentClient({ url: base, token: controller.token });
    try {
      assert.deepEqual(await client.getIndices("kg-std"), controller.getIndices("kg"));
      const index = kg.indices("test")[2];
      const started = await client.startSample("kg-std", String(index) as unknown as number);
      assert.ok(started.messages.length > 0 && started.tools.length > 0);
      assert.equal(controller.listSessions()[started.sessionId].name, "kg");
      await client.cancel(started.sessionId);
    } finally {
      await client.close();
    }
    const inProcess = new InProcessEnvironmentClient([kg]);
    const { sessionId } = await inProcess.startSample("kg-std", kg.indices("test")[0]);
    assert.match(sessionId, /^kg-/, "the in-process client takes the FC names too");
    await inProcess.cancel(sessionId);
    await inProcess.close();
  });
});

describe("text actions", () => {
  test("tool_call blocks, bare JSON and fenced JSON become tool calls; prose stays content", () => {
    const block = parseTextAction(
      'Let me look.\n<tool_call>{"name": "get_relations", "arguments": {"variable": "m.01"}}</tool_call>',
    );
    assert.equal(block.content, "Let me look.");
    assert.deepEqual(
      block.tool_calls?.map((call) => [call.function.name, JSON.parse(call.function.arguments)]),
      [["get_relations", { variable: "m.01" }]],
    );
    const bare = parseTextAction('{"name": "bash", "arguments": {"script": "ls"}}');
    assert.equal(bare.tool_calls?.[0].function.name, "bash");
    const fenced = parseTextAction(
      '```json\n[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 1}}]\n```',
    );
    assert.deepEqual(
      fenced.tool_calls?.map((call) => call.function.name),
      ["a", "b"],
    );
    const broken = parseTextAction(
      '<tool_call>{"name": "bash", "arguments": {"script": </tool_call>',
    );
    assert.equal(
      broken.tool_calls?.[0].function.name,
      "bash",
      "a broken call still names its tool, so the task can say what is wrong",
    );
    assert.deepEqual(parseTextAction("I think the answer is 3."), {
      role: "assistant",
      content: "I think the answer is 3.",
    });
  });
});
