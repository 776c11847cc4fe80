/**
 * `agentrl serve` end to end, across packages: a tiny model (the `test` preset, a BPE
 * tokenizer trained here) is fine-tuned for a few dozen supervised steps on ONE fixed
 * tool-call answer, saved, and served; then
 * - a plain fetch client sends OpenAI-format tool-calling requests (non-streaming and
 *   streaming), bad requests, wrong keys, and 20 concurrent requests (which must share
 *   decode steps: mean batch size > 1);
 * - the CLI serves the same directory as a child process (start, answer, SIGTERM, exit 0);
 * - cross-policy sampling goes through it: a PolicyPool whose `external` member is an
 *   ExternalChatModel pointed at the server (p = 0.5) plays episodes of a small task
 *   family, and the external turns appear with loss mask 0 and policy id `external`.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  FunctionCallSession,
  InProcessEnvironmentClient,
  type AssistantMessage,
  type Message,
  type ToolReply,
  type ToolSpec,
  type TaskFamily,
} from "@agentrl/envs";
import { Policy, Tokenizer, initBackend, presetConfig, trainByteLevelBpe } from "@agentrl/policy";
import {
  ExternalChatModel,
  PolicyPool,
  RolloutScheduler,
  TrajectoryBuffer,
  createPolicyEngine,
  formatToolCalls,
  runEpisode,
  POLICY_CODES,
  type Trajectory,
} from "@agentrl/rollout";
import { expertSequence, supervisedStep } from "@agentrl/trainer";
import { startModelServer, type RunningModelServer } from "@agentrl/rollout";
import { startServeProcess } from "./serve-process.js";

const API_KEY = "serve-test-key";
const MODEL_NAME = "echo-tiny";

const ECHO_TOOL: ToolSpec = {
  type: "function",
  function: {
    name: "echo",
    description: "Repeats the text.",
    parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  },
};
const OPENING: Message[] = [
  { role: "system", content: "You call tools." },
  { role: "user", content: "Echo hello twice." },
];
/** The one answer the model learns, for every turn. */
const CALL_TEXT = formatToolCalls([{ name: "echo", arguments: { text: "hello" } }]);
const CALL: AssistantMessage = {
  role: "assistant",
  content: null,
  tool_calls: [
    { id: "call_0", type: "function", function: { name: "echo", arguments: '{"text": "hello"}' } },
  ],
};

/** The task: call `echo` twice (any arguments); done with reward 1 after the second call. */
class EchoTwiceSession extends FunctionCallSession {
  constructor() {
    super({ messages: OPENING, tools: [ECHO_TOOL] }, { maxTurns: 4 });
  }
  protected override async callTool(
    _name: string,
    args: Record<string, unknown>,
  ): Promise<ToolReply> {
    return {
      content: `echo: ${String(args.text)}`,
      ...(this.turns >= 2 ? { outcome: { reward: 1, status: "completed" } } : {}),
    };
  }
}
const echoTwiceFamily: TaskFamily = {
  name: "echo-twice",
  indices: (split) => (split === "train" ? [0, 1, 2, 3] : [4]),
  startSession: async () => new EchoTwiceSession(),
};

/** The expert conversation: opening, call, tool reply, call. */
function expertConversation(): Message[] {
  return [
    ...OPENING,
    CALL,
    { role: "tool", tool_call_id: "call_0", content: "echo: hello" },
    { ...CALL, tool_calls: [{ ...CALL.tool_calls![0], id: "call_1" }] },
  ];
}

function makeTokenizer(): Tokenizer {
  const seed = trainByteLevelBpe(["hello world"], { vocabSize: 300, minFrequency: 1 });
  const renderer = new Tokenizer(seed.tokenizerJson, seed.tokenizerConfig);
  const rendered = renderer.applyChatTemplate(expertConversation(), { tools: [ECHO_TOOL] });
  const corpus = Array.from(
    { length: 20 },
    (_, i) => `${rendered}\n${CALL_TEXT} number ${i} the weather city list of files`,
  );
  const trained = trainByteLevelBpe(corpus, { vocabSize: 512 });
  return new Tokenizer(trained.tokenizerJson, trained.tokenizerConfig);
}

