/**
 * Policy speed on each tfjs backend that loads here:
 *   - the backend's own matmul GFLOP/s (rank-2, no transpose flags);
 *   - prefill tokens/s, decode tokens/s at batch 1 and 32 (tiny preset, KV cache, greedy);
 *   - training tokens/s (forward + backward + AdamW) and the GFLOP/s it achieves,
 *     counted as 6 · parameters · tokens plus attention (12 · layers · T · d per token);
 *   - training tokens/s of the warm-start SFT shape (long rows, small model), with and
 *     without the loss mask passed to tokenLogProbs (not on the slow cpu backend).
 *   npm run bench -- policy
 * The pure-JS cpu backend is 10-20× slower: it runs the same measurements on fewer tokens.
 */
import { performance } from "node:perf_hooks";
import { cpus, loadavg } from "node:os";
import * as tf from "@tensorflow/tfjs-core";
import {
  AdamW,
  Transformer,
  nextTokenLoss,
  presetConfig,
  setBackend,
  tokenLogProbs,
  trainStep,
  type BackendName,
} from "@agentrl/policy";
import { availableBackends } from "@agentrl/policy/internal";
import type { BenchResult } from "./types.js";

interface BackendFigures {
  backend: string;
  matmul: { label: string; gflops: number; cpuGflops: number }[];
  prefillTokensPerSecond: number;
  decodeBatch1: number;
  decodeBatch32: number;
  trainTokensPerSecond: number;
  trainGflops: number;
  trainCpuGflops: number;
  decodeBatch1Cpu: number;
  decodeBatch32Cpu: number;
  trainShape: string;
  /** SFT shape (see `measureSupervisedShape`); absent on the slow cpu backend. */
  supervised?: SupervisedFigures;
}

interface SupervisedFigures {
  /** Real (unpadded) tokens per second, wall and CPU, all positions scored. */
  all: { wall: number; cpu: number };
  /** The same with `tokenLogProbs(..., { mask })` (a third of the positions scored). */
  masked: { wall: number; cpu: number };
}

/** Row lengths and micro-batch budget of the warm-start SFT shape. */
const SUPERVISED_LENGTHS = [320, 480, 560, 640, 760, 900];
const SUPERVISED_MICRO_BATCH_TOKENS = 2048;

/**
 * One `trainStep` of the warm-start SFT shape: the shipped warm-start architecture (d 128,
 * 3 layers, 4 heads / 2 kv heads, vocab 4096, 1.1 M parameters), 6 rows of 320-900 tokens
 * right-padded into micro-batches of at most 2,048 tokens, masked next-token loss (every
 * third position scored, like assistant turns). Tokens counted without padding.
 */
function measureSupervisedShape(): SupervisedFigures {
  const config = presetConfig("tiny", {
    hiddenSize: 128,
    intermediateSize: 384,
    numHiddenLayers: 3,
    numAttentionHeads: 4,
    numKeyValueHeads: 2,
    headDim: 32,
    maxPositionEmbeddings: 2048,
  });
  const model = new Transformer(config, undefined, { seed: 0 });
  const optimizer = new AdamW(model.variables, { learningRate: 1e-4 });
  const groups: number[][] = [[]];
  for (const length of SUPERVISED_LENGTHS) {
    const group = groups.at(-1)!;
    if ((group.length + 1) * Math.max(length, ...group) > SUPERVISED_MICRO_BATCH_TOKENS)
      groups.push([length]);
    else group.push(length);
  }
  const microBatches = groups.map((lengths) => {
    const width = Math.max(...lengths);
    const ids = new Int32Array(lengths.length * width);
    const mask = new Float32Array(lengths.length * (width - 1));
    lengths.forEach((length, row) => {
      for (let t = 0; t < length; t++)
        ids[row * width + t] = (row * 31 + t * 13) % config.vocabSize;
      for (let t = 1; t < length; t++) mask[row * (width - 1) + t - 1] = t % 3 === 0 ? 1 : 0;
    });
    return {
      ids: tf.tensor2d(ids, [lengths.length, width], "int32"),
      mask: tf.tensor2d(mask, [lengths.length, width - 1]),
    };
  });
  const tokens = SUPERVISED_LENGTHS.reduce((a, b) => a + b, 0);
  const rate = (useMask: boolean) => {
    const seconds = measure(() => {
      trainStep(model, optimizer, microBatches, (m) =>
        tf.tidy(
          () =>
            tf.div(
              tf.neg(
                tf.sum(
                  tf.mul(
                    tokenLogProbs(model, m.ids, useMask ? { mask: m.mask } : {}).logProbs,
                    m.mask,
                  ),
                ),
              ),
              1000,
            ) as tf.Scalar,
        ),
      );
    }, 2);
    return { wall: tokens / seconds.wall, cpu: tokens / seconds.cpu };
  };
  const figures = { all: rate(false), masked: rate(true) };
  for (const m of microBatches) tf.dispose([m.ids, m.mask]);
  optimizer.dispose();
  model.dispose();
  return figures;
}

