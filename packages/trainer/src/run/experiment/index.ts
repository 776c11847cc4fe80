/**
 * `runExperiment(options)`: one training experiment, what `agentrl train` runs, callable from
 * a script or a notebook with this package alone. Phases, top to bottom (each one function):
 * Each phase has its file here:
 *   1. resolve the configuration (the schema of ../config.ts) and the run folder (config.yaml written there; ./configuration.ts);
 *   2. open the task families (./tasks.ts), in-process (os and db only when a Docker engine answers) or behind controllers;
 *   3. the starting model: `model.directory`, else a fresh `model.preset` model (./models.ts);
 *   4. evaluate it on the test split ("before warm start"; ./evaluation.ts);
 *   5. the supervised warm start (skipped when a warm checkpoint exists; ./warm-start.ts), evaluate again;
 *   6. GRPO (`runTraining`), with periodic evaluations into metrics.jsonl and a plot (./reinforcement.ts);
 *   7. evaluate the final policy, write results.md / results.json: before / after warm start / after RL (./results.ts).
 *
 * Every evaluation is cached in `<run>/evaluations/*.json`, so `resume` only redoes what was
 * not finished, and memoised per model in `<model>/evaluations/<key>.json`; a new run moves
 * an earlier run's outputs to `<run>/previous/`. Aborting `signal` stops the RL phase after a
 * checkpoint. Progress goes to `createProgress` (none by default), lines to `print`.
 */
import { join } from "node:path";
import type { ExperimentOptions, ExperimentResult } from "./options.js";
import { defaultConfig } from "../config.js";
import { prepareRunFolder } from "./configuration.js";
import { evaluateCached, type EvaluationRequest } from "./evaluation.js";
import { openTasks } from "./tasks.js";
import { reinforcementLearning } from "./reinforcement.js";
import { writeResults } from "./results.js";
import { startingModel } from "./models.js";
import { warmModel } from "./warm-start.js";
import { formatSeconds } from "../progress.js";

export {
  type ExperimentOptions,
  type ExperimentResult,
  type FamilyFactory,
  type Printer,
  SHIPPED_WARM_START,
} from "./options.js";
export { resolveTrainConfig, type ResolveConfigOptions } from "./configuration.js";
export { controllerOf, type OpenedTasks, openTasks } from "./tasks.js";
export { evaluateCached, evaluationKey, type EvaluationRequest } from "./evaluation.js";
export { warmStartPhase, type WarmStartPhaseOptions } from "./warm-start.js";
export { trainingSettings } from "./reinforcement.js";
export { setAsideEarlierRun, type SuccessColumn, successTable, writePlots } from "./results.js";

/** Runs one experiment (see the file comment). */
export async function runExperiment(options: ExperimentOptions = {}): Promise<ExperimentResult> {
  const print = options.print ?? ((line: string) => console.log(line));
  const began = performance.now();
  const config = options.config ?? defaultConfig();
  const runDirectory = config.run.directory;
  await prepareRunFolder(config, print);

  const opened = await openTasks(config, print, options.createFamily);
  const taskNames = opened.tasks.map((task) => task.name);
  const evaluation = (limit: number, phase: string, at = config): EvaluationRequest => ({
    config: at,
    client: opened.client,
    tasks: taskNames,
    limit,
    phase,
    createProgress: options.createProgress,
    signal: options.signal,
    print,
  });
  const tables: ExperimentResult["tables"] = {};
  // The second, sampled table: the same evaluation at the rollout temperature.
  const sampledConfig =
    config.evaluation.sampled && config.evaluation.temperature === 0
      ? { ...config, evaluation: { ...config.evaluation, temperature: config.rl.temperature } }
      : undefined;
  const sampledTables: NonNullable<ExperimentResult["sampledTables"]> = {};
  try {
    // The starting model is made only when something needs it (a shipped warm start may make it unnecessary).
    let startDirectory: string | undefined;
    const start = async () => (startDirectory ??= await startingModel(config, print));
    if (config.evaluation.beforeWarmStart)
      tables.before = await evaluateCached(
        "before",
        await start(),
        evaluation(config.evaluation.finalLimit, "eval start"),
      );
    const warm = await warmModel(config, start, opened, options, print);
    if (warm)
      tables.warmStart = await evaluateCached(
        "warmstart",
        warm,
        evaluation(config.evaluation.finalLimit, "eval warm"),
      );
    if (warm && sampledConfig)
      sampledTables.warmStart = await evaluateCached(
        "warmstart-sampled",
        warm,
        evaluation(config.evaluation.finalLimit, "eval warm, sampled", sampledConfig),
      );
    if (options.signal?.aborted) return { runDirectory, finalModel: undefined, steps: 0, tables };

    const rlStart = warm ?? (await start());
    const { finalModel, steps } = await reinforcementLearning(
      config,
      rlStart,
      opened,
      options,
      print,
    );
    if (options.signal?.aborted) {
      print(
        `stopped at RL step ${steps} with a checkpoint${finalModel ? ` (${finalModel})` : ""}; continue with: agentrl train --resume --run-dir ${runDirectory}`,
      );
      return { runDirectory, finalModel, steps, tables, sampledTables };
    }
    if (finalModel)
      tables.final = await evaluateCached(
        `final-step-${steps}`,
        finalModel,
        evaluation(config.evaluation.finalLimit, "eval final"),
      );
    if (finalModel && sampledConfig)
      sampledTables.final = await evaluateCached(
        `final-step-${steps}-sampled`,
        finalModel,
        evaluation(config.evaluation.finalLimit, "eval final, sampled", sampledConfig),
      );
    await writeResults(config, { steps, finalModel, tables, sampledTables, sampledConfig }, print);
    print(
      `done in ${formatSeconds((performance.now() - began) / 1000)}; metrics: ${join(runDirectory, "metrics.jsonl")}, plots: ${join(runDirectory, "success-*.svg")}`,
    );
    return { runDirectory, finalModel, steps, tables, sampledTables };
  } finally {
    await opened.close();
  }
}
