import { test } from "node:test";
import assert from "node:assert/strict";
import { createTaskFamily } from "./index.js";
import type { KgTaskFamily } from "./index.js";
import { indicesByTopicType, topicTypeOf } from "./topics.js";

test("indicesByTopicType splits a difficulty's questions by their topic entity's type", async () => {
  const family = (await createTaskFamily({ seed: 1000, trainSize: 300 })) as KgTaskFamily;
  const all = family.indicesAt("train", 0);
  const strong = ["people.person", "film.film"];
  const weak = indicesByTopicType(family, "train", 0, { exclude: strong });
  const people = indicesByTopicType(family, "train", 0, { include: strong });
  assert.ok(weak.length > 50 && people.length > 50, `${weak.length} and ${people.length}`);
  // Together they are the difficulty's questions, in the family's order, each once.
  assert.deepEqual(
    [...weak, ...people].sort((a, b) => a - b),
    all,
  );
  for (const index of weak) assert.ok(!strong.includes(topicTypeOf(family, index)));
  for (const index of people) {
    const instance = family.instance(index);
    const type = family.world.entities[instance.entities[0].entity].type;
    assert.ok(strong.includes(type), `${index}: ${type}`);
  }
  assert.deepEqual(indicesByTopicType(family, "test", 9, {}), []);
});
