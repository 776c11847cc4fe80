/**
 * `agentrl train [--config FILE] [--set k=v ...] [--resume] [--run-dir DIR]`: the main job,
 * and `agentrl ablation`. The run itself is `runExperiment` of @agentrl/trainer (phases,
 * evaluation memos, run folder: see packages/trainer/src/run/experiment/); this file parses
 * the flags, draws the progress bars and stops on SIGINT/SIGTERM.
 */
import { existsSync } from "node:fs";
import { copyFile, mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { type Command, InvalidArgumentError } from "commander";
import {
  resolveTrainConfig,
  runExperiment,
  successTable,
  type ExperimentResult,
  type SuccessColumn,
  type FamilyFactory,
  type Printer,
  type TaskEvaluation,
} from "@agentrl/trainer";
import { listOption, numberOption } from "../options.js";
import { progressFactory } from "../progress.js";
import { DEFAULT_DASHBOARD_PORT } from "@agentrl/dashboard";
import { openDashboard, parsePort } from "./dashboard.js";
import { runAgentTraining } from "./train-agent.js";

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
      "Train a policy: warm start, then GRPO over the task mix (no arguments: the embedded default run, ~21 min on a quiet 2-core machine)",
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
    .addHelpText(
      "after",
      "\nExamples:\n  agentrl train                                   # the embedded default run\n  agentrl train --agent examples/agents/kg-ai-sdk.ts --steps 10 --run-dir runs/agent\n  agentrl train --dashboard                       # with the live dashboard at http://127.0.0.1:8265/\n  agentrl train --config examples/single-task.yaml --set rl.steps=50\n  agentrl train --config examples/sync-baseline.yaml --run-dir runs/sync\n  agentrl train --run-dir runs/default --resume",
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

/** One arm of an ablation: a folder name, a column label and the `--set` overrides that make it. */
export interface AblationVariant {
  name: string;
  label: string;
  set: readonly string[];
}

/** The four variants of the default ablation: task advantage normalization × cross-policy sampling. */
export const ABLATION_VARIANTS: readonly AblationVariant[] = [
  { name: "full", label: "TAN + cross-policy", set: [] },
  { name: "no-tan", label: "cross-policy only", set: ["rl.taskAdvantageNormalization=false"] },
  { name: "no-cross", label: "TAN only", set: ["crossPolicy.staleProbability=0"] },
  {
    name: "neither",
    label: "neither",
    set: ["rl.taskAdvantageNormalization=false", "crossPolicy.staleProbability=0"],
  },
];

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

/** In an ablation's markdown, the text from this line on is kept when the ablation runs again. */
export const ABLATION_NOTES_MARKER = "<!-- notes: kept when the ablation is run again -->";

export interface AblationOptions extends Omit<TrainCommandOptions, "runDirectory"> {
  /** Markdown file the side-by-side table goes to. Default `docs/results.md`. */
  out?: string;
  /** Parent folder of the runs (each in `<folder>/<variant>`, or `<folder>/<variant>-<seed>` with `seeds`). Default: `run.directory` of the config. */
  runDirectory?: string;
  /** The arms. Default {@link ABLATION_VARIANTS}. */
  variants?: readonly AblationVariant[];
  /** Train every arm once per seed (`run.seed`); the tables show mean ± sd over the seeds. Default: the configuration's seed, once. */
  seeds?: readonly number[];
  /** The markdown's heading. Default: the TAN × cross-policy ablation's. */
  title?: string;
}

/**
 * Trains the same budget once per variant (default: with and without task advantage
 * normalization, with and without cross-policy sampling) and seed, from ONE warm start per
 * seed, then writes the final test success per task of the variants side by side into `out`
 * (with several seeds: mean ± sd over them). With `resume`, finished runs are read back, not
 * trained again.
 */
export async function runAblation(
  options: AblationOptions = {},
): Promise<Record<string, TrainResult>> {
  const print = options.print ?? ((line: string) => console.log(line));
  const base = await resolveTrainConfig({ config: options.config, set: options.set });
  const parent = options.runDirectory ?? base.run.directory;
  const variants = options.variants ?? ABLATION_VARIANTS;
  const names = variants.map((v) => v.name);
  const repeated = names.find((name, i) => names.indexOf(name) !== i);
  if (repeated) throw new InvalidArgumentError(`ablation: variant "${repeated}" is given twice`);
  const seeds = options.seeds ?? [base.run.seed];
  const folderOf = (variant: AblationVariant, seed: number) =>
    join(parent, options.seeds ? `${variant.name}-${seed}` : variant.name);
  const results: Record<string, TrainResult> = {};
  const bySeed = new Map<number, Record<string, TrainResult>>();
  for (const seed of seeds) {
    let warmCheckpoint: string | undefined;
    let first: TrainResult | undefined;
    const ofSeed: Record<string, TrainResult> = {};
    bySeed.set(seed, ofSeed);
    for (const variant of variants) {
      if (options.signal?.aborted) break;
      const folder = folderOf(variant, seed);
      print(
        `\n=== ablation: ${variant.label}${options.seeds ? `, seed ${seed}` : ""} (${folder}) ===`,
      );
      const set = [
        ...(options.set ?? []),
        ...(options.seeds ? [`run.seed=${seed}`] : []),
        ...variant.set,
      ];
      if (first) {
        // Later variants share the first one's warm start and its measurement.
        set.push("evaluation.beforeWarmStart=false");
        if (warmCheckpoint) set.push(`warmStart.checkpoint=${JSON.stringify(warmCheckpoint)}`);
        for (const name of ["warmstart.json", "warmstart-sampled.json"]) {
          const measured = join(first.runDirectory, "evaluations", name);
          if (!existsSync(measured)) continue;
          await mkdir(join(folder, "evaluations"), { recursive: true });
          await copyFile(measured, join(folder, "evaluations", name));
        }
      }
      const result = await runTrainCommand({ ...options, set, runDirectory: folder, print });
      ofSeed[variant.name] = result;
      results[options.seeds ? `${variant.name}-${seed}` : variant.name] = result;
      first ??= result;
      const own = join(folder, "warmstart", "model");
      if (!warmCheckpoint && base.warmStart.enabled && existsSync(join(own, "config.json")))
        warmCheckpoint = own;
    }
  }
  const runs = [...bySeed.values()];
  const column = (
    label: string,
    pick: (run: Record<string, TrainResult>) => Record<string, TaskEvaluation> | undefined,
  ): SuccessColumn => [
    label,
    runs.map(pick).filter((r): r is Record<string, TaskEvaluation> => r !== undefined),
  ];
  const firstOf = (run: Record<string, TrainResult>) => run[variants[0].name];
  const table = successTable([
    column("after warm start", (run) => firstOf(run)?.tables.warmStart),
    ...variants.map((v) => column(v.label, (run) => run[v.name]?.tables.final)),
  ]);
  const sampled = runs.some((run) => firstOf(run)?.sampledTables);
  const sampledTable = sampled
    ? successTable([
        column("after warm start", (run) => firstOf(run)?.sampledTables?.warmStart),
        ...variants.map((v) => column(v.label, (run) => run[v.name]?.sampledTables?.final)),
      ])
    : undefined;
  const out = options.out ?? "docs/results.md";
  // Notes written by hand below the marker survive a re-run.
  const previous = existsSync(out) ? await readFile(out, "utf8") : "";
  const notes = previous.includes(ABLATION_NOTES_MARKER)
    ? previous.slice(previous.indexOf(ABLATION_NOTES_MARKER))
    : `${ABLATION_NOTES_MARKER}\n`;
  const command = [
    "agentrl ablation",
    options.config ? `--config ${options.config}` : "",
    ...(options.set ?? []).map((item) => `--set ${item}`),
    options.seeds ? `--seeds ${seeds.join(",")}` : "",
  ]
    .filter(Boolean)
    .join(" ");
  const text = [
    `# ${options.title ?? "Ablation: task advantage normalization (TAN) and cross-policy sampling"}`,
    "",
    `Generated by \`${command}\` on ${new Date().toISOString().slice(0, 10)}: ${variants.length} variants of the same budget`,
    `(${base.rl.steps} RL steps of ${base.rl.batchGroups} groups × ${base.rl.groupSize} episodes, ${base.rl.mode} mode, ${options.seeds ? `seeds ${seeds.join(", ")}: mean ± sample sd over them` : `seed ${base.run.seed}`}) from one warm start${options.seeds ? " per seed" : ""}.`,
    `Variants: ${variants.map((v) => `${v.label} (${v.set.length ? v.set.map((s) => `\`${s}\``).join(" ") : "the configuration as is"})`).join("; ")}.`,
    `Test success per task after RL (${base.evaluation.finalLimit} test instances per task, ${base.evaluation.samples} sample(s), temperature ${base.evaluation.temperature}). Runs: \`${parent}/<variant>${options.seeds ? "-<seed>" : ""}\`.`,
    "",
    table,
    "",
    ...(sampledTable
      ? [
          `At the rollout temperature (${base.rl.temperature}), the same test instances:`,
          "",
          sampledTable,
          "",
        ]
      : []),
    notes,
  ].join("\n");
  await mkdir(dirname(out), { recursive: true });
  await writeFile(out, text);
  print(
    `\n${table}${sampledTable ? `\n\nat the rollout temperature:\n${sampledTable}` : ""}\nwritten to ${out}`,
  );
  return results;
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
