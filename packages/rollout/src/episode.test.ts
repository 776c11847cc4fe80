import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { InProcessEnvironmentClient, type Message } from "@agentrl/envs";
import { InferenceEngine } from "./engine/index.js";
import { runEpisode, type EpisodeDependencies } from "./episode.js";
import { PolicyPool } from "./pool.js";
import { formatToolCalls } from "./toolcall.js";
import {
  FaultyClient,
  ScriptedModel,
  echoFamily,
  testTokenizer,
  turnScript,
  type Tokenizer,
} from "./testing/fixtures.js";

describe("runEpisode (scripted model, exact token bookkeeping)", () => {
  let tokenizer: Tokenizer;
  let client: FaultyClient;
  before(() => {
    tokenizer = testTokenizer();
    client = new FaultyClient([
      echoFamily({ maxTurnsNeeded: 4 }),
      echoFamily({ name: "throws" }),
      echoFamily({ name: "hangs" }),
      echoFamily({ name: "dies" }),
      echoFamily({ name: "guess", maxTurnsNeeded: 1, metrics: { answerFromOutput: 0 } }),
      echoFamily({ name: "read", maxTurnsNeeded: 1, metrics: { answerFromOutput: 1 } }),
      // A task graded on the system's state (OS's `answerGraded` 0): no answer to read.
      echoFamily({ name: "state", maxTurnsNeeded: 1, metrics: { answerGraded: 0 } }),
    ]);
  });
  after(() => client.close());

  function dependencies(texts: (turn: number) => string): EpisodeDependencies {
    const model = new ScriptedModel(tokenizer.vocabSize, turnScript(tokenizer, texts));
    const engine = new InferenceEngine(model, {
      temperature: 0,
      stopTokenIds: tokenizer.stopTokenIds,
    });
    return { client, tokenizer, pool: new PolicyPool({ current: engine }) };
  }
  const toolCallText = (turn: number) =>
    formatToolCalls([{ name: "echo", arguments: { text: `hello number ${turn}` } }]);

  test("the trajectory equals the chat template's tokens of the conversation, turn by turn", async () => {
    const deps = dependencies(toolCallText);
    const trajectory = await runEpisode(deps, { task: "echo", index: 3, groupId: "g", member: 0 });
    assert.equal(trajectory.status, "completed");
    assert.equal(trajectory.turns.length, 4);
    assert.equal(trajectory.reward, 1);
    assert.equal(trajectory.metrics.templateFallbacks, 0);
    // Rebuild the conversation and check every turn's prompt against the template, token for token.
    const start = await client.inner.startSample("echo", 3);
    await client.inner.cancel(start.sessionId);
    const conversation: Message[] = [...start.messages];
    const tokens = Array.from(trajectory.tokens);
    for (const [k, turn] of trajectory.turns.entries()) {
      const expected = tokenizer.encode(
        tokenizer.applyChatTemplate(conversation, {
          tools: start.tools,
          addGenerationPrompt: true,
        }),
      );
      assert.deepEqual(tokens.slice(0, turn.promptLength), expected, `prompt of turn ${k}`);
      const [from, to] = turn.generated;
      assert.equal(from, turn.promptLength);
      assert.deepEqual(
        tokens.slice(from, to),
        [...tokenizer.encode(toolCallText(k)), tokenizer.encode("<|im_end|>")[0]],
        `generated tokens of turn ${k}`,
      );
      assert.ok(trajectory.lossMask.slice(from, to).every((m) => m === 1));
      assert.ok(trajectory.versions.slice(from, to).every((v) => v === 0));
      assert.ok(
        trajectory.lossMask.slice(turn.environment[0], turn.environment[1]).every((m) => m === 0),
      );
      conversation.push({
        role: "assistant",
        content: null,
        tool_calls: [
          {
            id: `call_${k}_0`,
            type: "function",
            function: { name: "echo", arguments: JSON.stringify({ text: `hello number ${k}` }) },
          },
        ],
      });
      conversation.push({
        role: "tool",
        tool_call_id: `call_${k}_0`,
        content: `echo: hello number ${k}`,
      });
    }
    // The whole sequence = the template's rendering of the final conversation (without its last tool reply).
    const final = tokenizer.encode(
      tokenizer.applyChatTemplate(conversation.slice(0, -1), { tools: start.tools }),
    );
    assert.deepEqual(tokens, final.slice(0, tokens.length));
    assert.equal(tokenizer.decode(final.slice(tokens.length)), "\n");
    assert.equal(
      trajectory.lossMask.reduce((a, b) => a + b, 0),
      trajectory.metrics.generatedTokens,
    );
    assert.equal(
      trajectory.lossMask.slice(0, trajectory.turns[0].promptLength).reduce((a, b) => a + b, 0),
      0,
    );
  });

  test("unreadAnswerReward: a right answer the environment says was not read from an output gets it; a read one, or no setting, keeps the environment's reward", async () => {
    const play = (task: string, unreadAnswerReward?: number) =>
      runEpisode(
        dependencies(toolCallText),
        { task, index: 0, groupId: "g", member: 0 },
        { unreadAnswerReward },
      );
    const guessed = await play("guess", 0);
    assert.equal(guessed.reward, 0);
    assert.equal(
      guessed.environmentReward,
      1,
      "the environment's verdict is kept (success counts it)",
    );
    assert.equal(guessed.metrics.answerFromOutput, 0);
    assert.equal((await play("guess")).reward, 1, "unset: the environment's reward");
    assert.equal((await play("read", 0)).reward, 1);
    assert.equal((await play("echo", 0)).reward, 1, "a family that does not report the metric");
    assert.equal((await play("state", 0)).reward, 1, "a task graded on the system's state");
    assert.equal((await play("guess", 2)).reward, 1, "never above the environment's reward");
  });

  test("a template that is not prefix-stable falls back and counts it", async () => {
    // Spacing the template re-renders differently (" {" is not what tojson writes).
    const deps = dependencies(
      (turn) => `<tool_call>\n{"name":  "echo", "arguments": {"text": "x${turn}"}}\n</tool_call>`,
    );
    const trajectory = await runEpisode(deps, { task: "echo", index: 2, groupId: "g", member: 0 });
    assert.equal(trajectory.status, "completed");
    assert.equal(trajectory.metrics.templateFallbacks, 2);
    // The environment's reply still starts right after the generated <|im_end|> and ends with a generation prompt.
    const turn = trajectory.turns[0];
    assert.equal(
      tokenizer.decode(Array.from(trajectory.tokens.slice(...turn.environment))),
      "\n<|im_start|>user\n<tool_response>\necho: x0\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
    );
  });

  test("a malformed tool call goes to the environment as content only and gets its format error", async () => {
    const deps = dependencies(() => '<tool_call>{"name": "echo", "arguments": {</tool_call>');
    const trajectory = await runEpisode(deps, { task: "echo", index: 1, groupId: "g", member: 0 });
    assert.equal(trajectory.metrics.formatErrors, 2);
    assert.match(trajectory.turns[0].formatError ?? "", /not valid JSON/);
    assert.match(
      tokenizer.decode(Array.from(trajectory.tokens.slice(...trajectory.turns[0].environment))),
      /You said \d+ characters/,
    );
  });

  for (const [task, expected] of [
    ["throws", /HTTP 500/],
    ["hangs", /TurnTimeoutError/],
    ["dies", /is gone/],
  ] as const) {
    test(`an environment that ${task} is an infrastructure fault: retried, then masked (reward 0), never a throw`, async () => {
      const deps = dependencies(toolCallText);
      const began = Date.now();
      const trajectory = await runEpisode(
        deps,
        { task, index: 3, groupId: "g", member: 0 },
        { turnTimeoutMs: 200, incompletePenalty: -0.2, infrastructureRetries: 1 },
      );
      assert.equal(trajectory.status, "task error");
      assert.equal(trajectory.endCause, "infrastructure");
      assert.equal(trajectory.masked, true);
      assert.equal(trajectory.reward, 0);
      assert.equal(trajectory.metrics.infrastructureRetries, 1);
      assert.match(trajectory.error ?? "", expected);
      assert.ok(trajectory.turns.length >= 1);
      assert.ok(Date.now() - began < 3000);
      assert.equal(deps.pool.current.stats().keptCaches, 0, "the episode's cache was released");
    });
  }

  test('with infrastructureFaults "penalize" an infrastructure fault gets the incomplete penalty, as the original did', async () => {
    const trajectory = await runEpisode(
      dependencies(toolCallText),
      { task: "throws", index: 3, groupId: "g", member: 0 },
      { infrastructureFaults: "penalize", infrastructureRetries: 0 },
    );
    assert.equal(trajectory.endCause, "infrastructure");
    assert.equal(trajectory.masked, false);
    assert.equal(trajectory.reward, -0.2);
    assert.equal(trajectory.metrics.infrastructureRetries, 0);
  });

  test("an infrastructure fault that goes away on retry yields the retried episode's verdict", async () => {
    let starts = 0;
    const flaky = {
      ...client,
      startSample: async (name: string, index: number) => {
        starts += 1;
        if (starts === 1)
          throw new Error("connect ECONNREFUSED 127.0.0.1:5020 (controller unreachable)");
        return client.startSample(name, index);
      },
      interact: client.interact.bind(client),
      cancel: client.cancel.bind(client),
      getIndices: client.getIndices.bind(client),
      close: async () => {},
    };
    const trajectory = await runEpisode(
      { ...dependencies(toolCallText), client: flaky },
      { task: "echo", index: 1, groupId: "g", member: 0 },
    );
    assert.equal(starts, 2);
    assert.equal(trajectory.status, "completed");
    assert.equal(trajectory.endCause, "verdict");
    assert.equal(trajectory.reward, 1);
    assert.equal(trajectory.metrics.infrastructureRetries, 1);
  });

  test("the agent's own ends (its generation outlasting the turn limit) keep the incomplete penalty and are not retried", async () => {
    const deps = dependencies(toolCallText);
    const slowEngine = deps.pool.current;
    const generate = slowEngine.generate.bind(slowEngine);
    slowEngine.generate = (async (request: Parameters<typeof generate>[0]) => {
      await new Promise((resolve) => setTimeout(resolve, 300));
      return generate(request);
    }) as typeof generate;
    const trajectory = await runEpisode(
      deps,
      { task: "echo", index: 3, groupId: "g", member: 0 },
      { turnTimeoutMs: 100 },
    );
    assert.equal(trajectory.status, "task limit reached");
    assert.match(trajectory.error ?? "", /TurnTimeoutError/);
    assert.equal(trajectory.endCause, "agent");
    assert.equal(trajectory.masked, false);
    assert.equal(trajectory.reward, -0.2);
    assert.equal(trajectory.metrics.infrastructureRetries, 0);
  });

  test("a full worker (406 on start) is waited for, not turned into a failed episode", async () => {
    const small = new InProcessEnvironmentClient([echoFamily({ latency: () => 10 })], {
      concurrency: 2,
    });
    const deps = { ...dependencies(toolCallText), client: small };
    const trajectories = await Promise.all(
      Array.from({ length: 6 }, (_, member) =>
        runEpisode(deps, { task: "echo", index: 1, groupId: "g", member }),
      ),
    );
    assert.deepEqual(
      trajectories.map((t) => t.status),
      new Array(6).fill("completed"),
    );
    await small.close();
  });

  test("the episode time limit, the turn limit and the token limit end an episode with their status", async () => {
    const slow = new FaultyClient([
      echoFamily({ latency: () => 200, maxTurnsNeeded: 4, maxTurns: 10 }),
    ]);
    const base = dependencies(toolCallText);
    const deps = { ...base, client: slow };
    // The time runs out while the environment answers (2 s a reply against a 400 ms limit; the
    // scripted model's turn takes milliseconds, so a loaded machine does not move the limit into
    // generation): the infrastructure's, not the agent's.
    const hung = new FaultyClient([
      echoFamily({ latency: () => 2_000, maxTurnsNeeded: 4, maxTurns: 10 }),
    ]);
    const timed = await runEpisode(
      { ...base, client: hung },
      { task: "echo", index: 3, groupId: "g", member: 0 },
      { episodeTimeoutMs: 400 },
    );
    await hung.close();
    assert.equal(timed.status, "task error");
    assert.equal(timed.endCause, "infrastructure");
    assert.match(timed.error ?? "", /EpisodeTimeoutError/);
    const limited = await runEpisode(
      deps,
      { task: "echo", index: 3, groupId: "g", member: 1 },
      { maxTurns: 2 },
    );
    assert.equal(limited.status, "task limit reached");
    assert.equal(limited.reward, -0.2);
    assert.equal(limited.endCause, "agent");
    const promptLength = limited.turns[0].promptLength;
    const long = await runEpisode(
      deps,
      { task: "echo", index: 3, groupId: "g", member: 2 },
      { maxTokens: promptLength + 40 },
    );
    assert.equal(long.status, "agent context limit");
    assert.equal(long.reward, -0.2);
    assert.ok(long.tokens.length <= promptLength + 40 + 60);
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error("stop")), 60);
    const cancelled = await runEpisode(
      deps,
      { task: "echo", index: 3, groupId: "g", member: 3 },
      {},
      controller.signal,
    );
    assert.equal(cancelled.status, "cancelled");
    await slow.close();
  });
});
