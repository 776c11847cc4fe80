import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { hashString, mixSeeds, Random } from "./random.js";

describe("envs random", () => {
  test("mulberry32 gives its reference outputs for seed 0 (those of webshop's former copy), every time", () => {
    const draw = (seed: number): number[] => {
      const random = new Random(seed);
      return Array.from({ length: 3 }, () => random.next() * 2 ** 32);
    };
    assert.deepEqual(draw(0), [1144304738, 1416247, 958946056]);
    assert.deepEqual(draw(0), draw(0));
    assert.notDeepEqual(draw(1), draw(0));
  });

  test("FNV-1a and the seed mixer give known values", () => {
    assert.equal(hashString(""), 0x811c9dc5);
    assert.equal(hashString("a"), 0xe40c292c);
    assert.notEqual(mixSeeds(1, 2), mixSeeds(2, 1));
    assert.notEqual(mixSeeds(2 ** 40), mixSeeds(0), "the high word of a part counts");
  });

  test("integer stays in [low, high] and reaches both ends", () => {
    const random = new Random(3);
    const seen = new Set<number>();
    for (let i = 0; i < 2000; i++) {
      const value = random.integer(-2, 2);
      assert.ok(Number.isInteger(value) && value >= -2 && value <= 2);
      seen.add(value);
    }
    assert.deepEqual(
      [...seen].sort((a, b) => a - b),
      [-2, -1, 0, 1, 2],
    );
  });

  test("shuffle returns a permutation and leaves its input alone; sample takes distinct items", () => {
    const random = new Random(5);
    const items = Array.from({ length: 20 }, (_, i) => i);
    const shuffled = random.shuffle(items);
    assert.deepEqual(
      items,
      Array.from({ length: 20 }, (_, i) => i),
    );
    assert.notDeepEqual(shuffled, items);
    assert.deepEqual(
      [...shuffled].sort((a, b) => a - b),
      items,
    );
    const sampled = random.sample(items, 7);
    assert.equal(sampled.length, 7);
    assert.equal(new Set(sampled).size, 7);
    assert.equal(random.sample(items, 50).length, 20);
  });

  test("weighted follows the weights; pick and weighted reject empty input", () => {
    const random = new Random(9);
    const counts = { a: 0, b: 0, c: 0 };
    for (let i = 0; i < 4000; i++) counts[random.weighted(["a", "b", "c"] as const, [1, 3, 0])]++;
    assert.equal(counts.c, 0);
    assert.ok(Math.abs(counts.b / 4000 - 0.75) < 0.04, `b share ${counts.b / 4000}`);
    assert.throws(() => random.pick([]), RangeError);
    assert.throws(() => random.weighted([], []), RangeError);
  });
});
