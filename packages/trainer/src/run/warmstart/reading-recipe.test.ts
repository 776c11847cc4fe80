import { test } from "node:test";
import assert from "node:assert/strict";
import { fromStage, warmStartStages } from "./options.js";
import { OS_READING_GENERATED, WARM_START_RECIPES } from "./recipes.js";

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
