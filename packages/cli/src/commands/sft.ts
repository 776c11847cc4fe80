/**
 * `agentrl sft`: the supervised warm start on expert episodes (`runWarmStart` of @agentrl/trainer; see
 * docs/warmstart.md). `--preset default` is the recipe that produced `models/warmstart`;
 * every flag given overrides the preset's value.
 */
import { InvalidArgumentError, Option, type Command } from "commander";
import { listOption, numberOption } from "../options.js";
import {
  WARM_START_RECIPES,
  WarmStartError,
  fromStage,
  runWarmStart,
  type WarmStartOptions,
} from "@agentrl/trainer";
import { progressFactory } from "../progress.js";

export interface SftCommandOptions {
  out: string;
  model?: string;
  preset: string;
  tasks?: string[];
  steps?: number;
  minutes?: number;
  batchSize?: number;
  learningRate?: number;
  promptLossWeight?: number;
  /** `--difficulties`: levels of every task and/or a task's own (`db:0-2`). */
  difficulties?: DifficultiesFlag;
  evalLimit?: number;
  evalEvery?: number;
  seed?: number;
  worldSeed?: number;
  /** `--training-worlds`: a count for every task and/or per task (`kg:32`). */
  trainingWorlds?: TrainingWorldsFlag;
  repetitionRows?: number;
  /** `--generated-size`: generated training tasks of the families that make them (`familyOptions.generatedSize`: os, db). */
  generatedSize?: number;
  /** `--generated-places`: where OS's generated tasks put their folders (`familyOptions.generatedPlaces`). */
  generatedPlaces?: "home" | "stated";
  /** `--generated-recovery`: share of OS's working-folder tasks whose expert recovers from a mistake (`familyOptions.generatedRecovery`). */
  generatedRecovery?: number;
  fromStage?: number;
  progress: boolean;
}

export interface TrainingWorldsFlag {
  /** Worlds of every task (`32`). */
  count?: number;
  /** A task's own (`kg:32`). */
  perTask: Record<string, number>;
}

export interface DifficultiesFlag {
  /** Levels of every task (`0,1`). */
  levels?: number[];
  /** A task's own levels (`db:0-2`), replacing the others' for it. */
  perTask: Record<string, number[]>;
}

const difficulty = numberOption("--difficulties", { integer: true, minimum: 0 });

/** One entry of a per-task list flag: `value` (every task) or `task:value`; more colons are an error saying `form`. */
function taskEntry(flag: string, entry: string, form: string): { task?: string; value: string } {
  const [first, second, ...rest] = entry.split(":");
  if (rest.length > 0) throw new InvalidArgumentError(`${flag} takes ${form}, got "${entry}"`);
  return second === undefined ? { value: first } : { task: first, value: second };
}

/** `--difficulties 0,1`, `db:0-2` or `0,db:0-2,kg:2`: levels of every task and/or per task (`a-b` a range). */
export function difficultiesOption(value: string): DifficultiesFlag {
  const flag: DifficultiesFlag = { perTask: {} };
  for (const entry of listOption(value)) {
    const { task, value: levels } = taskEntry(
      "--difficulties",
      entry,
      "a level or task:level (task:low-high for a range)",
    );
    if (task === undefined) {
      (flag.levels ??= []).push(difficulty(levels));
      continue;
    }
    const [low, high, ...more] = levels.split("-");
    if (more.length > 0)
      throw new InvalidArgumentError(
        `--difficulties takes task:low-high for a range, got "${entry}"`,
      );
    const from = difficulty(low);
    const to = high === undefined ? from : difficulty(high);
    if (to < from) throw new InvalidArgumentError(`--difficulties range ${entry} is empty`);
    (flag.perTask[task] ??= []).push(...Array.from({ length: to - from + 1 }, (_, i) => from + i));
  }
  return flag;
}

const worldsCount = numberOption("--training-worlds", { integer: true, minimum: 1 });

/** `--training-worlds 32`, `kg:32` or `8,kg:32`: a count for every task and/or per task. */
export function trainingWorldsOption(value: string): TrainingWorldsFlag {
  const flag: TrainingWorldsFlag = { perTask: {} };
  for (const entry of listOption(value)) {
    const { task, value: count } = taskEntry("--training-worlds", entry, "a count or task:count");
    if (task === undefined) flag.count = worldsCount(count);
    else flag.perTask[task] = worldsCount(count);
  }
  return flag;
}

