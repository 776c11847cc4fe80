import { test } from "node:test";
import assert from "node:assert/strict";
import { decodeInstanceIndex, encodeInstanceIndex, TEST_OFFSET } from "./instance-index.js";
import * as alfworld from "./alfworld/index.js";
import * as kg from "./kg/index.js";
import * as webshop from "./webshop/index.js";

test("instance index layout: the documented example, round trips, and the three families agree", () => {
  assert.equal(encodeInstanceIndex(2, "test", 6), 2_500_006);
  assert.deepEqual(decodeInstanceIndex(2_500_006), { difficulty: 2, split: "test", position: 6 });
  for (const [difficulty, split, position] of [
    [0, "train", 0],
    [3, "test", TEST_OFFSET - 1],
    [1, "train", TEST_OFFSET - 1],
  ] as const) {
    const index = encodeInstanceIndex(difficulty, split, position);
    assert.deepEqual(decodeInstanceIndex(index), { difficulty, split, position });
    assert.equal(kg.encodeIndex(difficulty, split, position), index);
    assert.equal(webshop.encodeIndex(difficulty, split, position), index);
    assert.equal(alfworld.encodeIndex(split, difficulty, position), index);
    assert.deepEqual(kg.decodeIndex(index), { difficulty, split, k: position });
    assert.deepEqual(webshop.decodeIndex(index), { difficulty, split, k: position });
    assert.deepEqual(alfworld.decodeIndex(index), { difficulty, split, position });
  }
  assert.throws(() => kg.decodeIndex(-1), /invalid KG index/);
  assert.throws(() => webshop.decodeIndex(9_000_000), /difficulty 9/);
  assert.throws(() => alfworld.decodeIndex(1.5), /not a non-negative integer/);
});
