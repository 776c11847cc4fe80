/**
 * `agentrl eval --model DIR [--tasks kg,webshop] [--difficulty 0] [--limit N] [--samples K]
 * [--temperature T] [--json] [--transcripts FILE]`: success, pass@k and mean reward per task on
 * the test split, and optionally every episode as text (JSONL) to see what the model does.
 */
import { createWriteStream } from "node:fs";
import { type Command } from "commander";
import { listOption, numberOption } from "../options.js";
import { Policy, initBackend } from "@agentrl/policy";
import { TASK_NAMES, createTaskFamily } from "@agentrl/envs";
import {
  createPolicyEnginePool,
  defaultDecodeThreads,
  type EngineStats,
  type GenerationEngine,
} from "@agentrl/rollout";
import {
  TrainConfigSchema,
  answerSource,
  evaluate,
  fromOutputNote,
  openTasks,
  type FamilyFactory,
  type Printer,
  type TaskEvaluation,
} from "@agentrl/trainer";
import { PhaseProgress } from "../progress.js";

export interface EvalCommandOptions {
  /** Model folder (Hugging Face layout, with tokenizer.json). */
  model: string;
  /** Task names. Default: the five families (os and db only with Docker). */
  tasks?: string[];
  /** Difficulty levels of the test instances. Default [0]. */
  difficulty?: number[];
  /** Test instances per task (the first ones). Default 20. */
  limit?: number;
  /** Samples per instance (pass@k, k = samples). Default 1. */
  samples?: number;
  /** 0 = greedy. Default 0. */
  temperature?: number;
  /** Assistant turns per episode at most. Default 8. */
  maxTurns?: number;
  /** Tokens per turn at most. Default 96. */
  maxNewTokensPerTurn?: number;
  /** Episodes at once. Default `EVAL_CONCURRENCY`. */
  concurrency?: number;
  /** Engine threads decoding beside the main thread (see `evaluate`). Default one a further core. */
  decodeThreads?: number;
  seed?: number;
  /** Seed of the task worlds. Default 0 (the shipped models' world). */
  worldSeed?: number;
  /** Progress bars (true) or plain lines (false). Default: bars on a terminal. */
  bars?: boolean;
  /** Write every episode to this JSONL file: task, index, sample, status, reward, and the decoded text. Default none. */
  transcripts?: string;
  /** Controller (`agentrl env serve`) that plays every task's episodes instead of this process. Default none. */
  controller?: string;
  /** File holding the controller's token. Default: env AGENTRL_TOKEN, else ~/.agentrl/controller-token. */
  tokenFile?: string;
  print?: Printer;
  createFamily?: FamilyFactory;
}

/**
 * Episodes at once by default. More episodes in flight make the engines' decode batches
 * larger (fewer steps for the same tokens) and cover the Docker families' container starts:
 * at --limit 100 on 2 cores, 80 took 2,135 decode steps (mean batch 21.9) where 40 took 3,419
 * (13.6), with the same successes; 160 took fewer steps (1,389) but each cost more.
 */
export const EVAL_CONCURRENCY = 80;

