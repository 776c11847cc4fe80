/**
 * Greedy KG success of the AI SDK agent (examples/agents/kg-ai-sdk.ts), played unmodified
 * through the recording gateway at temperature 0: how docs/harness.md's before/after table
 * is measured.
 *
 *   node --conditions=source --import tsx examples/agents/evaluate-kg-agent.ts \
 *     --model models/warmstart --difficulty 0 --world 0 --split test --limit 100
 *
 * `--exclude-topics people.person,film.film --test-size 600` plays only the questions whose
 * topic entity is of none of those types (among 600 test questions of the difficulty).
 *
 * `--temperature 1 --samples 4 --seed 1` plays every question 4 times, sampling at
 * temperature 1 (sampler seed 1): each question's reward is then its success rate over the 4
 * (the expected success of the sampling policy, which GRPO optimises), and `success` their mean.
 *
 * Prints one JSON line: { model, difficulty, world, split, instances, samples, success,
 * standardError }.
 */
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import {
  InProcessEnvironmentClient,
  createTaskFamily,
  kg,
  type InteractResult,
} from "@agentrl/envs";
import { Policy, initBackend } from "@agentrl/policy";
import { RecordingGateway, createPolicyEngine, type AgentSession } from "@agentrl/rollout";
import agent from "./kg-ai-sdk.js";

export interface KgAgentEvaluation {
  model: string;
  difficulty: number;
  world: number;
  split: "train" | "test";
  instances: number;
  /** Episodes played per instance. */
  samples: number;
  success: number;
  /** Standard error of `success` over instances: √(variance of the rewards / instances). */
  standardError: number;
  /** Each instance's reward (its success rate over `samples` episodes), by index. */
  rewards: Record<number, number>;
}

/** Plays `limit` KG instances of one difficulty with the agent (greedily unless a temperature is given), `samples` times each; their success rate. */
export async function evaluateKgAgent(options: {
  model: string;
  difficulty: number;
  world?: number;
  split?: "train" | "test";
  limit?: number;
  offset?: number;
  concurrency?: number;
  /** Sampling temperature; default 0 (greedy). */
  temperature?: number;
  /** Episodes per instance; default 1. */
  samples?: number;
  /** The sampler's seed; default 0. */
  seed?: number;
  /** KG family options beyond the world seed (e.g. `oneShot`, `testSize`). */
  kg?: Record<string, unknown>;
  /** Play only questions whose topic entity has none of these types (`kg.indicesByTopicType`). */
  excludeTopics?: string[];
}): Promise<KgAgentEvaluation> {
  const world = options.world ?? 0;
  const split = options.split ?? "test";
  await initBackend({ log: null });
  const policy = await Policy.load(options.model, { trainable: false });
  const family = (await createTaskFamily("kg", { ...options.kg, seed: world })) as kg.KgTaskFamily;
  const selected = options.excludeTopics
    ? kg.indicesByTopicType(family, split, options.difficulty, { exclude: options.excludeTopics })
    : family.indicesAt(split, options.difficulty);
  const indices = selected.slice(
    options.offset ?? 0,
    (options.offset ?? 0) + (options.limit ?? 100),
  );
  const client = new InProcessEnvironmentClient([family]);
  const engine = createPolicyEngine(policy, {
    temperature: options.temperature ?? 0,
    seed: options.seed ?? 0,
    maxBatchSize: 8,
    maxSequenceLength: 1280,
  });
  const gateway = new RecordingGateway({
    engine,
    tokenizer: policy.tokenizer!,
    temperature: options.temperature ?? 0,
    maxEpisodeTokens: 1280,
  });
  await gateway.listen(0);
  const samples = options.samples ?? 1;
  const successes: Record<number, number> = {};
  const play = async (index: number, member: number): Promise<number> => {
    const episode = gateway.openEpisode({ task: "kg", index, groupId: `eval-${index}`, member });
    const started = await client.startSample("kg", index);
    let last: InteractResult | undefined;
    const session: AgentSession = {
      messages: started.messages,
      tools: started.tools,
      interact: async (message) => (last = await client.interact(started.sessionId, message)),
    };
    try {
      await agent(
        { name: "kg", index },
        {
          baseURL: episode.baseURL,
          apiKey: episode.apiKey,
          model: gateway.modelName,
          signal: new AbortController().signal,
          taskName: "kg",
          index,
          session,
        },
      );
    } catch {
      // An agent that fails (a session already finished by the tool limit, …) scores its verdict so far.
    }
    if (!last?.finish) await client.cancel(started.sessionId).catch(() => {});
    gateway.finishEpisode(episode.apiKey, 0);
    return last?.finish ? last.reward : 0;
  };
  const episodes = indices.flatMap((index) => Array.from({ length: samples }, () => index));
  let next = 0;
  await Promise.all(
    Array.from({ length: options.concurrency ?? 8 }, async (_, member) => {
      while (next < episodes.length) {
        const index = episodes[next++];
        const reward = await play(index, member);
        successes[index] = (successes[index] ?? 0) + (reward === 1 ? 1 : 0);
      }
    }),
  );
  await gateway.close();
  engine.close();
  policy.dispose();
  const rewards: Record<number, number> = {};
  for (const index of indices) rewards[index] = successes[index] / samples;
  const played = Object.values(rewards);
  const success = played.reduce((sum, reward) => sum + reward, 0) / played.length;
  const variance = played.reduce((sum, reward) => sum + (reward - success) ** 2, 0) / played.length;
  return {
    model: options.model,
    difficulty: options.difficulty,
    world,
    split,
    instances: played.length,
    samples,
    success,
    standardError: Math.sqrt(variance / played.length),
    rewards,
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      model: { type: "string", default: "models/warmstart" },
      difficulty: { type: "string", default: "0" },
      world: { type: "string", default: "0" },
      split: { type: "string", default: "test" },
      limit: { type: "string", default: "100" },
      offset: { type: "string", default: "0" },
      concurrency: { type: "string", default: "8" },
      temperature: { type: "string", default: "0" },
      samples: { type: "string", default: "1" },
      seed: { type: "string", default: "0" },
      "rewards-out": { type: "string" },
      "one-shot": { type: "boolean", default: false },
      "test-size": { type: "string" },
      "exclude-topics": { type: "string" },
    },
  });
  const result = await evaluateKgAgent({
    model: values.model,
    difficulty: Number(values.difficulty),
    world: Number(values.world),
    split: values.split === "train" ? "train" : "test",
    limit: Number(values.limit),
    offset: Number(values.offset),
    concurrency: Number(values.concurrency),
    temperature: Number(values.temperature),
    samples: Number(values.samples),
    seed: Number(values.seed),
    kg: {
      oneShot: values["one-shot"],
      ...(values["test-size"] ? { testSize: Number(values["test-size"]) } : {}),
    },
    ...(values["exclude-topics"] ? { excludeTopics: values["exclude-topics"].split(",") } : {}),
  });
  if (values["rewards-out"]) writeFileSync(values["rewards-out"], JSON.stringify(result.rewards));
  console.log(JSON.stringify({ ...result, rewards: undefined }));
}
