import { test } from "node:test";
import assert from "node:assert/strict";
import { sftOptions } from "./sft.js";

test("sft: the preset's recipe, overridden by the flags given", () => {
  const preset = sftOptions({ out: "/tmp/o", preset: "default", progress: false });
  assert.ok(preset.steps! > 0 && preset.architecture);
  const flagged = sftOptions({ out: "/tmp/o", preset: "default", progress: false, steps: 5, tasks: ["kg"], difficulties: [0] });
  assert.equal(flagged.steps, 5);
  assert.equal(flagged.scheduleSteps, 5, "--steps sets the schedule's length too");
  assert.equal(flagged.minutes, undefined, "--steps alone lifts the preset's time budget");
  assert.deepEqual(flagged.evalDifficulties, [0]);
  assert.ok(preset.then, "the default preset has a second stage");
  assert.equal(flagged.then, undefined, "--steps makes one stage of that length");
  assert.equal(sftOptions({ out: "/tmp/o", preset: "default", progress: false, minutes: 3 }).then, undefined, "--minutes too");
  assert.throws(() => sftOptions({ out: "/tmp/o", preset: "nope", progress: false }), /unknown preset "nope"/);
  const weighted = sftOptions({ out: "/tmp/o", preset: "default", progress: false, tasks: ["kg", "os:3", "db:2"] });
  assert.deepEqual(weighted.tasks, ["kg", "os", "db"]);
  assert.deepEqual(weighted.taskWeights, { os: 3, db: 2 }, "name:weight gives the family that many rows per turn");
});