/** A `test`-preset policy fine-tuned until it writes CALL_TEXT greedily (≤ 80 steps). */
async function makeTrainedPolicy(): Promise<{ policy: Policy; steps: number; loss: number }> {
  await initBackend({ log: null });
  const tokenizer = makeTokenizer();
  const policy = Policy.create(presetConfig("test", { vocabSize: tokenizer.vocabSize }), {
    tokenizer,
    seed: 7,
  });
  const optimizer = policy.createOptimizer({ learningRate: 1e-2 });
  const row = expertSequence(tokenizer, "echo-twice", expertConversation(), [ECHO_TOOL]);
  let loss = Infinity;
  let steps = 0;
  while (steps < 80 && loss > 0.02) {
    loss = supervisedStep(policy, optimizer, [row]).loss;
    steps += 1;
  }
  optimizer.dispose();
  return { policy, steps, loss };
}

function post(baseUrl: string, body: unknown, key: string | null = API_KEY) {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (key !== null) headers.authorization = `Bearer ${key}`;
  return fetch(`${baseUrl}/chat/completions`, {
    method: "POST",
    headers,
    body: JSON.stringify(body),
  });
}

/** A response body as JSON (untyped: the tests check its shape). */
async function json(response: Response): Promise<any> {
  return response.json();
}

const toolRequest = {
  model: MODEL_NAME,
  messages: OPENING,
  tools: [ECHO_TOOL],
  temperature: 0,
  max_tokens: 48,
};

