/**
 * The WebShop task family (AgentBench FC's WebShop, rebuilt on a generated catalogue):
 * tools `search_action(keywords)` and `click_action(value)`, 20 turns, WebShop's own score
 * on "Buy Now". See docs/tasks/webshop.md.
 */
import { z } from "zod";
import type { TaskFamilyOptions } from "../types.js";
import type { CurriculumTaskFamily, Expert, Split, TaskSession } from "../types.js";
import { WebShopExpert, WrongWebShopExpert, type ExpertCodeCase } from "./expert.js";
import {
  DIFFICULTIES,
  TEST_OFFSET,
  decodeIndex,
  encodeIndex,
  makeInstance,
  type WebShopInstance,
} from "./instances.js";
import { getSearchEngine, type SearchEngine } from "./search.js";
import { WebShopSession } from "./session.js";

export { getCatalogue, formatPrice, type Catalogue, type Product } from "./catalogue.js";
export { getSearchEngine, SearchEngine, SEARCH_RETURN_N, PRODUCT_WINDOW } from "./search.js";
export {
  getReward,
  normalizeColor,
  tokenSetRatio,
  type Goal,
  type PurchasedProduct,
  type RewardParts,
} from "./reward.js";
export { Shop, type AvailableActions, type PageState } from "./shop.js";
export { WebShopSession, WEBSHOP_TOOLS, WEBSHOP_SYSTEM_PROMPT } from "./session.js";
export {
  WebShopExpert,
  WrongWebShopExpert,
  readLastPage,
  readResults,
  type ExpertCodeCase,
} from "./expert.js";
export {
  DIFFICULTIES,
  MAX_TURNS,
  InstanceError,
  decodeIndex,
  encodeIndex,
  makeInstance,
  planEpisode,
  levelOf,
  type WebShopInstance,
  type WebShopGoal,
  type Plan,
} from "./instances.js";

const OptionsSchema = z.object({
  seed: z.number().int().default(0),
  trainSize: z.number().int().min(1).max(TEST_OFFSET).default(5000),
  testSize: z.number().int().min(1).max(TEST_OFFSET).default(200),
  productsPerType: z.number().int().min(16).max(5000).optional(),
  expertCodeCase: z.enum(["lower", "page"]).default("lower"),
});

/** Options of the WebShop family (the common `TaskFamilyOptions` plus its own). */
export interface WebShopOptions {
  /** Seed of the catalogue and the instances. Default 0. */
  seed?: number;
  /** Training instances per difficulty. Default 5,000. */
  trainSize?: number;
  /** Test instances per difficulty. Default 200. */
  testSize?: number;
  /** Products per product type (40 types). Default 256, i.e. 10,240 products. */
  productsPerType?: number;
  /** How the expert spells the product codes it clicks (see `ExpertCodeCase`). Default `lower`. */
  expertCodeCase?: ExpertCodeCase;
}

/** How many built instances each family keeps (they are cheap to rebuild). */
const INSTANCE_CACHE_SIZE = 4096;

export class WebShopFamily implements CurriculumTaskFamily {
  readonly name = "webshop";
  readonly difficulties: number[] = [...DIFFICULTIES];
  private readonly options: Required<Omit<WebShopOptions, "productsPerType">> &
    Pick<WebShopOptions, "productsPerType">;
  private readonly instances = new Map<number, WebShopInstance>();
  readonly engine: SearchEngine;

  constructor(options: WebShopOptions = {}) {
    const parsed = OptionsSchema.parse(options);
    this.options = parsed;
    this.engine = getSearchEngine({ seed: parsed.seed, productsPerType: parsed.productsPerType });
  }

  indicesAt(split: Split, difficulty: number): number[] {
    if (!this.difficulties.includes(difficulty)) return [];
    const size = split === "train" ? this.options.trainSize : this.options.testSize;
    return Array.from({ length: size }, (_, k) => encodeIndex(difficulty, split, k));
  }

  indices(split: Split): number[] {
    return this.difficulties.flatMap((difficulty) => this.indicesAt(split, difficulty));
  }

  /** Instance `index` (built on first use, then cached). */
  instance(index: number): WebShopInstance {
    let instance = this.instances.get(index);
    if (!instance) {
      const { split, k } = decodeIndex(index);
      const size = split === "train" ? this.options.trainSize : this.options.testSize;
      if (k >= size)
        throw new RangeError(`webshop index ${index} is beyond the ${split} size ${size}`);
      instance = makeInstance(this.engine, this.options.seed, index);
      if (this.instances.size >= INSTANCE_CACHE_SIZE)
        this.instances.delete(this.instances.keys().next().value as number);
      this.instances.set(index, instance);
    }
    return instance;
  }

  async startSession(index: number): Promise<TaskSession> {
    return new WebShopSession(this.instance(index), this.engine);
  }

  expert(index: number): Expert {
    return new WebShopExpert(this.instance(index).goal, this.options.expertCodeCase);
  }

  wrongExpert(index: number): Expert {
    return new WrongWebShopExpert(this.instance(index).goal);
  }
}

export async function createTaskFamily(
  options: TaskFamilyOptions = {},
): Promise<CurriculumTaskFamily> {
  return new WebShopFamily({
    seed: options.seed,
    trainSize: options.trainSize,
    testSize: options.testSize,
    productsPerType:
      typeof options.productsPerType === "number" ? options.productsPerType : undefined,
    expertCodeCase: options.expertCodeCase as ExpertCodeCase | undefined,
  });
}
