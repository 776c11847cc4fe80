/** Phase 5: the warm model (an existing one, or the supervised warm start). */
import { join } from "node:path";
import { ConfigError, defaultConfig, taskDifficulties, type TrainConfig } from "../config.js";
import { controllerOf, type OpenedTasks } from "./tasks.js";
import { hasModel } from "./models.js";
import { isCompleteModelFolder, writeModelFolder } from "../../rl/checkpoint.js";
import { type ExperimentOptions, type Printer, SHIPPED_WARM_START } from "./options.js";
import { runWarmStart, WarmStartError } from "../warmstart/index.js";
import { formatSeconds, type ProgressFactory } from "../progress.js";

export interface WarmStartPhaseOptions {
  config: TrainConfig;
  /** Model to start from. */
  modelDirectory: string;
  /** Where the warm-started model goes (Hugging Face layout). */
  outputDirectory: string;
  /** Families that run, with their training indices. */
  tasks: OpenedTasks;
  print: Printer;
  bars?: boolean;
  createProgress?: ProgressFactory;
  signal?: AbortSignal;
}

/** The tasks the warm start plays (its expert episodes run in-process): those without a controller. */
function inProcessTasks(config: TrainConfig, opened: OpenedTasks, print: Printer): string[] {
  const remote = opened.tasks.filter((task) => controllerOf(config, task)).map((task) => task.name);
  const local = opened.tasks.filter((task) => !controllerOf(config, task)).map((task) => task.name);
  if (local.length === 0)
    throw new ConfigError(
      `the warm start plays expert episodes in the trainer's process, and every task (${remote.join(", ")}) is behind a controller: set warmStart.checkpoint to a warm model, or warmStart.enabled: false`,
    );
  if (remote.length)
    print(
      `warm start: on the in-process tasks ${local.join(", ")} only (${remote.join(", ")} behind a controller)`,
    );
  return local;
}

/**
 * The supervised warm start on expert episodes (`runWarmStart` of ../warmstart.ts) on the
 * families that run, at their difficulties; its own evaluations are off (this command
 * measures before and after on the same test instances as the RL phase).
 */
export async function warmStartPhase(options: WarmStartPhaseOptions): Promise<void> {
  const { config } = options;
  const difficulties = [...new Set(options.tasks.tasks.flatMap(taskDifficulties))].sort(
    (a, b) => a - b,
  );
  await runWarmStart({
    model: options.modelDirectory,
    out: options.outputDirectory,
    tasks: inProcessTasks(config, options.tasks, options.print),
    difficulties,
    curriculum: "uniform",
    steps: config.warmStart.steps,
    minutes: config.warmStart.minutes,
    batchSize: config.warmStart.batchEpisodes,
    learningRate: config.warmStart.learningRate,
    maxSequenceTokens: config.rollout.maxTokens,
    microBatchTokens: config.rl.microBatchTokens,
    seed: config.run.seed,
    worldSeed: config.run.worldSeed,
    evalLimit: 0,
    saveDtype: "F32",
    progress: options.bars ?? true,
    createProgress: options.createProgress,
    logEvery: 10,
    log: options.print,
  });
}

/** Whether the model section is the default one (a fresh tiny model): only then may the shipped warm start stand in for it. */
function usesDefaultModel(config: TrainConfig): boolean {
  const defaults = defaultConfig().model;
  return (
    !config.model.directory &&
    config.model.preset === defaults.preset &&
    JSON.stringify(config.model.architecture) === JSON.stringify(defaults.architecture) &&
    config.model.chatTemplate === defaults.chatTemplate &&
    config.model.vocabSize === defaults.vocabSize
  );
}

/** A warm model that exists already: `warmStart.checkpoint`, this run's, or the shipped `models/warmstart` (only for the default model). */
function existingWarmModel(config: TrainConfig): { directory: string; note: string } | undefined {
  if (config.warmStart.checkpoint) {
    if (!hasModel(config.warmStart.checkpoint))
      throw new ConfigError(
        `warmStart.checkpoint: no config.json in ${config.warmStart.checkpoint}`,
      );
    return {
      directory: config.warmStart.checkpoint,
      note: `warm start: skipped, starting from ${config.warmStart.checkpoint}`,
    };
  }
  if (!config.warmStart.enabled) return undefined;
  const own = join(config.run.directory, "warmstart", "model");
  if (isCompleteModelFolder(own))
    return { directory: own, note: `warm start: already done in this run folder (${own})` };
  if (usesDefaultModel(config) && hasModel(SHIPPED_WARM_START))
    return {
      directory: SHIPPED_WARM_START,
      note: `warm start: skipped, using the shipped checkpoint ${SHIPPED_WARM_START}`,
    };
  return undefined;
}

/** The warm model: an existing one, or a new warm start from `start` into `<run>/warmstart/model`. Undefined when the phase is off. */
export async function warmModel(
  config: TrainConfig,
  start: () => Promise<string>,
  opened: OpenedTasks,
  options: ExperimentOptions,
  print: Printer,
): Promise<string | undefined> {
  const existing = existingWarmModel(config);
  if (existing) {
    print(existing.note);
    return existing.directory;
  }
  if (!config.warmStart.enabled) return undefined;
  const own = join(config.run.directory, "warmstart", "model");
  const began = performance.now();
  const modelDirectory = await start();
  await writeModelFolder(own, (folder) =>
    warmStartPhase({
      config,
      modelDirectory,
      outputDirectory: folder,
      tasks: opened,
      print,
      bars: options.bars,
      createProgress: options.createProgress,
      signal: options.signal,
    }),
  );
  if (!hasModel(own)) throw new WarmStartError(`the warm start wrote no model into ${own}`);
  print(`warm start: done in ${formatSeconds((performance.now() - began) / 1000)} → ${own}`);
  return own;
}
