/**
 * The same agentic RL workload in `sync` and `async` mode, in one process, and their
 * trained tokens/s:
 *   npm run bench -- pipeline
 * Target: async ≥ 2.5× sync.
 *
 * Workload (identical for both modes): the `tiny` preset (random weights) with the compact
 * chat template (the CLI's default for fresh models: a 52-token opening prompt) on echo tasks
 * that need 3-8 turns; each turn generates up to 24 tokens (a tool call is 23; random
 * weights always use all 24) and the environment answers with a short observation (~25
 * tokens); every environment step takes a heavy-tailed time (log-normal, median 50 ms, p99 2 s, as in the rollout benchmark).
 * Each step trains on `groups × episodes` (the batch shapes of `BATCHES`). Both modes
 * run the same engine settings and at most `MAX_CONCURRENT_EPISODES` episodes at once:
 * - sync: one batch generated with the current weights (all its episodes at once), then
 *   one training step in the main thread, repeat;
 * - async: episodes run continuously (up to `BUFFER_GROUPS_PER_BATCH_GROUP` steps' worth of groups in flight or waiting),
 *   the learner trains in a worker thread on the oldest complete groups, episodes keep
 *   their KV caches across weight updates (`keepCachesOnUpdate`, the loop's async default), groups older than
 *   `MAX_STALENESS` versions are dropped.
 *
 * Threads and cores: tfjs's wasm backend computes on one core per thread. Generation runs in
 * the main thread, which waits on the environments about half the time; training is the
 * larger part of the work. In async mode the learner therefore trains data-parallel (the
 * loop's default, `gradientThreads: 2`): a gradient thread with its own copy of the policy
 * gets the weights and claims micro-batches from the same counter as the learner thread
 * (packages/trainer/src/rl/threads/gradient-thread.ts), so training takes whatever the rollout thread
 * leaves of the two cores. The update is the single-thread one (up to float summation
 * order). Sync mode keeps the learner in the main thread, single-threaded: the baseline.
 * With a gradient thread the micro-batch budget shrinks to ~4 micro-batches per thread
 * (less padding, too: the "processed" column).
 * Throughput counts steps 2… (step 1 includes warm-up: kernel compilation, the first batch).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { InProcessEnvironmentClient } from "@agentrl/envs";
import { runTraining, type TrainingRunOptions } from "@agentrl/trainer";
import { echoFamily, testPolicy, testTokenizer } from "../packages/rollout/src/testing/fixtures.js";
import { environmentLatencyMs, seededUniform } from "./latency.js";
import type { BenchResult } from "./types.js";

/** Optimizer steps per mode (`AGENTRL_BENCH_STEPS`). */
const STEPS = Number(process.env.AGENTRL_BENCH_STEPS ?? 16);
/**
 * Batch shapes measured, `groups x episodes` per step (`AGENTRL_BENCH_BATCHES`, e.g. "2x4").
 * The ratio depends on the shape: training time grows with the episodes of a step, the
 * straggler wait of sync mode much less (it is the slowest episode of the batch), so async
 * gains most on small batches, where environment latency is a larger share of a sync step.
 */
const BATCHES = (process.env.AGENTRL_BENCH_BATCHES ?? "1x4,2x4,1x8").split(",").map((shape) => {
  const [groups, episodes] = shape.split("x").map(Number);
  if (!(groups > 0 && episodes > 0))
    throw new Error(`AGENTRL_BENCH_BATCHES: "${shape}" is not GROUPSxEPISODES`);
  return { groups, episodes };
});
const MIN_TURNS = 3;
const MAX_TURNS = 8;
/** Up to 24 new tokens a turn: a tool call `<tool_call>{"name": "echo", "arguments": {"text": "hello number 12"}}</tool_call><|im_end|>` is 23 tokens in this tokenizer. */
const MAX_NEW_TOKENS_PER_TURN = 24;
/** Episodes at once (sync launches only its batch). */
const MAX_CONCURRENT_EPISODES = 24;
/** Groups in flight or waiting in the buffer (async's back-pressure), per group trained a step: 3 steps' worth, so that groups are at most ~3 versions old when trained. */
const BUFFER_GROUPS_PER_BATCH_GROUP = 3;
const MAX_STALENESS = 4;
/** Token budget of a learner micro-batch (`AGENTRL_BENCH_MICRO_BATCH_TOKENS`; see `measure`). */
const MICRO_BATCH_TOKENS = Number(process.env.AGENTRL_BENCH_MICRO_BATCH_TOKENS ?? 2048);
/**
 * Episodes recorded per step into trajectories.jsonl for the dashboard (`AGENTRL_BENCH_TRAJECTORIES`,
 * the config's `run.trajectories`); default 0, off, so the figures compare with earlier runs. Run once
 * with 0 and once with 8 to measure what recording costs.
 */
