/**
 * The household's state and rules: a TypeScript rendering of the ALFRED PDDL domain
 * (`alfred.pddl`) with the TextWorld observation grammar of `alfred.twl2`.
 *
 * - The agent stands in the middle of the room (`agentAt = null`) or at one receptacle.
 * - `go to r` moves to r; `open r` / `close r` (openable receptacles only, when there);
 *   `take o from r` (empty hands, r open if openable); `put o in/on r` (r open if openable,
 *   r's type can contain o's type); `clean o with sinkbasin`, `heat o with microwave`,
 *   `cool o with fridge` (holding o, standing at the appliance; no need to open it, as in
 *   the PDDL); `slice o with knife` (holding a knife, o visible); `use desklamp` (toggle,
 *   the lamp in the receptacle you stand at); `examine`, `inventory`, `look`.
 * - Anything not admissible in the current state answers "Nothing happens.".
 */
import { objectKind, type RoomKind } from "./catalog.js";

export const TASK_TYPES = [
  "pick_and_place",
  "look_at_obj_in_light",
  "pick_clean_then_place",
  "pick_heat_then_place",
  "pick_cool_then_place",
  "pick_two_obj",
] as const;
export type TaskType = (typeof TASK_TYPES)[number];

export interface ReceptacleState {
  /** E.g. "cabinet 3". */
  name: string;
  type: string;
  openable: boolean;
  opened: boolean;
}

export interface ObjectState {
  /** E.g. "apple 1". */
  name: string;
  type: string;
  /** The receptacle it lies in, or null while the agent holds it. */
  location: string | null;
  isClean: boolean;
  isHot: boolean;
  isCool: boolean;
  isSliced: boolean;
  /** Lamps only. */
  isOn: boolean;
}

export interface WorldState {
  room: RoomKind;
  receptacles: ReceptacleState[];
  objects: ObjectState[];
  /** The receptacle the agent stands at; null in the middle of the room. */
  agentAt: string | null;
}

/** What must hold at the end. */
export interface Goal {
  type: TaskType;
  /** Object type, e.g. "apple". */
  object: string;
  /** Receptacle type to put it in (all but `look_at_obj_in_light`). */
  receptacle?: string;
}

export const NOTHING_HAPPENS = "Nothing happens.";

/** Numbered names ("cabinet 10") split into type and number. */
function nameParts(name: string): { type: string; number: number } {
  const space = name.lastIndexOf(" ");
  return { type: name.slice(0, space), number: Number(name.slice(space + 1)) };
}

/** TextWorld's order in lists: by type A–Z, then number from high to low. */
export function displayOrder(a: string, b: string): number {
  const left = nameParts(a);
  const right = nameParts(b);
  if (left.type !== right.type) return left.type < right.type ? -1 : 1;
  return right.number - left.number;
}

/** TextWorld's list: "a x 1", "a x 1, and a y 2", "a x 1, a y 2, and a z 3"; empty "nothing". */
export function listThings(names: string[]): string {
  const items = [...names].sort(displayOrder).map((name) => `a ${name}`);
  if (items.length === 0) return "nothing";
  if (items.length === 1) return items[0];
  return `${items.slice(0, -1).join(", ")}, and ${items[items.length - 1]}`;
}

export function cloneWorld(state: WorldState): WorldState {
  return {
    room: state.room,
    receptacles: state.receptacles.map((r) => ({ ...r })),
    objects: state.objects.map((o) => ({ ...o })),
    agentAt: state.agentAt,
  };
}

/** A live household: the admissible commands of the moment and their effects. */
export class World {
  readonly state: WorldState;

  constructor(initial: WorldState) {
    this.state = cloneWorld(initial);
  }

  receptacle(name: string): ReceptacleState | undefined {
    return this.state.receptacles.find((r) => r.name === name);
  }

  held(): ObjectState | undefined {
    return this.state.objects.find((o) => o.location === null);
  }

  contents(receptacleName: string): ObjectState[] {
    return this.state.objects.filter((o) => o.location === receptacleName);
  }

  private accessible(receptacle: ReceptacleState): boolean {
    return !receptacle.openable || receptacle.opened;
  }

  /** "You are in the middle of a room. Looking quickly around you, you see a cabinet 1, ...". */
  describeRoom(): string {
    return `You are in the middle of a room. Looking quickly around you, you see ${listThings(this.state.receptacles.map((r) => r.name))}.`;
  }

  /** The `examineReceptacle` feedback: open / closed / "On the r, you see ...". */
  describeReceptacle(receptacle: ReceptacleState): string {
    const inside = listThings(this.contents(receptacle.name).map((o) => o.name));
    if (receptacle.openable && receptacle.opened)
      return `The ${receptacle.name} is open. In it, you see ${inside}.`;
    if (receptacle.openable) return `The ${receptacle.name} is closed.`;
    return `On the ${receptacle.name}, you see ${inside}.`;
  }

  /** The `examineObject` feedback of the grammar. */
  describeObject(object: ObjectState): string {
    const kind = objectKind(this.state.room, object.type);
    const name = object.name;
    const sliced = object.isSliced ? " sliced" : "";
    if (object.isClean && object.isHot) return `This is a hot and clean${sliced} ${name}.`;
    if (object.isClean && object.isCool) return `This is a cool and clean${sliced} ${name}.`;
    if (object.isClean) return `This is a clean${sliced} ${name}.`;
    if (object.isHot) return `This is a hot${sliced} ${name}.`;
    if (object.isCool)
      return object.isSliced ? `This is a cool sliced ${name}.` : `This is a cold ${name}.`;
    if (kind.toggleable) return `This ${name} is ${object.isOn ? "on" : "off"}.`;
    if (object.isSliced) return `This is a sliced ${name}.`;
    return `There's nothing special about ${name}.`;
  }

