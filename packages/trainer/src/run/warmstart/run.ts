/**
 * `runWarmStart`: the supervised warm start, as a short list of phases: resolve the options,
 * load the learner (a fresh model when none is given), open the task families and their
 * expert stream, evaluate, train the steps, evaluate, write the model and `warmstart.json`.
 * A staged run (`then`) runs its stages one after the other in the same folder.
 */
import { mkdtemp, mkdir, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Rng, type Policy } from "@agentrl/policy";
import type { CurriculumTaskFamily } from "@agentrl/envs";
import type { ChatTokenizer } from "@agentrl/rollout";
import { Learner, availableGradientThreads } from "../../rl/learner.js";
import { repetitionRows } from "../../rl/repetition.js";
import type { SupervisedRow } from "../../rl/sft.js";
import { evaluateByDifficulty, formatEvaluation } from "./evaluation.js";
import { initWarmStartModel } from "./model.js";
import {
  checkStagesRunnable,
  resolveWarmStartOptions,
  warmStartStages,
  WarmStartError,
  type WarmStartEvaluation,
  type WarmStartOptions,
  type WarmStartSummary,
} from "./options.js";
import {
  assistantLossWeight,
  ExpertStream,
  openWarmStartFamilies,
  TrainingWorlds,
} from "./rows.js";

type Settings = WarmStartSummary["options"];
type Log = (line: string) => void;

/** Runs the supervised warm start (see the file comment and docs/warmstart.md). */
export async function runWarmStart(options: WarmStartOptions): Promise<WarmStartSummary> {
  if (options.then) return runStages(options);
  const started = performance.now();
  const log = options.log ?? console.log;
  const settings = resolveWarmStartOptions(options);
  const learner = await loadLearner(settings, log);
  let data: ExpertData | undefined;
  try {
    data = await openExpertData(settings, learner.policy, log);
    const evaluations = new Evaluations(settings, learner.policy, data.families, log);
    await evaluations.at(0, 0);
    const training = await trainSteps(settings, options, learner, data, evaluations);
    await evaluations.at(training.steps, training.trainingMs);
    return await writeWarmModel(settings, learner.policy, training, evaluations.done, started, log);
  } finally {
    await learner.dispose();
    await data?.close();
  }
}

/** A staged run: each stage continues from the previous stage's model in `out`. */
async function runStages(options: WarmStartOptions): Promise<WarmStartSummary> {
  const stages = warmStartStages(options);
  await checkStagesRunnable(stages);
  let summary = await runWarmStart(stages[0]);
  for (let k = 1; k < stages.length; k++) {
    // Stopped: the folder keeps the last finished stage's model and its warmstart.json.
    if (options.signal?.aborted) return summary;
    await rename(
      join(options.out, "warmstart.json"),
      join(options.out, `warmstart-stage-${k}.json`),
    );
    (options.log ?? console.log)(
      `warm start: stage ${k + 1} of ${stages.length} continues from ${options.out}`,
    );
    summary = await runWarmStart(stages[k]);
  }
  return summary;
}

/** The learner on `settings.model`, or on a fresh model of `settings.architecture` (made in a scratch folder, removed once loaded). */
async function loadLearner(settings: Settings, log: Log): Promise<Learner> {
  let scratch: string | undefined;
  let modelDirectory = settings.model;
  if (!modelDirectory) {
    scratch = await mkdtemp(join(tmpdir(), "agentrl-warmstart-"));
    modelDirectory = scratch;
    await initWarmStartModel(scratch, settings.architecture, {
      seed: settings.seed,
      worldSeed: settings.worldSeed,
      corpusEpisodesPerDifficulty: settings.corpusEpisodesPerDifficulty,
      log,
    });
  }
  const learner = await Learner.load(modelDirectory, {
    grpo: { klCoefficient: 0, microBatchTokens: settings.microBatchTokens },
    schedule: {
      learningRate: settings.learningRate,
      warmupSteps: settings.warmupSteps,
      schedule: settings.schedule,
      totalSteps: settings.scheduleSteps,
      minLearningRateRatio: 0.1,
    },
    // AdamW ε 1e-8: the recipes were measured with it (the RL default, 1e-4, is for noise-sized GRPO gradients).
    optimizer: { weightDecay: settings.weightDecay, maxGradNorm: 1, epsilon: 1e-8 },
    gradientThreads: await availableGradientThreads(), // supervised steps on both cores
  });
  if (scratch) await rm(scratch, { recursive: true, force: true });
  if (!learner.policy.tokenizer) {
    await learner.dispose();
    throw new WarmStartError(`the model in ${modelDirectory} has no tokenizer`);
  }
  return learner;
}

