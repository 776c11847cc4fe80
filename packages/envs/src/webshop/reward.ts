/**
 * WebShop's reward, ported line by line from `get_reward` in
 * `web_agent_site/engine/goal.py` (princeton-nlp/WebShop, as used by AgentBench):
 *
 *   total = (num_attr_matches + num_option_matches + r_price)
 *           / (len(goal.attributes) + len(goal.options) + 1)
 *   total *= r_type
 *
 * Fuzzy matching is `token_set_ratio` of thefuzz, here from its JavaScript port fuzzball.
 * The one change: the original's noun parse of titles (spaCy) is replaced by the nouns
 * the catalogue generator knows each title has (`titleNouns`).
 */
import * as fuzz from "fuzzball";

/** The product fields the reward reads (a subset of `Product`). */
export interface PurchasedProduct {
  query: string;
  productCategory: string;
  title: string;
  titleNouns: readonly string[];
  attributes: readonly string[];
  bulletPoints: readonly string[];
  description: string;
}

/** What the shopper asked for (the original's goal dict). */
export interface Goal {
  query: string;
  productCategory: string;
  /** The goal product's title nouns (the original parses `goal['name']`). */
  nameNouns: readonly string[];
  attributes: readonly string[];
  /** Option name → wanted value. */
  goalOptions: Readonly<Record<string, string>>;
  /** Dollars; ≤ 0 means no price constraint. */
  priceUpper: number;
}

export interface RewardParts {
  reward: number;
  rType: number;
  rAttribute: number;
  /** Undefined when the goal has no options (as in the original). */
  rOption: number | undefined;
  rPrice: number;
  queryMatch: boolean;
  categoryMatch: boolean;
  titleScore: number;
}

/** Option names matched exactly rather than fuzzily (the original's `EXACT_MATCH_OPTS`). */
export const EXACT_MATCH_OPTIONS = ["size"];

/** The original's `COLOR_SET`, in its order (the first colour found in a string wins). */
export const COLOR_SET = [
  "alabaster",
  "apricot",
  "aqua",
  "ash",
  "asphalt",
  "azure",
  "banana",
  "beige",
  "black",
  "blue",
  "blush",
  "bordeaux",
  "bronze",
  "brown",
  "burgundy",
  "camel",
  "camo",
  "caramel",
  "champagne",
  "charcoal",
  "cheetah",
  "chestnut",
  "chocolate",
  "christmas",
  "coffee",
  "cognac",
  "copper",
  "coral",
  "cranberry",
  "cream",
  "crystal",
  "dark",
  "denim",
  "eggplant",
  "elephant",
  "espresso",
  "fuchsia",
  "gold",
  "granite",
  "grape",
  "graphite",
  "grass",
  "gray",
  "green",
  "grey",
  "heather",
  "indigo",
  "ivory",
  "ivy",
  "khaki",
  "lavender",
  "lemon",
  "leopard",
  "light",
  "lilac",
  "lime",
  "magenta",
  "maroon",
  "mauve",
  "merlot",
  "midnight",
  "mint",
  "mocha",
  "multicolor",
  "mushroom",
  "mustard",
  "natural",
  "navy",
  "nude",
  "olive",
  "orange",
  "peach",
  "pewter",
  "pink",
  "plum",
  "purple",
  "rainbow",
  "red",
  "rose",
  "royal",
  "rust",
  "sand",
  "sapphire",
  "seashell",
  "silver",
  "skull",
  "slate",
  "steel",
  "stone",
  "stonewash",
  "sunflower",
  "tan",
  "taupe",
  "teal",
  "tiger",
  "turquoise",
  "violet",
  "walnut",
  "wheat",
  "white",
  "wine",
  "yellow",
];

/** The first colour of `COLOR_SET` found in the string, else the string (`normalize_color`). */
export function normalizeColor(text: string): string {
  for (const color of COLOR_SET) if (text.includes(color)) return color;
  return text;
}

/** thefuzz's `token_set_ratio`, an integer in [0, 100]. */
export function tokenSetRatio(a: string, b: string): number {
  return fuzz.token_set_ratio(a, b);
}

