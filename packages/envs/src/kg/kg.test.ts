import { describe, test, before } from "node:test";
import assert from "node:assert/strict";
import { playEpisodes } from "../play.js";
import { createTaskFamily as createByName } from "../registry.js";
import { EnvironmentError, type AssistantMessage, type Expert, type Message } from "../types.js";
import { createTaskFamily, KgTaskFamily } from "./index.js";
import { hopCount } from "./logical-form.js";
import { Random } from "../random.js";
import { ATTRIBUTES, RELATIONS } from "./schema.js";

let family: KgTaskFamily;
before(async () => {
  family = (await createTaskFamily({ seed: 0 })) as KgTaskFamily;
});

describe("kg family: the world", () => {
  test("holds thousands of typed entities; every fact has the right types and its reverse", () => {
    const world = family.world;
    assert.ok(world.entities.length >= 5000, `${world.entities.length} entities`);
    assert.ok(world.factCount >= 40_000, `${world.factCount} facts`);
    assert.equal(
      new Set(world.entities.map((entity) => entity.name)).size,
      world.entities.length,
      "names are unique",
    );
    for (let subject = 0; subject < world.entities.length; subject++) {
      for (const relation of world.relationsOf([subject])) {
        const spec = RELATIONS.get(relation)!;
        assert.equal(
          world.entities[subject].type,
          spec.domain,
          `${relation} from a ${world.entities[subject].type}`,
        );
        for (const object of world.objects(subject, relation)) {
          assert.equal(world.entities[object].type, spec.range);
          assert.ok(
            world.objects(object, spec.reverse).includes(subject),
            `${spec.reverse} misses the reverse of ${relation}`,
          );
        }
      }
    }
  });

  test("attributes only sit on their domain types", () => {
    const world = family.world;
    for (const type of world.entityTypes()) {
      const allowed = new Set(
        ATTRIBUTES.filter((attribute) => attribute.domain === type).map(
          (attribute) => attribute.name,
        ),
      );
      for (const attribute of world.attributesOf(world.entitiesOfType(type)))
        assert.ok(allowed.has(attribute), `${attribute} on ${type}`);
    }
  });
});

describe("kg family: instances", () => {
  test("the registry builds it; sizes and difficulties are as configured", async () => {
    const small = await createByName("kg", { trainSize: 7, testSize: 3 });
    assert.equal(small.name, "kg");
    assert.deepEqual(small.difficulties, [0, 1, 2, 3]);
    assert.equal(small.indices("train").length, 28);
    assert.equal(small.indices("test").length, 12);
    assert.deepEqual(small.indicesAt("test", 2), [2_500_000, 2_500_001, 2_500_002]);
    await assert.rejects(small.startSession(2_500_003), EnvironmentError);
    await assert.rejects(small.startSession(9_000_000), EnvironmentError);
    await assert.rejects(createTaskFamily({ trainSize: -1 }), EnvironmentError);
  });

  test("each difficulty has its logical-form shape and a small non-empty gold answer", () => {
    for (const difficulty of family.difficulties) {
      for (const index of family.indicesAt("test", difficulty)) {
        const instance = family.instance(index);
        const form = instance.logicalForm;
        assert.equal(instance.difficulty, difficulty);
        assert.ok(
          instance.answer.length >= 1 && instance.answer.length <= 25,
          `${instance.program}: ${instance.answer.length} answers`,
        );
        if (difficulty === 0)
          assert.ok(form.kind === "join" && hopCount(form) === 1, instance.program);
        if (difficulty === 1)
          assert.ok(form.kind === "join" && hopCount(form) === 2, instance.program);
        if (difficulty === 2)
          assert.ok(form.kind === "and" || form.kind === "count", instance.program);
        if (difficulty === 3)
          assert.ok(
            form.kind === "argmax" || form.kind === "argmin" || hopCount(form) >= 3,
            instance.program,
          );
        assert.ok(instance.entities.length >= 1);
        assert.ok(
          instance.entities.every((entity) => instance.question.includes(entity.name)),
          instance.question,
        );
      }
    }
  });

  test("same seed gives the same instance; another seed another", async () => {
    const again = (await createTaskFamily({ seed: 0 })) as KgTaskFamily;
    const other = (await createTaskFamily({ seed: 1 })) as KgTaskFamily;
    for (const index of [0, 1, 1_000_003, 2_500_007, 3_000_042]) {
      assert.deepEqual(again.instance(index), family.instance(index));
      assert.notEqual(other.instance(index).question, family.instance(index).question);
    }
    const first = await family.startSession(3_500_001);
    const second = await again.startSession(3_500_001);
    assert.deepEqual(first.start, second.start);
  });

  test("train and test never share an index, a logical form or a question", () => {
    const train = family.indices("train");
    const test = family.indices("test");
    const testSet = new Set(test);
    assert.ok(train.every((index) => !testSet.has(index)));
    const testPrograms = new Set(test.map((index) => family.instance(index).program));
    const testQuestions = new Set(test.map((index) => family.instance(index).question));
    for (const index of train) {
      const instance = family.instance(index);
      assert.equal(instance.split, "train");
      assert.ok(!testPrograms.has(instance.program), `train ${index} repeats a test logical form`);
      assert.ok(!testQuestions.has(instance.question), `train ${index} repeats a test question`);
    }
  });
});

