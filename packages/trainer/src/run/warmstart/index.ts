/**
 * Supervised warm start: teach a fresh or given policy the tasks' tool-call format and easy
 * solutions from expert episodes, before reinforcement learning (docs/warmstart.md).
 *
 *   runWarmStart(options): Promise<WarmStartSummary>   (./run.ts)
 *     Loads `options.model` (or initialises a fresh model: `architecture` + a byte-level BPE
 *     tokenizer trained on `tokenizerCorpus()`), takes `steps` supervised steps (or stops
 *     after `minutes`) on expert episodes played fresh for every step, evaluates greedy
 *     success per task and difficulty on a fixed test subset at the start, every `evalEvery`
 *     steps and at the end, and writes the model (Hugging Face layout) and `warmstart.json`.
 *
 * The parts: ./options.ts (options, defaults, stages), ./recipes.ts (`agentrl sft --preset`
 * recipes as data), ./rows.ts (expert rows and worlds), ./evaluation.ts (success per task and
 * difficulty), ./model.ts (a fresh model), ./run.ts (the run, phase by phase).
 */
export {
  type ArchitectureSpec,
  checkStagesRunnable,
  DOCKER_FAMILIES,
  fromStage,
  resolveWarmStartOptions,
  WarmStartError,
  type WarmStartEvaluation,
  type WarmStartOptions,
  type WarmStartStage,
  type WarmStartSummary,
  warmStartStages,
} from "./options.js";
export { WARM_START_RECIPES } from "./recipes.js";
export {
  assistantLossWeight,
  collectExpertRows,
  type ExpertRowOptions,
  openDifficulties,
  TrainingWorlds,
  withPromptLoss,
} from "./rows.js";
export { evaluateByDifficulty, formatEvaluation } from "./evaluation.js";
export { createPolicy, initWarmStartModel } from "./model.js";
export { runWarmStart } from "./run.js";