/** CPU seconds (user + system) this process used since `start`. */
function cpuSecondsSince(start: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1e6;
}

/**
 * Best wall time of `repeats` runs of fn after one warm-up run, and the least CPU time
 * (this process's user + system) of a run: on a shared, loaded machine the CPU time is the
 * steadier figure.
 */
function measure(fn: () => void, repeats: number): { wall: number; cpu: number } {
  fn();
  let wall = Infinity;
  let cpu = Infinity;
  for (let i = 0; i < repeats; i++) {
    const start = performance.now();
    const cpuStart = process.cpuUsage();
    fn();
    cpu = Math.min(cpu, cpuSecondsSince(cpuStart));
    wall = Math.min(wall, (performance.now() - start) / 1000);
  }
  return { wall, cpu };
}

function bestSeconds(fn: () => void, repeats: number): number {
  return measure(fn, repeats).wall;
}

/** GFLOP/s by wall time and by CPU time. */
function matmulGflops(
  m: number,
  k: number,
  n: number,
  repeats: number,
): { wall: number; cpu: number } {
  const a = tf.randomNormal([m, k]);
  const b = tf.randomNormal([k, n]);
  const seconds = measure(() => {
    const c = tf.matMul(a, b);
    c.dataSync();
    c.dispose();
  }, repeats);
  a.dispose();
  b.dispose();
  return { wall: (2 * m * k * n) / seconds.wall / 1e9, cpu: (2 * m * k * n) / seconds.cpu / 1e9 };
}

