/**
 * The web shop itself: the page states of the original WebShop's text environment
 * (`WebAgentTextEnv` + `SimServer`), rendered the way its "simple" text mode renders them
 * (visible texts joined by " [SEP] "), with the list of clickables the agent may click.
 *
 *   search page ──search──► results (10 per page, "Next >" / "< Prev") ──asin──► item page
 *   item page: option values, "Description" / "Features" / "Reviews" sub-pages, "Buy Now"
 *   "< Prev" goes back one level; "Back to Search" returns to the search page.
 *
 * Searching works from any page, as in the original's `step` (it never checks the page).
 */
import { formatPrice, type Product } from "./catalogue.js";
import { PRODUCT_WINDOW, type SearchEngine } from "./search.js";

export const END_BUTTON = "Buy Now";
export const NEXT_PAGE = "Next >";
export const PREV_PAGE = "< Prev";
export const BACK_TO_SEARCH = "Back to Search";
export const SUB_PAGES = ["Description", "Features", "Reviews"] as const;
export type SubPage = (typeof SUB_PAGES)[number];

export type PageState =
  | { kind: "search" }
  | { kind: "results"; page: number }
  | { kind: "item"; asin: string }
  | { kind: "sub"; asin: string; sub: SubPage }
  | { kind: "done"; asin: string; score: number };

/** What the agent sees besides the page: the original's `get_available_actions()`. */
export interface AvailableActions {
  has_search_bar: boolean;
  clickables: string[];
}

/** What a click or search did. `purchase` is set when "Buy Now" was clicked. */
export interface StepResult {
  valid: boolean;
  purchase?: { product: Product; options: Record<string, string> };
}

export const SEPARATOR = " [SEP] ";

export class Shop {
  private state: PageState = { kind: "search" };
  private results: Product[] = [];
  private page = 1;
  private options: Record<string, string> = {};

  constructor(
    private readonly engine: SearchEngine,
    private readonly instruction: string,
  ) {}

  get pageState(): PageState {
    return this.state;
  }

  /** Runs `search[keywords]`. Empty keywords do nothing (invalid), as in the original. */
  search(keywords: string): StepResult {
    const words = keywords.trim();
    if (words === "") return { valid: false };
    this.results = this.engine.search(words);
    this.page = 1;
    this.options = {};
    this.state = { kind: "results", page: 1 };
    return { valid: true };
  }

  /** Runs `click[value]`; `value` is matched case-insensitively against the clickables. */
  click(rawValue: string): StepResult {
    const value = rawValue.trim().toLowerCase();
    if (value === "search" || !this.availableActions().clickables.includes(value))
      return { valid: false };
    const state = this.state;
    if (value === BACK_TO_SEARCH.toLowerCase()) {
      this.state = { kind: "search" };
    } else if (state.kind === "results") {
      if (value === NEXT_PAGE.toLowerCase()) this.showResults(this.page + 1);
      else if (value === PREV_PAGE.toLowerCase()) this.showResults(this.page - 1);
      else this.state = { kind: "item", asin: value.toUpperCase() };
    } else if (state.kind === "item") {
      const product = this.product(state.asin);
      if (value === END_BUTTON.toLowerCase()) {
        this.state = { kind: "done", asin: state.asin, score: 0 };
        return { valid: true, purchase: { product, options: { ...this.options } } };
      }
      if (value === PREV_PAGE.toLowerCase()) this.showResults(this.page);
      else {
        const sub = SUB_PAGES.find((name) => name.toLowerCase() === value);
        if (sub) this.state = { kind: "sub", asin: state.asin, sub };
        else this.selectOption(product, value);
      }
    } else if (state.kind === "sub" && value === PREV_PAGE.toLowerCase()) {
      this.state = { kind: "item", asin: state.asin };
    }
    return { valid: true };
  }

  /** Records the score shown on the done page. */
  setScore(score: number): void {
    if (this.state.kind === "done") this.state = { ...this.state, score };
  }

