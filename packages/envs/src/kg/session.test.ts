import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { AssistantMessage, InteractResult } from "../types.js";
import {
  answerStrings,
  execute,
  questionText,
  toSExpression,
  topicEntities,
  type LogicalForm,
} from "./logical-form.js";
import type { KgInstance } from "./instances.js";
import { NO_VALID_CALL_MESSAGE } from "./prompt.js";
import { KgSession } from "./session.js";
import { KnowledgeGraph } from "./world.js";

/**
 * A hand-made world: directors A and B, actors X and Y, films F1 (A; X, Y), F2 (A; X),
 * F3 (B; Y), with runtimes 100, 120, 90.
 */
function tinyWorld() {
  const world = new KnowledgeGraph();
  const a = world.addEntity("Director A", "people.person");
  const b = world.addEntity("Director B", "people.person");
  const x = world.addEntity("Actor X", "people.person");
  const y = world.addEntity("Actor Y", "people.person");
  const f1 = world.addEntity("Film One", "film.film");
  const f2 = world.addEntity("Film Two", "film.film");
  const f3 = world.addEntity("Film Three", "film.film");
  world.addFact(f1, "film.film.directed_by", a);
  world.addFact(f2, "film.film.directed_by", a);
  world.addFact(f3, "film.film.directed_by", b);
  world.addFact(f1, "film.film.starring", x);
  world.addFact(f1, "film.film.starring", y);
  world.addFact(f2, "film.film.starring", x);
  world.addFact(f3, "film.film.starring", y);
  world.setValue(f1, "film.film.runtime", 100);
  world.setValue(f2, "film.film.runtime", 120);
  world.setValue(f3, "film.film.runtime", 90);
  world.setValue(f1, "film.film.initial_release_date", 20000101);
  return { world, a, b, x, y, f1, f2, f3 };
}

/** "what are the films directed by Director A and starring Actor Y?" — gold: Film One. */
function tinyInstance(world: KnowledgeGraph, a: number, y: number): KgInstance {
  const form: LogicalForm = {
    kind: "and",
    left: { kind: "join", relation: "film.director.film", from: { kind: "entity", entity: a } },
    right: { kind: "join", relation: "film.actor.film", from: { kind: "entity", entity: y } },
  };
  const denotation = execute(form, world);
  return {
    index: 2_500_000,
    split: "test",
    difficulty: 2,
    question: questionText(form, world),
    entities: topicEntities(form).map((entity) => ({
      name: world.entities[entity].name,
      id: world.entities[entity].id,
      entity,
    })),
    logicalForm: form,
    program: toSExpression(form, world),
    answer: answerStrings(denotation, world).sort(),
    answerType: denotation.type,
  };
}

let callNumber = 0;
function call(name: string, args: Record<string, unknown> | string): AssistantMessage {
  callNumber += 1;
  const text = typeof args === "string" ? args : JSON.stringify(args);
  return {
    role: "assistant",
    content: null,
    tool_calls: [{ id: `c${callNumber}`, type: "function", function: { name, arguments: text } }],
  };
}
function say(content: string): AssistantMessage {
  return { role: "assistant", content };
}
function observation(result: InteractResult): string {
  assert.equal(result.messages.length, 1);
  return result.messages[0].content as string;
}

function newSession(maxTurns = 40) {
  const tiny = tinyWorld();
  return {
    ...tiny,
    session: new KgSession(tinyInstance(tiny.world, tiny.a, tiny.y), tiny.world, { maxTurns }),
  };
}

