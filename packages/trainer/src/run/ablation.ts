/**
 * `runAblation` (what `agentrl ablation` runs): the same budget trained once per variant and
 * seed from one warm start per seed, and the final success tables side by side in a markdown.
 */
import { existsSync } from "node:fs";
import { copyFile, mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { AgentRLError } from "@agentrl/spec";
import { resolveTrainConfig } from "./experiment/configuration.js";
import { runExperiment } from "./experiment/index.js";
import type { ExperimentOptions, ExperimentResult } from "./experiment/options.js";
import type { TaskEvaluation } from "./evaluate.js";
import { successTable, type SuccessColumn } from "./experiment/results.js";

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

/** In an ablation's markdown, the text from this line on is kept when the ablation runs again. */
export const ABLATION_NOTES_MARKER = "<!-- notes: kept when the ablation is run again -->";

/** Thrown when an ablation's arms are given wrongly. */
export class AblationError extends AgentRLError {}

export interface AblationOptions extends Omit<ExperimentOptions, "config"> {
  /** YAML configuration file of the base run. Default: none (the embedded default run). */
  config?: string;
  /** `key=value` overrides applied after the file, to every arm. */
  set?: string[];
  /** Continue each run from its newest checkpoint (finished runs are read back). Default false. */
  resume?: boolean;
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
): Promise<Record<string, ExperimentResult>> {
  const print = options.print ?? ((line: string) => console.log(line));
  const base = await resolveTrainConfig({ config: options.config, set: options.set });
  const parent = options.runDirectory ?? base.run.directory;
  const variants = options.variants ?? ABLATION_VARIANTS;
  const names = variants.map((v) => v.name);
  const repeated = names.find((name, i) => names.indexOf(name) !== i);
  if (repeated) throw new AblationError(`ablation: variant "${repeated}" is given twice`);
  const seeds = options.seeds ?? [base.run.seed];
  const folderOf = (variant: AblationVariant, seed: number) =>
    join(parent, options.seeds ? `${variant.name}-${seed}` : variant.name);
  const results: Record<string, ExperimentResult> = {};
  const bySeed = new Map<number, Record<string, ExperimentResult>>();
  for (const seed of seeds) {
    let warmCheckpoint: string | undefined;
    let first: ExperimentResult | undefined;
    const ofSeed: Record<string, ExperimentResult> = {};
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
      const config = await resolveTrainConfig({
        config: options.config,
        set,
        resume: options.resume,
        runDirectory: folder,
      });
      const result = await runExperiment({
        config,
        print,
        createFamily: options.createFamily,
        signal: options.signal,
        bars: options.bars,
        createProgress: options.createProgress,
      });
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
    pick: (run: Record<string, ExperimentResult>) => Record<string, TaskEvaluation> | undefined,
  ): SuccessColumn => [
    label,
    runs.map(pick).filter((r): r is Record<string, TaskEvaluation> => r !== undefined),
  ];
  const firstOf = (run: Record<string, ExperimentResult>) => run[variants[0].name];
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
