/**
 * Task instances: a goal ("i want a ... with ..., and price lower than 40.00 dollars")
 * drawn from a target product, built lazily from its index.
 *
 * Index layout: `index = difficulty * 1_000_000 + (split === "test" ? 500_000 : 0) + k`,
 * with `0 ≤ k < 500,000`. Train and test never coincide: an instruction text is eligible
 * for the test split only when its hash is 0 mod 8, and for the train split otherwise.
 *
 * Difficulty (measured by playing the expert's plan on the catalogue data, after searching
 * the instruction text verbatim):
 *   0: the top result is right, the goal has no options, the title shows every attribute
 *      (search, click the item, Buy Now: 3 calls);
 *   1: as 0, but with 1-2 options to select;
 *   2: distractors rank higher: the first right product is on page 1 below products that
 *      must be passed over (wrong kind, too dear) or clicked and rejected (option missing);
 *   3: the right product's attributes can only be read on its Features page (its title
 *      does not show them all), or it is on page 2 or later ("Next >").
 * Every instance is checked to be solvable in the 20-turn limit with the full score.
 */
import { AgentRLError } from "@agentrl/spec";
import type { Split } from "../types.js";
import { type Catalogue, type Product } from "./catalogue.js";
import { attributesShown, optionsAvailable, titleFits, type ShoppingList } from "./judge.js";
import { INSTRUCTION_OPENINGS, PRODUCT_TYPES } from "./lexicon.js";
import { Random, hashString, mixSeeds } from "../random.js";
import { decodeInstanceIndex, encodeInstanceIndex } from "../instance-index.js";
import { getReward, type Goal } from "./reward.js";
import { PRODUCT_WINDOW, type SearchEngine } from "./search.js";

export const DIFFICULTIES = [0, 1, 2, 3] as const;
export { DIFFICULTY_STRIDE, TEST_OFFSET } from "../instance-index.js";
/** The original's turn limit. */
export const MAX_TURNS = 20;
/** The original's `PRICE_RANGE`: 10, 20, ..., 990 dollars. */
export const PRICE_RANGE = Array.from({ length: 99 }, (_, i) => 10 * (i + 1));
/** A goal price when the product is too dear for two price steps (the original's 1,000,000). */
const NO_PRICE_LIMIT = 1_000_000;
/** Test-split instructions: hash ≡ 0 (mod TEST_SHARE_MODULUS). */
const TEST_SHARE_MODULUS = 8;
const MAX_ATTEMPTS = 20_000;

export interface WebShopGoal extends Goal, ShoppingList {
  /** The product the goal was drawn from (one of possibly several that score 1). */
  asin: string;
  instruction: string;
}

/** How the expert's plan goes on this instance (from the catalogue data). */
export interface Plan {
  /** The product the plan buys. */
  asin: string;
  /** Its rank in the search results (0 = top). */
  rank: number;
  /** Tool calls from the first search to Buy Now. */
  turns: number;
  /** Products clicked and rejected before. */
  inspected: number;
  /** Whether the Features page had to be read. */
  readFeatures: boolean;
}

export interface WebShopInstance {
  index: number;
  split: Split;
  difficulty: number;
  goal: WebShopGoal;
  plan: Plan;
}

export class InstanceError extends AgentRLError {}

/** Splits an index into its parts; throws `InstanceError` for an index outside the layout. */
export function decodeIndex(index: number): { difficulty: number; split: Split; k: number } {
  if (!Number.isInteger(index) || index < 0)
    throw new InstanceError(`webshop index ${index} is not a non-negative integer`);
  const { difficulty, split, position } = decodeInstanceIndex(index);
  if (!(DIFFICULTIES as readonly number[]).includes(difficulty))
    throw new InstanceError(
      `webshop index ${index} has difficulty ${difficulty}; known: ${DIFFICULTIES.join(", ")}`,
    );
  return { difficulty, split, k: position };
}

/** Index of the k-th instance of a split at a difficulty (the layout of ../instance-index.ts). */
export const encodeIndex: (difficulty: number, split: Split, k: number) => number =
  encodeInstanceIndex;

/** Which split an instruction text belongs to. */
export function splitOfInstruction(instruction: string): Split {
  return hashString(instruction) % TEST_SHARE_MODULUS === 0 ? "test" : "train";
}

/** Builds instance `index` of the world with `seed`: the same inputs, the same instance. */
export function makeInstance(engine: SearchEngine, seed: number, index: number): WebShopInstance {
  const { difficulty, split } = decodeIndex(index);
  const random = new Random(mixSeeds(seed, index, 0x5e5));
  const catalogue = engine.catalogue;
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const product = pickTarget(random, catalogue, difficulty);
    if (!product) continue;
    const goal = makeGoal(random, product, difficulty);
    if (splitOfInstruction(goal.instruction) !== split) continue;
    const plan = planEpisode(goal, engine.search(goal.instruction));
    if (!plan || plan.turns > MAX_TURNS) continue;
    if (levelOf(goal, plan) !== difficulty) continue;
    const chosen = catalogue.byAsin.get(plan.asin)!;
    if (getReward(chosen, goal, chosen.price, optionsToSelect(goal, chosen)).reward !== 1) continue;
    return { index, split, difficulty, goal, plan };
  }
  throw new InstanceError(
    `no webshop instance found for index ${index} after ${MAX_ATTEMPTS} attempts`,
  );
}

