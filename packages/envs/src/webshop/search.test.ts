import { test } from "node:test";
import assert from "node:assert/strict";
import type { Catalogue, Product } from "./catalogue.js";
import { SearchEngine, analyze } from "./search.js";

function product(asin: string, title: string): Product {
  return {
    asin,
    title,
    category: "food",
    query: "q",
    productCategory: "A › B",
    titleNouns: [],
    description: "",
    bulletPoints: [],
    reviews: [],
    attributes: [],
    titleAttributes: [],
    options: {},
    price: 1,
    typeIndex: 0,
  };
}

test("BM25 ranking, hand-computed (k1 0.9, b 0.4)", () => {
  // Lengths 2, 4, 2, 2 → mean 2.5. idf(red) = idf(apple) = ln(1 + (4 - 3 + 0.5) / (3 + 0.5)) = 0.3567.
  // "red apple":  B01 (tf 1, 1):  2 · 1.9 / (1 + 0.9 · (0.6 + 0.4 · 2 / 2.5)) = 2 · 1.9 / 1.828 = 2.079 → × idf = 0.742
  //               B02 (tf 2, 1):  3.8 / (2 + 0.9 · (0.6 + 0.4 · 4 / 2.5)) + 1.9 / (1 + 1.116) = 1.2195 + 0.8979 = 2.117 → 0.755
  //               B04 = B01 (tie: catalogue order)
  const products = [
    product("B01", "red apple"),
    product("B02", "red red apple pie"),
    product("B03", "green pear"),
    product("B04", "red apple"),
  ];
  const catalogue: Catalogue = {
    seed: 0,
    products,
    byAsin: new Map(products.map((p) => [p.asin, p])),
  };
  const engine = new SearchEngine(catalogue);
  assert.deepEqual(
    engine.search("I need a red apple, and price lower than 10.00 dollars").map((p) => p.asin),
    ["B02", "B01", "B04"],
  );
  assert.deepEqual(
    engine.search("pear").map((p) => p.asin),
    ["B03"],
  );
  assert.deepEqual(
    engine.search("red apple", 2).map((p) => p.asin),
    ["B02", "B01"],
  );
  assert.deepEqual(analyze("I want Women's Jeans with color: black"), [
    "women",
    "jeans",
    "color",
    "black",
  ]);
});