/** The warm-start options of a command line: the preset's, overridden by the flags given. */
export function sftOptions(flags: SftCommandOptions): WarmStartOptions {
  const preset = WARM_START_RECIPES[flags.preset];
  if (!preset)
    throw new WarmStartError(
      `unknown preset "${flags.preset}" (${Object.keys(WARM_START_RECIPES).join(", ")})`,
    );
  let recipe: Omit<WarmStartOptions, "out"> = preset;
  if (flags.fromStage !== undefined) {
    // Resume a staged recipe: stage k starts from --model (what stage k - 1 made), the later stages follow.
    if (flags.fromStage > 1 && flags.model === undefined)
      throw new WarmStartError(
        "--from-stage needs --model: the folder holding what the stage before made",
      );
    recipe = fromStage({ ...preset, out: flags.out }, flags.fromStage, flags.model);
  }
  const options: WarmStartOptions = { ...recipe, out: flags.out, progress: flags.progress };
  if (flags.model !== undefined) options.model = flags.model;
  if (flags.tasks !== undefined) {
    // `os:3` = the family with 3 rows per round-robin turn (taskWeights).
    const weights: Record<string, number> = {};
    options.tasks = flags.tasks.map((entry) => {
      const [name, weight] = entry.split(":");
      if (weight !== undefined) weights[name] = Number(weight);
      return name;
    });
    options.taskWeights = weights;
  }
  if (flags.steps !== undefined) options.steps = options.scheduleSteps = flags.steps;
  if (flags.minutes !== undefined) options.minutes = flags.minutes;
  if (flags.batchSize !== undefined) options.batchSize = flags.batchSize;
  if (flags.learningRate !== undefined) options.learningRate = flags.learningRate;
  if (flags.promptLossWeight !== undefined) options.promptLossWeight = flags.promptLossWeight;
  if (flags.difficulties?.levels !== undefined)
    options.difficulties = options.evalDifficulties = flags.difficulties.levels;
  if (flags.difficulties && Object.keys(flags.difficulties.perTask).length > 0)
    options.taskDifficulties = flags.difficulties.perTask;
  if (flags.evalLimit !== undefined) options.evalLimit = flags.evalLimit;
  if (flags.evalEvery !== undefined) options.evalEvery = flags.evalEvery;
  if (flags.seed !== undefined) options.seed = flags.seed;
  if (flags.worldSeed !== undefined) options.worldSeed = flags.worldSeed;
  if (flags.trainingWorlds?.count !== undefined)
    options.trainingWorlds = flags.trainingWorlds.count;
  if (flags.trainingWorlds && Object.keys(flags.trainingWorlds.perTask).length > 0)
    options.taskTrainingWorlds = flags.trainingWorlds.perTask;
  if (flags.repetitionRows !== undefined) options.repetitionRows = flags.repetitionRows;
  if (flags.generatedSize !== undefined)
    options.familyOptions = { ...options.familyOptions, generatedSize: flags.generatedSize };
  if (flags.generatedPlaces !== undefined)
    options.familyOptions = { ...options.familyOptions, generatedPlaces: flags.generatedPlaces };
  if (flags.generatedRecovery !== undefined)
    options.familyOptions = {
      ...options.familyOptions,
      generatedRecovery: flags.generatedRecovery,
    };
  // Steps alone given: the preset's time budget must not cut the run short.
  if (flags.steps !== undefined && flags.minutes === undefined) delete options.minutes;
  // A length given on the command line is the whole run: the preset's later stages (`then`) are dropped.
  if (flags.steps !== undefined || flags.minutes !== undefined) delete options.then;
  return options;
}

