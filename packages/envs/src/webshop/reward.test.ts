import { describe, test } from "node:test";
import assert from "node:assert/strict";
import {
  attributeReward,
  getReward,
  normalizeColor,
  optionReward,
  tokenSetRatio,
  typeReward,
  type Goal,
  type PurchasedProduct,
} from "./reward.js";

// Hand-computed cases of the original formulas (web_agent_site/engine/goal.py).

const jeans: PurchasedProduct = {
  query: "women's jeans",
  productCategory: "Clothing › Women › Clothing › Jeans",
  title: "Luvex Slim Fit Women's Jeans",
  titleNouns: ["luvex", "women", "jeans"],
  attributes: ["slim fit", "machine wash"],
  bulletPoints: [
    "Slim Fit: made to last",
    "Machine Wash: made to last",
    "Stretch Denim: loved by reviewers",
  ],
  description: "The Luvex women's jeans.",
};

const goal: Goal = {
  query: "women's jeans",
  productCategory: "Clothing › Women › Clothing › Jeans",
  nameNouns: ["ravex", "women", "jeans"],
  attributes: ["slim fit"],
  goalOptions: { color: "black", size: "medium" },
  priceUpper: 40,
};

describe("normalize_color and token_set_ratio", () => {
  const colors: [string, string][] = [
    ["navy blue", "blue"], // "blue" comes before "navy" in COLOR_SET
    ["dark blue", "blue"],
    ["light gray", "gray"],
    ["olive green", "green"],
    ["charcoal black", "black"],
    ["espresso", "espresso"],
    ["medium", "medium"],
  ];
  for (const [input, expected] of colors) {
    test(`normalizeColor(${input}) = ${expected}`, () =>
      assert.equal(normalizeColor(input), expected));
  }
  const ratios: [string, string, number][] = [
    // sect "machine"; 2·12/(16+12) = 85.7 → 86 (the best of the three pairs)
    ["machine washable", "machine wash", 86],
    // one side's tokens ⊂ the other's: sect equals the smaller side → 100
    ["navy", "navy blue", 100],
    // "fit" vs "fit slim": 2·3/(3+8) = 54.5 → 55
    ["slim fit", "regular fit", 55],
    ["", "", 0],
  ];
  for (const [a, b, expected] of ratios) {
    test(`token_set_ratio(${a}, ${b}) = ${expected}`, () =>
      assert.equal(tokenSetRatio(a, b), expected));
  }
});