  /** The `look` feedback. */
  look(): string {
    if (this.state.agentAt === null) return this.describeRoom();
    return `You are facing the ${this.state.agentAt}. Next to it, you see nothing.`;
  }

  /** Every admissible command with its effect (which returns the observation). */
  actions(): Map<string, () => string> {
    const actions = new Map<string, () => string>();
    const held = this.held();
    const here = this.state.agentAt === null ? undefined : this.receptacle(this.state.agentAt);
    for (const receptacle of this.state.receptacles) {
      if (receptacle === here) continue;
      actions.set(`go to ${receptacle.name}`, () => {
        this.state.agentAt = receptacle.name;
        return this.describeReceptacle(receptacle);
      });
    }
    actions.set("inventory", () =>
      held ? `You are carrying: a ${held.name}.` : "You are not carrying anything.",
    );
    actions.set("look", () => this.look());
    if (held) actions.set(`examine ${held.name}`, () => this.describeObject(held));
    if (!here) return actions;

    actions.set(`examine ${here.name}`, () => this.describeReceptacle(here));
    if (here.openable && !here.opened) {
      actions.set(`open ${here.name}`, () => {
        here.opened = true;
        return `You open the ${here.name}. ${this.describeReceptacle(here)}`;
      });
    }
    if (here.openable && here.opened) {
      actions.set(`close ${here.name}`, () => {
        here.opened = false;
        return `You close the ${here.name}.`;
      });
    }
    const visible = this.accessible(here) ? this.contents(here.name) : [];
    for (const object of this.contents(here.name)) {
      const kind = objectKind(this.state.room, object.type);
      // ToggleObject needs only the lamp at the agent's location.
      if (kind.toggleable) {
        actions.set(`use ${object.name}`, () => {
          object.isOn = !object.isOn;
          return `You turn ${object.isOn ? "on" : "off"} the ${object.name}.`;
        });
      }
    }
    for (const object of visible) {
      const kind = objectKind(this.state.room, object.type);
      if (!held && !kind.toggleable) {
        actions.set(`take ${object.name} from ${here.name}`, () => {
          object.location = null;
          return `You pick up the ${object.name} from the ${here.name}.`;
        });
      }
      if (
        held &&
        kind.sliceable &&
        !object.isSliced &&
        objectKind(this.state.room, held.type).slices
      ) {
        actions.set(`slice ${object.name} with ${held.name}`, () => {
          object.isSliced = true;
          return `You sliced the ${object.name} with the ${held.name}.`;
        });
      }
    }
    if (held) {
      const kind = objectKind(this.state.room, held.type);
      if (this.accessible(here) && kind.places.includes(here.type)) {
        actions.set(`put ${held.name} in/on ${here.name}`, () => {
          held.location = here.name;
          return `You put the ${held.name} in/on the ${here.name}.`;
        });
      }
      if (here.type === "sinkbasin" && kind.cleanable) {
        actions.set(`clean ${held.name} with ${here.name}`, () => {
          held.isClean = true;
          return `You clean the ${held.name} using the ${here.name}.`;
        });
      }
      if (here.type === "microwave" && kind.heatable) {
        actions.set(`heat ${held.name} with ${here.name}`, () => {
          held.isHot = true;
          held.isCool = false;
          return `You heat the ${held.name} using the ${here.name}.`;
        });
      }
      if (here.type === "fridge" && kind.coolable) {
        actions.set(`cool ${held.name} with ${here.name}`, () => {
          held.isCool = true;
          held.isHot = false;
          return `You cool the ${held.name} using the ${here.name}.`;
        });
      }
    }
    return actions;
  }

  /** The admissible commands, sorted as TextWorld lists them. */
  admissibleCommands(): string[] {
    return [...this.actions().keys()].sort();
  }

  /** Runs one command; a command that is not admissible now changes nothing. */
  step(command: string): string {
    const effect = this.actions().get(command);
    return effect ? effect() : NOTHING_HAPPENS;
  }

  /** Whether the goal holds in the current state. */
  goalReached(goal: Goal): boolean {
    const ofType = this.state.objects.filter((o) => o.type === goal.object);
    if (goal.type === "look_at_obj_in_light") {
      const held = this.held();
      if (!held || held.type !== goal.object || this.state.agentAt === null) return false;
      return this.contents(this.state.agentAt).some(
        (o) => objectKind(this.state.room, o.type).toggleable && o.isOn,
      );
    }
    const placed = ofType.filter((o) => {
      if (o.location === null) return false;
      const receptacle = this.receptacle(o.location);
      if (!receptacle || receptacle.type !== goal.receptacle) return false;
      if (goal.type === "pick_clean_then_place") return o.isClean;
      if (goal.type === "pick_heat_then_place") return o.isHot;
      if (goal.type === "pick_cool_then_place") return o.isCool;
      return true;
    });
    if (goal.type !== "pick_two_obj") return placed.length > 0;
    const perReceptacle = new Map<string, number>();
    for (const o of placed)
      perReceptacle.set(o.location as string, (perReceptacle.get(o.location as string) ?? 0) + 1);
    return [...perReceptacle.values()].some((count) => count >= 2);
  }
}