/** Evaluates the model on the test split of each task. */
export async function runEvalCommand(
  options: EvalCommandOptions,
): Promise<Record<string, TaskEvaluation>> {
  const print = options.print ?? ((line: string) => console.error(line));
  const limit = options.limit ?? 20;
  const samples = options.samples ?? 1;
  const difficulty = options.difficulty ?? [0];
  const config = TrainConfigSchema.parse({
    tasks: (options.tasks ?? [...TASK_NAMES]).map((name) => ({ name, difficulty })),
    rollout: {
      concurrency: options.concurrency ?? EVAL_CONCURRENCY,
      ...(options.maxTurns ? { maxTurns: options.maxTurns } : {}),
      ...(options.maxNewTokensPerTurn ? { maxNewTokensPerTurn: options.maxNewTokensPerTurn } : {}),
    },
    evaluation: { concurrency: options.concurrency ?? EVAL_CONCURRENCY },
    environments: {
      ...(options.controller ? { controller: options.controller } : {}),
      ...(options.tokenFile ? { tokenFile: options.tokenFile } : {}),
    },
    run: { seed: options.seed ?? 0, worldSeed: options.worldSeed ?? 0 },
  });
  const temperature = options.temperature ?? 0;
  const concurrency = config.evaluation.concurrency;
  const started = performance.now();
  await initBackend();
  const policy = await Policy.load(options.model, { trainable: false, tokenizer: true });
  // The engine threads load their copies of the weights while this thread opens the
  // environments, and the Docker families start their servers (DB) meanwhile: the first
  // episodes then wait for neither.
  const engineStarting = createPolicyEnginePool(
    policy,
    { temperature, seed: config.run.seed, maxBatchSize: concurrency },
    options.decodeThreads ?? defaultDecodeThreads(),
  );
  engineStarting.catch(() => undefined);
  let opened: Awaited<ReturnType<typeof openTasks>>;
  let engine: GenerationEngine;
  try {
    opened = await openTasks(config, print, warming(options.createFamily ?? createTaskFamily));
  } catch (error) {
    await engineStarting.then((started) => started.close()).catch(() => undefined);
    policy.dispose();
    throw error;
  }
  try {
    engine = await engineStarting;
  } catch (error) {
    policy.dispose();
    await opened.close();
    throw error;
  }
  const ready = performance.now();
  const tasks = opened.tasks.map((task) => task.name);
  const transcripts = options.transcripts ? createWriteStream(options.transcripts) : undefined;
  const progress = new PhaseProgress("eval", tasks.length * limit * samples, "episode", {
    plain: options.bars === undefined ? undefined : !options.bars,
    minimumIntervalMs: 10_000,
  });
  let stats: EngineStats | undefined;
  try {
    return await evaluate({
      client: opened.client,
      policy,
      tasks,
      split: "test",
      limit,
      samples,
      temperature,
      concurrency,
      engine,
      onEngineStats: (counts) => (stats = counts),
      episode: {
        maxTurns: config.rollout.maxTurns,
        maxTokens: config.rollout.maxTokens,
        maxNewTokensPerTurn: config.rollout.maxNewTokensPerTurn,
        incompletePenalty: config.rollout.incompletePenalty,
        infrastructureRetries: config.rollout.infrastructureRetries,
      },
      seed: config.run.seed,
      onProgress: (done) => progress.update(done),
      onEpisode: transcripts
        ? (t) => {
            const record = {
              task: t.task,
              index: t.index,
              sample: t.member,
              status: t.status,
              reward: t.environmentReward,
              turns: t.turns.length,
              error: t.error,
              answerFromOutput: t.metrics.answerFromOutput,
              answerSource: answerSource(t),
              text: policy.tokenizer!.decode(Array.from(t.tokens)),
            };
            transcripts.write(`${JSON.stringify(record)}\n`);
          }
        : undefined,
    });
  } finally {
    progress.stop();
    engine.close();
    if (stats) print(timelineLine(started, ready, stats));
    if (transcripts)
      await new Promise<void>((resolve, reject) =>
        transcripts.end((error?: Error | null) => (error ? reject(error) : resolve())),
      );
    policy.dispose();
    await opened.close();
  }
}

/**
 * A family factory that also starts the Docker families' shared servers as soon as they open
 * (DB's MariaDB), so that they come up while the rest opens instead of in the first episode.
 */
function warming(createFamily: FamilyFactory): FamilyFactory {
  return async (name, familyOptions) => {
    const family = await createFamily(name, familyOptions);
    const server = (family as { sharedServer?: () => Promise<unknown> }).sharedServer;
    // A server that fails to start fails the first session, which reports it.
    if (typeof server === "function") server.call(family).catch(() => undefined);
    return family;
  };
}

/**
 * "eval: ready after 2.1 s, 71.0 s in all; engines: decode 55.2 s (41,000 steps, 310,000 tokens
 * generated, mean batch 14.2), prefill 6.3 s (1,200 calls, 90,000 tokens; 200,000 reused)"
 */
function timelineLine(started: number, ready: number, stats: EngineStats): string {
  const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  return `eval: ready after ${seconds(ready - started)}, ${seconds(performance.now() - started)} in all; engines: decode ${seconds(stats.decodeMs)} (${stats.decodeSteps} steps, ${stats.generatedTokens} tokens generated, mean batch ${stats.meanBatchSize.toFixed(1)}), prefill ${seconds(stats.prefillMs)} (${stats.prefillCalls} calls, ${stats.prefilledTokens} tokens; ${stats.reusedCacheTokens} reused, ${stats.decodeFedTokens} fed to decode steps)`;
}

/** The per-task results as aligned text lines. */
export function formatEvaluation(
  results: Record<string, TaskEvaluation>,
  samples: number,
): string[] {
  const rows = Object.values(results);
  // The faults column appears only when an episode ended by an infrastructure fault.
  const faults = rows.some((r) => (r.infrastructureFaults ?? 0) > 0);
  const header = `${"task".padEnd(10)} ${"instances".padStart(9)} ${"success".padStart(8)} ${`pass@${samples}`.padStart(8)} ${"reward".padStart(7)} ${"turns".padStart(6)}${faults ? ` ${"faults".padStart(6)}` : ""}`;
  const lines = rows.map(
    (r) =>
      `${r.task.padEnd(10)} ${String(r.instances).padStart(9)} ${(100 * r.success).toFixed(1).padStart(7)}% ${(100 * r.passAtK).toFixed(1).padStart(7)}% ${r.meanReward.toFixed(3).padStart(7)} ${r.meanTurns.toFixed(1).padStart(6)}${faults ? ` ${String(r.infrastructureFaults ?? 0).padStart(6)}` : ""}`,
  );
  const mean = rows.length ? rows.reduce((a, r) => a + r.success, 0) / rows.length : 0;
  const note = faults
    ? [
        "faults: episodes ended by an infrastructure fault after their retries, counted as failures (is the Docker engine answering? docker ps; restart: bash scripts/start-dockerd.sh)",
      ]
    : [];
  // Families that report where an answer came from (OS): a right guess is not a read answer.
  const fromOutput = rows.flatMap((r) => {
    const text = fromOutputNote(r);
    return text
      ? [
          `${r.task}: ${text}: read = the answer is a line or field an own command printed, guessed = in no output (a constant's floor: agentrl env check --task ${r.task} --constant-answer <text>), other = graded on the system's state`,
        ]
      : [];
  });
  return [
    header,
    ...lines,
    `${"mean".padEnd(10)} ${"".padStart(9)} ${(100 * mean).toFixed(1).padStart(7)}%`,
    ...note,
    ...fromOutput,
  ];
}