function measureBackend(backend: string, slow: boolean): BackendFigures {
  const matmul = [
    { label: "[512×512]×[512×512]", shape: [512, 512, 512] },
    { label: "[1×768]×[768×3072]", shape: [1, 768, 3072] },
    { label: "[64×768]×[768×768]", shape: [64, 768, 768] },
  ].map(({ label, shape: [m, k, n] }) => {
    const { wall, cpu } = matmulGflops(m, k, n, slow ? 1 : 8);
    return { label, gflops: wall, cpuGflops: cpu };
  });

  const config = presetConfig("tiny"); // vocab 4096
  const model = new Transformer(config, undefined, { seed: 0 });
  const promptLength = 32;
  const prompt = (i: number) =>
    Array.from({ length: promptLength }, (_, t) => (i * 131 + t * 17) % config.vocabSize);

  // prefill: one 128-token prompt (cpu: 32)
  const longPrompt = Array.from({ length: slow ? 32 : 128 }, (_, t) => (t * 29) % config.vocabSize);
  const prefillSeconds = bestSeconds(
    () => {
      const sequence = model.createSequence();
      model.prefill(sequence, longPrompt);
      sequence.dispose();
    },
    slow ? 1 : 3,
  );

  /** Tokens per wall second and per CPU second. */
  const decode = (batch: number, steps: number): { wall: number; cpu: number } => {
    const sequences = Array.from({ length: batch }, () => model.createSequence());
    let next = sequences.map((s, i) => argmax(model.prefill(s, prompt(i))));
    model.decodeStep(sequences, next); // warm-up (regroups once)
    const start = performance.now();
    const cpuStart = process.cpuUsage();
    for (let step = 0; step < steps; step++) next = model.decodeStep(sequences, next).map(argmax);
    const cpu = cpuSecondsSince(cpuStart);
    const seconds = (performance.now() - start) / 1000;
    for (const s of sequences) s.dispose();
    return { wall: (batch * steps) / seconds, cpu: (batch * steps) / cpu };
  };
  // Interleaved rounds, median of each: a single window swings ±30 % with the machine's load and GC.
  const rounds = slow ? 1 : 3;
  const batch1Rounds: { wall: number; cpu: number }[] = [];
  const batch32Rounds: { wall: number; cpu: number }[] = [];
  for (let round = 0; round < rounds; round++) {
    batch1Rounds.push(decode(1, slow ? 4 : 64));
    batch32Rounds.push(decode(32, slow ? 2 : 32));
  }
  const median = (values: number[]) =>
    [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  const medianRound = (list: { wall: number; cpu: number }[]) => ({
    wall: median(list.map((r) => r.wall)),
    cpu: median(list.map((r) => r.cpu)),
  });
  const decodeBatch1 = medianRound(batch1Rounds);
  const decodeBatch32 = medianRound(batch32Rounds);

  const batch = slow ? 1 : 8;
  const length = slow ? 32 : 128;
  const ids = tf.tensor2d(
    Array.from({ length: batch }, (_, b) =>
      Array.from({ length }, (_, t) => (b * 7 + t * 13) % config.vocabSize),
    ),
    undefined,
    "int32",
  );
  const optimizer = new AdamW(model.variables, { learningRate: 1e-4 });
  const trainSeconds = measure(
    () => trainStep(model, optimizer, [ids], (x) => nextTokenLoss(model, x)),
    slow ? 1 : 6,
  );
  // the load of a shared machine drifts: measure 512³ again right after training and keep
  // the better figure, so the train / matmul ratio compares like with like
  const again = matmulGflops(512, 512, 512, slow ? 1 : 8);
  matmul[0].gflops = Math.max(matmul[0].gflops, again.wall);
  matmul[0].cpuGflops = Math.max(matmul[0].cpuGflops, again.cpu);
  const tokens = batch * (length - 1);
  const flopsPerToken =
    6 * model.parameterCount + 12 * config.numHiddenLayers * (length - 1) * config.hiddenSize;
  optimizer.dispose();
  ids.dispose();
  model.dispose();
  const supervised = slow ? undefined : measureSupervisedShape();
  return {
    backend,
    matmul,
    prefillTokensPerSecond: longPrompt.length / prefillSeconds,
    decodeBatch1: decodeBatch1.wall,
    decodeBatch32: decodeBatch32.wall,
    decodeBatch1Cpu: decodeBatch1.cpu,
    decodeBatch32Cpu: decodeBatch32.cpu,
    trainTokensPerSecond: tokens / trainSeconds.wall,
    trainGflops: (flopsPerToken * tokens) / trainSeconds.wall / 1e9,
    trainCpuGflops: (flopsPerToken * tokens) / trainSeconds.cpu / 1e9,
    trainShape: `${batch}×${length}`,
    ...(supervised ? { supervised } : {}),
  };
}

function argmax(values: Float32Array): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
  return best;
}

