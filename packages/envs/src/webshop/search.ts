/**
 * The search engine: a BM25 ranked full-text index over the catalogue, standing in for
 * the original's Lucene (pyserini) index. (minisearch, tried first, took 75-215 ms for a
 * long instruction that matches 5,000-7,000 products; this index takes about 1 ms.) As in the original, each
 * product is one document of title, description, first bullet and option text, lower
 * cased; a search returns the top 50 products (`SEARCH_RETURN_N`), shown 10 per page.
 */
import { getCatalogue, type Catalogue, type CatalogueOptions, type Product } from "./catalogue.js";

/** How many products one search returns, as in the original. */
export const SEARCH_RETURN_N = 50;
/** Products per results page, as in the original. */
export const PRODUCT_WINDOW = 10;

/** Lucene's English stop words, plus the filler words of WebShop instructions. */
const STOP_WORDS = new Set([
  "a",
  "an",
  "and",
  "are",
  "as",
  "at",
  "be",
  "but",
  "by",
  "for",
  "if",
  "in",
  "into",
  "is",
  "it",
  "no",
  "not",
  "of",
  "on",
  "or",
  "such",
  "that",
  "the",
  "their",
  "then",
  "there",
  "these",
  "they",
  "this",
  "to",
  "was",
  "will",
  "with",
  "i",
  "need",
  "want",
  "am",
  "looking",
  "would",
  "like",
  "find",
  "me",
  "price",
  "lower",
  "than",
  "dollars",
]);

/** Lower case, possessive "'s" dropped, split on anything but letters and digits. */
export function tokenize(text: string): string[] {
  return text
    .toLowerCase()
    .replace(/'s\b/g, "")
    .split(/[^a-z0-9]+/)
    .filter((token) => token.length > 0);
}

/** The terms the index keeps of a text: tokens that are not stop words. */
export function analyze(text: string): string[] {
  return tokenize(text).filter((token) => !STOP_WORDS.has(token));
}

/** The text the index holds for one product (the original's `contents`). */
export function documentText(product: Product): string {
  const optionText = Object.entries(product.options)
    .map(([name, values]) => `${name}: ${values.join(", ")}`)
    .join(", and ");
  return [product.title, product.description, product.bulletPoints[0] ?? "", optionText]
    .join(" ")
    .toLowerCase();
}

/** BM25 parameters of Anserini/pyserini's Lucene searcher, which the original uses. */
export const BM25_K1 = 0.9;
export const BM25_B = 0.4;

/**
 * An inverted index with Lucene's BM25 ranking (idf = ln(1 + (N - df + 0.5) / (df + 0.5)),
 * term score = idf · tf · (k1 + 1) / (tf + k1 · (1 - b + b · length / mean length))),
 * ties broken by catalogue order as Lucene breaks them by document id. Postings are typed
 * arrays, so a query of 15 terms over 10k products takes about a millisecond.
 */
export class SearchEngine {
  private readonly postings = new Map<string, { documents: Int32Array; counts: Float64Array }>();
  private readonly lengthNorm: Float64Array;
  private readonly scores: Float64Array;

  constructor(readonly catalogue: Catalogue) {
    const count = catalogue.products.length;
    const lists = new Map<string, number[]>();
    const lengths = new Float64Array(count);
    catalogue.products.forEach((product, id) => {
      const terms = analyze(documentText(product));
      lengths[id] = terms.length;
      const frequencies = new Map<string, number>();
      for (const term of terms) frequencies.set(term, (frequencies.get(term) ?? 0) + 1);
      for (const [term, frequency] of frequencies) {
        let list = lists.get(term);
        if (!list) lists.set(term, (list = []));
        list.push(id, frequency);
      }
    });
    for (const [term, list] of lists) {
      const documents = new Int32Array(list.length / 2);
      const counts = new Float64Array(list.length / 2);
      for (let i = 0; i < documents.length; i++) {
        documents[i] = list[2 * i];
        counts[i] = list[2 * i + 1];
      }
      this.postings.set(term, { documents, counts });
    }
    const meanLength = lengths.reduce((a, b) => a + b, 0) / Math.max(1, count);
    this.lengthNorm = lengths.map(
      (length) => BM25_K1 * (1 - BM25_B + (BM25_B * length) / meanLength),
    );
    this.scores = new Float64Array(count);
  }

  /** The best `limit` products for `keywords`, best first (ties: catalogue order). */
  search(keywords: string, limit = SEARCH_RETURN_N): Product[] {
    const total = this.catalogue.products.length;
    const touched: number[] = [];
    for (const term of analyze(keywords)) {
      const posting = this.postings.get(term);
      if (!posting) continue;
      const { documents, counts } = posting;
      const idf = Math.log(1 + (total - documents.length + 0.5) / (documents.length + 0.5));
      for (let i = 0; i < documents.length; i++) {
        const id = documents[i];
        if (this.scores[id] === 0) touched.push(id);
        const frequency = counts[i];
        this.scores[id] += (idf * frequency * (BM25_K1 + 1)) / (frequency + this.lengthNorm[id]);
      }
    }
    const scores = this.scores;
    touched.sort((a, b) => scores[b] - scores[a] || a - b);
    const best = touched.slice(0, limit).map((id) => this.catalogue.products[id]);
    for (const id of touched) scores[id] = 0;
    return best;
  }
}

const engines = new Map<string, SearchEngine>();

/** The search engine of a catalogue, built on first use and cached per process. */
export function getSearchEngine(options: CatalogueOptions = {}): SearchEngine {
  const key = `${options.seed ?? 0}/${options.productsPerType ?? "default"}`;
  let engine = engines.get(key);
  if (!engine) {
    engine = new SearchEngine(getCatalogue(options));
    engines.set(key, engine);
  }
  return engine;
}
