/**
 * `agentrl train [--config FILE] [--set k=v ...] [--resume] [--run-dir DIR]`: the main job,
 * and `agentrl ablation`. The run itself is `runExperiment` of @agentrl/trainer (phases,
 * evaluation memos, run folder: see packages/trainer/src/run/experiment/); this file parses
 * the flags, draws the progress bars and stops on SIGINT/SIGTERM.
 */
import { type Command, InvalidArgumentError } from "commander";
import {
  ABLATION_NOTES_MARKER,
  ABLATION_VARIANTS,
  resolveTrainConfig,
  runAblation as runTrainerAblation,
  runExperiment,
  type AblationOptions,
  type AblationVariant,
  type ExperimentResult,
  type FamilyFactory,
  type Printer,
} from "@agentrl/trainer";
import { listOption, numberOption } from "../options.js";
import { progressFactory } from "../progress.js";
import { DEFAULT_DASHBOARD_PORT } from "@agentrl/dashboard";
import { openDashboard, parsePort } from "./dashboard.js";
import { runAgentTraining } from "./train-agent.js";

export type { AblationOptions, FamilyFactory, Printer };
export type TrainResult = ExperimentResult;

export interface TrainCommandOptions {
  /** YAML configuration file. Default: none (the embedded default run). */
  config?: string;
  /** `key=value` overrides applied after the file. */
  set?: string[];
  /** Continue from the newest checkpoint of the run folder. Default false. */
  resume?: boolean;
  /** Run folder (overrides `run.directory`). */
  runDirectory?: string;
  print?: Printer;
  createFamily?: FamilyFactory;
  /** Aborting stops after the current RL step, with a checkpoint. */
  signal?: AbortSignal;
  /** Progress bars (true) or plain lines (false). Default: bars on a terminal. */
  bars?: boolean;
}

/** Resolves the configuration from the flags and runs the experiment with progress bars. */
export async function runTrainCommand(options: TrainCommandOptions = {}): Promise<TrainResult> {
  const config = await resolveTrainConfig(options);
  return runExperiment({
    config,
    print: options.print,
    createFamily: options.createFamily,
    signal: options.signal,
    bars: options.bars,
    createProgress: progressFactory(options.bars),
  });
}

/** Aborts on the first SIGINT/SIGTERM (stop after a checkpoint); a second one exits at once. */
function stopOnSignals(print: Printer): AbortController {
  const controller = new AbortController();
  const handler = (signal: NodeJS.Signals) => {
    if (controller.signal.aborted) {
      print(`${signal} again: exiting without a checkpoint`);
      process.exit(130);
    }
    print(
      `${signal}: stopping after the current step (with a checkpoint); press again to exit at once`,
    );
    controller.abort();
  };
  process.on("SIGINT", handler);
  process.on("SIGTERM", handler);
  return controller;
}