describe("agentrl serve, end to end", () => {
  let directory: string;
  let trained: Awaited<ReturnType<typeof makeTrainedPolicy>>;
  let running: RunningModelServer;
  let baseUrl: string;

  before(async () => {
    directory = mkdtempSync(join(tmpdir(), "agentrl-serve-"));
    trained = await makeTrainedPolicy();
    await trained.policy.save(directory);
    running = await startModelServer({
      model: directory,
      port: 0,
      apiKey: API_KEY,
      name: MODEL_NAME,
      maxBatch: 32,
      log: null,
    });
    baseUrl = running.address.baseUrl;
  });
  after(async () => {
    await running?.close();
    trained?.policy.dispose();
    rmSync(directory, { recursive: true, force: true });
  });

  test("a tool-calling request gets a well-formed OpenAI response with the learnt tool call", async (t) => {
    t.diagnostic(`fine-tuned ${trained.steps} steps to loss ${trained.loss.toFixed(4)}`);
    const response = await post(baseUrl, toolRequest);
    assert.equal(response.status, 200);
    const body = await json(response);
    assert.equal(body.object, "chat.completion");
    assert.equal(body.model, MODEL_NAME);
    assert.equal(body.choices.length, 1);
    const [choice] = body.choices;
    assert.equal(choice.message.role, "assistant");
    assert.equal(
      choice.finish_reason,
      "tool_calls",
      `after ${trained.steps} steps (loss ${trained.loss.toFixed(4)}): ${JSON.stringify(choice.message)}`,
    );
    assert.equal(choice.message.tool_calls[0].function.name, "echo");
    assert.equal(typeof choice.message.tool_calls[0].function.arguments, "string");
    assert.deepEqual(JSON.parse(choice.message.tool_calls[0].function.arguments), {
      text: "hello",
    });
    assert.match(choice.message.tool_calls[0].id, /^call_/);
    assert.ok(
      body.usage.prompt_tokens > 20 && body.usage.completion_tokens > 5,
      JSON.stringify(body.usage),
    );
  });

  test("streaming returns well-formed chunks ending in [DONE]", async () => {
    const response = await post(baseUrl, { ...toolRequest, stream: true });
    assert.equal(response.status, 200);
    const events = (await response.text()).split("\n\n").filter(Boolean);
    assert.ok(events.every((event) => event.startsWith("data: ")));
    assert.equal(events.at(-1), "data: [DONE]");
    const chunks = events.slice(0, -1).map((event) => JSON.parse(event.slice("data: ".length)));
    assert.ok(chunks.length >= 3);
    for (const chunk of chunks) {
      assert.equal(chunk.object, "chat.completion.chunk");
      assert.equal(chunk.id, chunks[0].id);
      assert.equal(chunk.choices[0].index, 0);
    }
    assert.equal(chunks[0].choices[0].delta.role, "assistant");
    const calls = chunks.flatMap((chunk) => chunk.choices[0].delta.tool_calls ?? []);
    assert.equal(calls.length, 1);
    assert.deepEqual(JSON.parse(calls[0].function.arguments), { text: "hello" });
    assert.equal(chunks.at(-1).choices[0].finish_reason, "tool_calls");
  });

  test("20 concurrent requests all succeed and share decode steps (mean batch size > 1)", async (t) => {
    const before = running.engine.stats();
    const began = performance.now();
    const responses = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        post(baseUrl, {
          model: MODEL_NAME,
          messages: [{ role: "user", content: `Say something, number ${i}.` }],
          temperature: 1,
          max_tokens: 16,
        }),
      ),
    );
    const bodies = await Promise.all(responses.map((response) => json(response)));
    assert.deepEqual(
      responses.map((response) => response.status),
      Array(20).fill(200),
    );
    for (const body of bodies)
      assert.ok(["stop", "length", "tool_calls"].includes(body.choices[0].finish_reason));
    const after = running.engine.stats();
    const steps = after.decodeSteps - before.decodeSteps;
    const sequences =
      after.meanBatchSize * after.decodeSteps - before.meanBatchSize * before.decodeSteps;
    const meanBatch = sequences / steps;
    t.diagnostic(
      `20 requests in ${(performance.now() - began).toFixed(0)} ms: ${steps} decode steps, mean batch ${meanBatch.toFixed(2)}, ${after.generatedTokens - before.generatedTokens} tokens`,
    );
    assert.ok(meanBatch > 1, `mean batch ${meanBatch.toFixed(2)} over ${steps} decode steps`);
    assert.equal(after.completedRequests - before.completedRequests, 20);
    const health = await json(await fetch(baseUrl.replace(/\/v1$/, "/health")));
    assert.ok(health.engine.meanBatchSize > 1);
  });

  test("bad requests get 400 with an error body; a wrong or missing key gets 401", async () => {
    const bad = await post(baseUrl, { model: MODEL_NAME, messages: [{ role: "user" }] });
    assert.equal(bad.status, 400);
    const { error } = await json(bad);
    assert.equal(error.type, "invalid_request_error");
    assert.equal(error.param, "messages.0.content");
    assert.equal((await post(baseUrl, { ...toolRequest, max_tokens: -3 })).status, 400);
    const wrongKey = await post(baseUrl, toolRequest, "not-the-key");
    assert.equal(wrongKey.status, 401);
    assert.equal((await json(wrongKey)).error.type, "authentication_error");
    assert.equal((await post(baseUrl, toolRequest, null)).status, 401);
    assert.equal((await post(baseUrl, { ...toolRequest, model: "other" })).status, 404);
    const tooLong = await post(baseUrl, {
      model: MODEL_NAME,
      messages: [
        {
          role: "user",
          content: Array.from({ length: 1500 }, (_, i) => String((i * 7919) % 100_003)).join(" "),
        },
      ],
    });
    assert.equal(tooLong.status, 400);
    assert.equal((await json(tooLong)).error.code, "context_length_exceeded");
  });

  test("cross-policy sampling: external turns come from the server, with loss mask 0 and policy id external", async (t) => {
    const client = new InProcessEnvironmentClient([echoTwiceFamily], { concurrency: 64 });
    const current = createPolicyEngine(trained.policy, { temperature: 0, seed: 1 });
    const external = new ExternalChatModel({
      baseUrl,
      model: MODEL_NAME,
      apiKey: API_KEY,
      temperature: 0,
      maxTokens: 48,
    });
    const pool = new PolicyPool({ current, external, externalProbability: 0.5, seed: 5 });
    const served = running.engine.stats().completedRequests;
    try {
      const buffer = new TrajectoryBuffer();
      const scheduler = new RolloutScheduler({
        client,
        tokenizer: trained.policy.tokenizer!,
        pool,
        buffer,
        tasks: [{ name: "echo-twice" }],
        groupSize: 4,
        maxConcurrentEpisodes: 8,
        maxGroups: 2,
        seed: 2,
        episode: { maxNewTokensPerTurn: 48, maxTurns: 4, temperature: 0 },
      });
      await scheduler.start();
      const trajectories: Trajectory[] = (await buffer.take(2)).flatMap(
        (group) => group.trajectories,
      );
      // One more, through runEpisode directly.
      trajectories.push(
        await runEpisode(
          { client, tokenizer: trained.policy.tokenizer!, pool },
          { task: "echo-twice", index: 0, groupId: "direct", member: 0 },
          { maxNewTokensPerTurn: 48, maxTurns: 4 },
        ),
      );
      assert.equal(trajectories.length, 9);
      let externalTurns = 0;
      let currentTurns = 0;
      for (const trajectory of trajectories) {
        assert.equal(trajectory.status, "completed", trajectory.error);
        assert.equal(trajectory.reward, 1);
        for (const turn of trajectory.turns) {
          const [start, end] = turn.generated;
          assert.ok(end > start);
          for (let t = start; t < end; t++) {
            if (turn.policy === "external") {
              assert.equal(trajectory.lossMask[t], 0);
              assert.equal(trajectory.policyIds[t], POLICY_CODES.external);
              assert.equal(trajectory.versions[t], -1);
            } else {
              assert.equal(trajectory.lossMask[t], 1);
              assert.equal(trajectory.policyIds[t], POLICY_CODES.current);
            }
          }
          if (turn.policy === "external") externalTurns += 1;
          else currentTurns += 1;
        }
      }
      const draws = pool.drawCounts();
      t.diagnostic(
        `${trajectories.length} episodes: ${externalTurns} external turns, ${currentTurns} current turns`,
      );
      assert.equal(externalTurns, draws.external);
      assert.ok(
        externalTurns >= 3 && currentTurns >= 3,
        `external ${externalTurns}, current ${currentTurns}`,
      );
      // Every external turn was one request answered by the server's engine.
      assert.equal(running.engine.stats().completedRequests - served, externalTurns);
    } finally {
      current.close();
      await client.close();
    }
  });

  test(
    "the CLI serves the directory as a child process and stops cleanly on SIGTERM",
    { timeout: 120_000 },
    async () => {
      const {
        child,
        url: childUrl,
        output,
      } = await startServeProcess(directory, ["--api-key", API_KEY, "--name", MODEL_NAME]);
      const exited =
        child.exitCode !== null
          ? Promise.resolve(child.exitCode)
          : new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
      try {
        const response = await post(childUrl, toolRequest);
        assert.equal(response.status, 200);
        const body = await json(response);
        assert.deepEqual(JSON.parse(body.choices[0].message.tool_calls[0].function.arguments), {
          text: "hello",
        });
        assert.equal((await post(childUrl, toolRequest, "wrong")).status, 401);
        child.kill("SIGTERM");
        assert.equal(await exited, 0, output());
        assert.match(output(), /POST \/v1\/chat\/completions 200/);
        assert.match(output(), /stopped/);
      } finally {
        if (child.exitCode === null) child.kill("SIGKILL");
      }
    },
  );
});
