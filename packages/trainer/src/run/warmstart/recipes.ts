/**
 * Named recipes of `agentrl sft --preset NAME`, as data: `default` is the measured recipe that
 * produced the shipped `models/warmstart`. How each stage was chosen (the runs behind it and
 * what they measured) is told in docs/warmstart.md, "The recipes' history".
 */
import { DEFAULT_ARCHITECTURE } from "../config.js";
import type { WarmStartOptions, WarmStartStage } from "./options.js";

/** What both recipes share: one cosine schedule over difficulty 0 with a progressive curriculum, light prompt loss, F16 output, a small final evaluation. */
const RECIPE_BASE: Partial<WarmStartOptions> = {
  schedule: "cosine",
  difficulties: [0],
  curriculum: "progressive",
  promptLossWeight: 0.05,
  maxSequenceTokens: 1400,
  microBatchTokens: 2048,
  evalLimit: 20,
  evalDifficulties: [0],
  evalEvery: 0,
  evalMaxNewTokens: 64,
  saveDtype: "F16",
};

/** Runs F, G, H, N and S6: the recipe of the shipped models/warmstart. */
const DEFAULT_RECIPE: Omit<
  WarmStartOptions,
  "out" | "model" | "log" | "signal" | "createProgress"
> = {
  architecture: {
    preset: "tiny",
    overrides: { ...DEFAULT_ARCHITECTURE },
    vocabSize: 4096,
    chatTemplate: "compact",
  },
  tasks: ["kg", "webshop", "alfworld"],
  steps: 210,
  scheduleSteps: 240,
  batchSize: 6,
  learningRate: 3e-3,
  warmupSteps: 10,
  ...RECIPE_BASE,
  evalMaxTurns: 6,
  then: [
    // Run G.
    { steps: 300, scheduleSteps: 300, batchSize: 8, learningRate: 2e-3, warmupSteps: 10 },
    // Run H.
    { tasks: ["kg", "webshop"], steps: 1600, scheduleSteps: 1600, evalEvery: 400, evalLimit: 10 },
    // Run N (needs Docker).
    {
      tasks: ["kg", "webshop", "alfworld", "os"],
      taskWeights: { kg: 2, webshop: 2, os: 3 },
      steps: 300,
      scheduleSteps: 300,
      learningRate: 5e-4,
      evalEvery: 0,
      evalLimit: 100,
    },
    // Run S6.
    {
      taskWeights: { kg: 4, webshop: 2, os: 3 },
      taskTrainingWorlds: { kg: 32 },
      steps: 450,
      scheduleSteps: 450,
    },
  ],
};

/**
 * Generated OS training tasks of the `reading` recipe's last stage: with AgentBench's 293 at
 * difficulty 0, about one OS row in two is a generated one. Four in five (1,200, session 25's
 * first version) took AgentBench's OS from 7 % to 1 % greedy: the generated tasks' paths and
 * words were recalled into AgentBench's questions (docs/warmstart.md, "The next stage").
 */
export const OS_READING_GENERATED = 300;

/** The `reading` recipe's last stage (run R2). */
const READING_STAGE: WarmStartStage = {
  familyOptions: { generatedSize: OS_READING_GENERATED },
  taskWeights: { kg: 4, webshop: 2, os: 3 },
  steps: 300,
  scheduleSteps: 300,
  learningRate: 5e-4,
};

/** The `reading` recipe: the default recipe's five stages, then the reading stage. */
const READING_RECIPE = {
  ...DEFAULT_RECIPE,
  then: [...[DEFAULT_RECIPE.then ?? []].flat(), READING_STAGE],
};

/**
 * Generated OS tasks of the `os-copy` recipe's OS-only stages: ~7 of a step's 8 rows are
 * generated ones (beside AgentBench's 293), so that a question's folder name is copied, not
 * recalled (~850 distinct names in 2,000 tasks, envs/src/os/generate.ts).
 */
export const OS_COPY_GENERATED = 2000;

/** Generated OS tasks of the `os-copy` recipe's mixed stages (three OS rows in four generated). */
export const OS_COPY_MIXED_GENERATED = 900;