/** `get_type_reward`: is the purchased product the same kind of thing? */
export function typeReward(
  product: PurchasedProduct,
  goal: Goal,
): { rType: number; queryMatch: boolean; categoryMatch: boolean; titleScore: number } {
  const queryMatch = product.query === goal.query;
  const purchasedCategory = new Set(product.productCategory.split("›").map((x) => x.trim()));
  const goalCategory = new Set(goal.productCategory.split("›").map((x) => x.trim()));
  const categoryMatch = [...purchasedCategory].filter((x) => goalCategory.has(x)).length >= 2;
  const purchasedNouns = new Set(product.titleNouns);
  const desiredNouns = new Set(goal.nameNouns);
  const intersect = [...purchasedNouns].filter((x) => desiredNouns.has(x)).length;
  // The original divides by the length of the desired parse list (duplicates included).
  const titleScore = goal.nameNouns.length === 0 ? 0.2 : intersect / goal.nameNouns.length;
  let rType = 1.0;
  const match = queryMatch || categoryMatch || titleScore > 0.2;
  if (!match) rType = 0.5;
  if (titleScore < 0.1) rType = 0.1;
  if (titleScore === 0.0) rType = 0.0;
  return { rType, queryMatch, categoryMatch, titleScore };
}

/** `get_attribute_reward`: how many goal attributes the product has. */
export function attributeReward(
  product: PurchasedProduct,
  goal: Goal,
): { rAttribute: number; matches: number } {
  let matches = 0;
  const title = product.title.toLowerCase();
  const bullets = product.bulletPoints.join(" ").toLowerCase();
  const description = product.description.toLowerCase();
  for (const goalAttribute of goal.attributes) {
    let matched = false;
    for (const productAttribute of product.attributes) {
      if (tokenSetRatio(productAttribute, goalAttribute) > 85) {
        matches += 1;
        matched = true;
        break;
      }
    }
    if (
      !matched &&
      (title.includes(goalAttribute) ||
        bullets.includes(goalAttribute) ||
        description.includes(goalAttribute))
    ) {
      matches += 1;
    }
  }
  return {
    rAttribute: goal.attributes.length === 0 ? 0 : matches / goal.attributes.length,
    matches,
  };
}

/** `get_option_reward`: how many purchased options match a goal option. */
export function optionReward(
  product: PurchasedProduct,
  goalOptionValues: readonly string[],
  purchasedOptions: Readonly<Record<string, string>>,
): { rOption: number | undefined; matches: number } {
  const goalValues = goalOptionValues.map(normalizeColor);
  const title = product.title.toLowerCase();
  const bullets = product.bulletPoints.join(" ").toLowerCase();
  const description = product.description.toLowerCase();
  let matches = 0;
  for (const [name, rawValue] of Object.entries(purchasedOptions)) {
    const value = normalizeColor(rawValue);
    let matched = false;
    if (EXACT_MATCH_OPTIONS.includes(name.toLowerCase())) {
      if (goalValues.includes(value)) {
        matches += 1;
        matched = true;
      }
    } else {
      for (const goalValue of goalValues) {
        if (tokenSetRatio(goalValue, value) > 85) {
          matches += 1;
          matched = true;
          break;
        }
      }
    }
    if (
      !matched &&
      (title.includes(value) || bullets.includes(value) || description.includes(value))
    ) {
      matches += 1;
    }
  }
  return { rOption: goalValues.length > 0 ? matches / goalValues.length : undefined, matches };
}

/**
 * `get_reward`: the score of buying `product` at `price` with `purchasedOptions` selected.
 * The original can exceed 1 when more options are selected than the goal names; the
 * episode reward is clamped to [0, 1] (`reward`), the raw value is kept in the parts.
 */
export function getReward(
  product: PurchasedProduct,
  goal: Goal,
  price: number,
  purchasedOptions: Readonly<Record<string, string>>,
): RewardParts {
  const type = typeReward(product, goal);
  const rPrice = goal.priceUpper > 0 ? (price <= goal.priceUpper ? 1 : 0) : 0;
  const attribute = attributeReward(product, goal);
  const goalOptionValues = Object.values(goal.goalOptions);
  const option = optionReward(product, goalOptionValues, purchasedOptions);
  const raw =
    ((attribute.matches + option.matches + rPrice) /
      (goal.attributes.length + goalOptionValues.length + 1)) *
    type.rType;
  return {
    reward: Math.min(1, Math.max(0, raw)),
    rType: type.rType,
    rAttribute: attribute.rAttribute,
    rOption: option.rOption,
    rPrice,
    queryMatch: type.queryMatch,
    categoryMatch: type.categoryMatch,
    titleScore: type.titleScore,
  };
}
