import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { playEpisode, playEpisodes } from "../play.js";
import { createTaskFamily as createByName } from "../registry.js";
import type {
  AssistantMessage,
  Expert,
  InteractResult,
  Message,
  ToolCall,
  ToolSpec,
} from "../types.js";
import { getCatalogue } from "./catalogue.js";
import { readLastPage } from "./expert.js";
import { WebShopFamily, createTaskFamily } from "./index.js";
import { levelOf, splitOfInstruction } from "./instances.js";
import { Random } from "../random.js";
import { getSearchEngine } from "./search.js";

const family = new WebShopFamily({ seed: 0 });
const TEST_COUNT = 200;

function toolCall(name: string, args: string, id = "call_0"): AssistantMessage {
  const call: ToolCall = { id, type: "function", function: { name, arguments: args } };
  return { role: "assistant", content: null, tool_calls: [call] };
}

/** Random tool calls with plausible arguments: clicks on listed clickables, searches of instruction words. */
class RandomShopper implements Expert {
  private readonly random: Random;
  constructor(
    seed: number,
    private readonly instruction: string,
  ) {
    this.random = new Random(seed);
  }
  act(history: Message[]): AssistantMessage {
    const page = readLastPage(history);
    const clickables = page?.actions.clickables.filter((c) => c !== "search") ?? [];
    if (clickables.length === 0 || this.random.chance(0.15)) {
      const words = this.random
        .sample(this.instruction.split(" "), this.random.integer(2, 5))
        .join(" ");
      return toolCall("search_action", JSON.stringify({ keywords: words }));
    }
    return toolCall("click_action", JSON.stringify({ value: this.random.pick(clickables) }));
  }
}

describe("catalogue and search", () => {
  test("≥ 10,000 products, deterministic in the seed, built fast", () => {
    const started = performance.now();
    const fresh = getCatalogue({ seed: 12345 });
    const seconds = (performance.now() - started) / 1000;
    console.log(`catalogue of ${fresh.products.length} products built in ${seconds.toFixed(2)} s`);
    assert.ok(fresh.products.length >= 10_000);
    assert.ok(seconds < 5, `took ${seconds} s`);
    const again = getCatalogue({ seed: 0 });
    assert.equal(again, family.engine.catalogue, "cached per process");
    assert.notDeepEqual(fresh.products.slice(0, 5), again.products.slice(0, 5));
    assert.equal(
      new Set(again.products.map((p) => p.asin)).size,
      again.products.length,
      "asins are unique",
    );
    for (const product of again.products.slice(0, 500)) {
      for (const attribute of product.attributes) {
        assert.ok(
          product.bulletPoints.join(" ").toLowerCase().includes(attribute),
          `${product.asin} lists ${attribute} in its features`,
        );
      }
    }
  });

  test("BM25 search ranks the matching kind first and returns at most 50", () => {
    const engine = getSearchEngine({ seed: 0 });
    const results = engine.search("slim fit high waist women's jeans");
    assert.equal(results.length, 50);
    assert.equal(results[0].query, "women's jeans");
    assert.ok(results[0].title.toLowerCase().includes("slim fit"));
    assert.deepEqual(engine.search("zzzz qqqq"), []);
  });
});

