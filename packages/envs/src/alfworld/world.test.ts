import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { listThings, NOTHING_HAPPENS, World, type ObjectState, type WorldState } from "./world.js";

function object(name: string, location: string | null): ObjectState {
  return {
    name,
    type: name.split(" ")[0],
    location,
    isClean: false,
    isHot: false,
    isCool: false,
    isSliced: false,
    isOn: false,
  };
}

/** A small hand-made kitchen. */
function kitchen(): WorldState {
  return {
    room: "kitchen",
    receptacles: [
      { name: "cabinet 1", type: "cabinet", openable: true, opened: false },
      { name: "countertop 1", type: "countertop", openable: false, opened: false },
      { name: "fridge 1", type: "fridge", openable: true, opened: false },
      { name: "microwave 1", type: "microwave", openable: true, opened: false },
      { name: "sinkbasin 1", type: "sinkbasin", openable: false, opened: false },
    ],
    objects: [
      object("apple 1", "countertop 1"),
      object("knife 1", "countertop 1"),
      object("mug 1", "cabinet 1"),
      object("tomato 1", "countertop 1"),
    ],
    agentAt: null,
  };
}

describe("TextWorld lists", () => {
  test("by type, numbers high to low, Oxford 'and'", () => {
    assert.equal(listThings([]), "nothing");
    assert.equal(listThings(["apple 1"]), "a apple 1");
    assert.equal(
      listThings(["cabinet 1", "apple 2", "cabinet 10", "cabinet 2"]),
      "a apple 2, a cabinet 10, a cabinet 2, and a cabinet 1",
    );
  });
});

describe("World rules (alfred.pddl)", () => {
  test("the room, arriving, opening, taking and putting", () => {
    const world = new World(kitchen());
    assert.equal(
      world.describeRoom(),
      "You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a countertop 1, a fridge 1, a microwave 1, and a sinkbasin 1.",
    );
    assert.equal(world.step("go to cabinet 1"), "The cabinet 1 is closed.");
    assert.equal(
      world.step("take mug 1 from cabinet 1"),
      NOTHING_HAPPENS,
      "closed receptacles hide their contents",
    );
    assert.equal(
      world.step("open cabinet 1"),
      "You open the cabinet 1. The cabinet 1 is open. In it, you see a mug 1.",
    );
    assert.equal(
      world.step("take mug 1 from cabinet 1"),
      "You pick up the mug 1 from the cabinet 1.",
    );
    assert.equal(world.step("inventory"), "You are carrying: a mug 1.");
    assert.equal(
      world.step("go to countertop 1"),
      "On the countertop 1, you see a apple 1, a knife 1, and a tomato 1.",
    );
    assert.equal(world.step("take apple 1 from countertop 1"), NOTHING_HAPPENS, "hands are full");
    assert.equal(
      world.step("put mug 1 in/on countertop 1"),
      "You put the mug 1 in/on the countertop 1.",
    );
    assert.equal(
      world.step("look"),
      "You are facing the countertop 1. Next to it, you see nothing.",
    );
    assert.equal(world.step("fly away"), NOTHING_HAPPENS);
  });

  test("admissible commands follow the state and are sorted", () => {
    const world = new World(kitchen());
    world.step("go to countertop 1");
    const commands = world.admissibleCommands();
    assert.deepEqual(commands, [...commands].sort());
    assert.ok(commands.includes("take apple 1 from countertop 1"));
    assert.ok(!commands.includes("go to countertop 1"), "no go to where you stand");
    assert.ok(!commands.some((c) => c.startsWith("put ")), "nothing to put with empty hands");
  });

  test("heat, cool and clean need the appliance and flip the state; examine reports it", () => {
    const world = new World(kitchen());
    world.step("go to countertop 1");
    world.step("take apple 1 from countertop 1");
    assert.equal(
      world.step("heat apple 1 with microwave 1"),
      NOTHING_HAPPENS,
      "not at the microwave",
    );
    world.step("go to microwave 1");
    assert.equal(
      world.step("heat apple 1 with microwave 1"),
      "You heat the apple 1 using the microwave 1.",
    );
    assert.equal(world.step("examine apple 1"), "This is a hot apple 1.");
    world.step("go to fridge 1");
    world.step("cool apple 1 with fridge 1");
    assert.equal(world.step("examine apple 1"), "This is a cold apple 1.");
    world.step("go to sinkbasin 1");
    world.step("clean apple 1 with sinkbasin 1");
    assert.equal(world.step("examine apple 1"), "This is a cool and clean apple 1.");
  });

  test("a held knife slices what lies here", () => {
    const world = new World(kitchen());
    world.step("go to countertop 1");
    world.step("take knife 1 from countertop 1");
    assert.equal(
      world.step("slice tomato 1 with knife 1"),
      "You sliced the tomato 1 with the knife 1.",
    );
    assert.equal(world.state.objects.find((o) => o.name === "tomato 1")?.isSliced, true);
  });

  test("goals: place, clean, two, look in light", () => {
    const state = kitchen();
    state.objects.push(object("apple 2", "cabinet 1"));
    const world = new World(state);
    const putApple = { type: "pick_and_place", object: "apple", receptacle: "fridge" } as const;
    const cleanApple = {
      type: "pick_clean_then_place",
      object: "apple",
      receptacle: "fridge",
    } as const;
    const twoApples = { type: "pick_two_obj", object: "apple", receptacle: "fridge" } as const;
    world.step("go to countertop 1");
    world.step("take apple 1 from countertop 1");
    world.step("go to fridge 1");
    world.step("open fridge 1");
    assert.equal(world.goalReached(putApple), false);
    world.step("put apple 1 in/on fridge 1");
    assert.equal(world.goalReached(putApple), true);
    assert.equal(world.goalReached(cleanApple), false, "not clean");
    assert.equal(world.goalReached(twoApples), false, "only one");
    world.step("go to cabinet 1");
    world.step("open cabinet 1");
    world.step("take apple 2 from cabinet 1");
    world.step("go to fridge 1");
    world.step("put apple 2 in/on fridge 1");
    assert.equal(world.goalReached(twoApples), true);

    const bedroom = new World({
      room: "bedroom",
      receptacles: [
        { name: "desk 1", type: "desk", openable: false, opened: false },
        { name: "bed 1", type: "bed", openable: false, opened: false },
      ],
      objects: [object("book 1", "bed 1"), object("desklamp 1", "desk 1")],
      agentAt: null,
    });
    const look = { type: "look_at_obj_in_light", object: "book" } as const;
    bedroom.step("go to desk 1");
    assert.equal(bedroom.step("use desklamp 1"), "You turn on the desklamp 1.");
    assert.equal(bedroom.goalReached(look), false, "lamp on but no book in hand");
    bedroom.step("go to bed 1");
    bedroom.step("take book 1 from bed 1");
    assert.equal(bedroom.goalReached(look), false, "book in hand, lamp elsewhere");
    bedroom.step("go to desk 1");
    assert.equal(bedroom.goalReached(look), true);
    assert.equal(bedroom.step("use desklamp 1"), "You turn off the desklamp 1.");
    assert.equal(bedroom.goalReached(look), false);
  });
});