/** The open families, their other worlds, the stream of expert rows and the repetition rows' settings. */
interface ExpertData {
  families: CurriculumTaskFamily[];
  stream: ExpertStream;
  repetition: Parameters<typeof repetitionRows>[2];
  close(): Promise<void>;
}

async function openExpertData(settings: Settings, policy: Policy, log: Log): Promise<ExpertData> {
  const tokenizer = policy.tokenizer as ChatTokenizer;
  // A row must fit the model's positions (evaluation prompts too).
  const maxSequenceTokens = Math.min(
    settings.maxSequenceTokens,
    policy.config.maxPositionEmbeddings,
  );
  const families = await openWarmStartFamilies(
    settings.tasks,
    { ...settings.familyOptions, seed: settings.worldSeed },
    log,
  );
  if (families.length === 0)
    throw new WarmStartError(`none of the tasks ${settings.tasks.join(", ")} could start`);
  log(
    `warm start: ${policy.model.parameterCount.toLocaleString("en-US")} parameters, vocabulary ${policy.config.vocabSize}, tasks ${families.map((f) => f.name).join(", ")}, difficulties ${settings.difficulties.join(",")}${Object.entries(
      settings.taskDifficulties,
    )
      .map(([task, levels]) => ` (${task} ${levels.join(",")})`)
      .join("")}`,
  );

  const worlds = new TrainingWorlds(settings.trainingWorlds, {
    seed: settings.worldSeed,
    familyOptions: settings.familyOptions,
    taskCounts: settings.taskTrainingWorlds,
  });
  const counts = new Set(families.map((family) => worlds.countOf(family.name)));
  if (counts.size === 1 && worlds.countOf(families[0].name) > 1) {
    const count = worlds.countOf(families[0].name);
    log(
      `warm start: expert episodes from ${count} worlds (world seeds ${settings.worldSeed}-${settings.worldSeed + count - 1}); evaluation on world ${settings.worldSeed}`,
    );
  } else if (counts.size > 1) {
    const perTask = families
      .map((family) => `${family.name} ${worlds.countOf(family.name)}`)
      .join(", ");
    log(
      `warm start: expert episodes from several worlds per task (${perTask}; world seeds from ${settings.worldSeed} on); evaluation on world ${settings.worldSeed}`,
    );
  }
  const stream = new ExpertStream(
    families,
    tokenizer,
    {
      difficulties: settings.difficulties,
      taskDifficulties: settings.taskDifficulties,
      curriculum: settings.curriculum,
      maxSequenceTokens,
      promptLossWeight: settings.promptLossWeight,
      seed: settings.seed,
      taskWeights: settings.taskWeights,
      log,
    },
    worlds,
  );
  // Its own generator, so that the expert rows are drawn as without repetition rows.
  const repetition = {
    spanTokens: settings.repetitionTokens,
    separator: tokenizer.encode("\n"),
    weight: assistantLossWeight(settings.promptLossWeight),
    random: new Rng(settings.seed + 104_729),
  };
  if (settings.repetitionRows > 0)
    log(
      `warm start: ${settings.repetitionRows} repetition rows a step (spans of ${settings.repetitionTokens} tokens)`,
    );
  return {
    families,
    stream,
    repetition,
    close: async () =>
      void (await Promise.all([...families.map((family) => family.close?.()), worlds.close()])),
  };
}

