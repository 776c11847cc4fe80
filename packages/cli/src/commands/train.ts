/**
 * `agentrl train [--config FILE] [--set k=v ...] [--resume] [--run-dir DIR]`: the main job,
 * and `agentrl ablation`. The run itself is `runExperiment` of @agentrl/trainer (phases,
 * evaluation memos, run folder: see packages/trainer/src/experiment.ts); this file parses
 * the flags, draws the progress bars and stops on SIGINT/SIGTERM.
 */
import { existsSync } from "node:fs";
import { copyFile, mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { Command } from "commander";
import {
  resolveTrainConfig,
  runExperiment,
  successTable,
  type ExperimentResult,
  type FamilyFactory,
  type Printer,
  type TaskEvaluation,
} from "@agentrl/trainer";
import { progressFactory } from "../progress.js";
import { DEFAULT_DASHBOARD_PORT } from "@agentrl/dashboard";
import { openDashboard, parsePort } from "./dashboard.js";

export type { FamilyFactory, Printer };
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
  return runExperiment({ config, print: options.print, createFamily: options.createFamily, signal: options.signal, bars: options.bars, createProgress: progressFactory(options.bars) });
}

/** Aborts on the first SIGINT/SIGTERM (stop after a checkpoint); a second one exits at once. */
function stopOnSignals(print: Printer): AbortController {
  const controller = new AbortController();
  const handler = (signal: NodeJS.Signals) => {
    if (controller.signal.aborted) {
      print(`${signal} again: exiting without a checkpoint`);
      process.exit(130);
    }
    print(`${signal}: stopping after the current step (with a checkpoint); press again to exit at once`);
    controller.abort();
  };
  process.on("SIGINT", handler);
  process.on("SIGTERM", handler);
  return controller;
}

export function registerTrainCommand(program: Command): void {
  program
    .command("train")
    .description("Train a policy: warm start, then GRPO over the task mix (no arguments: the embedded default run, ~17 min on 2 cores)")
    .option("-c, --config <file>", "YAML configuration (see docs/config.md); default: the embedded default run")
    .option("--set <key=value>", "override a configuration key, e.g. --set rl.steps=20 (repeatable; values are YAML: numbers, booleans, [lists])", (value: string, previous: string[] = []) => [...previous, value])
    .option("--resume", "continue from the newest checkpoint of the run folder")
    .option("--run-dir <dir>", "run folder (overrides run.directory)")
    .option("--dashboard [port]", `serve the live dashboard of the run at http://127.0.0.1:<port>/ (default ${DEFAULT_DASHBOARD_PORT})`, parsePort)
    .addHelpText(
      "after",
      "\nExamples:\n  agentrl train                                   # the embedded default run\n  agentrl train --dashboard                       # with the live dashboard at http://127.0.0.1:8265/\n  agentrl train --config examples/single-task.yaml --set rl.steps=50\n  agentrl train --config examples/sync-baseline.yaml --run-dir runs/sync\n  agentrl train --run-dir runs/default --resume",
    )
    .action(async (flags: { config?: string; set?: string[]; resume?: boolean; runDir?: string; dashboard?: boolean | number }) => {
      const print: Printer = (line) => console.log(line);
      const controller = stopOnSignals(print);
      const runs = flags.dashboard ? (flags.runDir ?? (await resolveTrainConfig({ config: flags.config, set: flags.set })).run.directory) : undefined;
      const dashboard = runs ? await openDashboard({ runs, port: typeof flags.dashboard === "number" ? flags.dashboard : DEFAULT_DASHBOARD_PORT, host: "127.0.0.1" }, print) : undefined;
      try {
        await runTrainCommand({ config: flags.config, set: flags.set, resume: flags.resume, runDirectory: flags.runDir, print, signal: controller.signal });
      } finally {
        await dashboard?.close();
      }
    });
}

// ── ablation ────────────────────────────────────────────────────────────────

/** The four variants of the ablation: task advantage normalization × cross-policy sampling. */
export const ABLATION_VARIANTS = [
  { name: "full", label: "TAN + cross-policy", set: [] as string[] },
  { name: "no-tan", label: "cross-policy only", set: ["rl.taskAdvantageNormalization=false"] },
  { name: "no-cross", label: "TAN only", set: ["crossPolicy.staleProbability=0"] },
  { name: "neither", label: "neither", set: ["rl.taskAdvantageNormalization=false", "crossPolicy.staleProbability=0"] },
] as const;

/** In an ablation's markdown, the text from this line on is kept when the ablation runs again. */
export const ABLATION_NOTES_MARKER = "<!-- notes: kept when the ablation is run again -->";

export interface AblationOptions extends Omit<TrainCommandOptions, "runDirectory"> {
  /** Markdown file the side-by-side table goes to. Default `docs/results.md`. */
  out?: string;
  /** Parent folder of the four runs (each in `<folder>/<variant>`). Default: `run.directory` of the config. */
  runDirectory?: string;
}

/**
 * Trains the same budget four times (with and without task advantage normalization, with and
 * without cross-policy sampling) from ONE warm start, then writes the final test success
 * per task of the four runs side by side into `out`.
 */
