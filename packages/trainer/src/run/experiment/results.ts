/** The run folder's outputs: plots of metrics.jsonl, the success tables, an earlier run set aside. */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { lineChartSvg, type Series } from "../plot.js";
import { successCount, type TaskEvaluation } from "../evaluate.js";
import type { TrainConfig } from "../config.js";
import type { ExperimentResult, Printer } from "./options.js";

// ── 6. RL ───────────────────────────────────────────────────────────────────

interface MetricsLine {
  step: number;
  [key: string]: number | string;
}

async function readMetrics(runDirectory: string): Promise<MetricsLine[]> {
  const file = join(runDirectory, "metrics.jsonl");
  if (!existsSync(file)) return [];
  return (await readFile(file, "utf8"))
    .split("\n")
    .filter((line) => line.trim())
    .map((line) => JSON.parse(line) as MetricsLine);
}

/** Series `prefix<task>` of the metrics lines, one per task, over steps. */
function seriesOf(lines: readonly MetricsLine[], prefix: string): Series[] {
  const byTask = new Map<string, Series>();
  for (const line of lines) {
    for (const [key, value] of Object.entries(line)) {
      if (!key.startsWith(prefix) || typeof value !== "number") continue;
      const task = key.slice(prefix.length);
      if (task.includes("/")) continue;
      if (!byTask.has(task)) byTask.set(task, { name: task, points: [] });
      byTask.get(task)!.points.push({ x: line.step, y: value });
    }
  }
  return [...byTask.values()].sort((a, b) => a.name.localeCompare(b.name));
}

/**
 * Writes success-per-task plots of the run (training batches; test evaluations when there are
 * any). `final`, when given, is the final evaluation: the last point of each test curve (the
 * periodic evaluations skip the last step, which it measures on more instances).
 */
export async function writePlots(
  runDirectory: string,
  final?: { step: number; results: Record<string, TaskEvaluation>; instances: number },
): Promise<string[]> {
  const lines = await readMetrics(runDirectory);
  if (final)
    lines.push({
      step: final.step,
      ...Object.fromEntries(
        Object.values(final.results).map((r) => [`eval/success/${r.task}`, r.success]),
      ),
    });
  const written: string[] = [];
  const plots: [string, string, string][] = [
    ["success-train.svg", "success/", "Success per task on training batches"],
    [
      "success-test.svg",
      "eval/success/",
      `Success per task on the test split${final ? ` (last point: final evaluation, ${final.instances} a task)` : ""}`,
    ],
  ];
  for (const [file, prefix, title] of plots) {
    const series = seriesOf(lines, prefix);
    if (series.length === 0) continue;
    await writeFile(
      join(runDirectory, file),
      lineChartSvg(series, { title, xLabel: "RL step", yLabel: "success" }),
    );
    written.push(join(runDirectory, file));
  }
  return written;
}

// ── 7. the table ────────────────────────────────────────────────────────────

/** One column of {@link successTable}: one run's results, or the same point of several seeds' runs. */
export type SuccessColumn = [
  string,
  Record<string, TaskEvaluation> | readonly Record<string, TaskEvaluation>[] | undefined,
];

/** Mean and sample standard deviation (n − 1; 0 for one value) of `values`, in percent. */
function meanAndSpread(values: readonly number[]): string {
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  if (values.length === 1) return `${(100 * mean).toFixed(1)}%`;
  const sd = Math.sqrt(values.reduce((a, b) => a + (b - mean) ** 2, 0) / (values.length - 1));
  return `${(100 * mean).toFixed(1)} ± ${(100 * sd).toFixed(1)}%`;
}

/**
 * A markdown table of test success per task, one column per measured point. A column of
 * several seeds' results shows `mean ± sd` over the seeds (sample standard deviation); its
 * mean row is the mean ± sd of each seed's mean over tasks. A cell with episodes ended by an
 * infrastructure fault says how many (`(46 faulted)`, summed over seeds), with a note below.
 */