/** The `os-copy` recipe's OS-only stage (runs R5 and R6): OS alone, 600 steps at 1e-3. */
const OS_ONLY_STAGE: WarmStartStage = {
  tasks: ["os"],
  taskWeights: {},
  taskTrainingWorlds: { os: 1 },
  familyOptions: { generatedSize: OS_COPY_GENERATED },
  steps: 600,
  scheduleSteps: 600,
  learningRate: 1e-3,
  evalLimit: 0,
};

/** The `os-copy` recipe's stages after its first: the reading recipe's, then runs R5, R6, R7 and R9. */
const OS_COPY_STAGES: WarmStartStage[] = [
  ...READING_RECIPE.then,
  // Runs R5 and R6: the same OS-only stage twice.
  OS_ONLY_STAGE,
  OS_ONLY_STAGE,
  // Run R7: the reading stage's mix (KG from 32 worlds) on 900 generated OS tasks.
  {
    tasks: ["kg", "webshop", "alfworld", "os"],
    taskWeights: { kg: 4, webshop: 2, os: 3 },
    taskTrainingWorlds: { kg: 32 },
    familyOptions: { generatedSize: OS_COPY_MIXED_GENERATED },
    steps: 300,
    scheduleSteps: 300,
    learningRate: 5e-4,
  },
  // Run R9: WebShop's rows doubled, 1,000 steps.
  {
    taskWeights: { kg: 4, webshop: 4, os: 3 },
    steps: 1000,
    scheduleSteps: 1000,
    evalLimit: 100,
  },
];

/**
 * The `os-stated` recipe's last stage (run R10): R9's mix again, 600 steps, on generated OS
 * tasks whose folders sit where the question states them (home 40 %, absolute 35 %, working
 * folder 25 %: envs/src/os/generate.ts `generatedPlaces`), not always under `~`.
 */
const OS_STATED_STAGE: WarmStartStage = {
  familyOptions: { generatedSize: OS_COPY_MIXED_GENERATED, generatedPlaces: "stated" },
  steps: 600,
  scheduleSteps: 600,
  evalLimit: 0,
};

/** The os-stated-longer recipe's stages after its first: the os-copy ones, then the stated stage on seeds 0, 1 and 2 (runs R10, R11, R12). */
const OS_STATED_LONGER_STAGES: WarmStartStage[] = [
  ...OS_COPY_STAGES,
  OS_STATED_STAGE,
  { ...OS_STATED_STAGE, seed: 1 },
  { ...OS_STATED_STAGE, seed: 2 },
];

/** The os-recovery recipe's last stage (run R13): the stated stage on seed 3, half the working-folder tasks' experts recovering. */
const OS_RECOVERY_STAGE: WarmStartStage = {
  ...OS_STATED_STAGE,
  familyOptions: { ...OS_STATED_STAGE.familyOptions, generatedRecovery: 0.5 },
  seed: 3,
};

/** The os-weighted recipe's last stage (run R15): R13's stage on seed 4 with OS's rows doubled. */
const OS_WEIGHTED_STAGE: WarmStartStage = {
  ...OS_RECOVERY_STAGE,
  taskWeights: { kg: 4, webshop: 4, os: 6 },
  seed: 4,
};

/** The recipes by name; each stage says which run of docs/warmstart.md ("The recipes' history") it is. */
export const WARM_START_RECIPES: Record<
  string,
  Omit<WarmStartOptions, "out" | "model" | "log" | "signal" | "createProgress">
