/**
 * Procedural households and tasks, generated lazily from (seed, index).
 *
 * Index layout: `index = difficulty × 1,000,000 + (test ? 500,000 : 0) + k`, with
 * `0 ≤ k < 500,000`. The split is also a property of the instance itself: an instance
 * belongs to the test split when the lowest bit of the FNV-1a hash of its canonical form
 * (room, receptacles, objects, start, goal, task text) is 1, to train when it is 0. The
 * generator re-draws (attempt 1, 2, ...) until the bit matches the index's split, so a train
 * and a test instance can never be the same household with the same task.
 *
 * Difficulty:
 * - 0: one action wins: you stand at the target receptacle (open) holding the object
 *   (pick and place: `put`), or at the desk lamp holding the object (look at in light: `use`).
 * - 1: pick and place from the middle of a small room.
 * - 2: clean / heat / cool then place, or look at in light, in a small room.
 * - 3: pick two, in a large room with more receptacles and more objects.
 */
import { EnvironmentError, type Split } from "../types.js";
import {
  isOpenable,
  ROOM_OBJECTS,
  ROOM_RECEPTACLES,
  type ObjectKind,
  type RoomKind,
} from "./catalog.js";
import { hashString, mixSeeds, Random } from "../random.js";
import {
  decodeInstanceIndex,
  encodeInstanceIndex,
  type InstanceIndexParts,
} from "../instance-index.js";
import {
  World,
  type Goal,
  type ObjectState,
  type ReceptacleState,
  type TaskType,
  type WorldState,
} from "./world.js";

export const DIFFICULTIES = [0, 1, 2, 3] as const;
export { DIFFICULTY_STRIDE, TEST_OFFSET } from "../instance-index.js";
const MAX_ATTEMPTS = 256;

/** Task types drawn at each difficulty. */
export const TASKS_AT_DIFFICULTY: Record<number, TaskType[]> = {
  0: ["pick_and_place", "look_at_obj_in_light"],
  1: ["pick_and_place"],
  2: [
    "pick_clean_then_place",
    "pick_heat_then_place",
    "pick_cool_then_place",
    "look_at_obj_in_light",
  ],
  3: ["pick_two_obj"],
};

const ROOMS_FOR_TASK: Record<TaskType, RoomKind[]> = {
  pick_and_place: ["kitchen", "bathroom", "bedroom", "livingroom"],
  look_at_obj_in_light: ["bedroom", "livingroom"],
  pick_clean_then_place: ["kitchen", "bathroom"],
  pick_heat_then_place: ["kitchen"],
  pick_cool_then_place: ["kitchen"],
  pick_two_obj: ["kitchen", "bathroom", "bedroom", "livingroom"],
};

/** One generated task: the household at the start, the goal and what the agent is told. */
export interface Instance {
  index: number;
  seed: number;
  split: Split;
  difficulty: number;
  goal: Goal;
  /** E.g. "put a clean apple in fridge." */
  taskText: string;
  world: WorldState;
  /** The objects the generator placed for the goal, in the order a plan uses them. */
  targets: string[];
  /** For look-at-in-light: the lamp's name. */
  lamp?: string;
  /** Which draw produced it (see the split rule above). */
  attempt: number;
}

/** An index's difficulty, split and position inside the (difficulty, split) block. */
export type DecodedIndex = InstanceIndexParts;

/** Index of the `position`-th instance of `split` at `difficulty` (the layout of ../instance-index.ts). */
export function encodeIndex(split: Split, difficulty: number, position: number): number {
  return encodeInstanceIndex(difficulty, split, position);
}

/** Splits an index into its parts; throws EnvironmentError for an index outside the layout. */
export function decodeIndex(index: number): DecodedIndex {
  if (!Number.isSafeInteger(index) || index < 0)
    throw new EnvironmentError(`alfworld: index ${index} is not a non-negative integer`);
  const decoded = decodeInstanceIndex(index);
  if (!(DIFFICULTIES as readonly number[]).includes(decoded.difficulty)) {
    throw new EnvironmentError(
      `alfworld: index ${index} encodes difficulty ${decoded.difficulty}; known: ${DIFFICULTIES.join(", ")}`,
    );
  }
  return decoded;
}

