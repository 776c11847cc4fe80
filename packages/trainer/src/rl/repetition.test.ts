import { test } from "node:test";
import assert from "node:assert/strict";
import { Rng } from "@agentrl/policy";
import { repetitionRows } from "./repetition.js";
import type { SupervisedRow } from "./sft.js";

const row = (tokens: number[]): SupervisedRow => ({
  task: "kg",
  tokens: Int32Array.from(tokens),
  lossMask: new Uint8Array(tokens.length),
});
const source = [
  row(Array.from({ length: 50 }, (_, i) => 100 + i)),
  row(Array.from({ length: 40 }, (_, i) => 500 + i)),
];

test("repetitionRows: [span, separator, span]; the loss on the repeat only; the span a shuffled slice of one source row", () => {
  const rows = repetitionRows(source, 6, {
    spanTokens: 8,
    separator: [7, 9],
    weight: 20,
    random: new Rng(3),
  });
  assert.equal(rows.length, 6);
  for (const { task, tokens, lossMask } of rows) {
    assert.equal(task, "repetition");
    assert.equal(tokens.length, 8 + 2 + 8);
    const first = Array.from(tokens.subarray(0, 8));
    assert.deepEqual(Array.from(tokens.subarray(8, 10)), [7, 9]);
    assert.deepEqual(Array.from(tokens.subarray(10)), first, "the repeat equals the span");
    assert.deepEqual(Array.from(lossMask), [...Array(10).fill(0), ...Array(8).fill(20)]);
    // A slice of one row: its 8 ids are consecutive (the sources count up), in some order.
    const sorted = [...first].sort((a, b) => a - b);
    assert.deepEqual(
      sorted,
      Array.from({ length: 8 }, (_, i) => sorted[0] + i),
    );
    assert.ok(
      (sorted[0] >= 100 && sorted[7] < 150) || (sorted[0] >= 500 && sorted[7] < 540),
      `span ${sorted}`,
    );
  }
  assert.ok(
    rows.some(({ tokens }) => tokens[1] !== tokens[0] + 1 || tokens[2] !== tokens[1] + 1),
    "spans are shuffled",
  );
});

test("repetitionRows: a short source row gives a short span; 0 rows or no source give none; the same seed the same rows", () => {
  const short = repetitionRows([row([1, 2, 3])], 1, {
    spanTokens: 32,
    separator: [0],
    weight: 1,
    random: new Rng(0),
  })[0];
  assert.equal(short.tokens.length, 3 + 1 + 3);
  assert.deepEqual([...short.tokens.subarray(0, 3)].sort(), [1, 2, 3]);
  assert.deepEqual(
    repetitionRows(source, 0, { spanTokens: 8, separator: [0], weight: 1, random: new Rng(0) }),
    [],
  );
  assert.deepEqual(
    repetitionRows([], 3, { spanTokens: 8, separator: [0], weight: 1, random: new Rng(0) }),
    [],
  );
  const again = (seed: number) =>
    repetitionRows(source, 3, {
      spanTokens: 8,
      separator: [0],
      weight: 1,
      random: new Rng(seed),
    }).map((r) => Array.from(r.tokens));
  assert.deepEqual(again(5), again(5));
  assert.notDeepEqual(again(5), again(6));
});
