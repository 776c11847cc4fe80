import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { exactMatch, f1Score } from "./reward.js";

// Hand-computed with the original's formulas (AgentBench knowledgegraph/task.py):
// TP = |gold ∩ pred|, FP = |pred| - TP, FN = |gold| - TP, F1 = 0 when TP = 0,
// else 2PR / (P + R) with P = TP / (TP + FP), R = TP / (TP + FN); EM = both sets equal.
const cases: Array<{
  name: string;
  predicted: string[];
  gold: string[];
  f1: number;
  exact: boolean;
}> = [
  { name: "identical single", predicted: ["m.01"], gold: ["m.01"], f1: 1, exact: true },
  {
    name: "identical, other order",
    predicted: ["m.02", "m.01"],
    gold: ["m.01", "m.02"],
    f1: 1,
    exact: true,
  },
  { name: "duplicates collapse", predicted: ["m.01", "m.01"], gold: ["m.01"], f1: 1, exact: true },
  { name: "disjoint", predicted: ["m.03"], gold: ["m.01"], f1: 0, exact: false },
  { name: "empty prediction", predicted: [], gold: ["m.01"], f1: 0, exact: false },
  // P = 1/2, R = 1 → F1 = 2 * 0.5 / 1.5 = 2/3
  { name: "superset", predicted: ["m.01", "m.02"], gold: ["m.01"], f1: 2 / 3, exact: false },
  // P = 1, R = 1/3 → F1 = (2/3) / (4/3) = 1/2
  { name: "subset", predicted: ["m.01"], gold: ["m.01", "m.02", "m.03"], f1: 0.5, exact: false },
  // TP = 2, P = 2/3, R = 2/4 → F1 = 2 * (1/3) / (7/6) = 4/7
  {
    name: "overlap",
    predicted: ["a", "b", "c"],
    gold: ["a", "b", "d", "e"],
    f1: 4 / 7,
    exact: false,
  },
  { name: "count answers are strings", predicted: ["3"], gold: ["3"], f1: 1, exact: true },
  { name: "wrong count", predicted: ["4"], gold: ["3"], f1: 0, exact: false },
];

describe("kg reward formulas", () => {
  for (const { name, predicted, gold, f1, exact } of cases) {
    test(name, () => {
      assert.ok(
        Math.abs(f1Score(predicted, gold) - f1) < 1e-12,
        `f1 ${f1Score(predicted, gold)} != ${f1}`,
      );
      assert.equal(exactMatch(predicted, gold), exact);
    });
  }
});
