/**
 * Supervised (warm-start) steps per second on one thread and on two (the learner's gradient
 * thread sharing out each step's micro-batches, `Learner.supervised`):
 *   npm run bench -- sft
 *
 * Workload: the shipped `models/warmstart` (d 128, 3 layers, vocabulary 4096, compact chat
 * template); a fixed pool of expert rows (KG, WebShop and ALFWorld, difficulty 0, train
 * split, as `agentrl sft` plays them); `STEPS` steps of `BATCH` rows each, the same rows for
 * both thread counts, after `WARMUP` untimed steps. Learning rate 1e-3, micro-batch budget 4096
 * tokens (the warm start's defaults).
 */
import { performance } from "node:perf_hooks";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { availableParallelism, loadavg } from "node:os";
import { createTaskFamily, playEpisode } from "@agentrl/envs";
import { Learner, expertSequence, type SupervisedRow } from "@agentrl/trainer";
import type { ChatTokenizer } from "@agentrl/rollout";
import type { BenchResult } from "./types.js";

const MODEL = join(fileURLToPath(new URL("..", import.meta.url)), "models", "warmstart");
const TASKS = ["kg", "webshop", "alfworld"];
const BATCH = 8;
const STEPS = Number(process.env.AGENTRL_BENCH_SFT_STEPS ?? 8);
const WARMUP = 1;

async function expertRows(tokenizer: ChatTokenizer, perTask: number): Promise<SupervisedRow[]> {
  const rows: SupervisedRow[] = [];
  for (const task of TASKS) {
    const family = await createTaskFamily(task, { seed: 0 });
    for (const index of family.indicesAt("train", 0).slice(0, perTask)) {
      const episode = await playEpisode(family, index, family.expert(index));
      if (episode.reward >= 1 - 1e-9)
        rows.push(expertSequence(tokenizer, task, episode.messages, episode.tools));
    }
    await family.close?.();
  }
  return rows;
}

/** Seconds per step over `STEPS` timed steps with `threads` gradient threads. */
async function measure(
  threads: 1 | 2,
  batches: SupervisedRow[][],
): Promise<{ secondsPerStep: number; tokensPerSecond: number; peerShare: number }> {
  const learner = await Learner.load(MODEL, {
    grpo: { klCoefficient: 0, microBatchTokens: 4096 },
    schedule: { learningRate: 1e-3 },
    gradientThreads: threads,
  });
  try {
    for (let k = 0; k < WARMUP; k++) await learner.supervised(batches[k]);
    let tokens = 0;
    let peer = 0;
    let micro = 0;
    const started = performance.now();
    for (const batch of batches.slice(WARMUP)) {
      const result = await learner.supervised(batch);
      tokens += batch.reduce((n, row) => n + row.tokens.length, 0);
      peer += result.peerMicroBatches;
      micro += batch.length;
    }
    const seconds = (performance.now() - started) / 1000;
    return {
      secondsPerStep: seconds / STEPS,
      tokensPerSecond: tokens / seconds,
      peerShare: peer / micro,
    };
  } finally {
    await learner.dispose();
  }
}

export async function run(): Promise<BenchResult> {
  const probe = await Learner.load(MODEL, { gradientThreads: 1 });
  const tokenizer: ChatTokenizer = probe.policy.tokenizer!;
  const parameters = probe.policy.model.parameterCount;
  await probe.dispose();
  const pool = await expertRows(tokenizer, Math.ceil(((STEPS + WARMUP) * BATCH) / TASKS.length));
  const batches = Array.from({ length: STEPS + WARMUP }, (_, k) =>
    Array.from({ length: BATCH }, (_, i) => pool[(k * BATCH + i) % pool.length]),
  );
  const meanTokens = pool.reduce((n, row) => n + row.tokens.length, 0) / pool.length;
  const load = loadavg()[0];
  const one = await measure(1, batches);
  const two = await measure(2, batches);
  const lines = [
    "## Supervised steps on one and two threads (`bench/sft.ts`)",
    "",
    `models/warmstart (${parameters.toLocaleString("en-US")} parameters), ${STEPS} steps of ${BATCH} expert rows (KG, WebShop, ALFWorld, difficulty 0; mean ${meanTokens.toFixed(0)} tokens a row) after ${WARMUP} untimed; ${availableParallelism()} cores, load average ${load.toFixed(1)} at the start (shared machine).`,
    "",
    "| gradient threads | s / step | steps / s | tokens / s | micro-batches by the gradient thread |",
    "|---|---:|---:|---:|---:|",
    `| 1 | ${one.secondsPerStep.toFixed(2)} | ${(1 / one.secondsPerStep).toFixed(3)} | ${one.tokensPerSecond.toFixed(0)} | - |`,
    `| 2 | ${two.secondsPerStep.toFixed(2)} | ${(1 / two.secondsPerStep).toFixed(3)} | ${two.tokensPerSecond.toFixed(0)} | ${(100 * two.peerShare).toFixed(0)} % |`,
    "",
    `Speed-up: ${(one.secondsPerStep / two.secondsPerStep).toFixed(2)}×.`,
  ];
  return { name: "sft", markdown: lines.join("\n") };
}
