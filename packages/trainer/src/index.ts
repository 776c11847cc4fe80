/**
 * @agentrl/trainer: GRPO for multi-turn agents, the training loop, the supervised warm start
 * and the whole experiment of `agentrl train` (`runExperiment`), with its config schema.
 * The public API, by name (a new export of a module is added here on purpose); the plumbing
 * that only benches and tests reach for is `@agentrl/trainer/internal` (./internal.ts).
 * test/exports.test.ts holds a snapshot of both lists.
 */
export {
  AlgorithmError,
  type AdvantageEstimator,
  advantageStatisticsByTask,
  DEFAULT_POLICY_LOSS,
  DEFAULT_POLICY_OBJECTIVE,
  getAdvantageEstimator,
  grpoAdvantage,
  grpoMeanOnlyAdvantage,
  shuffledGrpoAdvantage,
  klK3,
  type LossReduction,
  maskedMean,
  mean,
  normalizeAdvantagesByTask,
  type PolicyLossOptions,
  policyObjective,
  type PolicyObjectiveOptions,
  ppoClipTokenLoss,
  reduceLoss,
  registerAdvantageEstimator,
  standardDeviation,
  type TokenBatch,
  type PolicyLoss,
  registerPolicyLoss,
  getPolicyLoss,
  policyLossNames,
  advantageEstimatorNames,
  OFF_POLICY_CORRECTED_LOSSES,
  truncatedImportanceTokenLoss,
  truncatedImportanceSequenceLoss,
  icepopTokenLoss,
  importanceRatioKept,
  type MismatchStatistics,
  mismatchStatistics,
} from "./rl/algorithms.js";
export {
  type CheckpointManifest,
  latestCheckpoint,
  listCheckpoints,
  pruneCheckpoints,
  writeCheckpoint,
  isCompleteModelFolder,
  writeModelFolder,
} from "./rl/checkpoint.js";
export {
  JsonlWriter,
  type Metrics,
  readTensorBoardScalars,
  TensorBoardWriter,
} from "./rl/logging.js";
export { lineChartSvg, type Series } from "./run/plot.js";
export {
  DEFAULT_GRPO,
  type GrpoDiagnostics,
  type GrpoOptions,
  GrpoShard,
  grpoUpdate,
  planMicroBatches,
  prepareBatch,
  type PreparedBatch,
  type TrainingRow,
  type UpdateMetrics,
  withoutUntrainedTail,
  checkGrpoOptions,
  grpoOptionsOf,
} from "./rl/grpo.js";
export {
  CROSS_POLICY_DEFAULTS,
  RL_DEFAULTS,
  type RlSettings,
  WARM_START_DEFAULTS,
} from "./rl/defaults.js";
export {
  expertSequence,
  type SupervisedRow,
  supervisedStep,
  type SupervisedStepResult,
  sharedSupervisedStep,
} from "./rl/sft.js";
export {
  DEFAULT_OPTIMIZER,
  DEFAULT_SCHEDULE,
  Learner,
  type LearnerOptions,
  type LearnerSettings,
  type LearnerUpdate,
  learningRateAt,
  type LearningRateSchedule,
  availableGradientThreads,
} from "./rl/learner.js";
export {
  type LearnerHandle,
  LearnerWorkerError,
  openLearner,
  type OpenLearnerOptions,
} from "./rl/threads/learner-thread.js";
export {
  type AnswerSource,
  answerSource,
  answerSources,
  evaluate,
  type EvaluationOptions,
  faultedTasks,
  fromOutputNote,
  isSuccess,
  successCount,
  successesFromOutput,
  type TaskEvaluation,
} from "./run/evaluate.js";
export {
  type ExternalPolicyMember,
  runTraining,
  type StepRecord,
  stepSeed,
  TrainingOptionsError,
  type TrainingRunOptions,
} from "./rl/loop.js";
export {
  ConfigError,
  configToYaml,
  DEFAULT_ARCHITECTURE,
  DEFAULT_TASK_DIFFICULTIES,
  DEFAULT_TASK_NAMES,
  DEFAULT_TASK_WEIGHTS,
  defaultConfig,
  formatKey,
  loadConfig,
  type LoadConfigOptions,
  type Override,
  parseOverride,
  setPath,
  type TaskConfig,
  TaskConfigSchema,
  taskDifficulties,
  type TrainConfig,
  TrainConfigSchema,
  validateConfig,
} from "./run/config.js";
export {
  formatPerTask,
  formatSeconds,
  type PhaseReporter,
  type ProgressFactory,
  type ProgressHints,
} from "./run/progress.js";
export {
  agentBenchProblemTexts,
  CORPUS_TASKS,
  defaultTokenizerCorpus,
  gatherTaskText,
  TASK_TEXT_SOURCES,
  type TaskTextOptions,
  tokenizerCorpus,
} from "./run/corpus.js";
export {
  type ArchitectureSpec,
  checkStagesRunnable,
  collectExpertRows,
  createPolicy,
  DOCKER_FAMILIES,
  evaluateByDifficulty,
  type ExpertRowOptions,
  formatEvaluation,
  fromStage,
  initWarmStartModel,
  openDifficulties,
  resolveWarmStartOptions,
  runWarmStart,
  WARM_START_RECIPES,
  WarmStartError,
  type WarmStartEvaluation,
  type WarmStartOptions,
  type WarmStartStage,
  type WarmStartSummary,
  warmStartStages,
  withPromptLoss,
} from "./run/warmstart/index.js";
export { type RepetitionOptions, repetitionRows } from "./rl/repetition.js";
export {
  evaluationKey,
  type ExperimentOptions,
  type ExperimentResult,
  type FamilyFactory,
  type OpenedTasks,
  openTasks,
  type Printer,
  type ResolveConfigOptions,
  resolveTrainConfig,
  runExperiment,
  setAsideEarlierRun,
  SHIPPED_WARM_START,
  successTable,
  warmStartPhase,
  type SuccessColumn,
  type WarmStartPhaseOptions,
  writePlots,
} from "./run/experiment/index.js";
export {
  ABLATION_NOTES_MARKER,
  ABLATION_VARIANTS,
  AblationError,
  type AblationOptions,
  type AblationVariant,
  runAblation,
} from "./run/ablation.js";
export {
  type CheckReport,
  type CheckRow,
  constantAnswerAgent,
  EnvCommandError,
  type EnvCheckOptions,
  runEnvCheck,
} from "./run/env-check.js";
export {
  recordStep,
  type RecordedEpisode,
  type RecordedToken,
  type RecordedTurn,
  ROTATED_TRAJECTORY_FILE,
  TRAJECTORY_FILE,
  TrajectoryLog,
  type TrajectoryLogOptions,
  type TrajectoryStepRecord,
} from "./rl/trajectory-log.js";
export {
  type AgentTasks,
  trainAgent,
  TrainAgentError,
  type TrainAgentOptions,
} from "./agent/index.js";