/** Canonical text of everything the agent could ever observe or be asked (no index, no seed). */
export function canonicalForm(instance: Pick<Instance, "goal" | "taskText" | "world">): string {
  const world = instance.world;
  return JSON.stringify({
    goal: instance.goal,
    task: instance.taskText,
    room: world.room,
    at: world.agentAt,
    receptacles: world.receptacles.map((r) => [r.name, r.opened]),
    objects: world.objects
      .map((o) => [o.name, o.location, o.isClean, o.isHot, o.isCool, o.isSliced, o.isOn])
      .sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
  });
}

export function fingerprint(instance: Pick<Instance, "goal" | "taskText" | "world">): number {
  return hashString(canonicalForm(instance));
}

export function splitOfInstance(instance: Pick<Instance, "goal" | "taskText" | "world">): Split {
  return (fingerprint(instance) & 1) === 1 ? "test" : "train";
}

/** The instance at `index` for `seed` (pure: same inputs, same instance). */
export function generateInstance(seed: number, index: number): Instance {
  const { difficulty, split } = decodeIndex(index);
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const random = new Random(mixSeeds(seed, index, attempt));
    const draft = draftInstance(random, difficulty);
    if (!draft) continue;
    if (splitOfInstance(draft) !== split) continue;
    return { ...draft, index, seed, split, difficulty, attempt };
  }
  throw new EnvironmentError(
    `alfworld: could not generate instance ${index} (seed ${seed}) in ${MAX_ATTEMPTS} attempts`,
  );
}

type Draft = Pick<Instance, "goal" | "taskText" | "world" | "targets" | "lamp">;

/** Receptacles of a room; small rooms below difficulty 3, large ones at 3. */
function makeReceptacles(random: Random, room: RoomKind, large: boolean): ReceptacleState[] {
  const receptacles: ReceptacleState[] = [];
  for (const { type, count } of ROOM_RECEPTACLES[room]) {
    const [low, high] = count;
    const middle = Math.floor((low + high) / 2);
    const n = large
      ? random.integer(Math.ceil((low + high) / 2), high)
      : random.integer(low, middle);
    for (let i = 1; i <= n; i++) {
      receptacles.push({ name: `${type} ${i}`, type, openable: isOpenable(type), opened: false });
    }
  }
  return receptacles;
}

function fitsTask(kind: ObjectKind, task: TaskType): boolean {
  if (kind.toggleable) return false;
  if (task === "pick_clean_then_place") return kind.cleanable === true;
  if (task === "pick_heat_then_place") return kind.heatable === true;
  if (task === "pick_cool_then_place") return kind.coolable === true;
  return true;
}

/** Receptacle types a goal may not name for this task (the appliance it needs). */
function excludedTargets(task: TaskType): string[] {
  if (task === "pick_clean_then_place") return ["sinkbasin"];
  if (task === "pick_heat_then_place") return ["microwave"];
  if (task === "pick_cool_then_place") return ["fridge"];
  return [];
}

function taskSentence(random: Random, task: TaskType, object: string, receptacle: string): string {
  const choices: Record<TaskType, string[]> = {
    pick_and_place: [`put a ${object} in ${receptacle}.`, `put some ${object} on ${receptacle}.`],
    look_at_obj_in_light: [
      `look at ${object} under the desklamp.`,
      `examine the ${object} with the desklamp.`,
    ],
    pick_clean_then_place: [
      `put a clean ${object} in ${receptacle}.`,
      `clean some ${object} and put it in ${receptacle}.`,
    ],
    pick_heat_then_place: [
      `put a hot ${object} in ${receptacle}.`,
      `heat some ${object} and put it in ${receptacle}.`,
    ],
    pick_cool_then_place: [
      `put a cool ${object} in ${receptacle}.`,
      `cool some ${object} and put it in ${receptacle}.`,
    ],
    pick_two_obj: [
      `put two ${object} in ${receptacle}.`,
      `find two ${object} and put them in ${receptacle}.`,
    ],
  };
  return random.pick(choices[task]);
}

