/**
 * The generated product catalogue: ≥ 10,000 products with the fields of the original's
 * `items_shuffle.json` after `load_products` (asin, category, query, product_category,
 * Title, Description, BulletPoints, Reviews, Attributes, options, price). Deterministic
 * in the seed and cached per process: the same seed gives the same catalogue, built once.
 */
import {
  BULLET_TAILS,
  FILLER_BULLETS,
  PRODUCT_TYPES,
  REVIEW_LINES,
  brandsOf,
  type Category,
  type ProductType,
} from "./lexicon.js";
import { Random, mixSeeds } from "../random.js";

export interface Review {
  /** Stars, 1 to 5. */
  score: number;
  body: string;
}

export interface Product {
  /** Amazon-style id, "B0" and 8 characters of [0-9A-Z]. */
  asin: string;
  category: Category;
  /** The type's search query (the original's `query`). */
  query: string;
  productCategory: string;
  title: string;
  /** Lower-case nouns of the title (brand and type nouns): the type reward's "parse". */
  titleNouns: string[];
  description: string;
  /** The Features page. Every attribute of the product has a bullet naming it. */
  bulletPoints: string[];
  reviews: Review[];
  /** Hidden from the agent, as in the original (`show_attrs` off). */
  attributes: string[];
  /** The attributes written into the title (a subset of `attributes`). */
  titleAttributes: string[];
  /** Option name → values offered, e.g. `{ size: ["small", "large"] }`; may be empty. */
  options: Record<string, string[]>;
  /** Dollars, two decimals. */
  price: number;
  /** Position of the product type in `PRODUCT_TYPES`. */
  typeIndex: number;
}

export interface CatalogueOptions {
  /** Seed of the generator. Default 0. */
  seed?: number;
  /** Products per type; 40 types. Default 256 (10,240 products). */
  productsPerType?: number;
}

export interface Catalogue {
  seed: number;
  products: Product[];
  byAsin: Map<string, Product>;
}

const DEFAULT_PRODUCTS_PER_TYPE = 256;
const cache = new Map<string, Catalogue>();

/** The catalogue of a seed, built on first use and then shared (about 0.1 s for 10k). */
export function getCatalogue(options: CatalogueOptions = {}): Catalogue {
  const seed = options.seed ?? 0;
  const perType = options.productsPerType ?? DEFAULT_PRODUCTS_PER_TYPE;
  const key = `${seed}/${perType}`;
  let catalogue = cache.get(key);
  if (!catalogue) {
    catalogue = buildCatalogue(seed, perType);
    cache.set(key, catalogue);
  }
  return catalogue;
}

function buildCatalogue(seed: number, perType: number): Catalogue {
  const random = new Random(mixSeeds(seed, 0xca7a));
  const usedAsins = new Set<string>();
  const products: Product[] = [];
  const brandsByCategory = new Map<Category, string[]>();
  PRODUCT_TYPES.forEach((type, typeIndex) => {
    let brands = brandsByCategory.get(type.category);
    if (!brands) brandsByCategory.set(type.category, (brands = brandsOf(type.category)));
    for (let i = 0; i < perType; i++) {
      products.push(makeProduct(random, type, typeIndex, brands, newAsin(random, usedAsins)));
    }
  });
  // Shuffle so that catalogue order (the search engine's tie-break) says nothing about type.
  const shuffled = random.shuffle(products);
  return { seed, products: shuffled, byAsin: new Map(shuffled.map((p) => [p.asin, p])) };
}

const ASIN_CHARACTERS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";

function newAsin(random: Random, used: Set<string>): string {
  for (;;) {
    let asin = "B0";
    for (let i = 0; i < 8; i++)
      asin += ASIN_CHARACTERS[random.integer(0, ASIN_CHARACTERS.length - 1)];
    if (!used.has(asin)) {
      used.add(asin);
      return asin;
    }
  }
}

function titleCase(phrase: string): string {
  return phrase
    .split(" ")
    .map((word) => word[0].toUpperCase() + word.slice(1))
    .join(" ");
}

function makeProduct(
  random: Random,
  type: ProductType,
  typeIndex: number,
  brands: string[],
  asin: string,
): Product {
  const brand = random.pick(brands);
  const attributes = random.sample(type.attributes, random.integer(2, 4));
  const titleAttributes = attributes.filter(() => random.chance(0.5));
  const title = [brand, ...titleAttributes.map(titleCase), type.title].join(" ");
  const attributeBullets = attributes.map((attribute) => {
    const text = `${titleCase(attribute)}: ${random.pick(BULLET_TAILS)}`;
    return text;
  });
  const bulletPoints = random.shuffle([...attributeBullets, random.pick(FILLER_BULLETS)]);
  const options: Record<string, string[]> = {};
  if (type.options.length > 0 && random.chance(0.7)) {
    for (const group of type.options) {
      const count = random.integer(Math.min(3, group.values.length), group.values.length);
      const chosen = new Set(random.sample(group.values, count));
      options[group.name] = group.values.filter((value) => chosen.has(value));
    }
  }
  const [low, high] = type.price;
  const price = Math.round((low + random.next() * (high - low)) * 100) / 100;
  const reviews = Array.from({ length: random.integer(0, 2) }, () => ({
    score: random.integer(2, 5),
    body: random.pick(REVIEW_LINES),
  }));
  return {
    asin,
    category: type.category,
    query: type.query,
    productCategory: type.productCategory,
    title,
    titleNouns: [brand.toLowerCase(), ...type.nouns],
    description: `The ${brand} ${type.query}, item model ${asin.slice(2)}, sold by ${brand}.`,
    bulletPoints,
    reviews,
    attributes,
    titleAttributes,
    options,
    price,
    typeIndex,
  };
}

/** The price as the pages show it, e.g. "$23.50". */
export function formatPrice(price: number): string {
  return `$${price.toFixed(2)}`;
}
