/**
 * The supervised warm start's options: what a run takes (`WarmStartOptions`), what it writes
 * (`WarmStartSummary`), every default (`resolveWarmStartOptions`; the shared ones are
 * `WARM_START_DEFAULTS` of ../../rl/defaults.ts, the schema's too) and the stages of a staged run.
 */
import { AgentRLError } from "@agentrl/spec";
import { isDockerAvailable, TASK_FAMILIES, type TaskFamilyOptions } from "@agentrl/envs";
import type { ChatTemplateName, ModelConfig, PresetName, SafetensorsDtype } from "@agentrl/policy";
import { WARM_START_DEFAULTS } from "../../rl/defaults.js";
import type { ProgressFactory } from "../progress.js";

/** A warm start that cannot run (bad option, no family could start). */
export class WarmStartError extends AgentRLError {}

/** Architecture of a fresh model: a preset, optionally with some fields replaced. */
export interface ArchitectureSpec {
  /** Base preset (`test`, `tiny`, `small`). Default `tiny`. */
  preset: PresetName;
  /** Fields replacing the preset's (e.g. `{ hiddenSize: 192, numHiddenLayers: 3 }`). Default none. */
  overrides?: Partial<ModelConfig>;
  /** Tokenizer vocabulary size. Default 4096. */
  vocabSize?: number;
  /** Chat template of the fresh model's tokenizer (`compact` lists tools as one-line signatures). Default `qwen2.5`. */
  chatTemplate?: ChatTemplateName;
}