export async function runAblation(options: AblationOptions = {}): Promise<Record<string, TrainResult>> {
  const print = options.print ?? ((line: string) => console.log(line));
  const base = await resolveTrainConfig({ config: options.config, set: options.set });
  const parent = options.runDirectory ?? base.run.directory;
  const results: Record<string, TrainResult> = {};
  let warmCheckpoint: string | undefined;
  for (const variant of ABLATION_VARIANTS) {
    if (options.signal?.aborted) break;
    print(`\n=== ablation: ${variant.label} (${variant.name}) ===`);
    const set = [...(options.set ?? []), ...variant.set];
    const firstRun = Object.values(results)[0];
    if (firstRun) {
      // Later variants share the first one's warm start and its measurement.
      set.push("evaluation.beforeWarmStart=false");
      if (warmCheckpoint) set.push(`warmStart.checkpoint=${JSON.stringify(warmCheckpoint)}`);
      for (const name of ["warmstart.json", "warmstart-sampled.json"]) {
        const measured = join(firstRun.runDirectory, "evaluations", name);
        if (!existsSync(measured)) continue;
        await mkdir(join(parent, variant.name, "evaluations"), { recursive: true });
        await copyFile(measured, join(parent, variant.name, "evaluations", name));
      }
    }
    const result = await runTrainCommand({ ...options, set, runDirectory: join(parent, variant.name), print });
    results[variant.name] = result;
    const own = join(parent, variant.name, "warmstart", "model");
    if (!warmCheckpoint && base.warmStart.enabled && existsSync(join(own, "config.json"))) warmCheckpoint = own;
  }
  const first = Object.values(results)[0];
  const table = successTable([
    ["after warm start", first?.tables.warmStart],
    ...ABLATION_VARIANTS.filter((v) => results[v.name]).map((v): [string, Record<string, TaskEvaluation> | undefined] => [v.label, results[v.name].tables.final]),
  ]);
  const sampledTable = first?.sampledTables
    ? successTable([
        ["after warm start", first.sampledTables.warmStart],
        ...ABLATION_VARIANTS.filter((v) => results[v.name]).map((v): [string, Record<string, TaskEvaluation> | undefined] => [v.label, results[v.name].sampledTables?.final]),
      ])
    : undefined;
  const out = options.out ?? "docs/results.md";
  // Notes written by hand below the marker survive a re-run.
  const previous = existsSync(out) ? await readFile(out, "utf8") : "";
  const notes = previous.includes(ABLATION_NOTES_MARKER) ? previous.slice(previous.indexOf(ABLATION_NOTES_MARKER)) : `${ABLATION_NOTES_MARKER}\n`;
  const text = [
    "# Ablation: task advantage normalization (TAN) and cross-policy sampling",
    "",
    `Generated by \`agentrl ablation${options.config ? ` --config ${options.config}` : ""}\` on ${new Date().toISOString().slice(0, 10)}: four runs of the same budget`,
    `(${base.rl.steps} RL steps of ${base.rl.batchGroups} groups × ${base.rl.groupSize} episodes, ${base.rl.mode} mode, seed ${base.run.seed}) from one warm start.`,
    `Test success per task after RL (${base.evaluation.finalLimit} test instances per task, ${base.evaluation.samples} sample(s), temperature ${base.evaluation.temperature}). Runs: \`${parent}/<variant>\`.`,
    "",
    table,
    "",
    ...(sampledTable ? [`At the rollout temperature (${base.rl.temperature}), the same test instances:`, "", sampledTable, ""] : []),
    notes,
  ].join("\n");
  await mkdir(dirname(out), { recursive: true });
  await writeFile(out, text);
  print(`\n${table}${sampledTable ? `\n\nat the rollout temperature:\n${sampledTable}` : ""}\nwritten to ${out}`);
  return results;
}

export function registerAblationCommand(program: Command): void {
  program
    .command("ablation")
    .description("Train the same budget with/without task advantage normalization and with/without cross-policy sampling; write the four success tables side by side")
    .option("-c, --config <file>", "base YAML configuration (e.g. examples/ablation.yaml)")
    .option("--set <key=value>", "override a configuration key (repeatable)", (value: string, previous: string[] = []) => [...previous, value])
    .option("--run-dir <dir>", "parent folder of the four runs (default: run.directory)")
    .option("--resume", "continue each run from its newest checkpoint")
    .option("-o, --out <file>", "markdown output", "docs/results.md")
    .addHelpText(
      "after",
      "\nExamples:\n  agentrl ablation --config examples/ablation.yaml\n  agentrl ablation --config examples/ablation.yaml --set run.seed=1 --run-dir runs/ablation-seed1 --out /tmp/results-seed1.md",
    )
    .action(async (flags: { config?: string; set?: string[]; runDir?: string; resume?: boolean; out: string }) => {
      const print: Printer = (line) => console.log(line);
      const controller = stopOnSignals(print);
      await runAblation({ config: flags.config, set: flags.set, runDirectory: flags.runDir, resume: flags.resume, out: flags.out, print, signal: controller.signal });
    });
}