describe("kg family: agents", () => {
  for (const difficulty of [0, 1, 2, 3]) {
    test(`difficulty ${difficulty}: the expert solves ≥ 99% of 200 test instances; the wrong expert none`, async () => {
      const indices = family.indicesAt("test", difficulty);
      assert.equal(indices.length, 200);
      const solved = await playEpisodes(family, indices, (index) => family.expert(index));
      const rate =
        solved.filter((episode) => episode.reward === 1 && episode.status === "completed").length /
        indices.length;
      const toolCalls = solved.map((episode) => episode.turns - 1);
      console.log(
        `kg difficulty ${difficulty}: expert ${(rate * 100).toFixed(1)}%, tool calls ${Math.min(...toolCalls)}-${Math.max(...toolCalls)}`,
      );
      assert.ok(rate >= 0.99, `expert solved ${rate}`);
      if (difficulty === 0)
        assert.ok(
          toolCalls.every((calls) => calls === 1),
          "difficulty 0 takes one tool call",
        );
      const wrong = await playEpisodes(family, indices, (index) => family.wrongExpert(index));
      assert.ok(
        wrong.every(
          (episode) =>
            episode.reward === 0 && episode.status === "completed" && episode.metrics.f1 === 0,
        ),
      );
    });
  }

  test("the exploring expert (get_relations / get_attributes first) also solves them within 15 turns", async () => {
    const exploring = (await createTaskFamily({ seed: 0, expertExplores: true })) as KgTaskFamily;
    const indices = exploring.difficulties.flatMap((difficulty) =>
      exploring.indicesAt("test", difficulty).slice(0, 50),
    );
    const episodes = await playEpisodes(exploring, indices, (index) => exploring.expert(index));
    const solved = episodes.filter((episode) => episode.reward === 1).length;
    assert.ok(solved >= 0.99 * indices.length, `${solved}/${indices.length}`);
    assert.ok(episodes.every((episode) => episode.turns <= 15));
    assert.ok(
      episodes.some((episode) =>
        episode.messages.some(
          (message) =>
            message.role === "assistant" &&
            message.tool_calls?.[0]?.function.name === "get_relations",
        ),
      ),
    );
  });

  test("with oneShot, a solved example sits between the instructions and the question, and the expert still solves", async () => {
    const shown = (await createTaskFamily({
      seed: 0,
      oneShot: true,
      testSize: 20,
    })) as KgTaskFamily;
    const session = await shown.startSession(shown.indicesAt("test", 1)[0]);
    const roles = session.start.messages.map((message) => message.role);
    assert.equal(roles[0], "system");
    assert.equal(roles[1], "user");
    assert.equal(roles.at(-1), "user");
    assert.ok(roles.includes("tool"));
    assert.match(session.start.messages.at(-2)!.content as string, /^Final Answer: #\d+$/);
    await session.cancel();
    const indices = shown.difficulties.flatMap((difficulty) => shown.indicesAt("test", difficulty));
    const episodes = await playEpisodes(shown, indices, (index) => shown.expert(index));
    assert.ok(
      episodes.every((episode) => episode.reward === 1),
      "expert solves with the example shown",
    );
  });

  test("a random agent with plausible arguments rarely succeeds", async () => {
    const indices = family.difficulties.flatMap((difficulty) =>
      family.indicesAt("test", difficulty).slice(0, 100),
    );
    const episodes = await playEpisodes(family, indices, (index) => randomAgent(index));
    const rate = episodes.filter((episode) => episode.reward === 1).length / episodes.length;
    const crashed = episodes.filter((episode) => episode.status === "task error").length;
    console.log(
      `kg random agent: ${(rate * 100).toFixed(1)}% of ${episodes.length} episodes solved`,
    );
    assert.equal(crashed, 0);
    assert.ok(episodes.every((episode) => episode.status !== "running"));
    assert.ok(rate < 0.15, `random agent solved ${rate}`);
  });
});

/**
 * Random tool calls with plausible arguments: topic entities or existing variables,
 * relations / attributes from the last listing (or any known one); answers a random
 * variable with probability 0.2 per turn once one exists.
 */
function randomAgent(seed: number): Expert {
  const random = new Random(seed);
  const relations = [...RELATIONS.keys()];
  const attributes = [...new Set(ATTRIBUTES.map((attribute) => attribute.name))];
  let turn = 0;
  return {
    act(history: Message[]): AssistantMessage {
      turn += 1;
      const entities = /\nEntities: \[(.*)\]$/.exec(history[1].content as string)![1].split(", ");
      const observations = history
        .filter((message) => message.role === "tool")
        .map((message) => message.content as string);
      const variableCount = observations.filter((text) => /variable #\d+/.test(text)).length;
      if (variableCount > 0 && random.chance(0.2))
        return {
          role: "assistant",
          content: `Final Answer: #${random.integer(0, variableCount - 1)}`,
        };
      const listed = [...observations].reverse().find((text) => text.startsWith("Observation: ["));
      const fromListing = listed
        ? listed.slice("Observation: [".length, -1).split(", ").filter(Boolean)
        : [];
      const variable = (): string =>
        variableCount > 0 && random.chance(0.6)
          ? `#${random.integer(0, variableCount - 1)}`
          : random.pick(entities);
      const relation = (): string =>
        fromListing.length > 0 && random.chance(0.7)
          ? random.pick(fromListing)
          : random.pick(relations);
      const attribute = (): string =>
        fromListing.length > 0 && random.chance(0.7)
          ? random.pick(fromListing)
          : random.pick(attributes);
      const tool = random.pick([
        "get_relations",
        "get_neighbors",
        "get_neighbors",
        "intersection",
        "get_attributes",
        "argmax",
        "argmin",
        "count",
      ]);
      const args: Record<string, string> =
        tool === "get_neighbors"
          ? { variable: variable(), relation: relation() }
          : tool === "intersection"
            ? { variable1: variable(), variable2: variable() }
            : tool === "argmax" || tool === "argmin"
              ? { variable: variable(), attribute: attribute() }
              : { variable: variable() };
      return {
        role: "assistant",
        content: null,
        tool_calls: [
          {
            id: `r${turn}`,
            type: "function",
            function: { name: tool, arguments: JSON.stringify(args) },
          },
        ],
      };
    },
  };
}