describe("get_type_reward", () => {
  const cases: {
    name: string;
    product: Partial<PurchasedProduct>;
    goal: Partial<Goal>;
    rType: number;
    titleScore: number;
  }[] = [
    { name: "same query, 2 of 3 nouns", product: {}, goal: {}, rType: 1, titleScore: 2 / 3 },
    {
      name: "no query/category match, title score 1/6 (≤ 0.2, ≥ 0.1) → 0.5",
      product: { query: "x", productCategory: "A › B", titleNouns: ["a", "x"] },
      goal: { nameNouns: ["a", "b", "c", "d", "e", "f"] },
      rType: 0.5,
      titleScore: 1 / 6,
    },
    {
      name: "query match but title score 1/11 < 0.1 → 0.1",
      product: { titleNouns: ["a"] },
      goal: { nameNouns: ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"] },
      rType: 0.1,
      titleScore: 1 / 11,
    },
    {
      name: "no shared noun → 0",
      product: { titleNouns: ["zentro", "mouse"] },
      goal: {},
      rType: 0,
      titleScore: 0,
    },
    {
      name: "other query, 2 shared category segments, 1/3 nouns → 1",
      product: {
        query: "women's dress",
        productCategory: "Clothing › Women › Clothing › Dresses",
        titleNouns: ["mora", "women", "dress"],
      },
      goal: {},
      rType: 1,
      titleScore: 1 / 3,
    },
    {
      name: "empty goal parse → title score 0.2, query match → 1",
      product: {},
      goal: { nameNouns: [] },
      rType: 1,
      titleScore: 0.2,
    },
    {
      name: "empty goal parse, no query/category match → 0.5",
      product: { query: "x", productCategory: "P › Q" },
      goal: { nameNouns: [] },
      rType: 0.5,
      titleScore: 0.2,
    },
  ];
  for (const c of cases) {
    test(c.name, () => {
      const result = typeReward({ ...jeans, ...c.product }, { ...goal, ...c.goal });
      assert.equal(result.rType, c.rType);
      assert.ok(
        Math.abs(result.titleScore - c.titleScore) < 1e-12,
        `title score ${result.titleScore}`,
      );
    });
  }
});

describe("get_attribute_reward and get_option_reward", () => {
  test("attributes: exact, fuzzy (> 85), text fallback, miss", () => {
    const result = attributeReward(jeans, {
      ...goal,
      attributes: ["slim fit", "machine washable", "stretch denim", "high waist"],
    });
    assert.equal(result.matches, 3);
    assert.equal(result.rAttribute, 3 / 4);
  });
  test("options: size matches exactly, colours after normalize_color, text fallback", () => {
    assert.deepEqual(
      optionReward(jeans, ["dark blue", "medium"], { color: "navy blue", size: "medium" }),
      { rOption: 1, matches: 2 },
    );
    // "large" ≠ "medium" (exact for size), and "large" is nowhere in the text.
    assert.deepEqual(optionReward(jeans, ["black", "medium"], { color: "black", size: "large" }), {
      rOption: 0.5,
      matches: 1,
    });
    // No goal options: r_option is None, but a selected value found in the text still counts.
    assert.deepEqual(optionReward(jeans, [], { fit: "slim fit" }), {
      rOption: undefined,
      matches: 1,
    });
  });
});

describe("get_reward = (attributes + options + price) / (n_att + n_opt + 1) · r_type", () => {
  const cases: {
    name: string;
    price: number;
    options: Record<string, string>;
    goal?: Partial<Goal>;
    product?: Partial<PurchasedProduct>;
    reward: number;
  }[] = [
    {
      name: "everything matches",
      price: 30,
      options: { color: "black", size: "medium" },
      reward: 1,
    },
    {
      name: "too dear: (1 + 2 + 0) / 4",
      price: 50,
      options: { color: "black", size: "medium" },
      reward: 0.75,
    },
    { name: "no option selected: (1 + 0 + 1) / 4", price: 30, options: {}, reward: 0.5 },
    {
      name: "wrong size: (1 + 1 + 1) / 4",
      price: 30,
      options: { color: "black", size: "large" },
      reward: 0.75,
    },
    {
      name: "one of two attributes: (1 + 2 + 1) / 5",
      price: 30,
      options: { color: "black", size: "medium" },
      goal: { attributes: ["slim fit", "high waist"] },
      reward: 0.8,
    },
    {
      name: "r_type 0.5 halves a full match",
      price: 30,
      options: { color: "black", size: "medium" },
      product: { query: "x", productCategory: "A › B", titleNouns: ["women"] },
      goal: { nameNouns: ["a", "b", "c", "d", "women"] },
      reward: 0.5,
    },
    {
      name: "r_type 0: wrong kind of product",
      price: 30,
      options: { color: "black", size: "medium" },
      product: { titleNouns: ["zentro", "mouse"] },
      reward: 0,
    },
    {
      name: "raw (1 + 1 + 1) / 2 = 1.5 is clamped to 1",
      price: 30,
      options: { fit: "slim fit" },
      goal: { goalOptions: {} },
      reward: 1,
    },
  ];
  for (const c of cases) {
    test(c.name, () => {
      const parts = getReward(
        { ...jeans, ...c.product },
        { ...goal, ...c.goal },
        c.price,
        c.options,
      );
      assert.ok(
        Math.abs(parts.reward - c.reward) < 1e-12,
        `reward ${parts.reward}, expected ${c.reward}`,
      );
    });
  }
});
