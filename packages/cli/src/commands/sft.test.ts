import { test } from "node:test";
import assert from "node:assert/strict";
import { WARM_START_RECIPES } from "@agentrl/trainer";
import { difficultiesOption, sftOptions, trainingWorldsOption } from "./sft.js";

test("sft: the preset's recipe, overridden by the flags given", () => {
  const preset = sftOptions({ out: "/tmp/o", preset: "default", progress: false });
  assert.ok(preset.steps! > 0 && preset.architecture);
  const flagged = sftOptions({
    out: "/tmp/o",
    preset: "default",
    progress: false,
    steps: 5,
    tasks: ["kg"],
    difficulties: difficultiesOption("0"),
  });
  assert.equal(flagged.steps, 5);
  assert.equal(flagged.scheduleSteps, 5, "--steps sets the schedule's length too");
  assert.equal(flagged.minutes, undefined, "--steps alone lifts the preset's time budget");
  assert.deepEqual(flagged.evalDifficulties, [0]);
  assert.ok(preset.then, "the default preset has a second stage");
  assert.equal(flagged.then, undefined, "--steps makes one stage of that length");
  assert.equal(
    sftOptions({ out: "/tmp/o", preset: "default", progress: false, minutes: 3 }).then,
    undefined,
    "--minutes too",
  );
  assert.throws(
    () => sftOptions({ out: "/tmp/o", preset: "nope", progress: false }),
    /unknown preset "nope"/,
  );
  const weighted = sftOptions({
    out: "/tmp/o",
    preset: "default",
    progress: false,
    tasks: ["kg", "os:3", "db:2"],
  });
  assert.deepEqual(weighted.tasks, ["kg", "os", "db"]);
  assert.deepEqual(
    weighted.taskWeights,
    { os: 3, db: 2 },
    "name:weight gives the family that many rows per turn",
  );
});

test("sft --from-stage: a staged preset starts at stage k from --model; the later stages follow", () => {
  const last = sftOptions({
    out: "/tmp/o",
    preset: "default",
    progress: false,
    fromStage: 5,
    model: "/models/run-n",
  });
  assert.equal(last.model, "/models/run-n");
  assert.deepEqual(
    [last.tasks, last.taskWeights, last.taskTrainingWorlds, last.steps],
    [["kg", "webshop", "alfworld", "os"], { kg: 4, webshop: 2, os: 3 }, { kg: 32 }, 450],
    "the preset's fifth stage, on the fourth's tasks",
  );
  assert.equal(last.then, undefined, "the last stage alone");
  assert.equal(last.out, "/tmp/o");
  const third = sftOptions({
    out: "/tmp/o",
    preset: "default",
    progress: false,
    fromStage: 3,
    model: "/models/run-g",
  });
  assert.deepEqual([third.tasks, third.steps], [["kg", "webshop"], 1600]);
  assert.equal([third.then ?? []].flat().length, 2, "stages 4 and 5 follow");
  assert.throws(
    () => sftOptions({ out: "/tmp/o", preset: "default", progress: false, fromStage: 2 }),
    /--from-stage needs --model/,
  );
  assert.throws(
    () =>
      sftOptions({ out: "/tmp/o", preset: "default", progress: false, fromStage: 9, model: "/m" }),
    /stage 9 does not exist/,
  );
});

test("sft --generated-size, --generated-places and --generated-recovery: the generated training tasks of the family options, beside the preset's other family options", () => {
  const reading = sftOptions({
    out: "/tmp/o",
    preset: "reading",
    progress: false,
    fromStage: 6,
    model: "/models/r2",
  });
  assert.ok(
    Number(reading.familyOptions?.generatedSize) > 0,
    "the reading stage generates OS tasks",
  );
  const more = sftOptions({
    out: "/tmp/o",
    preset: "reading",
    progress: false,
    fromStage: 6,
    model: "/models/r2",
    generatedSize: 900,
  });
  assert.equal(more.familyOptions?.generatedSize, 900);
  const stated = sftOptions({
    out: "/tmp/o",
    preset: "reading",
    progress: false,
    fromStage: 6,
    model: "/models/r2",
    generatedPlaces: "stated",
  });
  assert.deepEqual(stated.familyOptions, { ...reading.familyOptions, generatedPlaces: "stated" });
  const recovering = sftOptions({
    out: "/tmp/o",
    preset: "reading",
    progress: false,
    fromStage: 6,
    model: "/models/r2",
    generatedRecovery: 0.5,
  });
  assert.deepEqual(recovering.familyOptions, {
    ...reading.familyOptions,
    generatedRecovery: 0.5,
  });
  assert.deepEqual(
    [more.steps, more.taskWeights, more.learningRate],
    [reading.steps, reading.taskWeights, reading.learningRate],
    "the rest of the stage as the preset's",
  );
  assert.equal(
    sftOptions({ out: "/tmp/o", preset: "default", progress: false }).familyOptions,
    undefined,
    "not given: the preset's (none)",
  );
});

test("sft --training-worlds: a count for every task and/or per task; bad counts are errors", () => {
  assert.deepEqual(trainingWorldsOption("32"), { count: 32, perTask: {} });
  assert.deepEqual(trainingWorldsOption("8, kg:32"), { count: 8, perTask: { kg: 32 } });
  const perTask = sftOptions({
    out: "/tmp/o",
    preset: "default",
    progress: false,
    trainingWorlds: trainingWorldsOption("kg:32"),
  });
  assert.deepEqual(perTask.taskTrainingWorlds, { kg: 32 });
  assert.equal(
    perTask.trainingWorlds,
    WARM_START_RECIPES.default.trainingWorlds,
    "the others keep the preset's",
  );
  assert.equal(
    sftOptions({
      out: "/tmp/o",
      preset: "default",
      progress: false,
      trainingWorlds: trainingWorldsOption("4"),
    }).trainingWorlds,
    4,
  );
  assert.throws(
    () => trainingWorldsOption("kg:0"),
    /--training-worlds must be an integer ≥ 1, got "0"/,
  );
  assert.throws(() => trainingWorldsOption("many"), /--training-worlds must be an integer/);
  assert.throws(
    () => trainingWorldsOption("kg:32:1"),
    /--training-worlds takes a count or task:count, got "kg:32:1"/,
  );
});

test("sft --difficulties: levels for every task and/or a task's own (ranges); bad levels are errors", () => {
  assert.deepEqual(difficultiesOption("0,1"), { levels: [0, 1], perTask: {} });
  assert.deepEqual(difficultiesOption("0, db:0-2, kg:2"), {
    levels: [0],
    perTask: { db: [0, 1, 2], kg: [2] },
  });
  assert.deepEqual(difficultiesOption("db:0,db:2"), { perTask: { db: [0, 2] } });
  const perTask = sftOptions({
    out: "/tmp/o",
    preset: "default",
    progress: false,
    difficulties: difficultiesOption("db:0-2"),
  });
  assert.deepEqual(perTask.taskDifficulties, { db: [0, 1, 2] });
  assert.deepEqual(
    perTask.difficulties,
    WARM_START_RECIPES.default.difficulties,
    "the others keep the preset's",
  );
  assert.throws(() => difficultiesOption("db:2-0"), /range db:2-0 is empty/);
  assert.throws(() => difficultiesOption("db:0-1-2"), /task:low-high for a range/);
  assert.throws(() => difficultiesOption("hard"), /--difficulties must be an integer/);
});