describe("kg session", () => {
  test("the opening states the question and its entities as the original does", () => {
    const { session } = newSession();
    const [system, user] = session.start.messages;
    assert.equal(system.role, "system");
    assert.match(system.content as string, /Final Answer: #/);
    assert.equal(
      user.content,
      "what are the films directed by Director A and starring Actor Y?\nEntities: [Director A, Actor Y]",
    );
    assert.deepEqual(
      session.start.tools.map((tool) => tool.function.name),
      [
        "get_relations",
        "get_neighbors",
        "intersection",
        "get_attributes",
        "argmax",
        "argmin",
        "count",
      ],
    );
  });

  test("tools create numbered variables with the original's observations; the right answer scores 1", async () => {
    const { session } = newSession();
    assert.equal(
      observation(await session.interact(call("get_relations", { variable: "Director A" }))),
      "Observation: [film.director.film]",
    );
    assert.equal(
      observation(
        await session.interact(
          call("get_neighbors", { variable: "Director A", relation: "film.director.film" }),
        ),
      ),
      "Observation: variable #0, which are instances of film.film",
    );
    assert.equal(
      observation(
        await session.interact(
          call("get_neighbors", { variable: "Actor Y", relation: "film.actor.film" }),
        ),
      ),
      "Observation: variable #1, which are instances of film.film",
    );
    assert.equal(
      observation(
        await session.interact(call("intersection", { variable1: "#0", variable2: "#1" })),
      ),
      "Observation: variable #2, which are instances of film.film",
    );
    assert.equal(
      observation(await session.interact(call("get_relations", { variable: "#2" }))),
      "Observation: [film.film.directed_by, film.film.starring]",
    );
    assert.equal(
      observation(await session.interact(call("get_attributes", { variable: "#0" }))),
      "Observation: [film.film.initial_release_date, film.film.runtime]",
    );
    assert.equal(
      observation(
        await session.interact(call("argmax", { variable: "#0", attribute: "film.film.runtime" })),
      ),
      "Observation: variable #3, which are instances of film.film",
    );
    assert.equal(
      observation(await session.interact(call("count", { variable: "#0" }))),
      "Observation: variable #4, which is a number",
    );
    assert.deepEqual(
      session.variables[3],
      { kind: "entities", type: "film.film", members: [5] },
      "argmax of runtime over {F1, F2} is F2",
    );
    assert.deepEqual(session.variables[4], { kind: "number", type: "type.int", value: 2 });
    const end = await session.interact(
      say("Thought: #2 holds the films of both.\nFinal Answer: #2"),
    );
    assert.equal(end.finish, true);
    assert.equal(end.status, "completed");
    assert.equal(end.reward, 1);
    assert.equal(end.metrics.f1, 1);
  });

  test("a superset answer scores 0 with F1 2/3 (hand-computed)", async () => {
    const { session } = newSession();
    await session.interact(
      call("get_neighbors", { variable: "Director A", relation: "film.director.film" }),
    );
    const end = await session.interact(say("Final Answer: #0"));
    assert.equal(end.status, "completed");
    assert.equal(end.reward, 0);
    assert.ok(Math.abs(end.metrics.f1 - 2 / 3) < 1e-12);
  });

  test("a count answered is compared as a number", async () => {
    const { session } = newSession();
    await session.interact(
      call("get_neighbors", { variable: "Actor Y", relation: "film.actor.film" }),
    );
    await session.interact(call("count", { variable: "#0" }));
    const end = await session.interact(say("Find Answer: #1"));
    assert.equal(end.status, "completed");
    assert.equal(end.reward, 0);
    assert.equal(end.metrics.f1, 0);
  });

  test("misuse gets an error message, keeps the episode running and does not shift variable numbers", async () => {
    const { session } = newSession();
    await session.interact(
      call("get_neighbors", { variable: "Director A", relation: "film.director.film" }),
    );
    await session.interact(
      call("get_neighbors", { variable: "#0", relation: "film.film.starring" }),
    );
    const misuse: Array<[AssistantMessage, RegExp]> = [
      [call("get_neighbors", "{not json"), /not valid JSON/],
      [call("get_neighbors", { variable: "#0" }), /missing the required argument "relation"/],
      [call("get_relations", { variable: 3 }), /must be of type string/],
      [call("get_relations", { variable: "#0", extra: "x" }), /has no argument "extra"/],
      [call("search", { query: "films" }), /Unknown tool "search"/],
      [
        call("get_relations", { variable: "#9" }),
        /^Error processing tool call: get_relations: variable #9 does not exist/,
      ],
      [
        call("get_relations", { variable: "Nobody" }),
        /^Error processing tool call: get_relations: variable must be a variable or an entity$/,
      ],
      [
        call("get_neighbors", { variable: "#0", relation: "film.director.film" }),
        /relation must be a relation of the variable/,
      ],
      [
        call("intersection", { variable1: "#0", variable2: "#1" }),
        /two variables must have the same type/,
      ],
      [call("intersection", { variable1: "#0", variable2: "Director A" }), /must be a variable/],
      [call("get_attributes", { variable: "Director A" }), /must be a variable/],
      [
        call("argmax", { variable: "#0", attribute: "people.person.height_meters" }),
        /attribute must be an attribute of the variable/,
      ],
      [
        call("argmin", { variable: "#0", attribute: "" }),
        /attribute must be an attribute of the variable/,
      ],
    ];
    for (const [message, expected] of misuse) {
      const result = await session.interact(message);
      assert.equal(
        result.finish,
        false,
        `${message.tool_calls![0].function.name} ended the episode`,
      );
      assert.equal(result.messages[0].role, "tool");
      assert.match(result.messages[0].content as string, expected);
    }
    await session.interact(call("count", { variable: "#0" }));
    assert.match(
      observation(await session.interact(call("count", { variable: "#2" }))),
      /is a number, not a set/,
    );
    assert.equal(session.variables.length, 3, "errors create no variables");
    const text = await session.interact(say("The answer is Film One."));
    assert.equal(observation(text), NO_VALID_CALL_MESSAGE);
    assert.equal(text.finish, false);
  });

  test("a turn with tool calls runs them and ignores a final answer in its text, as the original", async () => {
    const { session } = newSession();
    const message = {
      ...call("get_neighbors", { variable: "Director A", relation: "film.director.film" }),
      content: "Final Answer: #0",
    };
    const result = await session.interact(message);
    assert.equal(result.finish, false);
    assert.equal(observation(result), "Observation: variable #0, which are instances of film.film");
  });

  test("an answer naming a variable that does not exist fails validation", async () => {
    const { session } = newSession();
    const end = await session.interact(say("Final Answer: #0"));
    assert.equal(end.finish, true);
    assert.equal(end.status, "agent validation failed");
    assert.equal(end.reward, 0);
  });

  test("the episode ends at the turn limit", async () => {
    const { session } = newSession(15);
    let result: InteractResult | undefined;
    for (let turn = 1; turn <= 15; turn++) {
      result = await session.interact(call("get_relations", { variable: "Director A" }));
      assert.equal(result.finish, turn === 15);
    }
    assert.equal(result!.status, "task limit reached");
    assert.equal(result!.reward, 0);
  });
});