export function registerEvalCommand(program: Command): void {
  program
    .command("eval")
    .description("Evaluate a model on the test split: success, pass@k and mean reward per task")
    .requiredOption("-m, --model <dir>", "model folder (Hugging Face layout, with tokenizer.json)")
    .option(
      "-t, --tasks <names>",
      `comma-separated task names (default: ${TASK_NAMES.join(",")}; os and db need Docker)`,
      listOption,
    )
    .option(
      "--difficulty <levels>",
      "comma-separated difficulty levels (default 0)",
      (value: string) =>
        listOption(value).map(numberOption("difficulty", { integer: true, minimum: 0 })),
    )
    .option(
      "-n, --limit <n>",
      "test instances per task (default 20)",
      numberOption("limit", { integer: true, minimum: 1 }),
    )
    .option(
      "-k, --samples <k>",
      "samples per instance, for pass@k (default 1)",
      numberOption("samples", { integer: true, minimum: 1 }),
    )
    .option(
      "--temperature <t>",
      "sampling temperature; 0 is greedy (default 0)",
      numberOption("temperature", { minimum: 0 }),
    )
    .option(
      "--max-turns <n>",
      "assistant turns per episode (default 8)",
      numberOption("max turns", { integer: true, minimum: 1 }),
    )
    .option(
      "--max-new-tokens <n>",
      "tokens per turn (default 96)",
      numberOption("max new tokens", { integer: true, minimum: 1 }),
    )
    .option(
      "--concurrency <n>",
      `episodes at once (default ${EVAL_CONCURRENCY})`,
      numberOption("concurrency", { integer: true, minimum: 1 }),
    )
    .option(
      "--decode-threads <n>",
      "engine threads decoding beside the main thread, each with a copy of the weights (default: one a further core; 0: main thread only)",
      numberOption("decode threads", { integer: true, minimum: 0 }),
    )
    .option(
      "--seed <n>",
      "seed of the sampling (default 0)",
      numberOption("seed", { integer: true, minimum: 0 }),
    )
    .option(
      "--world-seed <n>",
      "seed of the task worlds (default 0, the shipped models' world)",
      numberOption("world seed", { integer: true, minimum: 0 }),
    )
    .option(
      "--controller <url>",
      "play the episodes through this controller (agentrl env serve and its workers) instead of in this process, e.g. http://10.0.0.5:5020",
    )
    .option(
      "--token-file <path>",
      "file holding the controller's token (default: env AGENTRL_TOKEN, else ~/.agentrl/controller-token)",
    )
    .option("--json", "print the results as JSON on stdout")
    .option(
      "--transcripts <file>",
      "write every episode (status, reward, answerFromOutput and answerSource (read, guessed, other) where the family says, decoded text) to this JSONL file",
    )
    .addHelpText(
      "after",
      "\nExamples:\n  agentrl eval --model models/warmstart --tasks kg,webshop,alfworld --limit 200\n  agentrl eval --model runs/default/checkpoints/step-000020/policy --samples 4 --temperature 0.8 --json\n  agentrl eval --model models/warmstart --tasks kg --limit 20 --transcripts /tmp/kg.jsonl\n  agentrl eval --model models/warmstart --tasks os --controller http://127.0.0.1:5020",
    )
    .action(
      async (flags: {
        transcripts?: string;
        model: string;
        tasks?: string[];
        difficulty?: number[];
        limit?: number;
        samples?: number;
        temperature?: number;
        maxTurns?: number;
        maxNewTokens?: number;
        concurrency?: number;
        decodeThreads?: number;
        seed?: number;
        worldSeed?: number;
        controller?: string;
        tokenFile?: string;
        json?: boolean;
      }) => {
        const results = await runEvalCommand({
          model: flags.model,
          tasks: flags.tasks,
          difficulty: flags.difficulty,
          limit: flags.limit,
          samples: flags.samples,
          temperature: flags.temperature,
          maxTurns: flags.maxTurns,
          maxNewTokensPerTurn: flags.maxNewTokens,
          concurrency: flags.concurrency,
          decodeThreads: flags.decodeThreads,
          seed: flags.seed,
          worldSeed: flags.worldSeed,
          bars: flags.json ? false : undefined,
          transcripts: flags.transcripts,
          controller: flags.controller,
          tokenFile: flags.tokenFile,
        });
        if (flags.json)
          console.log(
            JSON.stringify(
              { model: flags.model, samples: flags.samples ?? 1, tasks: results },
              null,
              2,
            ),
          );
        else for (const line of formatEvaluation(results, flags.samples ?? 1)) console.log(line);
      },
    );
}
