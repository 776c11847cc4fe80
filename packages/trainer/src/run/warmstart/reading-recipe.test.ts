import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { fromStage, warmStartStages, type WarmStartSummary } from "./options.js";
import {
  OS_COPY_GENERATED,
  OS_COPY_MIXED_GENERATED,
  OS_READING_GENERATED,
  WARM_START_RECIPES,
} from "./recipes.js";

test("the reading recipe: the default recipe's stages unchanged, then one stage on generated OS tasks; --from-stage 6 trains that stage alone from the shipped model", () => {
  const defaultStages = warmStartStages({ ...WARM_START_RECIPES.default, out: "/tmp/w" });
  const readingStages = warmStartStages({ ...WARM_START_RECIPES.reading, out: "/tmp/w" });
  assert.equal(readingStages.length, defaultStages.length + 1);
  assert.deepEqual(readingStages.slice(0, defaultStages.length), defaultStages);
  const last = readingStages.at(-1)!;
  assert.deepEqual(last.familyOptions, { generatedSize: OS_READING_GENERATED });
  assert.ok(last.tasks?.includes("os"));
  assert.deepEqual(last.difficulties, [0], "generated tasks are difficulty 0");
  // About one OS row in two comes from generated tasks (AgentBench has 293 training tasks at
  // difficulty 0); four in five made the model recall their surface into AgentBench's questions.
  const share = OS_READING_GENERATED / (OS_READING_GENERATED + 293);
  assert.ok(share > 0.4 && share < 0.6, `generated share ${share}`);
  const alone = fromStage(
    { ...WARM_START_RECIPES.reading, out: "/tmp/w" },
    readingStages.length,
    "models/warmstart",
  );
  assert.equal(alone.then, undefined);
  assert.equal(alone.model, "models/warmstart");
  assert.deepEqual(alone.familyOptions, last.familyOptions);
  assert.equal(alone.steps, 300);
});

/** The options a committed checkpoint records in its warmstart.json. */
async function recordedOptions(model: string): Promise<WarmStartSummary["options"]> {
  const file = new URL(`../../../../../models/${model}/warmstart.json`, import.meta.url);
  return (JSON.parse(await readFile(file, "utf8")) as WarmStartSummary).options;
}

/** The options that decide what a stage trains. */
const TRAINING_KEYS = [
  "tasks",
  "taskWeights",
  "taskTrainingWorlds",
  "familyOptions",
  "steps",
  "scheduleSteps",
  "batchSize",
  "learningRate",
  "warmupSteps",
  "schedule",
  "difficulties",
  "promptLossWeight",
  "maxSequenceTokens",
] as const;

/**
 * A recipe that is `previous` and one more stage: checks the stages before it are `previous`'s,
 * and that the last one trains what `checkpoint` (models/<checkpoint>) records, seed included,
 * started from `fromModel`. Returns the stages.
 */
async function assertOneMoreStage(
  recipe: string,
  previous: string,
  checkpoint: string,
  fromModel: string,
): Promise<ReturnType<typeof warmStartStages>> {
  const before = warmStartStages({ ...WARM_START_RECIPES[previous], out: "/tmp/w" });
  const stages = warmStartStages({ ...WARM_START_RECIPES[recipe], out: "/tmp/w" });
  assert.equal(stages.length, before.length + 1);
  assert.deepEqual(stages.slice(0, before.length), before);
  const recorded = await recordedOptions(checkpoint);
  for (const key of [...TRAINING_KEYS, "seed" as const])
    assert.deepEqual(stages.at(-1)![key], recorded[key], `stage ${stages.length}: ${key}`);
  assert.equal(recorded.model, fromModel);
  return stages;
}

test("the os-copy recipe: the reading recipe, two OS-only stages, two mixed ones; its last two stages are what the committed checkpoints were trained with", async () => {
  const readingStages = warmStartStages({ ...WARM_START_RECIPES.reading, out: "/tmp/w" });
  const stages = warmStartStages({ ...WARM_START_RECIPES["os-copy"], out: "/tmp/w" });
  assert.equal(stages.length, readingStages.length + 4);
  assert.deepEqual(stages.slice(0, readingStages.length), readingStages);
  const [osOnlyA, osOnlyB, mixed, last] = stages.slice(readingStages.length);
  for (const stage of [osOnlyA, osOnlyB]) {
    assert.deepEqual(stage.tasks, ["os"]);
    assert.deepEqual(stage.familyOptions, { generatedSize: OS_COPY_GENERATED });
  }
  // About 7 of 8 OS rows are generated ones (AgentBench has 293 training tasks at difficulty 0).
  assert.ok(OS_COPY_GENERATED / (OS_COPY_GENERATED + 293) > 0.85);
  assert.deepEqual(mixed.tasks, ["kg", "webshop", "alfworld", "os"]);
  assert.deepEqual(mixed.familyOptions, { generatedSize: OS_COPY_MIXED_GENERATED });
  // Stage 9 made models/warmstart-os-copy-stage9 (run R7), stage 10 from it models/warmstart-os-copy (R9).
  const stage9 = await recordedOptions("warmstart-os-copy-stage9");
  const stage10 = await recordedOptions("warmstart-os-copy");
  for (const key of TRAINING_KEYS) {
    assert.deepEqual(mixed[key], stage9[key], `stage 9: ${key}`);
    assert.deepEqual(last[key], stage10[key], `stage 10: ${key}`);
  }
  assert.equal(stage10.model, "models/warmstart-os-copy-stage9");
  const alone = fromStage(
    { ...WARM_START_RECIPES["os-copy"], out: "/tmp/w" },
    stages.length,
    "models/warmstart-os-copy-stage9",
  );
  assert.equal(alone.then, undefined);
  assert.equal(alone.model, "models/warmstart-os-copy-stage9");
  assert.deepEqual(alone.taskWeights, { kg: 4, webshop: 4, os: 3 });
  assert.deepEqual(alone.familyOptions, { generatedSize: OS_COPY_MIXED_GENERATED });
});