/** The evaluations of the run (none when `evalLimit` is 0), each logged as it is made. */
class Evaluations {
  readonly done: WarmStartEvaluation[] = [];
  constructor(
    private readonly settings: Settings,
    private readonly policy: Policy,
    private readonly families: CurriculumTaskFamily[],
    private readonly log: Log,
  ) {}

  async at(step: number, trainingMs: number): Promise<void> {
    const { settings } = this;
    if (settings.evalLimit <= 0) return;
    const evaluationStarted = performance.now();
    const results = await evaluateByDifficulty(this.policy, this.families, {
      difficulties: settings.evalDifficulties,
      taskDifficulties: settings.taskDifficulties,
      limit: settings.evalLimit,
      maxTurns: settings.evalMaxTurns,
      maxNewTokens: settings.evalMaxNewTokens,
    });
    const evaluation = {
      step,
      minutes: trainingMs / 60_000,
      results,
      seconds: (performance.now() - evaluationStarted) / 1000,
    };
    this.done.push(evaluation);
    this.log(
      `eval step ${step} (${evaluation.minutes.toFixed(1)} min): ${formatEvaluation(results)} [${evaluation.seconds.toFixed(0)} s]`,
    );
  }
}

/** What the training steps did. */
interface Training {
  steps: number;
  trainingMs: number;
  rows: number;
  trainedTokens: number;
  rowTokens: number;
  dataMs: number;
  lossCurve: WarmStartSummary["lossCurve"];
}

/**
 * The supervised steps, until `steps`, the time budget or the signal. The next step's expert
 * episodes play while this step trains (Docker families spend most of an episode waiting for a
 * container); batches are drawn in the same order as without the overlap, so a step-based run
 * trains on the same rows.
 */
async function trainSteps(
  settings: Settings,
  options: WarmStartOptions,
  learner: Learner,
  data: ExpertData,
  evaluations: Evaluations,
): Promise<Training> {
  const log = options.log ?? console.log;
  const training: Training = {
    steps: 0,
    trainingMs: 0,
    rows: 0,
    trainedTokens: 0,
    rowTokens: 0,
    dataMs: 0,
    lossCurve: [],
  };
  const startBar = (from: number) => {
    const made = settings.progress
      ? options.createProgress?.("sft", settings.steps, "step", { terminalOnly: true })
      : undefined;
    made?.update(from, "loss -");
    return made;
  };
  let bar = startBar(0);
  let windowLoss = 0;
  let windowSteps = 0;
  const budgetMs = settings.minutes === null ? Infinity : settings.minutes * 60_000;
  const draw = (at: number) => {
    const batch = data.stream.batch(
      settings.batchSize,
      Math.max(at / settings.steps, training.trainingMs / budgetMs),
    );
    batch.catch(() => {}); // awaited below; a failure surfaces there
    return batch;
  };
  let next: Promise<SupervisedRow[]> | undefined;
  try {
    next = draw(0);
    while (
      training.steps < settings.steps &&
      training.trainingMs < budgetMs &&
      !options.signal?.aborted
    ) {
      const stepStarted = performance.now();
      const expertBatch = await next!;
      next = training.steps + 1 < settings.steps ? draw(training.steps + 1) : undefined;
      const batch = [
        ...expertBatch,
        ...repetitionRows(expertBatch, settings.repetitionRows, data.repetition),
      ];
      training.dataMs += performance.now() - stepStarted;
      const result = await learner.supervised(batch, settings.microBatchTokens);
      training.rowTokens += batch.reduce((n, row) => n + row.tokens.length, 0);
      training.steps += 1;
      training.rows += batch.length;
      training.trainedTokens += result.tokens;
      windowLoss += result.loss;
      windowSteps += 1;
      training.trainingMs += performance.now() - stepStarted;
      const step = training.steps;
      bar?.update(step, `loss ${result.loss.toFixed(3)}`);
      if (step % settings.logEvery === 0 || step === settings.steps) {
        training.lossCurve.push([
          step,
          training.trainingMs / 60_000,
          windowLoss / windowSteps,
          learner.optimizer.learningRate,
        ]);
        if (!bar)
          log(
            `step ${step}/${settings.steps} ${(training.trainingMs / 60_000).toFixed(1)} min loss ${(windowLoss / windowSteps).toFixed(3)} lr ${learner.optimizer.learningRate.toExponential(2)} (${((100 * training.dataMs) / training.trainingMs).toFixed(0)}% waiting for experts, ${((training.rowTokens * 1000) / (training.trainingMs - training.dataMs)).toFixed(0)} tokens/s)`,
          );
        windowLoss = 0;
        windowSteps = 0;
      }
      if (settings.evalEvery > 0 && step % settings.evalEvery === 0 && step < settings.steps) {
        bar?.stop();
        await evaluations.at(step, training.trainingMs);
        bar = startBar(step);
      }
    }
    if (windowSteps > 0)
      training.lossCurve.push([
        training.steps,
        training.trainingMs / 60_000,
        windowLoss / windowSteps,
        learner.optimizer.learningRate,
      ]);
    return training;
  } catch (error) {
    bar?.stop();
    if (training.steps > 0) await keepInterrupted(settings, learner.policy, training, error, log);
    throw error;
  } finally {
    bar?.stop();
    await next?.catch(() => {}); // an unused prefetch finishes before its families close
  }
}

