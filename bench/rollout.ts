/**
 * Rollout throughput: generated tokens/s with 1, 8, 32 and 64 concurrent episodes, on the
 * `tiny` preset (random weights, so every turn runs to the per-turn token limit) against
 * simulated environments whose every step takes a heavy-tailed time (log-normal, median
 * 50 ms, p99 2 s). Also the engine's batch occupancy (mean sequences per decode step).
 *   npm run bench -- rollout
 * Target: 32 concurrent episodes give at least 5× the tokens/s of 1.
 */
import { cpus, loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import * as tf from "@tensorflow/tfjs-core";
import {
  PolicyPool,
  RolloutScheduler,
  TrajectoryBuffer,
  createPolicyEngine,
  type InferenceEngineOptions,
} from "@agentrl/rollout";
import type { Policy } from "@agentrl/policy";
import {
  FaultyClient,
  echoFamily,
  testPolicy,
  testTokenizer,
  type Tokenizer,
} from "../packages/rollout/src/testing/fixtures.js";
import { environmentLatencyMs, seededUniform } from "./latency.js";
import type { BenchResult } from "./types.js";

/** Concurrency levels measured (`AGENTRL_BENCH_CONCURRENCIES=1,32` to pick some). */
const CONCURRENCIES = (process.env.AGENTRL_BENCH_CONCURRENCIES ?? "1,8,32,64")
  .split(",")
  .map(Number);
/** Wall time of each measurement, seconds (after a short warm-up). */
const SECONDS_PER_LEVEL = Number(process.env.AGENTRL_BENCH_SECONDS ?? 20);
/** Each level's time is split into this many windows, measured in interleaved rounds. */
const ROUNDS = Number(process.env.AGENTRL_BENCH_ROUNDS ?? 2);
const MAX_NEW_TOKENS_PER_TURN = 32;
/** Chat template of the tokenizer (`AGENTRL_BENCH_TEMPLATE`): `compact` (the CLI's default for fresh models; 52-token prompt) or `qwen2.5` (146). */
const CHAT_TEMPLATE = (process.env.AGENTRL_BENCH_TEMPLATE ?? "compact") as "compact" | "qwen2.5";

/** Extra engine options as JSON (`AGENTRL_BENCH_ENGINE='{"joinIntervalSteps":0}'`), for experiments. */
const ENGINE_OVERRIDES = JSON.parse(
  process.env.AGENTRL_BENCH_ENGINE ?? "{}",
) as InferenceEngineOptions;

interface Level {
  concurrency: number;
  tokensPerSecond: number;
  episodesPerSecond: number;
  meanBatchSize: number;
  occupancy: number;
  decodeShare: number;
  prefillShare: number;
  msPerDecodeStep: number;
}

/** Sums of one concurrency level over its measurement windows. */
interface Totals {
  seconds: number;
  generatedTokens: number;
  episodes: number;
  decodeSteps: number;
  batchSum: number;
  decodeMs: number;
  prefillMs: number;
  prefillCalls: number;
  prefilledTokens: number;
  fedByDecode: number;
}

/** Runs `concurrency` episodes at once for a 2 s warm-up plus `seconds`; returns what the engine did in the measured part. */
async function measureWindow(
  policy: Policy,
  tokenizer: Tokenizer,
  concurrency: number,
  seconds: number,
  seed: number,
  latencySeed: number,
): Promise<Totals> {
  // Every level of a round draws the same sequence of environment delays.
  const random = seededUniform(latencySeed);
  const client = new FaultyClient([
    echoFamily({
      size: 64,
      maxTurnsNeeded: 4,
      maxTurns: 8,
      latency: () => environmentLatencyMs(random),
    }),
  ]);
  const engine = createPolicyEngine(policy, {
    temperature: 0.8,
    maxBatchSize: 64,
    seed,
    ...ENGINE_OVERRIDES,
  });
  const scheduler = new RolloutScheduler({
    client,
    tokenizer,
    pool: new PolicyPool({ current: engine }),
    buffer: new TrajectoryBuffer({ capacityGroups: 1_000_000 }),
    tasks: [{ name: "echo" }],
    groupSize: Math.min(8, concurrency),
    maxConcurrentEpisodes: concurrency,
    seed,
    episode: { maxNewTokensPerTurn: MAX_NEW_TOKENS_PER_TURN, maxTurns: 8 },
  });
  const done = scheduler.start();
  await new Promise((resolve) => setTimeout(resolve, 2000)); // warm-up: fill the batch
  const before = engine.stats();
  const episodesBefore = scheduler.snapshot().episodes;
  const began = performance.now();
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  const after = engine.stats();
  const measured = (performance.now() - began) / 1000;
  const episodes = scheduler.snapshot().episodes - episodesBefore;
  await scheduler.stop();
  await done;
  engine.close();
  await client.close();
  return {
    seconds: measured,
    generatedTokens: after.generatedTokens - before.generatedTokens,
    episodes,
    decodeSteps: after.decodeSteps - before.decodeSteps,
    batchSum: after.meanBatchSize * after.decodeSteps - before.meanBatchSize * before.decodeSteps,
    decodeMs: after.decodeMs - before.decodeMs,
    prefillMs: after.prefillMs - before.prefillMs,
    prefillCalls: after.prefillCalls - before.prefillCalls,
    prefilledTokens: after.prefilledTokens - before.prefilledTokens,
    fedByDecode: after.decodeFedTokens - before.decodeFedTokens,
  };
}

export async function run(): Promise<BenchResult> {
  const tokenizer = testTokenizer(4096, { chatTemplate: CHAT_TEMPLATE });
  const policy = await testPolicy({ preset: "tiny", tokenizer, seed: 1 });
  // Levels are measured in interleaved rounds (1, 8, 32, 64, 1, 8, …) so that a change of the
  // machine's load during the run affects every level alike.
  const totals = new Map<number, Totals>();
  for (let round = 0; round < ROUNDS; round++) {
    for (const concurrency of CONCURRENCIES) {
      const window = await measureWindow(
        policy,
        tokenizer,
        concurrency,
        SECONDS_PER_LEVEL / ROUNDS,
        concurrency + 1000 * round,
        17 + round,
      );
      const sum = totals.get(concurrency);
      totals.set(
        concurrency,
        sum
          ? (Object.fromEntries(
              Object.entries(sum).map(([key, value]) => [key, value + window[key as keyof Totals]]),
            ) as unknown as Totals)
          : window,
      );
      console.log(
        `[bench rollout] round ${round + 1}/${ROUNDS}, ${concurrency} episodes: ${(window.generatedTokens / window.seconds).toFixed(0)} tokens/s, ${(window.decodeMs / Math.max(1, window.decodeSteps)).toFixed(1)} ms per step at batch ${(window.batchSum / Math.max(1, window.decodeSteps)).toFixed(1)}; prefill ${window.prefillCalls} calls, ${window.prefilledTokens} tokens; fed by decode ${window.fedByDecode}`,
      );
    }
  }
  const levels: Level[] = CONCURRENCIES.map((concurrency) => {
    const t = totals.get(concurrency)!;
    const steps = Math.max(1, t.decodeSteps);
    return {
      concurrency,
      tokensPerSecond: t.generatedTokens / t.seconds,
      episodesPerSecond: t.episodes / t.seconds,
      meanBatchSize: t.batchSum / steps,
      occupancy: t.batchSum / steps / concurrency,
      decodeShare: t.decodeMs / 1000 / t.seconds,
      prefillShare: t.prefillMs / 1000 / t.seconds,
      msPerDecodeStep: t.decodeMs / steps,
    };
  });
  policy.dispose();
  const base = levels[0].tokensPerSecond;
  const rows = levels.map(
    (l) =>
      `| ${l.concurrency} | ${l.tokensPerSecond.toFixed(0)} | ${(l.tokensPerSecond / base).toFixed(1)}× | ${l.episodesPerSecond.toFixed(2)} | ${l.meanBatchSize.toFixed(1)} | ${(100 * l.occupancy).toFixed(0)} % | ${l.msPerDecodeStep.toFixed(1)} | ${(100 * l.decodeShare).toFixed(0)} % / ${(100 * l.prefillShare).toFixed(0)} % |`,
  );
  const speedup32 = (levels.find((l) => l.concurrency === 32)?.tokensPerSecond ?? 0) / base;
  const markdown = [
    "## Rollout: continuous batching against slow environments",
    "",
    `\`tiny\` preset (random weights, vocab ${tokenizer.vocabSize}, ${CHAT_TEMPLATE} chat template), backend ${tf.getBackend()}, temperature 0.8, ${MAX_NEW_TOKENS_PER_TURN} new tokens per turn, echo tasks of 1-4 turns;`,
    `every environment step sleeps a log-normal time (median 50 ms, p99 2 s). ${SECONDS_PER_LEVEL} s per row, in ${ROUNDS} interleaved windows (each after a 2 s warm-up).`,
    "Occupancy = mean sequences per decode step / concurrent episodes.",
    "",
    "| concurrent episodes | generated tokens/s | vs 1 | episodes/s | mean decode batch | occupancy | ms per decode step | time in decode / prefill |",
    "|---|---|---|---|---|---|---|---|",
    ...rows,
    "",
    `32 concurrent episodes: ${speedup32.toFixed(1)}× the tokens/s of 1 (target ≥ 5×: ${speedup32 >= 5 ? "met" : "NOT met"}). Machine load average during the run: ${loadavg()[0].toFixed(1)} on ${cpus().length} cores`,
    "(compute slows down with load, the simulated environment latency does not).",
  ].join("\n");
  return { name: "rollout", markdown };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  run().then((result) => console.log(result.markdown));
}