/** A random target product fit for a difficulty (none: try again). */
function pickTarget(random: Random, catalogue: Catalogue, difficulty: number): Product | undefined {
  const product = random.pick(catalogue.products);
  const hasOptions = Object.keys(product.options).length > 0;
  if (difficulty === 0)
    return !hasOptions && product.titleAttributes.length > 0 ? product : undefined;
  if (difficulty === 1)
    return hasOptions && product.titleAttributes.length > 0 ? product : undefined;
  if (difficulty === 2)
    return (hasOptions || random.chance(0.3)) && product.titleAttributes.length > 0
      ? product
      : undefined;
  // Level 3 needs page 1 to be passed over cheaply: cheap targets make a tight price
  // limit, which rules out most same-type products on the results page itself.
  const [low, high] = PRODUCT_TYPES[product.typeIndex].price;
  return (product.price - low) / (high - low) <= 0.15 ? product : undefined;
}

/** A goal drawn from `product`, written like the original's synthetic goals. */
export function makeGoal(random: Random, product: Product, difficulty: number): WebShopGoal {
  const pool = difficulty <= 2 ? product.titleAttributes : product.attributes;
  const fewest = difficulty === 3 ? 2 : 1;
  const most = difficulty <= 1 ? 2 : 3;
  const attributes = random.sample(
    pool,
    random.integer(Math.min(fewest, pool.length), Math.min(most, pool.length)),
  );
  const goalOptions: Record<string, string> = {};
  for (const name of Object.keys(product.options).sort())
    goalOptions[name] = random.pick(product.options[name]);
  const priceSteps = PRICE_RANGE.filter((p) => p > product.price).slice(0, 4);
  let priceUpper = NO_PRICE_LIMIT;
  let priceText = "";
  if (priceSteps.length >= 2) {
    priceUpper = Math.max(...random.sample(priceSteps, 2));
    priceText = `, and price lower than ${priceUpper.toFixed(2)} dollars`;
  }
  const optionText = Object.entries(goalOptions)
    .map(([name, value]) => `${name}: ${value}`)
    .join(", and ");
  const type = PRODUCT_TYPES[product.typeIndex];
  const described = `${attributes.join(" and ")} ${type.query}`;
  const article =
    type.category === "food" || type.query.endsWith("s")
      ? ""
      : /^[aeiou]/.test(described)
        ? "an "
        : "a ";
  const base = `${random.pick(INSTRUCTION_OPENINGS)} ${article}${described}`;
  const instruction = `${base}${optionText ? ` with ${optionText}` : ""}${priceText}`;
  return {
    asin: product.asin,
    instruction,
    query: product.query,
    productCategory: product.productCategory,
    nameNouns: product.titleNouns,
    attributes,
    goalOptions,
    priceUpper,
  };
}

/** The options the expert selects on `product`: the goal's values. */
export function optionsToSelect(goal: ShoppingList, product: Product): Record<string, string> {
  const selected: Record<string, string> = {};
  for (const [name, values] of Object.entries(product.options)) {
    for (const value of Object.values(goal.goalOptions))
      if (values.includes(value)) selected[name] = value;
  }
  return selected;
}

/**
 * Plays the expert's plan on the data: scan the results in order; click a product whose
 * title and price fit; go back if a wanted option is missing; read its Features when the
 * title does not show every attribute; select the options; buy. Undefined: nothing fits.
 */
export function planEpisode(goal: ShoppingList, results: readonly Product[]): Plan | undefined {
  const optionCount = Object.keys(goal.goalOptions).length;
  let turns = 1; // the search
  let inspected = 0;
  for (let page = 1; (page - 1) * PRODUCT_WINDOW < results.length; page++) {
    if (page > 1) turns += 1; // "Next >"
    const start = (page - 1) * PRODUCT_WINDOW;
    for (let rank = start; rank < Math.min(results.length, start + PRODUCT_WINDOW); rank++) {
      const product = results[rank];
      if (!titleFits(goal, product.title, product.price)) continue;
      turns += 1; // click the product
      if (!optionsAvailable(goal, Object.values(product.options).flat())) {
        turns += 1; // "< Prev" to the results
        inspected += 1;
        continue;
      }
      if (attributesShown(goal, product.title)) {
        return {
          asin: product.asin,
          rank,
          turns: turns + optionCount + 1,
          inspected,
          readFeatures: false,
        };
      }
      turns += 1; // "Features"
      if (attributesShown(goal, featureText(product))) {
        return {
          asin: product.asin,
          rank,
          turns: turns + 1 + optionCount + 1,
          inspected,
          readFeatures: true,
        };
      }
      turns += 2; // "< Prev" twice
      inspected += 1;
    }
  }
  return undefined;
}

/** The text the expert checks attributes in after reading the Features page. */
export function featureText(product: Pick<Product, "title" | "bulletPoints">): string {
  return [product.title, ...product.bulletPoints].join("\n");
}

/** The difficulty level a plan shows (see the module comment). */
export function levelOf(goal: ShoppingList, plan: Plan): number {
  if (plan.rank >= PRODUCT_WINDOW || plan.readFeatures) return 3;
  if (plan.rank > 0 || plan.inspected > 0) return 2;
  return Object.keys(goal.goalOptions).length > 0 ? 1 : 0;
}
