/**
 * The recording gateway with the real `openai` client and the real AI SDK (`ai` with
 * `@ai-sdk/openai-compatible`): agents with tools play KG episodes on the shipped warm
 * start (models/warmstart) through the gateway, unmodified. Checked: the recorded completion
 * tokens, log-probs and versions equal what the engine sampled (exact); the joined sequence
 * is the template's rendering of the whole conversation; the training-side scoring of the
 * sequence (`tokenLogProbs`, as the trainer scores) agrees with the sampler's log-probs; the
 * refusals (no key, unknown key, finished key, malformed request) and episode isolation;
 * template rewrites and `n` > 1. Skipped when models/warmstart is missing.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as tf from "@tensorflow/tfjs-core";
import OpenAI from "openai";
import { generateText, jsonSchema, stepCountIs, streamText, tool, type ToolSet } from "ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import {
  InProcessEnvironmentClient,
  createTaskFamily,
  type CurriculumTaskFamily,
  type Message,
  type ToolSpec,
} from "@agentrl/envs";
import { Policy, initBackend, tokenLogProbs } from "@agentrl/policy";
import {
  createPolicyEngine,
  PolicyPool,
  RolloutScheduler,
  TrajectoryBuffer,
  type Trajectory,
} from "../index.js";
import { AgentEpisodes } from "./agent-episodes.js";
import type { GatewayEngine } from "./gateway.js";
import { RecordingGateway, checkTemplate } from "./index.js";

const MODEL = fileURLToPath(new URL("../../../../models/warmstart", import.meta.url));
const HAVE_MODEL =
  existsSync(`${MODEL}/model.safetensors`) && existsSync(`${MODEL}/tokenizer.json`);
const TEMPERATURE = 0.8;
const TOLERANCE = 2e-3;

type Generate = GatewayEngine["generate"];
type Logged = { prompt: number[]; tokens: number[]; logprobs: number[]; versions: number[] };

/** The engine, with every generation it returns kept (what was really sampled). */
function loggingEngine(engine: ReturnType<typeof createPolicyEngine>): {
  engine: GatewayEngine &
    Pick<ReturnType<typeof createPolicyEngine>, "stats" | "updateWeights" | "close">;
  log: Logged[];
} {
  const log: Logged[] = [];
  const generate: Generate = async (request) => {
    const result = await engine.generate(request);
    log.push({
      prompt: [...request.promptTokens],
      tokens: [...result.tokens],
      logprobs: [...result.logprobs],
      versions: [...result.versions],
    });
    return result;
  };
  return {
    log,
    engine: {
      get version() {
        return engine.version;
      },
      generate,
      releaseCache: (key) => engine.releaseCache(key),
      stats: () => engine.stats(),
      updateWeights: (weights, version) => engine.updateWeights(weights, version),
      close: () => engine.close(),
    },
  };
}

/**
 * What the engine sampled after `prompt` that the record says was generated (`recorded`): its
 * generation(s), chained when streamed in slices. Episodes of one group share prompts, so the
 * entry is the one whose tokens the record continues with; its log-probs and versions are then
 * the engine's own.
 */
function sampledAfter(
  log: readonly Logged[],
  prompt: readonly number[],
  recorded: ArrayLike<number>,
): Logged {
  const found: Logged = { prompt: [...prompt], tokens: [], logprobs: [], versions: [] };
  for (;;) {
    const context = [...prompt, ...found.tokens];
    const next = log.find(
      (entry) =>
        entry.tokens.length > 0 &&
        entry.prompt.length === context.length &&
        entry.prompt.every((token, i) => token === context[i]) &&
        entry.tokens.every((token, i) => token === recorded[found.tokens.length + i]),
    );
    if (!next) return found;
    found.tokens.push(...next.tokens);
    found.logprobs.push(...next.logprobs);
    found.versions.push(...next.versions);
  }
}

const same = (a: ArrayLike<number>, b: ArrayLike<number>) =>
  a.length === b.length && Array.from(a).every((value, i) => value === b[i]);

