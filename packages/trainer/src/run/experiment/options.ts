/** What `runExperiment` takes and returns, and the two callbacks every phase shares (where lines go, how a family is made). */
import type { TaskFamilyFactory } from "@agentrl/envs";
import type { TaskEvaluation } from "../evaluate.js";
import type { TrainConfig } from "../config.js";
import type { ProgressFactory } from "../progress.js";

/** Where the run prints its lines. */
export type Printer = (line: string) => void;

/** Creates a task family by name (the registry's unless a test swaps it): @agentrl/envs' TaskFamilyFactory. */
export type FamilyFactory = TaskFamilyFactory;

/**
 * The default run's shipped, already warm-started model (relative to the working directory),
 * used as the warm checkpoint of the default model when present: the os-weighted recipe's end
 * (run R15: R13's stage once more with OS's rows doubled), whose OS successes are all read from
 * what its commands printed, whose commands put a folder where the question states it, and
 * which runs a second command after an error (docs/warmstart.md, "R15"). Until session 32 it was
 * `models/warmstart` (the default recipe's end); in session 32 `models/warmstart-os-copy` (R9);
 * in sessions 33-35 `models/warmstart-os-stated` (R10); in session 36
 * `models/warmstart-os-stated-long` (R11); in session 37 `models/warmstart-os-stated-longer`
 * (R12); in session 38 `models/warmstart-os-recovery` (R13).
 */
export const SHIPPED_WARM_START = "models/warmstart-os-weighted";

/**
 * Evaluation memos shared by every run besides a model's own `<model>/evaluations`: those of
 * models re-made bit-identically from a seed (the default run's fresh model), kept with the
 * first shipped warm start's.
 */
export const SHARED_EVALUATION_MEMOS = "models/warmstart/evaluations";

export interface ExperimentOptions {
  /** The configuration; default: the embedded default run (`defaultConfig()`). Use `loadConfig` / `resolveTrainConfig` for YAML and overrides. */
  config?: TrainConfig;
  /** Where lines go. Default `console.log`. */
  print?: Printer;
  createFamily?: FamilyFactory;
  /** Aborting stops after the current RL step, with a checkpoint. */
  signal?: AbortSignal;
  /** Progress bars of the phases (see ./progress.ts). Default none. */
  createProgress?: ProgressFactory;
  /** The warm start's own progress bar (see `WarmStartOptions.progress`). Default true. */
  bars?: boolean;
}

/** Test success per task at the three points of the run (undefined when not measured). */
export interface ExperimentResult {
  runDirectory: string;
  finalModel: string | undefined;
  steps: number;
  tables: {
    before?: Record<string, TaskEvaluation>;
    warmStart?: Record<string, TaskEvaluation>;
    final?: Record<string, TaskEvaluation>;
  };
  /** The same test instances at the rollout temperature (`evaluation.sampled`), when the main tables are greedy. */
  sampledTables?: {
    warmStart?: Record<string, TaskEvaluation>;
    final?: Record<string, TaskEvaluation>;
  };
}