const TRAJECTORIES = Number(process.env.AGENTRL_BENCH_TRAJECTORIES ?? 0);
/** Modes to run (`AGENTRL_BENCH_MODES=async` for one). */
const MODES = (process.env.AGENTRL_BENCH_MODES ?? "sync,async").split(",") as ("sync" | "async")[];
/**
 * Gradient threads of each mode's learner (`AGENTRL_BENCH_SYNC_GRADIENT_THREADS`,
 * `AGENTRL_BENCH_ASYNC_GRADIENT_THREADS`); default the loop's: 1 in sync mode (the
 * baseline), 2 in async mode (the learner thread and a gradient thread share out each update).
 */
const GRADIENT_THREADS = {
  sync: gradientThreads(process.env.AGENTRL_BENCH_SYNC_GRADIENT_THREADS, 1),
  async: gradientThreads(process.env.AGENTRL_BENCH_ASYNC_GRADIENT_THREADS, 2),
};

function gradientThreads(value: string | undefined, fallback: 1 | 2): 1 | 2 {
  if (value === undefined || value === "") return fallback;
  if (value !== "1" && value !== "2") throw new Error(`gradient threads: "${value}" is not 1 or 2`);
  return Number(value) as 1 | 2;
}

interface Batch {
  groups: number;
  episodes: number;
}

interface ModeResult {
  mode: "sync" | "async";
  batch: Batch;
  seconds: number;
  steps: number;
  trainedTokens: number;
  processedTokens: number;
  tokensPerSecond: number;
  episodesPerSecond: number;
  /** Shares of the wall time: waiting for a batch, training (as the loop sees it). */
  waitShare: number;
  trainShare: number;
  /** Main thread busy (event-loop utilization): generation, and training in sync mode. */
  mainThreadBusy: number;
  /** Cores used on average over steps 2…: by this process (all its threads), by everything else on the machine. */
  processCores: number;
  otherCores: number;
  meanDecodeBatch: number;
  /** Gradient threads of the learner, and the share of micro-batches the gradient thread computed. */
  gradientThreads: number;
  peerShare: number;
  maxStaleness: number;
  droppedStaleGroups: number;
  /** Share of the wall time the main thread spent recording trajectories for the dashboard. */
  recordingShare: number;
}

