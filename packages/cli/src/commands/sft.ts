/**
 * `agentrl sft`: the supervised warm start on expert episodes (`runWarmStart` of @agentrl/trainer; see
 * docs/warmstart.md). `--preset default` is the recipe that produced `models/warmstart`;
 * every flag given overrides the preset's value.
 */
import { InvalidArgumentError, type Command } from "commander";
import { WARM_START_RECIPES, WarmStartError, runWarmStart, type WarmStartOptions } from "@agentrl/trainer";
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
  difficulties?: number[];
  evalLimit?: number;
  evalEvery?: number;
  seed?: number;
  progress: boolean;
}

/** The warm-start options of a command line: the preset's, overridden by the flags given. */
export function sftOptions(flags: SftCommandOptions): WarmStartOptions {
  const recipe = WARM_START_RECIPES[flags.preset];
  if (!recipe) throw new WarmStartError(`unknown preset "${flags.preset}" (${Object.keys(WARM_START_RECIPES).join(", ")})`);
  const options: WarmStartOptions = { ...recipe, out: flags.out, progress: flags.progress };
  if (flags.model !== undefined) options.model = flags.model;
  if (flags.tasks !== undefined) options.tasks = flags.tasks;
  if (flags.steps !== undefined) options.steps = options.scheduleSteps = flags.steps;
  if (flags.minutes !== undefined) options.minutes = flags.minutes;
  if (flags.batchSize !== undefined) options.batchSize = flags.batchSize;
  if (flags.learningRate !== undefined) options.learningRate = flags.learningRate;
  if (flags.promptLossWeight !== undefined) options.promptLossWeight = flags.promptLossWeight;
  if (flags.difficulties !== undefined) options.difficulties = options.evalDifficulties = flags.difficulties;
  if (flags.evalLimit !== undefined) options.evalLimit = flags.evalLimit;
  if (flags.evalEvery !== undefined) options.evalEvery = flags.evalEvery;
  if (flags.seed !== undefined) options.seed = flags.seed;
  // Steps alone given: the preset's time budget must not cut the run short.
  if (flags.steps !== undefined && flags.minutes === undefined) delete options.minutes;
  // A length given on the command line is the whole run: the preset's later stages (`then`) are dropped.
  if (flags.steps !== undefined || flags.minutes !== undefined) delete options.then;
  return options;
}

function positiveInteger(label: string) {
  return (value: string): number => {
    const number = Number(value);
    if (!Number.isInteger(number) || number <= 0) throw new InvalidArgumentError(`${label} must be a positive integer, got "${value}"`);
    return number;
  };
}

function nonNegativeInteger(label: string) {
  return (value: string): number => {
    const number = Number(value);
    if (!Number.isInteger(number) || number < 0) throw new InvalidArgumentError(`${label} must be an integer ≥ 0, got "${value}"`);
    return number;
  };
}

function positiveNumber(label: string) {
  return (value: string): number => {
    const number = Number(value);
    if (!(number > 0)) throw new InvalidArgumentError(`${label} must be a number > 0, got "${value}"`);
    return number;
  };
}

function nonNegativeNumber(label: string) {
  return (value: string): number => {
    const number = Number(value);
    if (!(number >= 0)) throw new InvalidArgumentError(`${label} must be a number ≥ 0, got "${value}"`);
    return number;
  };
}

function list(value: string): string[] {
  return value.split(",").map((item) => item.trim()).filter((item) => item !== "");
}

function integerList(value: string): number[] {
  return list(value).map((item) => nonNegativeInteger("--difficulties")(item));
}

export function registerSftCommand(program: Command): void {
  program
    .command("sft")
    .description("supervised warm start: train a policy on expert episodes of the task families, evaluate greedy success before and after")
    .requiredOption("--out <dir>", "output directory (model in Hugging Face layout + warmstart.json)")
    .option("--model <dir>", "model to start from (default: a fresh model of the preset's architecture, tokenizer trained on task text)")
    .option("--preset <name>", `recipe: ${Object.keys(WARM_START_RECIPES).join(", ")} (flags override its values)`, "default")
    .option("--tasks <list>", "comma-separated task families, e.g. kg,webshop,alfworld (default: the preset's)", list)
    .option("--steps <n>", "supervised steps (default: the preset's; given, it is the whole run: a preset's later stages are dropped)", positiveInteger("--steps"))
    .option("--minutes <m>", "wall-clock training budget; stops at whichever of steps/minutes comes first", positiveNumber("--minutes"))
    .option("--batch-size <n>", "expert episodes per step", positiveInteger("--batch-size"))
    .option("--learning-rate <lr>", "peak AdamW learning rate", positiveNumber("--learning-rate"))
    .option("--prompt-loss-weight <w>", "weight of prompt/observation tokens in the loss relative to the assistant's (0 = assistant only)", nonNegativeNumber("--prompt-loss-weight"))
    .option("--difficulties <list>", "comma-separated difficulties to train and evaluate on, e.g. 0,1", integerList)
    .option("--eval-limit <n>", "test instances per task and difficulty in each evaluation (0 = none)", nonNegativeInteger("--eval-limit"))
    .option("--eval-every <n>", "also evaluate every n steps", nonNegativeInteger("--eval-every"))
    .option("--seed <n>", "seed of the weights, worlds and episode stream", nonNegativeInteger("--seed"))
    .option("--no-progress", "log lines instead of a progress bar")
    .addHelpText(
      "after",
      [
        "",
        "Examples:",
        "  agentrl sft --preset default --out models/warmstart          # the shipped checkpoint's recipe (6 stages, ~100 min; OS stages need Docker)",
        "  agentrl sft --out /tmp/ws --tasks kg,alfworld --minutes 5 --eval-limit 10",
        "  agentrl sft --model models/warmstart --out /tmp/ws2 --steps 100 --learning-rate 3e-4 --difficulties 0,1,2",
        "",
      ].join("\n"),
    )
    .action(async (flags: SftCommandOptions) => {
      await runWarmStart({ ...sftOptions(flags), createProgress: progressFactory() });
    });
}