export interface WarmStartOptions {
  /** Output directory: the model (config.json, safetensors, tokenizer) and `warmstart.json`. Required. */
  out: string;
  /** Model directory to start from. Default: none, a fresh model of `architecture`. */
  model?: string;
  /** Architecture of the fresh model (ignored with `model`). Default `{ preset: "tiny" }`. */
  architecture?: ArchitectureSpec;
  /** Task families to train and evaluate on. Default `["kg", "webshop", "alfworld"]`. */
  tasks?: string[];
  /**
   * Rows a family gets per turn of the round-robin over `tasks` (positive integers), e.g.
   * `{ os: 3, db: 2 }`: of every 3 + 2 + (one per other family) rows, 3 are OS and 2 DB.
   * Default 1 each.
   */
  taskWeights?: Record<string, number>;
  /** Supervised steps (also the length of the learning-rate schedule). Default 400 (`WARM_START_DEFAULTS`, the schema's `warmStart.steps`). */
  steps?: number;
  /** Wall-clock budget in minutes; training stops at whichever of `steps` / `minutes` comes first. Default: none. */
  minutes?: number;
  /** Expert episodes (rows) per step. Default 8. */
  batchSize?: number;
  /** Peak AdamW learning rate. Default 2e-3 (`WARM_START_DEFAULTS`, the schema's `warmStart.learningRate`). */
  learningRate?: number;
  /** Linear warm-up steps. Default 10. */
  warmupSteps?: number;
  /** `cosine` decay to 0.1 × peak at `scheduleSteps`, or `constant`. Default `cosine`. */
  schedule?: "constant" | "cosine";
  /** Length of the learning-rate schedule in steps (may exceed `steps`: stop part-way along it). Default `steps`. */
  scheduleSteps?: number;
  /** AdamW weight decay. Default 0. */
  weightDecay?: number;
  /** Difficulties trained on. Default `[0, 1]`. */
  difficulties?: number[];
  /**
   * A family's own difficulties, replacing `difficulties` (and `evalDifficulties`) for it,
   * e.g. `{ db: [0, 1, 2] }` to train and evaluate DB's INSERT, UPDATE and SELECT levels while
   * the others stay at `difficulties`. Default none.
   */
  taskDifficulties?: Record<string, number[]>;
  /**
   * How training rows pick a difficulty: `uniform` over `difficulties`, or `progressive`
   * (the k-th of n difficulties joins at progress k/n, then all joined ones are uniform).
   * Default `progressive`.
   */
  curriculum?: "uniform" | "progressive";
  /**
   * Weight of the other tokens (prompt, observations) in the loss relative to the
   * assistant's tokens: 0 trains on the assistant's tokens only (RL's mask); 0.05 also
   * teaches the model the task text (entity names, action lists, product codes) from the
   * same forward pass, at 1/20 of the weight. Rows then carry integer weights in `lossMask`
   * (assistant round(1/w), others 1) and the loss is the weighted mean. Default 0.
   */
  promptLossWeight?: number;
  /** Rows longer than this many tokens (or than the model's positions) are skipped (another episode is played). Default 2048. */
  maxSequenceTokens?: number;
  /** Tokens per micro-batch (gradient accumulation above it). Default 4096. */
  microBatchTokens?: number;
  /** Seed of the weights (fresh model) and the episode stream. Default 0. */
  seed?: number;
  /** Seed of the task worlds (and of the fresh tokenizer's corpus, their text). Default 0: the world the shipped models were trained and measured on. */
  worldSeed?: number;
  /**
   * Worlds the expert episodes are drawn from, uniformly: `worldSeed`, `worldSeed + 1`, ….
   * Above 1, recalling one catalogue or graph no longer answers (a model trained on world 0
   * alone recalls its product codes: WebShop 0 % on world 1, docs/warmstart.md), so only
   * copying from the prompt does. Evaluation stays on world `worldSeed`; worlds from
   * `worldSeed + trainingWorlds` on are unseen. A world is opened on its first episode and
   * kept: ~30 MB and ~0.5 s for KG, WebShop and ALFWorld together. Default 1.
   */
  trainingWorlds?: number;
  /**
   * A family's own number of training worlds, replacing `trainingWorlds` for it, e.g.
   * `{ kg: 32 }`: KG's episodes from 32 worlds (its entity names must be copied) while the
   * others stay on world `worldSeed` (WebShop's codes recalled). Default none.
   */
  taskTrainingWorlds?: Record<string, number>;
  /**
   * Rows of pure repetition added to every step (`repetitionRows` in repetition.ts): a span of
   * `repetitionTokens` tokens cut from the step's expert rows and shuffled, then the same span
   * again, the loss on the repeat at the assistant tokens' weight. They teach copying (the
   * skill KG, WebShop and DB fail on) with every trained token a copy. Default 0: none (the
   * shipped recipe).
   */
  repetitionRows?: number;
  /** Tokens in each repetition row's span. Default 32. */
  repetitionTokens?: number;
  /** Expert episodes per task and difficulty in the fresh model's tokenizer corpus (`gatherTaskText`). Default 40. */
  corpusEpisodesPerDifficulty?: number;
  /** Test instances per task and difficulty in each evaluation (the first ones of the split). Default 20; 0 = no evaluation. */
  evalLimit?: number;
  /** Difficulties evaluated. Default: `difficulties`. */
  evalDifficulties?: number[];
  /** Evaluate every this many steps as well as at the start and end. Default 0 (start and end only). */
  evalEvery?: number;
  /** Assistant turns per evaluation episode at most (an untrained model never stops). Default 8. */
  evalMaxTurns?: number;
  /** Tokens generated per evaluation turn at most. Default 128. */
  evalMaxNewTokens?: number;
  /** Dtype of the saved model. Default `F16` (half the size; RL trains in float32 after loading). */
  saveDtype?: SafetensorsDtype;
  /** Options for `createTaskFamily` (besides `seed`). Default none. */
  familyOptions?: TaskFamilyOptions;
  /** Show a progress bar when `createProgress` gives one (else a log line every `logEvery` steps). Default true. */
  progress?: boolean;
  /** Makes the progress bar (the CLI's draws one on a terminal). Default none: log lines only. */
  createProgress?: ProgressFactory;
  /** Log a line every this many steps when there is no progress bar. Default 10. */
  logEvery?: number;
  /** Where log lines go. Default `console.log`. */
  log?: (line: string) => void;
  /** Stops training early when aborted (the model trained so far is still evaluated and saved). Default none. */
  signal?: AbortSignal;
  /**
   * Further stages, each continuing from the previous stage's model in the same `out` folder
   * with its options replacing the previous stage's (a fresh optimizer each stage). The
   * summary of stage k < last is kept as `warmstart-stage-k.json`. Default none.
   */
  then?: WarmStartStage | WarmStartStage[];
}

/** The options of a later warm-start stage (see `then`): what changes from the stage before. */
export type WarmStartStage = Omit<
  WarmStartOptions,
  "out" | "model" | "log" | "signal" | "then" | "createProgress"
>;

/** Success of one evaluation, per task, per difficulty. */
export interface WarmStartEvaluation {
  step: number;
  /** Training minutes when the evaluation started (evaluation time excluded). */
  minutes: number;
  /** task → difficulty → numbers. */
  results: Record<
    string,
    Record<string, { success: number; meanReward: number; meanTurns: number; instances: number }>
  >;
  /** Seconds the evaluation took. */
  seconds: number;
}