async function measure(
  mode: "sync" | "async",
  batch: Batch,
  modelDirectory: string,
): Promise<ModeResult> {
  const random = seededUniform(5);
  const family = echoFamily({
    size: 64,
    minTurnsNeeded: MIN_TURNS,
    maxTurnsNeeded: MAX_TURNS,
    maxTurns: MAX_TURNS,
    latency: () => environmentLatencyMs(random),
  });
  const client = new InProcessEnvironmentClient([family], { concurrency: 1024 });
  const runDirectory = mkdtempSync(join(tmpdir(), `agentrl-bench-${mode}-`));
  const marks: { at: number; metrics: Record<string, number>; busy: number }[] = [];
  let utilization = performance.eventLoopUtilization();
  let afterFirstStep: ReturnType<typeof performance.eventLoopUtilization> | undefined;
  let steadyBusy = 0;
  let cpuAfterFirstStep: CpuReading | undefined;
  let steadyCpu: { process: number; others: number } | undefined;
  const began = performance.now();
  const options: TrainingRunOptions = {
    modelDirectory,
    runDirectory,
    client,
    mode,
    tasks: [{ name: "echo" }],
    steps: STEPS,
    batchGroups: batch.groups,
    groupSize: batch.episodes,
    seed: 3,
    // Random weights complete every echo episode alike: keep uniform groups so both modes train on all 8 episodes.
    // Micro-batches of 2,048 padded tokens: rows of 3- and 8-turn episodes differ ~2× in length, and one 4,096-token
    // micro-batch pads them all to the longest (measured: 3,600 instead of 2,920 tokens processed, 8.5 vs 6.7 s a step).
    learner: {
      schedule: { learningRate: 1e-5 },
      grpo: { klCoefficient: 0, skipUniformGroups: false, microBatchTokens: MICRO_BATCH_TOKENS },
      gradientThreads: GRADIENT_THREADS[mode],
    },
    rollout: {
      maxConcurrentEpisodes: MAX_CONCURRENT_EPISODES,
      bufferGroups: BUFFER_GROUPS_PER_BATCH_GROUP * batch.groups,
      maxStaleness: MAX_STALENESS,
      engine: { temperature: 0.8 }, // async keeps KV caches across updates (the loop's default)
      episode: {
        maxTurns: MAX_TURNS,
        maxNewTokensPerTurn: MAX_NEW_TOKENS_PER_TURN,
        maxTokens: 2048,
      },
    },
    crossPolicy: { staleProbability: 0, refreshEvery: 25 },
    checkpoint: { every: 1_000_000, keep: 1 },
    trajectories: { episodesPerStep: TRAJECTORIES },
    resume: false,
    onStep: (record) => {
      const busy = performance.eventLoopUtilization(utilization).utilization;
      utilization = performance.eventLoopUtilization();
      marks.push({ at: performance.now(), metrics: record.metrics, busy });
      if (afterFirstStep) {
        steadyBusy = performance.eventLoopUtilization(afterFirstStep).utilization;
        steadyCpu = coresUsedSince(cpuAfterFirstStep!);
      } else {
        afterFirstStep = performance.eventLoopUtilization();
        cpuAfterFirstStep = readCpu();
      }
      const m = record.metrics;
      console.log(
        `[pipeline] ${batch.groups}x${batch.episodes} ${mode} step ${record.step} at ${((performance.now() - began) / 1000).toFixed(1)} s: wait ${m["time/wait"].toFixed(2)} s, train ${m["time/train"].toFixed(2)} s ` +
          `(${m["train/processedTokens"]} tokens, ${m["train/peerMicroBatches"]}/${m["train/microBatches"]} micro-batches in the gradient thread), staleness ${m.staleness}, decode batch ${m["rollout/mean_decode_batch"]?.toFixed(1)}, main thread busy ${(100 * busy).toFixed(0)} %`,
      );
    },
  };
  try {
    await runTraining(options);
  } finally {
    rmSync(runDirectory, { recursive: true, force: true });
  }
  const steady = marks.slice(1);
  const seconds = (marks[marks.length - 1].at - marks[0].at) / 1000;
  const sum = (key: string) => steady.reduce((n, m) => n + (m.metrics[key] ?? 0), 0);
  const trainedTokens = sum("train/trainedTokens");
  return {
    mode,
    batch,
    seconds,
    steps: steady.length,
    trainedTokens,
    processedTokens: sum("train/processedTokens"),
    tokensPerSecond: trainedTokens / seconds,
    episodesPerSecond: (steady.length * batch.groups * batch.episodes) / seconds,
    waitShare: sum("time/wait") / seconds,
    trainShare: sum("time/train") / seconds,
    mainThreadBusy: steadyBusy,
    processCores: steadyCpu?.process ?? NaN,
    otherCores: steadyCpu?.others ?? NaN,
    meanDecodeBatch: sum("rollout/mean_decode_batch") / steady.length,
    gradientThreads: GRADIENT_THREADS[mode],
    peerShare: sum("train/peerMicroBatches") / Math.max(1, sum("train/microBatches")),
    maxStaleness: Math.max(...steady.map((m) => m.metrics.staleness)),
    droppedStaleGroups: marks[marks.length - 1].metrics["buffer/dropped_stale_groups"] ?? 0,
    recordingShare: sum("time/trajectory_log") / seconds,
  };
}

interface CpuReading {
  at: number;
  /** This process's CPU time (all threads), µs. */
  process: number;
  /** The whole machine's busy time (/proc/stat, clock ticks), or undefined off Linux. */
  machine: number | undefined;
}

function readCpu(): CpuReading {
  const usage = process.cpuUsage();
  let machine: number | undefined;
  try {
    const [user, nice, system, , , irq, softirq, steal] = readFileSync("/proc/stat", "utf8")
      .split("\n")[0]
      .trim()
      .split(/\s+/)
      .slice(1)
      .map(Number);
    machine = user + nice + system + irq + softirq + steal;
  } catch {
    machine = undefined;
  }
  return { at: performance.now(), process: usage.user + usage.system, machine };
}