describe(
  "recording gateway on the warm start, with the real openai and ai packages",
  { skip: HAVE_MODEL ? false : `no ${MODEL}` },
  () => {
    let policy: Policy;
    let family: CurriculumTaskFamily;
    let client: InProcessEnvironmentClient;
    let inner: ReturnType<typeof createPolicyEngine>;
    let logged: ReturnType<typeof loggingEngine>;
    let gateway: RecordingGateway;
    let baseURL: string;

    before(async () => {
      await initBackend({ log: null });
      policy = await Policy.load(MODEL, { trainable: false });
      family = await createTaskFamily("kg", { seed: 0 });
      client = new InProcessEnvironmentClient([family]);
      inner = createPolicyEngine(policy, {
        temperature: TEMPERATURE,
        maxBatchSize: 8,
        maxSequenceLength: 1280,
        seed: 5,
      });
      logged = loggingEngine(inner);
      gateway = new RecordingGateway({
        engine: logged.engine,
        tokenizer: policy.tokenizer!,
        temperature: TEMPERATURE,
        maxEpisodeTokens: 1280,
        streamChunkTokens: 8,
      });
      ({ baseURL } = await gateway.listen(0));
    });

    after(async () => {
      await gateway?.close();
      inner?.close();
      policy?.dispose();
    });

    /** Checks a recorded episode against the engine's log, the template and the training-side scoring. */
    function checkEpisode(
      trajectory: Trajectory,
      conversation: readonly Message[],
      tools: readonly ToolSpec[],
      last: boolean,
    ): { tokens: number; maxDifference: number; joined: boolean } {
      const tokenizer = policy.tokenizer!;
      assert.ok(trajectory.turns.length >= 1);
      // A turn that sampled a special token inside its text (e.g. `<|im_start|>` in a runaway
      // generation) reaches the client without it (skipSpecialTokens), so the client's history
      // cannot render back to the sampled tokens: the next request starts a new sample.
      const clean = trajectory.turns.every((turn) => {
        const ids = Array.from(
          trajectory.tokens.subarray(turn.generated[0], turn.generated[1] - 1),
        );
        return tokenizer.decode(ids) === tokenizer.decode(ids, { skipSpecialTokens: true });
      });
      for (const turn of trajectory.turns) {
        const [start, end] = turn.generated;
        const sampled = sampledAfter(
          logged.log,
          Array.from(trajectory.tokens.subarray(0, start)),
          trajectory.tokens.subarray(start, end),
        );
        assert.ok(sampled.tokens.length > 0, `the engine sampled after turn ${start}'s prompt`);
        assert.ok(
          same(trajectory.tokens.subarray(start, end), sampled.tokens),
          "recorded completion ids = sampled ids",
        );
        assert.ok(
          same(trajectory.logprobs.subarray(start, end), Float32Array.from(sampled.logprobs)),
          "recorded log-probs = sampler's (exact)",
        );
        assert.ok(
          same(trajectory.versions.subarray(start, end), sampled.versions),
          "recorded versions = sampler's",
        );
        assert.ok(trajectory.lossMask.subarray(start, end).every((mask) => mask === 1));
      }
      // The joined sequence is the template's rendering of the conversation through the last assistant turn.
      const lastAssistant = conversation.map((message) => message.role).lastIndexOf("assistant");
      const rendered = tokenizer.applyChatTemplate(conversation.slice(0, lastAssistant + 1), {
        tools,
        addGenerationPrompt: false,
      });
      if (clean && last) {
        assert.equal(tokenizer.decode(Array.from(trajectory.tokens)) + "\n", rendered);
      }
      // The training side scores the sequence as the trainer does: log-probs at the rollout temperature.
      const ids = tf.tensor2d(
        Array.from(trajectory.tokens),
        [1, trajectory.tokens.length],
        "int32",
      );
      const scored = tf.tidy(() =>
        tokenLogProbs(policy.model, ids, { temperature: TEMPERATURE }).logProbs.dataSync().slice(),
      );
      ids.dispose();
      let maxDifference = 0;
      let count = 0;
      for (let position = 1; position < trajectory.tokens.length; position++) {
        if (trajectory.lossMask[position] !== 1) continue;
        maxDifference = Math.max(
          maxDifference,
          Math.abs(scored[position - 1] - trajectory.logprobs[position]),
        );
        count += 1;
      }
      assert.ok(maxDifference < TOLERANCE, `trainer scoring vs sampler: max |Δ| ${maxDifference}`);
      return { tokens: count, maxDifference, joined: clean };
    }

    /** Every sample of an episode checked; the last one against the whole conversation. */
    function checkSamples(
      samples: Trajectory[],
      conversation: readonly Message[],
      tools: readonly ToolSpec[],
      reward: number,
    ) {
      assert.ok(samples.length >= 1);
      assert.ok(
        samples.every(
          (sample) =>
            sample.metrics.templateRewrites === samples.length - 1 && sample.reward === reward,
        ),
      );
      const checks = samples.map((sample) =>
        checkEpisode(sample, conversation, tools, sample === samples[samples.length - 1]),
      );
      const last = checks[checks.length - 1];
      return {
        tokens: checks.reduce((sum, check) => sum + check.tokens, 0),
        maxDifference: Math.max(...checks.map((check) => check.maxDifference)),
        joined: samples.length === 1 && last.joined,
        turns: samples.reduce((sum, sample) => sum + sample.turns.length, 0),
        samples: samples.length,
        reward,
      };
    }

    test("an openai-client agent with tools (plain and streamed) plays KG episodes; records are exact", async () => {
      const indices = family.indicesAt("train", 0).slice(0, 4);
      const results = await Promise.all(
        indices.map(async (index, member) => {
          const episode = gateway.openEpisode({ task: "kg", index, groupId: "openai", member });
          const openai = new OpenAI({
            baseURL: episode.baseURL,
            apiKey: episode.apiKey,
            maxRetries: 0,
          });
          const start = await client.startSample("kg", index);
          const conversation: Message[] = [...start.messages];
          let reward = 0;
          for (let turn = 0; turn < 5; turn++) {
            let message: Message;
            if (member % 2 === 0) {
              const completion = await openai.chat.completions.create({
                model: "any-name",
                messages: conversation as OpenAI.ChatCompletionMessageParam[],
                tools: start.tools as OpenAI.ChatCompletionTool[],
                max_tokens: 96,
              });
              message = completion.choices[0].message as Message;
            } else {
              const stream = await openai.chat.completions.create({
                model: "any-name",
                messages: conversation as OpenAI.ChatCompletionMessageParam[],
                tools: start.tools as OpenAI.ChatCompletionTool[],
                max_tokens: 96,
                stream: true,
              });
              let content = "";
              const calls: {
                id: string;
                type: "function";
                function: { name: string; arguments: string };
              }[] = [];
              for await (const chunk of stream) {
                const delta = chunk.choices[0]?.delta;
                content += delta?.content ?? "";
                for (const call of delta?.tool_calls ?? [])
                  calls[call.index] = {
                    id: call.id!,
                    type: "function",
                    function: {
                      name: call.function!.name!,
                      arguments: call.function!.arguments ?? "",
                    },
                  };
              }
              message =
                calls.length > 0
                  ? { role: "assistant", content: content || null, tool_calls: calls }
                  : { role: "assistant", content };
            }
            conversation.push(message);
            const reply = await client.interact(start.sessionId, message as never);
            conversation.push(...reply.messages);
            reward = reply.reward;
            if (reply.finish) break;
          }
          const trajectories = gateway.finishEpisode(episode.apiKey, reward);
          return checkSamples(trajectories, conversation, start.tools, reward);
        }),
      );
      console.log(
        `openai: ${results.map((r) => `${r.turns} turns in ${r.samples} sample(s), reward ${r.reward}, ${r.tokens} tokens max |Δ| ${r.maxDifference.toExponential(2)}`).join("; ")}`,
      );
      assert.ok(
        results.some((r) => r.turns >= 2),
        "a multi-turn episode",
      );
      assert.ok(
        results.filter((r) => r.joined).length >= results.length / 2,
        "most episodes are one joined sequence",
      );
    });

    test("an AI SDK agent (generateText / streamText with tools and stopWhen) plays KG episodes; records are exact", async () => {
      const indices = family.indicesAt("train", 0).slice(4, 8);
      const results = await Promise.all(
        indices.map(async (index, member) => {
          const episode = gateway.openEpisode({ task: "kg", index, groupId: "ai", member });
          const provider = createOpenAICompatible({
            name: "agentrl",
            baseURL: episode.baseURL,
            apiKey: episode.apiKey,
          });
          const start = await client.startSample("kg", index);
          let reward = 0;
          let finished = false;
          const tools: ToolSet = Object.fromEntries(
            start.tools.map((spec) => [
              spec.function.name,
              tool({
                description: spec.function.description,
                inputSchema: jsonSchema(
                  spec.function.parameters as Parameters<typeof jsonSchema>[0],
                ),
                execute: async (input, { toolCallId }) => {
                  const reply = await client.interact(start.sessionId, {
                    role: "assistant",
                    content: null,
                    tool_calls: [
                      {
                        id: toolCallId,
                        type: "function",
                        function: { name: spec.function.name, arguments: JSON.stringify(input) },
                      },
                    ],
                  });
                  reward = reply.reward;
                  finished = reply.finish;
                  return reply.messages.map((message) => message.content).join("\n");
                },
              }),
            ]),
          );
          const system = start.messages
            .filter((message) => message.role === "system")
            .map((message) => message.content)
            .join("\n");
          const prompt = start.messages
            .filter((message) => message.role === "user")
            .map((message) => message.content)
            .join("\n");
          const settings = {
            model: provider("policy"),
            system,
            prompt,
            tools,
            stopWhen: stepCountIs(5),
            maxOutputTokens: 96,
          };
          let text: string;
          let responseMessages: unknown[];
          if (member % 2 === 0) {
            const result = await generateText(settings);
            text = result.text;
            responseMessages = result.response.messages;
          } else {
            const result = streamText(settings);
            text = await result.text;
            responseMessages = (await result.response).messages;
          }
          if (!finished)
            reward = (await client.interact(start.sessionId, { role: "assistant", content: text }))
              .reward;
          // The conversation as the gateway saw it (AI SDK messages in OpenAI form).
          const conversation: Message[] = [
            ...start.messages.filter((m) => m.role === "system"),
            { role: "user", content: prompt },
            ...toOpenAIMessages(responseMessages),
          ];
          const trajectories = gateway.finishEpisode(episode.apiKey, reward);
          return checkSamples(trajectories, conversation, start.tools, reward);
        }),
      );
      console.log(
        `ai: ${results.map((r) => `${r.turns} turns in ${r.samples} sample(s), reward ${r.reward}, ${r.tokens} tokens max |Δ| ${r.maxDifference.toExponential(2)}`).join("; ")}`,
      );
      assert.ok(
        results.some((r) => r.turns >= 2),
        "a multi-turn episode",
      );
      assert.ok(
        results.filter((r) => r.joined).length >= results.length / 2,
        "most episodes are one joined sequence",
      );
    });

    test("requests without a key, with an unknown or finished key, or malformed get a clear 4xx; keys reach only their episode", async () => {
      const post = (body: unknown, key?: string) =>
        fetch(`${baseURL}/chat/completions`, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            ...(key ? { authorization: `Bearer ${key}` } : {}),
          },
          body: JSON.stringify(body),
        });
      const valid = {
        model: "m",
        messages: [{ role: "user", content: "Who directed Alien?" }],
        max_tokens: 4,
      };
      const noKey = await post(valid);
      assert.equal(noKey.status, 401);
      assert.equal(
        ((await noKey.json()) as { error: { code: string } }).error.code,
        "missing_episode_key",
      );
      const unknown = await post(valid, "ep-not-a-key");
      assert.equal(unknown.status, 401);
      assert.equal(
        ((await unknown.json()) as { error: { code: string } }).error.code,
        "unknown_episode",
      );

      const a = gateway.openEpisode({ task: "kg", index: 0, groupId: "iso", member: 0 });
      const b = gateway.openEpisode({ task: "kg", index: 0, groupId: "iso", member: 1 });
      const malformed = await post(
        { model: "m", messages: [{ role: "wizard", content: "hi" }] },
        a.apiKey,
      );
      assert.equal(malformed.status, 400);
      assert.match(
        ((await malformed.json()) as { error: { message: string } }).error.message,
        /messages\.0/,
      );
      assert.equal((await post({ model: "m", prompt_token_ids: [1, 2, 3] }, a.apiKey)).status, 400);
      assert.equal((await post({ ...valid, cache_key: "b" }, a.apiKey)).status, 400);
      assert.equal((await post({ ...valid, messages: [] }, a.apiKey)).status, 400);
      assert.equal(
        (
          await fetch(`${baseURL}/chat/completions`, {
            method: "POST",
            headers: { authorization: `Bearer ${a.apiKey}` },
            body: "{not json",
          })
        ).status,
        400,
      );

      // The openai client surfaces them as its own errors.
      const openaiWithoutEpisode = new OpenAI({ baseURL, apiKey: "ep-unknown", maxRetries: 0 });
      await assert.rejects(
        openaiWithoutEpisode.chat.completions.create(
          valid as OpenAI.ChatCompletionCreateParamsNonStreaming,
        ),
        (error: unknown) => error instanceof OpenAI.AuthenticationError,
      );

      assert.equal((await post(valid, a.apiKey)).status, 200);
      assert.equal((await post(valid, a.apiKey)).status, 200);
      const recordA = gateway.finishEpisode(a.apiKey, 1);
      const recordB = gateway.finishEpisode(b.apiKey, 0);
      assert.equal(recordA[0].metrics.gatewayRequests, 2);
      assert.deepEqual(
        recordB,
        [],
        "B's record is untouched by A's requests (no request: no trajectory)",
      );
      const finished = await post(valid, a.apiKey);
      assert.equal(finished.status, 410);
      assert.equal(
        ((await finished.json()) as { error: { code: string } }).error.code,
        "episode_finished",
      );
      assert.throws(() => gateway.finishEpisode(a.apiKey, 1), /already finished/);
    });

    test("a client that edits an earlier message makes a sample per turn (counted); with n = 2 the continued choice is kept", async () => {
      const openaiFor = (key: string) => new OpenAI({ baseURL, apiKey: key, maxRetries: 0 });
      const rewrite = gateway.openEpisode({ task: "kg", index: 0, groupId: "rewrite", member: 0 });
      const messages: OpenAI.ChatCompletionMessageParam[] = [
        { role: "user", content: "Who directed Alien?" },
      ];
      const first = await openaiFor(rewrite.apiKey).chat.completions.create({
        model: "m",
        messages,
        max_tokens: 8,
      });
      const edited: OpenAI.ChatCompletionMessageParam[] = [
        { role: "user", content: "Who directed Aliens?" },
        first.choices[0].message as OpenAI.ChatCompletionMessageParam,
        { role: "user", content: "Sure?" },
      ];
      await openaiFor(rewrite.apiKey).chat.completions.create({
        model: "m",
        messages: edited,
        max_tokens: 8,
      });
      const before = gateway.stats().templateRewrites;
      const samples = gateway.finishEpisode(rewrite.apiKey, 0.5);
      assert.equal(samples.length, 2, "one sample per turn after the rewrite");
      assert.ok(
        samples.every(
          (sample) =>
            sample.reward === 0.5 &&
            sample.metrics.templateRewrites === 1 &&
            sample.turns.length === 1,
        ),
      );
      assert.ok(before >= 1);
      assert.ok(policy.tokenizer!.decode(Array.from(samples[1].tokens)).includes("Aliens?"));

      const branching = gateway.openEpisode({ task: "kg", index: 0, groupId: "n", member: 0 });
      const two = await openaiFor(branching.apiKey).chat.completions.create({
        model: "m",
        messages,
        max_tokens: 12,
        n: 2,
      });
      assert.equal(two.choices.length, 2);
      const chosen = two.choices[1].message as OpenAI.ChatCompletionMessageParam;
      await openaiFor(branching.apiKey).chat.completions.create({
        model: "m",
        messages: [...messages, chosen, { role: "user", content: "Go on." }],
        max_tokens: 4,
      });
      const [joined, ...rest] = gateway.finishEpisode(branching.apiKey, 1);
      assert.equal(rest.length, 0);
      assert.equal(joined.turns.length, 2);
      const rendered = policy.tokenizer!.applyChatTemplate(
        [...(messages as Message[]), chosen as Message],
        { addGenerationPrompt: false },
      );
      const firstTurn = policy.tokenizer!.decode(
        Array.from(joined.tokens.subarray(0, joined.turns[0].environment[0])),
      );
      assert.equal(firstTurn + "\n", rendered, "the second choice's turn is the one joined");
    });

    test("AgentEpisodes plays an unmodified agent as the scheduler's episodes: groups of exact trajectories; faults are masked, user rewards kept", async () => {
      // An engine of its own (the scheduler's episodes decode in one batch).
      const own = createPolicyEngine(policy, {
        temperature: TEMPERATURE,
        maxBatchSize: 6,
        maxSequenceLength: 1280,
        seed: 6,
      });
      const ownLogged = loggingEngine(own);
      const pool = new PolicyPool({ current: ownLogged.engine, seed: 3 });
      const buffer = new TrajectoryBuffer({ capacityGroups: 4 });
      let calls = 0;
      const episodes = new AgentEpisodes<{ index: number }>({
        taskOf: (_name, index) => ({ index }),
        environmentTasks: ["kg"],
        gateway: { log: process.env.GATEWAY_DEBUG ? (line) => console.error(line) : null },
        agent: async (task, { baseURL, apiKey, model, session }) => {
          calls += 1;
          if (calls === 2) throw new Error("a crash in the user's agent");
          const openai = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
          const conversation: Message[] = [...session!.messages];
          for (let turn = 0; turn < 4; turn++) {
            const completion = await openai.chat.completions.create({
              model,
              messages: conversation as OpenAI.ChatCompletionMessageParam[],
              tools: session!.tools as OpenAI.ChatCompletionTool[],
              max_tokens: 96,
              temperature: 0,
            });
            const message = completion.choices[0].message as Message;
            conversation.push(message);
            const reply = await session!.interact(message as never);
            conversation.push(...reply.messages);
            if (reply.finish)
              return task.index % 2 === 0 ? undefined : { reward: reply.reward * 0.5 };
          }
          return undefined;
        },
      });
      const scheduler = new RolloutScheduler({
        client,
        tokenizer: policy.tokenizer!,
        pool,
        buffer,
        tasks: [{ name: "kg", indices: family.indicesAt("train", 0).slice(0, 2) }],
        groupSize: 3,
        maxConcurrentEpisodes: 6,
        maxGroups: 2,
        seed: 4,
        playEpisode: episodes.play,
        onEpisode: (t) =>
          process.env.GATEWAY_DEBUG && console.error(`episode ${t.status} ${t.error ?? ""}`),
        episode: { maxTokens: 1280, maxNewTokensPerTurn: 96, infrastructureRetries: 0 },
      });
      try {
        await scheduler.start();
        if (process.env.GATEWAY_DEBUG) console.error("scheduler done");
        const groups = buffer.takeAvailable();
        assert.equal(groups.length, 2);
        const trajectories = groups.flatMap((group) => group.trajectories);
        assert.equal(trajectories.length, 6);
        const crashed = trajectories.filter((t) => t.status === "task error");
        assert.equal(crashed.length, 1, "the crashing episode is an infrastructure fault");
        assert.ok(
          crashed[0].masked &&
            crashed[0].reward === 0 &&
            /crash in the user's agent/.test(crashed[0].error ?? ""),
        );
        for (const trajectory of trajectories.filter((t) => !t.masked)) {
          assert.ok(trajectory.turns.length >= 1);
          for (const turn of trajectory.turns) {
            const sampled = sampledAfter(
              ownLogged.log,
              Array.from(trajectory.tokens.subarray(0, turn.generated[0])),
              trajectory.tokens.subarray(...turn.generated),
            );
            assert.ok(same(trajectory.tokens.subarray(...turn.generated), sampled.tokens));
            assert.ok(
              same(
                trajectory.logprobs.subarray(...turn.generated),
                Float32Array.from(sampled.logprobs),
              ),
            );
          }
          if (trajectory.status === "completed" && trajectory.index % 2 === 1)
            assert.equal(trajectory.reward, trajectory.environmentReward, "the user's reward");
        }
        // The request asked for temperature 0; the gateway sampled at the engine's (the rollout's).
        assert.ok(
          trajectories.some((t) => Array.from(t.logprobs).some((logprob) => logprob < -1e-3)),
          "sampled, not greedy",
        );
        console.log(
          `AgentEpisodes: ${trajectories.map((t) => `${t.status}/${t.reward}`).join(", ")}`,
        );
      } finally {
        buffer.close();
        await episodes.close();
        own.close();
      }
    });

    test("the template check: the warm start's template is append-only for tool-calling conversations", () => {
      const check = checkTemplate(policy.tokenizer!);
      assert.equal(check.appendOnly, true, JSON.stringify(check.steps));
      assert.ok(check.steps.length >= 4);
      // A template that drops earlier assistant content (as reasoning templates do) is caught.
      const dropping = {
        applyChatTemplate: (
          messages: readonly Message[],
          options?: { addGenerationPrompt?: boolean },
        ) => {
          const lastUser = messages.map((m) => m.role).lastIndexOf("user");
          return (
            messages
              .map(
                (m, i) =>
                  `<${m.role}>${m.role === "assistant" && i < lastUser ? "" : (m.content ?? "")}`,
              )
              .join("") + (options?.addGenerationPrompt ? "<assistant>" : "")
          );
        },
      };
      const caught = checkTemplate(dropping);
      assert.equal(caught.appendOnly, false);
      assert.ok(caught.steps.some((step) => !step.appendOnly && step.divergesAt !== undefined));
    });
  },
);