> = {
  // Runs F, G, H, N and S6: the recipe of the shipped models/warmstart.
  default: DEFAULT_RECIPE,
  // Issue 37's reading stage (run R2, session 27): the default recipe, then read rows. Its
  // sixth stage trains OS on generated tasks (envs/src/os/generate.ts: answers a constant
  // cannot win, the expert answers what its command printed) beside AgentBench's, one row in
  // two: AgentBench's OS 7.5 -> 15.5 % greedy (n 200), every success read. From the shipped
  // model alone: `agentrl sft --preset reading --from-stage 6 --model models/warmstart --out DIR`.
  // (R2 was trained on the first generator's tasks; since session 29 the stage draws the
  // AgentBench-like ones, docs/warmstart.md "A second reading stage".)
  reading: READING_RECIPE,
  // Issue 37's folder copy (session 30 runs R5, R6, R7; session 31 run R9): the reading
  // recipe, then two OS-only stages on many generated tasks (~7 of a step's 8 rows; the name
  // of the question's folder copied into the command forms after ~8,400 such rows, and every
  // other family is lost), then two mixed stages that bring KG, WebShop and ALFWorld back while
  // the copy holds: models/warmstart-os-copy (R9). Stage 9's model is
  // models/warmstart-os-copy-stage9 (R7): `agentrl sft --preset os-copy --from-stage 10 --model
  // models/warmstart-os-copy-stage9 --out DIR` trains the last stage alone (32.5 min).
  "os-copy": { ...READING_RECIPE, then: OS_COPY_STAGES },
  // Issue 37's stated folders (session 32, run R10): the os-copy recipe, then one mixed stage
  // whose generated OS tasks put their folders where the question says (absolute, working
  // folder or home): models/warmstart-os-stated. From R9's model alone (21 min):
  // `agentrl sft --preset os-stated --from-stage 11 --model models/warmstart-os-copy --out DIR`.
  "os-stated": { ...READING_RECIPE, then: [...OS_COPY_STAGES, OS_STATED_STAGE] },
  // Run R11 (session 36): the os-stated recipe with its last stage run again on another
  // episode stream (seed 1): models/warmstart-os-stated-long. From R10's model alone (21 min):
  // `agentrl sft --preset os-stated-long --from-stage 12 --model models/warmstart-os-stated --out DIR`.
  "os-stated-long": {
    ...READING_RECIPE,
    then: [...OS_COPY_STAGES, OS_STATED_STAGE, { ...OS_STATED_STAGE, seed: 1 }],
  },
  // Run R12 (session 37): the os-stated-long recipe with the same stage a third time (seed 2):
  // models/warmstart-os-stated-longer. From R11's model alone (22 min):
  // `agentrl sft --preset os-stated-longer --from-stage 13 --model models/warmstart-os-stated-long --out DIR`.
  "os-stated-longer": { ...READING_RECIPE, then: OS_STATED_LONGER_STAGES },
  // Run R13 (session 37; the default run's warm start since session 38): the
  // os-stated-longer recipe, then the stage a fourth time (seed 3) with recovery rows: half
  // of the generated working-folder tasks' experts first write the folder under `~/` (shown,
  // not trained on), read the error, then run the right command: models/warmstart-os-recovery.
  // From R12's model alone (22 min): `agentrl sft --preset os-recovery --from-stage 14 --model
  // models/warmstart-os-stated-longer --out DIR`.
  "os-recovery": { ...READING_RECIPE, then: [...OS_STATED_LONGER_STAGES, OS_RECOVERY_STAGE] },
  // Run R15 (session 39): the os-recovery recipe, then its last stage once more (seed 4) with
  // OS's rows doubled (weight 6 against KG's and WebShop's 4): models/warmstart-os-weighted.
  // From R13's model alone (17 min): `agentrl sft --preset os-weighted --from-stage 15 --model
  // models/warmstart-os-recovery --out DIR`.
  "os-weighted": {
    ...READING_RECIPE,
    then: [...OS_STATED_LONGER_STAGES, OS_RECOVERY_STAGE, OS_WEIGHTED_STAGE],
  },
  // Runs C/D: the first shipped checkpoint.
  alfworld: {
    architecture: {
      preset: "tiny",
      overrides: {
        hiddenSize: 128,
        intermediateSize: 384,
        numHiddenLayers: 3,
        numAttentionHeads: 4,
        numKeyValueHeads: 2,
        headDim: 32,
        maxPositionEmbeddings: 2048,
      },
      vocabSize: 4096,
    },
    tasks: ["alfworld"],
    steps: 51,
    scheduleSteps: 200,
    batchSize: 4,
    learningRate: 3e-3,
    warmupSteps: 5,
    ...RECIPE_BASE,
    evalMaxTurns: 4,
  },
};