/**
 * Cores used since `before` by this process and by the rest of the machine. The load
 * average cannot tell: it counts this process's own threads. Another job, even niced, in
 * another session gets its own scheduler share (Linux autogroups) and takes a core from async.
 */
function coresUsedSince(before: CpuReading): { process: number; others: number } {
  const now = readCpu();
  const seconds = (now.at - before.at) / 1000;
  const processCores = (now.process - before.process) / 1e6 / seconds;
  const ticksPerSecond = 100; // USER_HZ
  const machineCores =
    now.machine !== undefined && before.machine !== undefined
      ? (now.machine - before.machine) / ticksPerSecond / seconds
      : NaN;
  return { process: processCores, others: Math.max(0, machineCores - processCores) };
}

/**
 * Upper bound of async / sync with two free cores, from a (single-threaded) sync run: a
 * sync step takes wait + train seconds, of which the main thread is busy generating
 * `busy × step − train`. Async can at best run that generation beside training: with one
 * training thread a step takes the larger of the two; with `threads` training threads
 * (data-parallel) training can also fill the rest of the rollout's core, so a step takes at
 * least the rollout, training spread over the threads, and the total work over 2 cores.
 */
function boundWithTwoFreeCores(sync: ModeResult, threads: number): number {
  const step = sync.seconds;
  const train = sync.trainShare * step;
  const rolloutBusy = Math.max(0, sync.mainThreadBusy * step - train);
  return step / Math.max(rolloutBusy, train / Math.min(threads, 2), (train + rolloutBusy) / 2);
}

