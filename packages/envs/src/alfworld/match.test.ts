import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { brevityPenalty, matchAction, modifiedPrecision, sentenceBleu } from "./match.js";

/** method4's smoothed precision for the i-th zero (i = 1, 2, ...) of a hypothesis of `length` tokens. */
const smoothed = (i: number, length: number, denominator = 1) =>
  Math.log(length) / (2 ** i * 5) / denominator;

describe("sentenceBleu (NLTK sentence_bleu, method4) against hand-computed values", () => {
  const cases: { reference: string; hypothesis: string; expected: number; why: string }[] = [
    { reference: "go to fridge 1", hypothesis: "go to fridge 1", expected: 1, why: "identical" },
    {
      reference: "go to fridge 1",
      hypothesis: "go to fridge",
      // p1..p3 = 1, p4 = 0/1 smoothed to ln3/10; BP = exp(1 - 4/3)
      expected: Math.exp(1 - 4 / 3) * smoothed(1, 3) ** 0.25,
      why: "prefix of the command",
    },
    {
      reference: "take apple 1 from countertop 1",
      hypothesis: "take apple 1",
      expected: Math.exp(1 - 6 / 3) * smoothed(1, 3) ** 0.25,
      why: "short hypothesis, brevity penalty exp(-1)",
    },
    {
      reference: "look",
      hypothesis: "look around",
      // p1 = 1/2; p2, p3, p4 all zero: ln2/10, ln2/20, ln2/40; BP = 1 (longer than the reference)
      expected: (0.5 * smoothed(1, 2) * smoothed(2, 2) * smoothed(3, 2)) ** 0.25,
      why: "hypothesis longer than the reference",
    },
    {
      reference: "go to cabinet 1",
      hypothesis: "go to fridge",
      // p1 = 2/3, p2 = 1/2, p3 = 0/1 -> ln3/10, p4 = 0/1 -> ln3/20; BP = exp(1 - 4/3)
      expected: Math.exp(1 - 4 / 3) * ((2 / 3) * 0.5 * smoothed(1, 3) * smoothed(2, 3)) ** 0.25,
      why: "partial overlap, two smoothed orders",
    },
    {
      reference: "go to fridge 1",
      hypothesis: "hello world",
      expected: 0,
      why: "no unigram in common",
    },
    { reference: "go to fridge 1", hypothesis: "", expected: 0, why: "empty hypothesis" },
  ];
  for (const { reference, hypothesis, expected, why } of cases) {
    test(`${why}: "${hypothesis}" vs "${reference}"`, () => {
      assert.ok(
        Math.abs(sentenceBleu(reference, hypothesis) - expected) < 1e-12,
        `${sentenceBleu(reference, hypothesis)} != ${expected}`,
      );
    });
  }

  test("a one-word hypothesis: unsmoothed zero precisions are left out, BLEU = BP", () => {
    assert.ok(
      Math.abs(sentenceBleu("take apple 1 from countertop 1", "apple") - Math.exp(1 - 6)) < 1e-15,
    );
    assert.ok(Math.abs(sentenceBleu("examine fridge 1", "examine") - Math.exp(1 - 3)) < 1e-15);
  });

  test("modified precision clips counts by the reference and keeps the raw denominator", () => {
    assert.deepEqual(modifiedPrecision(["go", "to", "x"], ["go", "go", "go"], 1), {
      numerator: 1,
      denominator: 3,
    });
    assert.deepEqual(modifiedPrecision(["a"], ["a"], 2), { numerator: 0, denominator: 1 });
  });

  test("brevity penalty", () => {
    assert.equal(brevityPenalty(4, 5), 1);
    assert.equal(brevityPenalty(4, 0), 0);
    assert.equal(brevityPenalty(4, 2), Math.exp(-1));
  });
});

describe("matchAction (the original's process_action)", () => {
  const choices = [
    "go to cabinet 1",
    "go to fridge 1",
    "inventory",
    "look",
    "take apple 1 from countertop 1",
  ];
  const cases: { text: string; expected: string; why: string }[] = [
    { text: "go to fridge 1", expected: "go to fridge 1", why: "exact" },
    { text: "  GO TO Fridge 1  ", expected: "go to fridge 1", why: "trimmed and lower-cased" },
    {
      text: "go to fridge 1\nthen take the apple",
      expected: "go to fridge 1",
      why: "first line only",
    },
    { text: "go to fridge", expected: "go to fridge 1", why: "closest by BLEU" },
    { text: "take apple 1", expected: "take apple 1 from countertop 1", why: "closest by BLEU" },
    { text: "go to", expected: "go to cabinet 1", why: "ties go to the first choice" },
    { text: "apple", expected: "apple", why: "one word, best BLEU exp(-5) <= 0.01: text kept" },
    { text: "inventory please", expected: "inventory", why: "longer than the command" },
    { text: "jump high", expected: "jump high", why: "no overlap: text kept" },
    { text: "", expected: "", why: "empty text kept" },
  ];
  for (const { text, expected, why } of cases) {
    test(`${why}: ${JSON.stringify(text)}`, () =>
      assert.equal(matchAction(text, choices), expected));
  }
  test("with no choices the cleaned text passes through", () =>
    assert.equal(matchAction(" Look ", []), "look"));
});