export function registerTrainCommand(program: Command): void {
  program
    .command("train")
    .description(
      "Train a policy: warm start, then GRPO over the task mix (no arguments: the embedded default run, ~24 min on a quiet 2-core machine)",
    )
    .option(
      "-c, --config <file>",
      "YAML configuration (see docs/config.md); default: the embedded default run",
    )
    .option(
      "--set <key=value>",
      "override a configuration key, e.g. --set rl.steps=20 (repeatable; values are YAML: numbers, booleans, [lists])",
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option("--resume", "continue from the newest checkpoint of the run folder")
    .option("--run-dir <dir>", "run folder (overrides run.directory)")
    .option(
      "--dashboard [port]",
      `serve the live dashboard of the run at http://127.0.0.1:<port>/ (default ${DEFAULT_DASHBOARD_PORT})`,
      parsePort,
    )
    .option(
      "--agent <module>",
      "train an unmodified agent function (the module's default export) on its exported tasks through the recording gateway (docs/harness.md); --config/--set do not apply",
    )
    .option("--model <dir>", "with --agent: starting weights (default models/warmstart)")
    .option(
      "--steps <n>",
      "with --agent: GRPO steps (default 20)",
      numberOption("--steps", { integer: true, minimum: 1 }),
    )
    .option(
      "--group-size <n>",
      "with --agent: episodes per task (default 4)",
      numberOption("--group-size", { integer: true, minimum: 2 }),
    )
    .option(
      "--batch-groups <n>",
      "with --agent: groups per step (default 4)",
      numberOption("--batch-groups", { integer: true, minimum: 1 }),
    )
    .option(
      "--learning-rate <x>",
      "with --agent: learning rate, constant (default 1e-4)",
      numberOption("--learning-rate", { minimum: 0 }),
    )
    .option(
      "--seed <n>",
      "with --agent: the run's seed (default 0)",
      numberOption("--seed", { integer: true }),
    )
    .option(
      "--difficulty <n>",
      "with --agent: environment tasks draw their train split at this difficulty (unless the module exports environmentIndices)",
      numberOption("--difficulty", { integer: true, minimum: 0 }),
    )
    .addHelpText(
      "after",
      "\nExamples:\n  agentrl train                                   # the embedded default run\n  agentrl train --agent examples/agents/kg-ai-sdk.ts --steps 10 --run-dir runs/agent\n  agentrl train --agent examples/agents/kg-ai-sdk.ts --difficulty 0 --learning-rate 1e-4 --seed 1\n  agentrl train --dashboard                       # with the live dashboard at http://127.0.0.1:8265/\n  agentrl train --config examples/single-task.yaml --set rl.steps=50\n  agentrl train --config examples/sync-baseline.yaml --run-dir runs/sync\n  agentrl train --run-dir runs/default --resume",
    )
    .action(
      async (flags: {
        config?: string;
        set?: string[];
        resume?: boolean;
        runDir?: string;
        dashboard?: boolean | number;
        agent?: string;
        model?: string;
        steps?: number;
        groupSize?: number;
        batchGroups?: number;
        learningRate?: number;
        seed?: number;
        difficulty?: number;
      }) => {
        const print: Printer = (line) => console.log(line);
        const controller = stopOnSignals(print);
        if (flags.agent) {
          await runAgentTraining({
            module: flags.agent,
            model: flags.model,
            runDirectory: flags.runDir,
            steps: flags.steps,
            groupSize: flags.groupSize,
            batchGroups: flags.batchGroups,
            learningRate: flags.learningRate,
            seed: flags.seed,
            difficulty: flags.difficulty,
            resume: flags.resume,
            print,
            signal: controller.signal,
          });
          return;
        }
        const runs = flags.dashboard
          ? (flags.runDir ??
            (await resolveTrainConfig({ config: flags.config, set: flags.set })).run.directory)
          : undefined;
        const dashboard = runs
          ? await openDashboard(
              {
                runs,
                port:
                  typeof flags.dashboard === "number" ? flags.dashboard : DEFAULT_DASHBOARD_PORT,
                host: "127.0.0.1",
              },
              print,
            )
          : undefined;
        try {
          await runTrainCommand({
            config: flags.config,
            set: flags.set,
            resume: flags.resume,
            runDirectory: flags.runDir,
            print,
            signal: controller.signal,
          });
        } finally {
          await dashboard?.close();
        }
      },
    );
}

// ── ablation ────────────────────────────────────────────────────────────────
// The ablation itself is `runAblation` of @agentrl/trainer (run/ablation.ts); here, its flags.

export { ABLATION_NOTES_MARKER, ABLATION_VARIANTS, type AblationVariant };

/**
 * `--variant "NAME: key=value key=value"` → an {@link AblationVariant} labelled NAME (the
 * overrides are separated by spaces; none makes the base configuration an arm of its own).
 */
export function parseVariant(text: string): AblationVariant {
  const match = /^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*:(.*)$/s.exec(text);
  if (!match)
    throw new InvalidArgumentError(
      `--variant must be "NAME: key=value ...", NAME of letters, digits, '.', '_' or '-' (it names the run folder), got "${text}"`,
    );
  const set = match[2]
    .trim()
    .split(/\s+/)
    .filter((item) => item !== "");
  const bad = set.find((item) => !/^[^=\s]+=/.test(item));
  if (bad) throw new InvalidArgumentError(`--variant ${match[1]}: "${bad}" is not key=value`);
  return { name: match[1], label: match[1], set };
}

/** Runs `runAblation` with the CLI's progress bars. */
export function runAblation(options: AblationOptions = {}): Promise<Record<string, TrainResult>> {
  return runTrainerAblation({ ...options, createProgress: progressFactory(options.bars) });
}

export function registerAblationCommand(program: Command): void {
  program
    .command("ablation")
    .description(
      "Train the same budget with/without task advantage normalization and with/without cross-policy sampling; write the four success tables side by side",
    )
    .option("-c, --config <file>", "base YAML configuration (e.g. examples/ablation.yaml)")
    .option(
      "--set <key=value>",
      "override a configuration key (repeatable)",
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option("--run-dir <dir>", "parent folder of the four runs (default: run.directory)")
    .option(
      "--variant <spec>",
      'an arm "NAME: key=value ..." instead of the four TAN × cross-policy variants (repeatable)',
      (value: string, previous: AblationVariant[] = []) => [...previous, parseVariant(value)],
    )
    .option(
      "--seeds <list>",
      "train every variant once per seed (comma-separated); the tables show mean ± sd",
      (value: string) =>
        listOption(value).map(numberOption("--seeds", { integer: true, minimum: 0 })),
    )
    .option("--title <text>", "heading of the markdown")
    .option(
      "--resume",
      "continue each run from its newest checkpoint (finished runs are read back)",
    )
    .option("-o, --out <file>", "markdown output", "docs/results.md")
    .addHelpText(
      "after",
      '\nExamples:\n  agentrl ablation --config examples/ablation.yaml\n  agentrl ablation --config examples/ablation.yaml --seeds 1,2,3 --out /tmp/results-3-seeds.md\n  agentrl ablation --config examples/off-policy.yaml --variant "ppo-clip:" --variant "tis-token: rl.policyLoss=tis_token" --seeds 1,2,3',
    )
    .action(
      async (flags: {
        config?: string;
        set?: string[];
        runDir?: string;
        variant?: AblationVariant[];
        seeds?: number[];
        title?: string;
        resume?: boolean;
        out: string;
      }) => {
        const print: Printer = (line) => console.log(line);
        const controller = stopOnSignals(print);
        await runAblation({
          config: flags.config,
          set: flags.set,
          runDirectory: flags.runDir,
          variants: flags.variant,
          seeds: flags.seeds,
          title: flags.title,
          resume: flags.resume,
          out: flags.out,
          print,
          signal: controller.signal,
        });
      },
    );
}