/** AI SDK response messages (`tool-call` / `tool-result` parts) in OpenAI's chat form. */
function toOpenAIMessages(messages: readonly unknown[]): Message[] {
  const out: Message[] = [];
  for (const message of messages as {
    role: string;
    content:
      | string
      | {
          type: string;
          text?: string;
          toolCallId?: string;
          toolName?: string;
          input?: unknown;
          output?: { type: string; value: unknown };
        }[];
  }[]) {
    const parts =
      typeof message.content === "string"
        ? [{ type: "text", text: message.content }]
        : message.content;
    if (message.role === "assistant") {
      const text = parts
        .filter((p) => p.type === "text")
        .map((p) => p.text ?? "")
        .join("");
      const calls = parts
        .filter((p) => p.type === "tool-call")
        .map((p) => ({
          id: p.toolCallId!,
          type: "function" as const,
          function: { name: p.toolName!, arguments: JSON.stringify(p.input) },
        }));
      out.push(
        calls.length > 0
          ? { role: "assistant", content: text || null, tool_calls: calls }
          : { role: "assistant", content: text },
      );
    } else if (message.role === "tool") {
      for (const part of parts) {
        if (part.type !== "tool-result") continue;
        const value = part.output?.value;
        out.push({
          role: "tool",
          tool_call_id: part.toolCallId!,
          content: typeof value === "string" ? value : JSON.stringify(value),
        });
      }
    }
  }
  return out;
}