describe("instances", () => {
  test("same seed → same instance; different seed → different", () => {
    const other = new WebShopFamily({ seed: 7 });
    const again = new WebShopFamily({ seed: 0 });
    for (const difficulty of family.difficulties) {
      const index = family.indicesAt("test", difficulty)[3];
      assert.deepEqual(again.instance(index), family.instance(index));
      assert.notEqual(
        other.instance(index).goal.instruction,
        family.instance(index).goal.instruction,
      );
    }
  });

  test("train and test indices and instructions never coincide", () => {
    const train = family.indices("train");
    const test = new Set(family.indices("test"));
    assert.ok(train.every((index) => !test.has(index)));
    for (const difficulty of family.difficulties) {
      const testInstructions = new Set(
        family
          .indicesAt("test", difficulty)
          .slice(0, TEST_COUNT)
          .map((i) => family.instance(i).goal.instruction),
      );
      for (const text of testInstructions) assert.equal(splitOfInstruction(text), "test");
      for (const index of family.indicesAt("train", difficulty).slice(0, 200)) {
        const instruction = family.instance(index).goal.instruction;
        assert.equal(splitOfInstruction(instruction), "train");
        assert.ok(!testInstructions.has(instruction), instruction);
      }
    }
  });

  test("every instance has the level of its index; sizes follow the options", async () => {
    const small = await createTaskFamily({ seed: 0, trainSize: 3, testSize: 2 });
    assert.equal(small.indices("train").length, 3 * small.difficulties.length);
    assert.equal(small.indicesAt("test", 2).length, 2);
    for (const difficulty of family.difficulties) {
      for (const index of family.indicesAt("test", difficulty).slice(0, 50)) {
        const instance = family.instance(index);
        assert.equal(levelOf(instance.goal, instance.plan), difficulty);
        assert.ok(instance.plan.turns <= 20);
      }
    }
    assert.throws(() => family.instance(9_000_000), /difficulty/);
  });
});