export async function run(): Promise<BenchResult> {
  const backends: BackendName[] = await availableBackends();
  const figures: BackendFigures[] = [];
  const before = tf.getBackend() as BackendName;
  try {
    for (const backend of backends) {
      const name = await setBackend(backend, { log: null });
      console.log(`[bench policy] ${name} ...`);
      figures.push(measureBackend(name, name === "cpu"));
    }
  } finally {
    // Benchmarks run one after another in one process: leave the fastest backend for the next one, not `cpu`.
    await setBackend(before, { log: null });
  }
  const parameters = new Transformer(presetConfig("tiny"), undefined, { seed: 0 });
  const parameterCount = parameters.parameterCount;
  parameters.dispose();
  const fixed = (x: number, digits = 0) =>
    x.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
  const lines = [
    "## Policy (tfjs)",
    "",
    `Tiny preset (${fixed(parameterCount)} parameters: d 256, 4 layers, 8 heads / 2 kv heads, vocab 4096). Decode: prompt 32, greedy, KV cache, the median of 3 interleaved windows per batch size (64 steps at batch 1, 32 at batch 32); prefill: one 128-token prompt (cpu: 32); training: forward + backward + AdamW on one batch, GFLOP/s counted as 6·params·tokens + attention. Matmul, prefill and training: best of a few runs; the machine is shared. Backends that do not load here (tfjs-node) are absent.`,
    "",
    `| backend | ${figures[0].matmul.map((m) => `matmul ${m.label} GFLOP/s`).join(" | ")} | prefill tok/s | decode tok/s batch 1 | decode tok/s batch 32 | batch 32 / batch 1 | train tok/s (batch) | train GFLOP/s | train / matmul 512³ |`,
    `|---|${figures[0].matmul.map(() => "---").join("|")}|---|---|---|---|---|---|---|`,
    ...figures.map(
      (f) =>
        `| ${f.backend} | ${f.matmul.map((m) => fixed(m.gflops, 1)).join(" | ")} | ${fixed(f.prefillTokensPerSecond)} | ${fixed(f.decodeBatch1)} | ${fixed(f.decodeBatch32)} | ${fixed(f.decodeBatch32 / f.decodeBatch1, 1)}× | ${fixed(f.trainTokensPerSecond)} (${f.trainShape}) | ${fixed(f.trainGflops, 1)} | ${fixed((100 * f.trainGflops) / f.matmul[0].gflops)} % |`,
    ),
  ];
  lines.push(
    "",
    `Per CPU-second of this process (steadier when other work shares the cores; load average at the end ${loadavg()[0].toFixed(1)} on ${cpus().length} cores):`,
    "",
    "| backend | matmul 512³ GFLOP/s | decode tok/s batch 1 | decode tok/s batch 32 | batch 32 / batch 1 | train GFLOP/s | train / matmul 512³ |",
    "|---|---|---|---|---|---|---|",
    ...figures.map(
      (f) =>
        `| ${f.backend} | ${fixed(f.matmul[0].cpuGflops, 1)} | ${fixed(f.decodeBatch1Cpu)} | ${fixed(f.decodeBatch32Cpu)} | ${fixed(f.decodeBatch32Cpu / f.decodeBatch1Cpu, 1)}× | ${fixed(f.trainCpuGflops, 1)} | ${fixed((100 * f.trainCpuGflops) / f.matmul[0].cpuGflops)} % |`,
    ),
  );
  const supervisedRows = figures.filter((f) => f.supervised);
  if (supervisedRows.length > 0) {
    lines.push(
      "",
      `Warm-start SFT shape (d 128, 3 layers, 4 heads / 2 kv heads, vocab 4096: 1.1 M parameters; rows of ${SUPERVISED_LENGTHS.join(", ")} tokens right-padded into micro-batches of ≤ ${fixed(SUPERVISED_MICRO_BATCH_TOKENS)} tokens; one \`trainStep\`; tokens counted without padding; a third of the positions in the loss):`,
      "",
      "| backend | train tok/s | per CPU-second | with `tokenLogProbs(…, { mask })` | per CPU-second |",
      "|---|---|---|---|---|",
      ...supervisedRows.map(
        (f) =>
          `| ${f.backend} | ${fixed(f.supervised!.all.wall)} | ${fixed(f.supervised!.all.cpu)} | ${fixed(f.supervised!.masked.wall)} | ${fixed(f.supervised!.masked.cpu)} |`,
      ),
    );
  }
  const markdown = lines.join("\n");
  console.log(markdown);
  return { name: "policy", markdown };
}

const invokedDirectly =
  process.argv[1] && import.meta.url.endsWith(process.argv[1].replace(/\\/g, "/"));
if (invokedDirectly) await run();