/**
 * A stage stopped by an error keeps what it trained: the model as it is, in `out/interrupted`
 * (beside, not over, an earlier stage's model in `out`), with the steps made and the error.
 */
async function keepInterrupted(
  settings: Settings,
  policy: Policy,
  training: Training,
  error: unknown,
  log: Log,
): Promise<void> {
  const folder = join(settings.out, "interrupted");
  try {
    await mkdir(folder, { recursive: true });
    await policy.save(folder, { dtype: settings.saveDtype });
    const reason = error instanceof Error ? error.message : String(error);
    await writeFile(
      join(folder, "interrupted.json"),
      JSON.stringify({ steps: training.steps, of: settings.steps, error: reason }, null, 2) + "\n",
    );
    log(
      `warm start: stopped by an error after ${training.steps} of ${settings.steps} steps; the model as trained so far is in ${folder} (go on with --model ${folder})`,
    );
  } catch (saveError) {
    log(
      `warm start: could not keep the interrupted model in ${folder}: ${(saveError as Error).message}`,
    );
  }
}

/** Saves the model into `out` and writes `warmstart.json` beside it. */
async function writeWarmModel(
  settings: Settings,
  policy: Policy,
  training: Training,
  evaluations: WarmStartEvaluation[],
  started: number,
  log: Log,
): Promise<WarmStartSummary> {
  await mkdir(settings.out, { recursive: true });
  await policy.save(settings.out, { dtype: settings.saveDtype });
  const summary: WarmStartSummary = {
    out: settings.out,
    options: settings,
    parameters: policy.model.parameterCount,
    vocabSize: policy.config.vocabSize,
    steps: training.steps,
    trainingMinutes: training.trainingMs / 60_000,
    totalMinutes: (performance.now() - started) / 60_000,
    rows: training.rows,
    trainedTokens: training.trainedTokens,
    sequenceTokens: training.rowTokens,
    expertSeconds: training.dataMs / 1000,
    lossCurve: training.lossCurve,
    evaluations,
  };
  await writeFile(join(settings.out, "warmstart.json"), JSON.stringify(summary, null, 2) + "\n");
  log(
    `warm start: ${training.steps} steps in ${summary.trainingMinutes.toFixed(1)} min (total ${summary.totalMinutes.toFixed(1)} min); wrote ${settings.out}`,
  );
  return summary;
}