describe("playing", () => {
  for (const difficulty of [0, 1, 2, 3]) {
    test(`the expert solves ≥ 99 % of ${TEST_COUNT} test instances at difficulty ${difficulty}`, async () => {
      const indices = family.indicesAt("test", difficulty).slice(0, TEST_COUNT);
      const records = await playEpisodes(family, indices, (index) => family.expert(index));
      const solved = records.filter(
        (r) => r.reward === 1 && r.status === "completed" && r.metrics.success === 1,
      ).length;
      const meanTurns = records.reduce((sum, r) => sum + r.turns, 0) / records.length;
      console.log(
        `difficulty ${difficulty}: expert solved ${solved}/${records.length}, mean ${meanTurns.toFixed(1)} calls`,
      );
      assert.ok(solved >= 0.99 * records.length);
      if (difficulty === 0)
        assert.ok(
          records.every((r) => r.turns === 3),
          "difficulty 0 takes search, click, Buy Now",
        );
    });
  }

  test("expertCodeCase 'page' clicks the codes as the results page spells them (the default: as the clickables do), and still solves", async () => {
    const codesClicked = async (shop: WebShopFamily, indices: number[]) => {
      const clicked: string[] = [];
      const records = await playEpisodes(shop, indices, (index) => {
        const expert = shop.expert(index);
        return {
          act: async (history: Message[], tools: ToolSpec[]) => {
            const message = await expert.act(history, tools);
            clicked.push(
              (JSON.parse(message.tool_calls![0].function.arguments) as { value?: string }).value ??
                "",
            );
            return message;
          },
        };
      });
      assert.ok(
        records.filter((r) => r.reward === 1).length >= 0.99 * records.length,
        "the expert still solves",
      );
      return clicked.filter((value) => /^b0[0-9a-z]{8}$/i.test(value));
    };
    const indices = [0, 2].flatMap((d) => family.indicesAt("test", d).slice(0, 40));
    const paged = await codesClicked(
      new WebShopFamily({ seed: 0, expertCodeCase: "page" }),
      indices,
    );
    const lower = await codesClicked(family, indices);
    assert.ok(
      paged.length >= indices.length && lower.length === paged.length,
      "every episode clicks a product, the same ones",
    );
    assert.ok(
      paged.every((code) => /^B0[0-9A-Z]{8}$/.test(code)),
      `page case: ${paged.slice(0, 3).join(", ")}`,
    );
    assert.deepEqual(
      lower,
      paged.map((code) => code.toLowerCase()),
    );
    assert.throws(
      () => new WebShopFamily({ seed: 0, expertCodeCase: "upper" as "page" }),
      /expertCodeCase/,
    );
  });

  test("the wrong expert scores 0 and a random agent solves few", async () => {
    const indices = family.difficulties.flatMap((d) => family.indicesAt("test", d).slice(0, 25));
    const wrong = await playEpisodes(family, indices, (index) => family.wrongExpert(index));
    assert.ok(
      wrong.every((r) => r.reward === 0 && r.status === "completed"),
      "wrong purchases score 0",
    );
    const random = await playEpisodes(
      family,
      indices,
      (index) => new RandomShopper(index, family.instance(index).goal.instruction),
    );
    const rate = random.filter((r) => r.reward === 1).length / random.length;
    const meanScore = random.reduce((sum, r) => sum + r.reward, 0) / random.length;
    console.log(
      `random agent: success ${(100 * rate).toFixed(1)} %, mean score ${meanScore.toFixed(3)} over ${random.length} episodes`,
    );
    assert.ok(rate < 0.2);
  });

  test("the page states: paging, item page, sub-pages, back to search, invalid clicks", async () => {
    const session = await family.startSession(family.indicesAt("test", 3)[0]);
    assert.match(
      session.start.messages[1].content as string,
      /^The initial observation:\nWebShop \[SEP\] Instruction: \[SEP\] /,
    );
    const send = async (name: string, args: object) =>
      (await session.interact(toolCall(name, JSON.stringify(args)))).messages[0].content as string;
    const page1 = await send("search_action", { keywords: "usda organic trail mix" });
    assert.match(page1, /Page 1 \(Total results: 50\) \[SEP\] Next >/);
    const page2 = await send("click_action", { value: "Next >" });
    assert.match(page2, /Page 2 \(Total results: 50\) \[SEP\] < Prev \[SEP\] Next >/);
    const back = await send("click_action", { value: "< prev" });
    assert.match(back, /Page 1 /);
    const asin = /\[SEP\] (B0[0-9A-Z]{8}) \[SEP\]/.exec(back)![1];
    const item = await send("click_action", { value: asin.toLowerCase() });
    assert.match(
      item,
      /Price: \$\d+\.\d\d \[SEP\] Description \[SEP\] Features \[SEP\] Reviews \[SEP\] Buy Now/,
    );
    for (const sub of ["description", "features", "reviews"]) {
      assert.match(
        await send("click_action", { value: sub }),
        /^Action: click\[.*\]\n\nObservation:\nBack to Search \[SEP\] < Prev \[SEP\] /,
      );
      assert.match(await send("click_action", { value: "< prev" }), /Buy Now/);
    }
    assert.match(
      await send("click_action", { value: "not a button" }),
      /The action is not valid; nothing happened\.\nBack to Search/,
    );
    assert.match(await send("click_action", { value: "back to search" }), /"has_search_bar":true/);
  });

  test("malformed tool calls get an error message and do not end the episode", async () => {
    const index = family.indicesAt("test", 1)[0];
    const session = await family.startSession(index);
    const bad: AssistantMessage[] = [
      toolCall("search_action", "{not json"),
      toolCall("search_action", "{}"),
      toolCall("click_action", JSON.stringify({ value: 3 })),
      toolCall("buy_it", "{}"),
      toolCall("search_action", JSON.stringify({ keywords: "x", extra: 1 })),
      { role: "assistant", content: "I think I should search." },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "x", type: "function", function: { name: "click_action" } } as unknown as ToolCall,
        ],
      },
    ];
    for (const message of bad) {
      const result = await session.interact(message);
      assert.equal(result.finish, false);
      assert.ok((result.messages[0].content as string).length > 0);
    }
    const empty = await session.interact(
      toolCall("search_action", JSON.stringify({ keywords: "   " })),
    );
    assert.match(empty.messages[0].content as string, /not valid/);
    // The episode goes on: the expert still solves it from here.
    const record = await playEpisode(
      { name: "w", indices: () => [], startSession: async () => session },
      index,
      family.expert(index),
    );
    assert.equal(record.reward, 1);
  });

  test("the 20-turn limit ends an episode with reward 0", async () => {
    const session = await family.startSession(family.indicesAt("test", 0)[1]);
    let result: InteractResult | undefined;
    for (let turn = 0; turn < 20; turn++)
      result = await session.interact(
        toolCall("click_action", JSON.stringify({ value: "nothing" })),
      );
    assert.equal(result!.finish, true);
    assert.equal(result!.status, "task limit reached");
    assert.equal(result!.reward, 0);
  });

  test("the registry creates the family by name", async () => {
    const byName = await createByName("webshop", { seed: 0, testSize: 5 });
    assert.equal(byName.name, "webshop");
    assert.equal(byName.indices("test").length, 5 * byName.difficulties.length);
  });
});