export interface WarmStartSummary {
  out: string;
  /** The options after defaults (without `log` and `signal`). */
  options: Omit<
    Required<WarmStartOptions>,
    "log" | "model" | "minutes" | "signal" | "then" | "createProgress"
  > & { model: string | null; minutes: number | null };
  parameters: number;
  vocabSize: number;
  steps: number;
  /** Wall-clock training minutes (evaluations excluded). */
  trainingMinutes: number;
  /** Wall-clock minutes of the whole run. */
  totalMinutes: number;
  /** Rows (repetition rows included) and tokens trained on. */
  rows: number;
  trainedTokens: number;
  /** Tokens of all rows (prompts and replies included: what the forward pass costs). */
  sequenceTokens: number;
  /** Seconds training waited for expert episodes and rows (part of the training minutes; the next batch plays while a step trains). */
  expertSeconds: number;
  /** Mean loss per assistant token over windows of steps: [step, minutes, loss, learning rate]. */
  lossCurve: [number, number, number, number][];
  evaluations: WarmStartEvaluation[];
}

/** Fills in every default. */
export function resolveWarmStartOptions(options: WarmStartOptions): WarmStartSummary["options"] {
  if (!options.out) throw new WarmStartError("`out` (output directory) is required");
  const difficulties = options.difficulties ?? [0, 1];
  const resolved: WarmStartSummary["options"] = {
    out: options.out,
    model: options.model ?? null,
    architecture: options.architecture ?? { preset: "tiny" },
    tasks: options.tasks ?? ["kg", "webshop", "alfworld"],
    taskWeights: options.taskWeights ?? {},
    steps: options.steps ?? WARM_START_DEFAULTS.steps,
    minutes: options.minutes ?? null,
    batchSize: options.batchSize ?? WARM_START_DEFAULTS.batchEpisodes,
    learningRate: options.learningRate ?? WARM_START_DEFAULTS.learningRate,
    warmupSteps: options.warmupSteps ?? 10,
    schedule: options.schedule ?? "cosine",
    scheduleSteps: options.scheduleSteps ?? options.steps ?? WARM_START_DEFAULTS.steps,
    weightDecay: options.weightDecay ?? 0,
    difficulties,
    taskDifficulties: options.taskDifficulties ?? {},
    curriculum: options.curriculum ?? "progressive",
    promptLossWeight: options.promptLossWeight ?? 0,
    maxSequenceTokens: options.maxSequenceTokens ?? 2048,
    microBatchTokens: options.microBatchTokens ?? 4096,
    seed: options.seed ?? 0,
    worldSeed: options.worldSeed ?? 0,
    trainingWorlds: options.trainingWorlds ?? 1,
    taskTrainingWorlds: options.taskTrainingWorlds ?? {},
    repetitionRows: options.repetitionRows ?? 0,
    repetitionTokens: options.repetitionTokens ?? 32,
    corpusEpisodesPerDifficulty: options.corpusEpisodesPerDifficulty ?? 40,
    evalLimit: options.evalLimit ?? 20,
    evalDifficulties: options.evalDifficulties ?? difficulties,
    evalEvery: options.evalEvery ?? 0,
    evalMaxTurns: options.evalMaxTurns ?? 8,
    evalMaxNewTokens: options.evalMaxNewTokens ?? 128,
    saveDtype: options.saveDtype ?? "F16",
    familyOptions: options.familyOptions ?? {},
    progress: options.progress ?? true,
    logEvery: options.logEvery ?? 10,
  };
  if (resolved.tasks.length === 0) throw new WarmStartError("no tasks given");
  if (difficulties.length === 0) throw new WarmStartError("no difficulties given");
  for (const [name, weight] of Object.entries(resolved.taskWeights)) {
    if (!resolved.tasks.includes(name))
      throw new WarmStartError(
        `taskWeights names ${name}, which is not among the tasks (${resolved.tasks.join(", ")})`,
      );
    if (!Number.isInteger(weight) || weight <= 0)
      throw new WarmStartError(`taskWeights.${name} must be a positive integer, got ${weight}`);
  }
  for (const [name, levels] of Object.entries(resolved.taskDifficulties)) {
    if (!resolved.tasks.includes(name))
      throw new WarmStartError(
        `taskDifficulties names ${name}, which is not among the tasks (${resolved.tasks.join(", ")})`,
      );
    if (levels.length === 0 || !levels.every((d) => Number.isInteger(d) && d >= 0))
      throw new WarmStartError(
        `taskDifficulties.${name} must be a non-empty list of difficulties (integers >= 0), got ${JSON.stringify(levels)}`,
      );
  }
  for (const [name, value] of [
    ["steps", resolved.steps],
    ["batchSize", resolved.batchSize],
    ["maxSequenceTokens", resolved.maxSequenceTokens],
  ] as const) {
    if (!Number.isInteger(value) || value <= 0)
      throw new WarmStartError(`${name} must be a positive integer, got ${value}`);
  }
  if (!(resolved.promptLossWeight >= 0 && resolved.promptLossWeight <= 1))
    throw new WarmStartError(
      `promptLossWeight must be in [0, 1], got ${resolved.promptLossWeight}`,
    );
  if (!Number.isInteger(resolved.trainingWorlds) || resolved.trainingWorlds < 1)
    throw new WarmStartError(
      `trainingWorlds must be a positive integer, got ${resolved.trainingWorlds}`,
    );
  for (const [name, count] of Object.entries(resolved.taskTrainingWorlds)) {
    if (!resolved.tasks.includes(name))
      throw new WarmStartError(
        `taskTrainingWorlds names ${name}, which is not among the tasks (${resolved.tasks.join(", ")})`,
      );
    if (!Number.isInteger(count) || count < 1)
      throw new WarmStartError(
        `taskTrainingWorlds.${name} must be a positive integer, got ${count}`,
      );
  }
  if (!Number.isInteger(resolved.repetitionRows) || resolved.repetitionRows < 0)
    throw new WarmStartError(
      `repetitionRows must be an integer >= 0, got ${resolved.repetitionRows}`,
    );
  if (!Number.isInteger(resolved.repetitionTokens) || resolved.repetitionTokens < 1)
    throw new WarmStartError(
      `repetitionTokens must be a positive integer, got ${resolved.repetitionTokens}`,
    );
  if (!(resolved.learningRate > 0))
    throw new WarmStartError(`learningRate must be > 0, got ${resolved.learningRate}`);
  if (resolved.minutes !== null && !(resolved.minutes > 0))
    throw new WarmStartError(`minutes must be > 0, got ${resolved.minutes}`);
  return resolved;
}