export async function run(): Promise<BenchResult> {
  const tokenizer = testTokenizer(4096, { chatTemplate: "compact" });
  const policy = await testPolicy({ preset: "tiny", tokenizer, seed: 1 });
  const modelDirectory = mkdtempSync(join(tmpdir(), "agentrl-bench-model-"));
  await policy.save(modelDirectory);
  policy.dispose();
  const loads: number[] = [loadavg()[0]];
  const rows: string[] = [];
  const ratios: { batch: Batch; ratio: number }[] = [];
  const allResults: ModeResult[] = [];
  try {
    for (const batch of BATCHES) {
      const results: ModeResult[] = [];
      for (const mode of MODES) {
        const result = await measure(mode, batch, modelDirectory);
        loads.push(loadavg()[0]);
        console.log(
          `[pipeline] ${batch.groups}x${batch.episodes} ${mode}: ${result.tokensPerSecond.toFixed(1)} trained tokens/s over ${result.seconds.toFixed(1)} s; cores used: ${result.processCores.toFixed(2)} by this process, ${result.otherCores.toFixed(2)} by others`,
        );
        results.push(result);
        allResults.push(result);
      }
      const sync = results.find((r) => r.mode === "sync");
      const async = results.find((r) => r.mode === "async");
      const ratio = sync && async ? async.tokensPerSecond / sync.tokensPerSecond : NaN;
      // What async could reach with a core for each of its two threads, from sync's own step: a sync step is
      // rollout (busy) + straggler wait (idle) + training; async at best overlaps rollout and training completely.
      const bound = sync ? boundWithTwoFreeCores(sync, GRADIENT_THREADS.async) : NaN;
      ratios.push({ batch, ratio });
      for (const r of results) {
        const last = r.mode === "async" || !async;
        rows.push(
          `| ${r.batch.groups} × ${r.batch.episodes} | ${r.mode} | ${r.tokensPerSecond.toFixed(1)} | ${r.episodesPerSecond.toFixed(2)} | ${r.trainedTokens} / ${r.processedTokens} | ${r.seconds.toFixed(1)} | ${(100 * r.waitShare).toFixed(0)} % | ${(100 * r.trainShare).toFixed(0)} % | ${(100 * r.mainThreadBusy).toFixed(0)} % | ${r.processCores.toFixed(2)} / ${r.otherCores.toFixed(2)} | ${r.meanDecodeBatch.toFixed(1)} | ${r.gradientThreads}${r.gradientThreads > 1 ? ` (${(100 * r.peerShare).toFixed(0)} %)` : ""} | ${r.maxStaleness} / ${r.droppedStaleGroups} | ${last ? `**${ratio.toFixed(2)}×** (bound ${bound.toFixed(2)}×)` : ""} |`,
        );
      }
    }
  } finally {
    rmSync(modelDirectory, { recursive: true, force: true });
  }
  const verdict = ratios
    .filter((r) => Number.isFinite(r.ratio))
    .map(
      (r) =>
        `${r.batch.groups} × ${r.batch.episodes}: ${r.ratio.toFixed(2)}× (${r.ratio >= 2.5 ? "met" : "NOT met"})`,
    )
    .join("; ");
  const busiestOthers = Math.max(0, ...allResults.map((r) => r.otherCores).filter(Number.isFinite));
  const markdown = [
    `### Pipeline: sync vs async (${STEPS} steps per mode and batch shape)`,
    "",
    `\`tiny\` preset (random weights, vocab ${tokenizer.vocabSize}, compact chat template: 52-token opening prompt), echo tasks of ${MIN_TURNS}-${MAX_TURNS} turns,`,
    `${MAX_NEW_TOKENS_PER_TURN} new tokens per turn (a tool call is 23), ~25-token observations, every environment step sleeps a log-normal time (median 50 ms, p99 2 s).`,
    `Both modes: the same engine settings and the same trained samples per step; at most ${MAX_CONCURRENT_EPISODES} episodes at once (sync generates its batch all at once, then trains in the main thread);`,
    `async: learner in a worker thread, up to ${BUFFER_GROUPS_PER_BATCH_GROUP} steps' worth of groups in flight or waiting, episodes keep their KV caches across weight updates, max staleness ${MAX_STALENESS}.`,
    `Learner: GRPO, micro-batches of at most ${MICRO_BATCH_TOKENS.toLocaleString("en-US")} padded tokens; sync: in the main thread, ${GRADIENT_THREADS.sync === 1 ? "single-threaded" : "with a gradient thread"}; async: in a worker thread${GRADIENT_THREADS.async === 2 ? ", data-parallel with a gradient thread (its own policy copy; the two claim micro-batches from one counter, ~4 per thread, and the learner sums the gradients before the one clipped AdamW step)" : ", single-threaded"}.`,
    `Trajectory recording for the dashboard: ${TRAJECTORIES > 0 ? `${TRAJECTORIES} episodes per step, ${allResults.map((r) => `${r.batch.groups} × ${r.batch.episodes} ${r.mode}: ${(100 * r.recordingShare).toFixed(2)} %`).join(", ")} of the wall time spent recording (main thread)` : "off"} (\`AGENTRL_BENCH_TRAJECTORIES\`).`,
    "Figures over steps 2… (step 1 is warm-up). Trained tokens = generated tokens in the loss; processed = all tokens run through the learner.",
    GRADIENT_THREADS.async === 2
      ? "Bound = what async could reach on two free cores, from sync's own figures: sync step / max(rollout busy, training / 2, (training + rollout busy) / 2)."
      : "Bound = what async could reach with a free core for each of its two threads, from sync's own figures (sync step / max(training, rollout busy)).",
    "",
    "| groups × episodes per step | mode | trained tokens/s | episodes/s | trained / processed tokens | seconds | waiting for data | training | main thread busy | cores used: this process / other processes | mean decode batch | gradient threads (gradient thread's share) | max staleness / dropped groups | async / sync |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ...rows,
    "",
    `**async / sync** (target ≥ 2.5×): ${verdict}. Machine load average (1 min) before and after each mode: ${loads.map((l) => l.toFixed(1)).join(", ")} on ${cpus().length} cores` +
      (busiestOthers > 0.2
        ? `; **other processes used up to ${busiestOthers.toFixed(2)} cores during a mode: these figures are not from a quiet machine**.`
        : "; other processes used at most " + busiestOthers.toFixed(2) + " cores during any mode."),
    "",
    "Why the ratio falls as the batch grows: on 2 cores async can at most keep both cores busy with rollout and training, so beyond 2× it gains",
    "only the time sync spends idle, waiting for the slowest episode of its batch. Training time grows with the episodes of a step; that wait",
    "(the slowest of a few heavy-tailed episodes) hardly does. The gradient thread is what lets training use the part of a core the rollout",
    "thread leaves idle (with a single training thread async was training-bound, the learner 96-99 % busy, the rollout thread ~50 %).",
    "With other jobs running, the process's threads share one scheduler share (Linux autogroups), so async loses its second core.",
  ].join("\n");
  return { name: "pipeline", markdown };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  run().then((result) => {
    console.log(result.markdown);
    process.exit(0);
  });
}
