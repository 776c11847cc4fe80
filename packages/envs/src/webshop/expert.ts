/**
 * Scripted shoppers that play through the session API, reading only the conversation:
 * the expert knows the goal's content (the instance generator's output, all of it written
 * in the instruction) and finds a matching product by reading the pages; the wrong expert
 * buys a product of an unrelated kind (score 0).
 */
import type { AssistantMessage, Expert, Message } from "../types.js";
import { attributesShown, optionsAvailable, titleFits, type ShoppingList } from "./judge.js";
import { PRODUCT_TYPES } from "./lexicon.js";
import {
  BACK_TO_SEARCH,
  END_BUTTON,
  NEXT_PAGE,
  PREV_PAGE,
  SEPARATOR,
  type AvailableActions,
} from "./shop.js";

/** A page as the agent reads it: the observation text and the available actions. */
export interface ReadPage {
  observation: string;
  actions: AvailableActions;
}

const ASIN_PATTERN = /^B0[0-9A-Z]{8}$/;

/** Reads the last page shown in `history` (the first user message or a tool message). */
export function readLastPage(history: readonly Message[]): ReadPage | undefined {
  for (let i = history.length - 1; i >= 0; i--) {
    const message = history[i];
    if (message.role === "assistant" || message.role === "system") continue;
    const match = /[Oo]bservation:\n([\s\S]*)\n\nAvailable Actions:\n(.*)$/.exec(message.content);
    if (!match) continue;
    try {
      return { observation: match[1], actions: JSON.parse(match[2]) as AvailableActions };
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** The products of a results page: id, title and price, in page order. */
export function readResults(observation: string): { asin: string; title: string; price: number }[] {
  const parts = observation.split(SEPARATOR);
  const products = [];
  for (let i = 0; i + 2 < parts.length; i++) {
    if (ASIN_PATTERN.test(parts[i])) {
      products.push({
        asin: parts[i],
        title: parts[i + 1],
        price: Number(parts[i + 2].replace("$", "")),
      });
      i += 2;
    }
  }
  return products;
}

let callCounter = 0;

function call(
  name: "search_action" | "click_action",
  args: Record<string, string>,
): AssistantMessage {
  callCounter += 1;
  return {
    role: "assistant",
    content: null,
    tool_calls: [
      {
        id: `call_${callCounter}`,
        type: "function",
        function: { name, arguments: JSON.stringify(args) },
      },
    ],
  };
}

const click = (value: string) => call("click_action", { value });

type PageKind = "search" | "results" | "item" | "features" | "other";

function pageKind(page: ReadPage): PageKind {
  if (page.actions.has_search_bar) return "search";
  if (
    page.observation.includes(`${SEPARATOR}Page `) &&
    page.observation.includes("(Total results:")
  )
    return "results";
  if (page.actions.clickables.includes(END_BUTTON.toLowerCase())) return "item";
  return "other";
}

/**
 * How the expert spells a product code it clicks: `lower` as WebShop's clickables list it
 * (`b0abc12345`: the copy is of the clickables entry at the product's position on the page),
 * `page` as the results page shows it (`B0ABC12345`: the copy is of the code just before the
 * chosen title). The shop matches clicks without regard to case.
 */
export type ExpertCodeCase = "lower" | "page";

/**
 * The expert: search the instruction verbatim; on the results page click the first
 * unrejected product whose title names the wanted kind at a fitting price, else "Next >";
 * on the item page go back if a wanted option is missing, read Features if the title does
 * not show every wanted attribute, then select the options and buy.
 */
export class WebShopExpert implements Expert {
  private readonly rejected = new Set<string>();
  private readonly verified = new Set<string>();
  private current: { asin: string; title: string } | undefined;
  private lastClick = "";

  constructor(
    private readonly list: ShoppingList,
    private readonly codeCase: ExpertCodeCase = "lower",
  ) {}

  act(history: Message[]): AssistantMessage {
    const page = readLastPage(history);
    if (!page) return call("search_action", { keywords: this.list.instruction });
    const kind = pageKind(page);
    if (kind === "search") return call("search_action", { keywords: this.list.instruction });
    if (kind === "results") return this.onResults(page);
    if (kind === "item") return this.onItem(page);
    if (this.lastClick === "features" && this.current) return this.onFeatures(page, this.current);
    return this.remember(PREV_PAGE.toLowerCase());
  }

  private remember(value: string): AssistantMessage {
    this.lastClick = value;
    return click(value);
  }

  private onResults(page: ReadPage): AssistantMessage {
    for (const product of readResults(page.observation)) {
      if (this.rejected.has(product.asin) || !titleFits(this.list, product.title, product.price))
        continue;
      this.current = { asin: product.asin, title: product.title };
      return this.remember(this.codeCase === "page" ? product.asin : product.asin.toLowerCase());
    }
    if (page.actions.clickables.includes(NEXT_PAGE.toLowerCase()))
      return this.remember(NEXT_PAGE.toLowerCase());
    // Nothing fits anywhere: search again from the start (the turn limit ends it).
    return this.remember(BACK_TO_SEARCH.toLowerCase());
  }

  private onItem(page: ReadPage): AssistantMessage {
    const current = this.current;
    if (
      !current ||
      this.rejected.has(current.asin) ||
      !optionsAvailable(this.list, page.actions.clickables)
    ) {
      if (current) this.rejected.add(current.asin);
      return this.remember(PREV_PAGE.toLowerCase());
    }
    if (!this.verified.has(current.asin) && !attributesShown(this.list, current.title))
      return this.remember("features");
    const clicked = new Set(
      [...page.observation.matchAll(/^You have clicked (.*)\.$/gm)].map((m) => m[1]),
    );
    for (const value of Object.values(this.list.goalOptions)) {
      if (!clicked.has(value)) return this.remember(value);
    }
    return this.remember(END_BUTTON.toLowerCase());
  }

  private onFeatures(page: ReadPage, current: { asin: string; title: string }): AssistantMessage {
    const bullets = page.observation.split(SEPARATOR).slice(2);
    if (attributesShown(this.list, [current.title, ...bullets].join("\n")))
      this.verified.add(current.asin);
    else this.rejected.add(current.asin);
    return this.remember(PREV_PAGE.toLowerCase());
  }
}

/**
 * The wrong expert: searches for a kind of product that shares no noun and no category with
 * the goal's, and buys the first one (type reward 0, so score 0).
 */
export class WrongWebShopExpert implements Expert {
  private readonly query: string;

  constructor(list: ShoppingList) {
    const goalType = PRODUCT_TYPES.find((type) => type.query === list.query);
    const goalNouns = new Set(goalType?.nouns ?? []);
    const other = PRODUCT_TYPES.find(
      (type) =>
        type.category !== goalType?.category && type.nouns.every((noun) => !goalNouns.has(noun)),
    );
    this.query = other?.query ?? "";
  }

  act(history: Message[]): AssistantMessage {
    const page = readLastPage(history);
    const kind = page ? pageKind(page) : "search";
    if (!page || kind === "search") return call("search_action", { keywords: this.query });
    if (kind === "item") return click(END_BUTTON.toLowerCase());
    if (kind === "results") {
      const product = readResults(page.observation).find((p) =>
        ` ${p.title.toLowerCase()} `.includes(` ${this.query} `),
      );
      if (product) return click(product.asin.toLowerCase());
    }
    return click(BACK_TO_SEARCH.toLowerCase());
  }
}