export function registerSftCommand(program: Command): void {
  program
    .command("sft")
    .description(
      "supervised warm start: train a policy on expert episodes of the task families, evaluate greedy success before and after",
    )
    .requiredOption(
      "--out <dir>",
      "output directory (model in Hugging Face layout + warmstart.json)",
    )
    .option(
      "--model <dir>",
      "model to start from (default: a fresh model of the preset's architecture, tokenizer trained on task text)",
    )
    .option(
      "--preset <name>",
      `recipe: ${Object.keys(WARM_START_RECIPES).join(", ")} (flags override its values)`,
      "default",
    )
    .option(
      "--tasks <list>",
      "comma-separated task families, each with an optional integer weight (rows per round-robin turn), e.g. kg,webshop,alfworld,os:3 (default: the preset's)",
      listOption,
    )
    .option(
      "--steps <n>",
      "supervised steps (default: the preset's; given, it is the whole run: a preset's later stages are dropped)",
      numberOption("--steps", { integer: true, minimum: 1 }),
    )
    .option(
      "--minutes <m>",
      "wall-clock training budget; stops at whichever of steps/minutes comes first",
      numberOption("--minutes", { minimum: 0, exclusiveMinimum: true }),
    )
    .option(
      "--batch-size <n>",
      "expert episodes per step",
      numberOption("--batch-size", { integer: true, minimum: 1 }),
    )
    .option(
      "--learning-rate <lr>",
      "peak AdamW learning rate",
      numberOption("--learning-rate", { minimum: 0, exclusiveMinimum: true }),
    )
    .option(
      "--prompt-loss-weight <w>",
      "weight of prompt/observation tokens in the loss relative to the assistant's (0 = assistant only)",
      numberOption("--prompt-loss-weight", { minimum: 0 }),
    )
    .option(
      "--difficulties <list>",
      "comma-separated difficulties to train and evaluate on, for every task and/or per task (a task's own replace the others' for it), e.g. 0,1 or 0,db:0-2",
      difficultiesOption,
    )
    .option(
      "--eval-limit <n>",
      "test instances per task and difficulty in each evaluation (0 = none)",
      numberOption("--eval-limit", { integer: true, minimum: 0 }),
    )
    .option(
      "--eval-every <n>",
      "also evaluate every n steps",
      numberOption("--eval-every", { integer: true, minimum: 0 }),
    )
    .option(
      "--seed <n>",
      "seed of the weights and the episode stream",
      numberOption("--seed", { integer: true, minimum: 0 }),
    )
    .option(
      "--world-seed <n>",
      "seed of the task worlds (catalogue, graph, houses, generated tasks; default 0, the shipped models' world)",
      numberOption("--world-seed", { integer: true, minimum: 0 }),
    )
    .option(
      "--training-worlds <list>",
      "draw expert episodes from n worlds (world-seed, world-seed + 1, …), so that copying from the prompt, not recall, answers; n for every task, or per task: kg:32 (evaluation stays on world-seed; default 1)",
      trainingWorldsOption,
    )
    .option(
      "--repetition-rows <n>",
      "add n rows of pure repetition to every step (a shuffled span of the step's expert tokens, then the span again; the loss on the repeat): teaches copying (default 0)",
      numberOption("--repetition-rows", { integer: true, minimum: 0 }),
    )
    .option(
      "--generated-size <n>",
      "generated training tasks beside the data's, for the families that make them (os: answers a constant cannot win; db) (default: the preset's; the reading preset's last stage: 300)",
      numberOption("--generated-size", { integer: true, minimum: 0 }),
    )
    .addOption(
      new Option(
        "--generated-places <where>",
        "where OS's generated tasks put their folders: home (the home folder, as the shipped warm starts learnt) or stated (home, absolute and working-folder paths, each written as the question states it) (default: home)",
      ).choices(["home", "stated"]),
    )
    .option(
      "--generated-recovery <share>",
      "share (0 to 1) of OS's generated working-folder tasks whose expert first runs the usual mistake (the folder under ~/; shown, not trained on), reads the error, then runs the right command (default: the preset's, else 0)",
      numberOption("--generated-recovery", { minimum: 0, maximum: 1 }),
    )
    .option(
      "--from-stage <k>",
      "start a staged preset at its stage k (1-based) from --model, e.g. a saved earlier stage; the later stages follow",
      numberOption("--from-stage", { integer: true, minimum: 1 }),
    )
    .option("--no-progress", "log lines instead of a progress bar")
    .addHelpText(
      "after",
      [
        "",
        "Examples:",
        "  agentrl sft --preset default --out models/warmstart          # the shipped checkpoint's recipe (5 stages; the last two need Docker)",
        "  agentrl sft --out /tmp/ws --tasks kg,alfworld --minutes 5 --eval-limit 10",
        "  agentrl sft --model models/warmstart --out /tmp/ws2 --steps 100 --learning-rate 3e-4 --difficulties 0,1,2",
        "  agentrl sft --preset default --from-stage 4 --model models/warmstart-copy --out models/warmstart   # its last two stages, from run H's model",
        "  agentrl sft --preset default --from-stage 5 --model models/warmstart --out /tmp/s7 --tasks kg:4,webshop:2,alfworld,os:3,db:3 --difficulties db:0-2 --steps 585   # the last stage again, with DB's three levels",
        "  agentrl sft --preset reading --from-stage 6 --model models/warmstart-reading --out /tmp/r3 --generated-size 600   # the reading stage again, two OS rows in three generated",
        "  agentrl sft --preset os-copy --from-stage 10 --model models/warmstart-os-copy-stage9 --out /tmp/os-copy   # models/warmstart-os-copy's last stage (issue 37's folder copy, 1,000 mixed steps)",
        "  agentrl sft --preset os-stated --from-stage 11 --model models/warmstart-os-copy --out /tmp/os-stated   # models/warmstart-os-stated's stage (OS folders where the question states them, 600 mixed steps)",
        "  agentrl sft --preset os-stated-long --from-stage 12 --model models/warmstart-os-stated --out /tmp/os-stated-long   # models/warmstart-os-stated-long's stage (R10's stage again, seed 1)",
        "  agentrl sft --preset os-stated-longer --from-stage 13 --model models/warmstart-os-stated-long --out /tmp/os-stated-longer   # models/warmstart-os-stated-longer's stage (the same stage a third time, seed 2)",
        "  agentrl sft --preset os-recovery --from-stage 14 --model models/warmstart-os-stated-longer --out /tmp/os-recovery   # models/warmstart-os-recovery's stage (the same stage, seed 3, half the working-folder tasks recovering from the ~/ mistake)",
        "  agentrl sft --preset os-weighted --from-stage 15 --model models/warmstart-os-recovery --out /tmp/os-weighted   # models/warmstart-os-weighted's stage (R13's stage on seed 4 with OS's rows doubled)",
        "",
      ].join("\n"),
    )
    .action(async (flags: SftCommandOptions) => {
      await runWarmStart({ ...sftOptions(flags), createProgress: progressFactory() });
    });
}