export function successTable(columns: readonly SuccessColumn[]): string {
  const present = columns
    .filter((c): c is [string, NonNullable<SuccessColumn[1]>] => c[1] !== undefined)
    .map(([name, r]): [string, readonly Record<string, TaskEvaluation>[]] => [
      name,
      Array.isArray(r) ? r : [r as Record<string, TaskEvaluation>],
    ])
    .filter(([, runs]) => runs.length > 0);
  const tasks = [
    ...new Set(present.flatMap(([, runs]) => runs.flatMap((r) => Object.keys(r)))),
  ].sort();
  const faultCount = (runs: readonly Record<string, TaskEvaluation>[], task: string) =>
    runs.reduce((sum, r) => sum + (r[task]?.infrastructureFaults ?? 0), 0);
  const cell = (runs: readonly Record<string, TaskEvaluation>[], task: string) => {
    const values = runs.filter((r) => r[task]).map((r) => r[task].success);
    const faults = faultCount(runs, task);
    return values.length
      ? `${meanAndSpread(values)}${faults > 0 ? ` (${faults} faulted)` : ""}`
      : "—";
  };
  const mean = (runs: readonly Record<string, TaskEvaluation>[]) => {
    const perRun = runs
      .map((r) => tasks.filter((t) => r[t]).map((t) => r[t].success))
      .filter((v) => v.length > 0);
    return perRun.length
      ? meanAndSpread(perRun.map((v) => v.reduce((a, b) => a + b, 0) / v.length))
      : "—";
  };
  const lines = [
    `| task | ${present.map(([name]) => name).join(" | ")} |`,
    `|---|${present.map(() => "---:").join("|")}|`,
    ...tasks.map(
      (task) => `| ${task} | ${present.map(([, runs]) => cell(runs, task)).join(" | ")} |`,
    ),
    `| **mean** | ${present.map(([, runs]) => mean(runs)).join(" | ")} |`,
  ];
  if (present.some(([, runs]) => tasks.some((task) => faultCount(runs, task) > 0)))
    lines.push(
      "",
      "(N faulted): N episodes ended by an infrastructure fault after their retries and count as failures: the cell understates the model.",
    );
  // Families that say where an answer came from (OS): how many successes read it, per column (summed over seeds).
  for (const task of tasks) {
    const read = present.flatMap(([name, runs]) => {
      const measured = runs.map((r) => r[task]).filter((r) => r?.successesFromOutput !== undefined);
      if (measured.length === 0) return [];
      const fromOutput = measured.reduce((sum, r) => sum + r.successesFromOutput!, 0);
      const successes = measured.reduce((sum, r) => sum + successCount(r), 0);
      const other = measured.reduce((sum, r) => sum + (r.answerSources?.other ?? 0), 0);
      return [`${name} ${fromOutput} of ${successes}${other > 0 ? ` (${other} other)` : ""}`];
    });
    if (read.length > 0)
      lines.push(
        "",
        `${task}: successes that read their answer from a line or field a command printed (the others guessed it, or were graded on the system's state: other): ${read.join(", ")}.`,
      );
  }
  return lines.join("\n");
}

/** What one RL run writes into its folder (the starting model and the warm start are kept and reused). */
const RUN_OUTPUTS = [
  "checkpoints",
  "evaluations",
  "metrics.jsonl",
  "tensorboard",
  "results.md",
  "results.json",
  "success-test.svg",
  "success-train.svg",
];

/**
 * A new run (not `--resume`) in a folder that holds an earlier run's outputs moves them to
 * `<run>/previous/` (replacing an older one there), so that none of them (a cached final
 * evaluation, a later checkpoint `--resume` would pick) is taken for the new run's.
 * Returns the names moved.
 */
export async function setAsideEarlierRun(runDirectory: string): Promise<string[]> {
  const present = RUN_OUTPUTS.filter((name) => existsSync(join(runDirectory, name)));
  if (present.length === 0) return [];
  const previous = join(runDirectory, "previous");
  await rm(previous, { recursive: true, force: true });
  await mkdir(previous, { recursive: true });
  for (const name of present) await rename(join(runDirectory, name), join(previous, name));
  return present;
}

/** What the run measured, for {@link writeResults}. */
export interface RunOutcome {
  steps: number;
  finalModel: string | undefined;
  tables: ExperimentResult["tables"];
  sampledTables: NonNullable<ExperimentResult["sampledTables"]>;
  /** The configuration of the sampled evaluations, when there are any. */
  sampledConfig: TrainConfig | undefined;
}

/** Phase 7's outputs: the test plot's last point, results.md (the tables, also printed) and results.json. */
export async function writeResults(
  config: TrainConfig,
  outcome: RunOutcome,
  print: Printer,
): Promise<void> {
  const runDirectory = config.run.directory;
  const { steps, finalModel, tables, sampledTables, sampledConfig } = outcome;
  if (tables.final)
    await writePlots(runDirectory, {
      step: steps,
      results: tables.final,
      instances: config.evaluation.finalLimit,
    });
  const table = successTable([
    ["before warm start", tables.before],
    ["after warm start", tables.warmStart],
    [`after RL (step ${steps})`, tables.final],
  ]);
  const heading = (at: TrainConfig) =>
    `test success per task (${at.evaluation.finalLimit} instances each, ${at.evaluation.samples} sample(s), temperature ${at.evaluation.temperature})`;
  let report = `${heading(config)}:\n${table}`;
  if (sampledConfig && (sampledTables.warmStart || sampledTables.final)) {
    const sampled = successTable([
      ["after warm start", sampledTables.warmStart],
      [`after RL (step ${steps})`, sampledTables.final],
    ]);
    report += `\n\n${heading(sampledConfig)}, the rollout's:\n${sampled}`;
  }
  await writeFile(join(runDirectory, "results.md"), `# Test success per task\n\n${report}\n`);
  await writeFile(
    join(runDirectory, "results.json"),
    JSON.stringify(
      {
        steps,
        finalModel,
        ...tables,
        ...(sampledConfig
          ? { sampled: { temperature: sampledConfig.evaluation.temperature, ...sampledTables } }
          : {}),
      },
      null,
      2,
    ),
  );
  print(`\n${report}`);
  if (finalModel) print(`final model: ${finalModel}`);
}