/** Task families that run in Docker containers (from @agentrl/envs' descriptors). */
export const DOCKER_FAMILIES: ReadonlySet<string> = new Set(
  TASK_FAMILIES.filter((family) => family.needsDocker).map((family) => family.name),
);

/**
 * Rejects with a `WarmStartError` naming the first stage (1-based) that trains a Docker
 * family when no Docker engine answers: a recipe's later stage must not fail, or silently
 * train without its family, an hour into the run. Asks `dockerAvailable` only when a stage
 * needs it.
 */
export async function checkStagesRunnable(
  stages: ReadonlyArray<{ tasks?: string[] }>,
  dockerAvailable: () => Promise<boolean> = () => isDockerAvailable(),
): Promise<void> {
  const first = stages.findIndex((stage) => stage.tasks?.some((task) => DOCKER_FAMILIES.has(task)));
  if (first < 0 || (await dockerAvailable())) return;
  const needs = stages[first].tasks!.filter((task) => DOCKER_FAMILIES.has(task)).join(", ");
  throw new WarmStartError(
    `stage ${first + 1} of ${stages.length} trains ${needs}, which needs a Docker engine, and none answers: start one (bash scripts/start-dockerd.sh) or give --tasks without ${needs}`,
  );
}

/**
 * The stages of a staged warm start, each with its whole options: the previous stage's with
 * its own replacing them, continuing from the previous stage's model in `out`.
 */
export function warmStartStages(options: WarmStartOptions): WarmStartOptions[] {
  const { then, ...first } = options;
  const stages: WarmStartOptions[] = [first];
  for (const stage of [then ?? []].flat())
    stages.push({ ...stages[stages.length - 1], ...stage, model: options.out });
  return stages;
}

/**
 * The same run started at stage `from` (1-based) from the model in `model` (a folder holding
 * what stage `from - 1` made, e.g. a stage's saved output; required after stage 1): the later
 * stages follow as usual.
 */
export function fromStage(
  options: WarmStartOptions,
  from: number,
  model?: string,
): WarmStartOptions {
  const stages = warmStartStages(options);
  if (!Number.isInteger(from) || from < 1 || from > stages.length)
    throw new WarmStartError(
      `stage ${from} does not exist: the recipe has ${stages.length} stage(s)`,
    );
  if (from > 1 && model === undefined)
    throw new WarmStartError(
      `stage ${from} continues a model: give the folder holding what stage ${from - 1} made`,
    );
  const [start, ...rest] = stages.slice(from - 1);
  return {
    ...start,
    ...(model === undefined ? {} : { model }),
    then: rest.length
      ? rest.map(
          ({
            out: _out,
            model: _model,
            log: _log,
            signal: _signal,
            createProgress: _createProgress,
            then: _then,
            ...stage
          }) => stage,
        )
      : undefined,
  };
}