  /** The clickables of the current page, lower case, in page order. */
  availableActions(): AvailableActions {
    const state = this.state;
    const back = BACK_TO_SEARCH.toLowerCase();
    const prev = PREV_PAGE.toLowerCase();
    switch (state.kind) {
      case "search":
        return { has_search_bar: true, clickables: ["search"] };
      case "results": {
        const clickables = [back];
        if (this.page > 1) clickables.push(prev);
        if (this.page * PRODUCT_WINDOW < this.results.length)
          clickables.push(NEXT_PAGE.toLowerCase());
        for (const product of this.pageProducts()) clickables.push(product.asin.toLowerCase());
        return { has_search_bar: false, clickables };
      }
      case "item": {
        const product = this.product(state.asin);
        const buttons = [
          back,
          prev,
          ...SUB_PAGES.map((s) => s.toLowerCase()),
          END_BUTTON.toLowerCase(),
        ];
        return {
          has_search_bar: false,
          clickables: [...buttons, ...Object.values(product.options).flat()],
        };
      }
      case "sub":
        return { has_search_bar: false, clickables: [back, prev] };
      case "done":
        return { has_search_bar: false, clickables: [] };
    }
  }

  /** The current page as text ("simple" mode: visible texts joined by " [SEP] "). */
  observation(): string {
    const state = this.state;
    switch (state.kind) {
      case "search":
        return ["WebShop", "Instruction:", this.instruction, "Search"].join(SEPARATOR);
      case "results": {
        const parts = [BACK_TO_SEARCH, `Page ${this.page} (Total results: ${this.results.length})`];
        if (this.page > 1) parts.push(PREV_PAGE);
        if (this.page * PRODUCT_WINDOW < this.results.length) parts.push(NEXT_PAGE);
        for (const product of this.pageProducts())
          parts.push(product.asin, product.title, formatPrice(product.price));
        return parts.join(SEPARATOR);
      }
      case "item": {
        const product = this.product(state.asin);
        const parts = [BACK_TO_SEARCH, PREV_PAGE];
        for (const [name, values] of Object.entries(product.options)) parts.push(name, ...values);
        parts.push(product.title, `Price: ${formatPrice(product.price)}`, ...SUB_PAGES, END_BUTTON);
        const clicked = Object.values(this.options)
          .map((value) => `You have clicked ${value}.\n`)
          .join("");
        return clicked + parts.join(SEPARATOR);
      }
      case "sub": {
        const product = this.product(state.asin);
        return [BACK_TO_SEARCH, PREV_PAGE, ...subPageTexts(product, state.sub)].join(SEPARATOR);
      }
      case "done":
        return [
          "Thank you for shopping with us!",
          "Your score (min 0.0, max 1.0)",
          state.score.toFixed(2),
        ].join(SEPARATOR);
    }
  }

  private showResults(page: number): void {
    this.page = page;
    this.options = {};
    this.state = { kind: "results", page };
  }

  private pageProducts(): Product[] {
    return this.results.slice((this.page - 1) * PRODUCT_WINDOW, this.page * PRODUCT_WINDOW);
  }

  private product(asin: string): Product {
    const product = this.engine.catalogue.byAsin.get(asin);
    if (!product) throw new Error(`no product ${asin} in the catalogue`);
    return product;
  }

  private selectOption(product: Product, value: string): void {
    for (const [name, values] of Object.entries(product.options)) {
      if (values.includes(value)) this.options[name] = value;
    }
  }
}

function subPageTexts(product: Product, sub: SubPage): string[] {
  switch (sub) {
    case "Description":
      return [product.description];
    case "Features":
      return product.bulletPoints.length > 0 ? product.bulletPoints : ["No Features"];
    case "Reviews":
      return product.reviews.length > 0
        ? product.reviews.flatMap((r) => [`${r.score} stars`, r.body])
        : ["No Reviews"];
  }
}