function newObject(name: string, type: string, location: string | null): ObjectState {
  return {
    name,
    type,
    location,
    isClean: false,
    isHot: false,
    isCool: false,
    isSliced: false,
    isOn: false,
  };
}

/** One draw; undefined when the drawn room cannot host the drawn task. */
function draftInstance(random: Random, difficulty: number): Draft | undefined {
  const task = random.pick(TASKS_AT_DIFFICULTY[difficulty]);
  const room = random.pick(ROOMS_FOR_TASK[task]);
  const large = difficulty >= 3;
  const receptacles = makeReceptacles(random, room, large);
  const present = new Set(receptacles.map((r) => r.type));
  const kinds = ROOM_OBJECTS[room];

  // The goal: an object type and a receptacle type it can be put into, with somewhere
  // else to start from.
  const candidates = kinds
    .filter((kind) => fitsTask(kind, task))
    .flatMap((kind) => {
      const spots = kind.places.filter((p) => present.has(p));
      const targets =
        task === "look_at_obj_in_light"
          ? [""]
          : spots.filter((p) => !excludedTargets(task).includes(p));
      return targets
        .map((target) => ({ kind, target, sources: spots.filter((p) => p !== target) }))
        .filter((c) => c.sources.length > 0);
    });
  if (candidates.length === 0) return undefined;
  const { kind, target, sources } = random.pick(candidates);
  const goal: Goal =
    task === "look_at_obj_in_light"
      ? { type: task, object: kind.type }
      : { type: task, object: kind.type, receptacle: target };
  const sourceReceptacles = receptacles.filter((r) => sources.includes(r.type));

  const objects: ObjectState[] = [];
  const numbers = new Map<string, number>();
  const nextName = (type: string): string => {
    const n = (numbers.get(type) ?? 0) + 1;
    numbers.set(type, n);
    return `${type} ${n}`;
  };
  const targetCount = task === "pick_two_obj" ? random.integer(2, 3) : 1;
  const targets: string[] = [];
  for (let i = 0; i < targetCount; i++) {
    const object = newObject(nextName(kind.type), kind.type, random.pick(sourceReceptacles).name);
    objects.push(object);
    targets.push(object.name);
  }

  // A desk lamp in every bedroom and living room.
  let lamp: string | undefined;
  const lampKind = kinds.find((k) => k.toggleable);
  if (lampKind) {
    const stands = receptacles.filter((r) => lampKind.places.includes(r.type));
    if (stands.length === 0) {
      if (task === "look_at_obj_in_light") return undefined;
    } else {
      lamp = nextName(lampKind.type);
      objects.push(newObject(lamp, lampKind.type, random.pick(stands).name));
    }
  }

  // Distractors: other object types (never the goal's), about one per receptacle.
  const others = kinds.filter((k) => k.type !== kind.type && !k.toggleable);
  const distractorCount = Math.round(
    (receptacles.length * (large ? random.integer(8, 14) : random.integer(5, 10))) / 10,
  );
  for (let i = 0; i < distractorCount; i++) {
    const other = random.pick(others);
    const spots = receptacles.filter((r) => other.places.includes(r.type));
    if (spots.length === 0) continue;
    objects.push(newObject(nextName(other.type), other.type, random.pick(spots).name));
  }

  const world: WorldState = { room, receptacles, objects, agentAt: null };
  if (difficulty === 0) {
    // One action wins: stand at the goal's receptacle (or the lamp) holding the object.
    const held = objects[0];
    held.location = null;
    if (task === "look_at_obj_in_light") {
      const lampObject = objects.find((o) => o.name === lamp);
      if (!lampObject) return undefined;
      world.agentAt = lampObject.location;
    } else {
      const stand = random.pick(receptacles.filter((r) => r.type === target));
      stand.opened = true;
      world.agentAt = stand.name;
    }
  }
  const taskText = taskSentence(random, task, kind.type, target);
  if (new World(world).goalReached(goal)) return undefined;
  return { goal, taskText, world, targets, lamp };
}