test("the os-stated recipe: the os-copy recipe, then one mixed stage on generated OS tasks with stated folders; that stage is what models/warmstart-os-stated was trained with", async () => {
  const copyStages = warmStartStages({ ...WARM_START_RECIPES["os-copy"], out: "/tmp/w" });
  const stages = warmStartStages({ ...WARM_START_RECIPES["os-stated"], out: "/tmp/w" });
  assert.equal(stages.length, copyStages.length + 1);
  assert.deepEqual(stages.slice(0, copyStages.length), copyStages);
  const last = stages.at(-1)!;
  assert.deepEqual(last.familyOptions, {
    generatedSize: OS_COPY_MIXED_GENERATED,
    generatedPlaces: "stated",
  });
  // Stage 11 made models/warmstart-os-stated (run R10) from models/warmstart-os-copy (R9).
  const recorded = await recordedOptions("warmstart-os-stated");
  for (const key of TRAINING_KEYS) assert.deepEqual(last[key], recorded[key], `stage 11: ${key}`);
  assert.equal(recorded.model, "models/warmstart-os-copy");
  const alone = fromStage(
    { ...WARM_START_RECIPES["os-stated"], out: "/tmp/w" },
    stages.length,
    "models/warmstart-os-copy",
  );
  assert.equal(alone.then, undefined);
  assert.equal(alone.model, "models/warmstart-os-copy");
  assert.equal(alone.steps, 600);
});

test("the os-stated-long recipe: the os-stated recipe, then its last stage again on seed 1; that stage is what models/warmstart-os-stated-long was trained with", async () => {
  // Stage 12 made models/warmstart-os-stated-long (run R11) from models/warmstart-os-stated (R10).
  const stages = await assertOneMoreStage(
    "os-stated-long",
    "os-stated",
    "warmstart-os-stated-long",
    "models/warmstart-os-stated",
  );
  const last = stages.at(-1)!;
  assert.equal(last.seed, 1);
  assert.notEqual(stages.at(-2)!.seed, 1);
  const alone = fromStage(
    { ...WARM_START_RECIPES["os-stated-long"], out: "/tmp/w" },
    stages.length,
    "models/warmstart-os-stated",
  );
  assert.equal(alone.then, undefined);
  assert.equal(alone.model, "models/warmstart-os-stated");
  assert.equal(alone.seed, 1);
});

test("the os-stated-longer recipe: the os-stated-long recipe, then the same stage again on seed 2; that stage is what models/warmstart-os-stated-longer was trained with", async () => {
  // Stage 13 made models/warmstart-os-stated-longer (run R12) from models/warmstart-os-stated-long (R11).
  const stages = await assertOneMoreStage(
    "os-stated-longer",
    "os-stated-long",
    "warmstart-os-stated-longer",
    "models/warmstart-os-stated-long",
  );
  const last = stages.at(-1)!;
  assert.equal(last.seed, 2);
  const alone = fromStage(
    { ...WARM_START_RECIPES["os-stated-longer"], out: "/tmp/w" },
    stages.length,
    "models/warmstart-os-stated-long",
  );
  assert.equal(alone.then, undefined);
  assert.equal(alone.seed, 2);
});

test("the os-recovery recipe: the os-stated-longer recipe, then the stage again on seed 3 with half the working-folder tasks' experts recovering; that stage is what models/warmstart-os-recovery was trained with", async () => {
  // Stage 14 made models/warmstart-os-recovery (run R13) from models/warmstart-os-stated-longer (R12).
  const stages = await assertOneMoreStage(
    "os-recovery",
    "os-stated-longer",
    "warmstart-os-recovery",
    "models/warmstart-os-stated-longer",
  );
  const last = stages.at(-1)!;
  assert.equal(last.seed, 3);
  assert.equal(last.familyOptions?.generatedRecovery, 0.5);
});

test("the os-weighted recipe: the os-recovery recipe, then its last stage on seed 4 with OS's rows doubled; that stage is what models/warmstart-os-weighted was trained with", async () => {
  // Stage 15 made models/warmstart-os-weighted (run R15) from models/warmstart-os-recovery (R13).
  const stages = await assertOneMoreStage(
    "os-weighted",
    "os-recovery",
    "warmstart-os-weighted",
    "models/warmstart-os-recovery",
  );
  const last = stages.at(-1)!;
  assert.equal(last.seed, 4);
  assert.deepEqual(last.taskWeights, { kg: 4, webshop: 4, os: 6 });
  assert.equal(last.familyOptions?.generatedRecovery, 0.5);
});
