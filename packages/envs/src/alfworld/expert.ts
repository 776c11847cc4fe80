/**
 * Scripted players that act through the session API (`take_action` tool calls).
 *
 * The expert plans like ALFWorld's handcoded expert, from the generator's knowledge of
 * where the goal's objects lie (`Instance.targets`), and acts on what it observes: it opens a
 * receptacle when the observation says it is closed, and takes the goal's object by the name
 * it sees listed. The wrong expert walks to receptacles the goal does not name and looks
 * around until the repeated-action rule ends the episode: it never reaches the goal.
 */
import { isOpenable, objectKind } from "./catalog.js";
import type { Instance } from "./generate.js";
import type { AssistantMessage, Expert, Message } from "../types.js";

/** One step of a plan; commands are built when the step runs. */
type PlanStep =
  | { kind: "goto"; receptacle: string }
  | { kind: "take"; object: string; receptacle: string }
  | { kind: "put"; object: string; receptacle: string }
  | { kind: "apply"; verb: "clean" | "heat" | "cool"; object: string; receptacle: string }
  | { kind: "use"; lamp: string };

function toolCall(action: string, turn: number): AssistantMessage {
  return {
    role: "assistant",
    content: null,
    tool_calls: [
      {
        id: `call_${turn}`,
        type: "function",
        function: { name: "take_action", arguments: JSON.stringify({ action }) },
      },
    ],
  };
}

/** The text of the newest environment message (tool reply or user message). */
function lastObservation(history: Message[]): string {
  for (let i = history.length - 1; i >= 0; i--) {
    const message = history[i];
    if (message.role === "tool" || message.role === "user") return message.content;
  }
  return "";
}

/** The lowest-numbered receptacle of a type. */
function firstOfType(instance: Instance, type: string): string {
  const names = instance.world.receptacles.filter((r) => r.type === type).map((r) => r.name);
  if (names.length === 0)
    throw new Error(`alfworld expert: no ${type} in instance ${instance.index}`);
  return names[0];
}

function locationOf(instance: Instance, object: string): string {
  const state = instance.world.objects.find((o) => o.name === object);
  if (!state || state.location === null)
    throw new Error(`alfworld expert: ${object} is not in a receptacle`);
  return state.location;
}

/** The plan for an instance, from its generated state. */
export function planFor(instance: Instance): PlanStep[] {
  const { goal, targets } = instance;
  const object = targets[0];
  const heldAtStart = instance.world.objects.find((o) => o.location === null)?.name;
  const fetch = (name: string): PlanStep[] => {
    const source = locationOf(instance, name);
    return [
      { kind: "goto", receptacle: source },
      { kind: "take", object: name, receptacle: source },
    ];
  };
  if (goal.type === "look_at_obj_in_light") {
    if (!instance.lamp) throw new Error(`alfworld expert: instance ${instance.index} has no lamp`);
    const lampPlace = locationOf(instance, instance.lamp);
    const steps: PlanStep[] = heldAtStart ? [] : fetch(object);
    return [
      ...steps,
      { kind: "goto", receptacle: lampPlace },
      { kind: "use", lamp: instance.lamp },
    ];
  }
  const receptacleType = goal.receptacle as string;
  const target =
    instance.world.agentAt &&
    instance.world.receptacles.find((r) => r.name === instance.world.agentAt)?.type ===
      receptacleType
      ? instance.world.agentAt
      : firstOfType(instance, receptacleType);
  const place = (name: string): PlanStep[] => [
    { kind: "goto", receptacle: target },
    { kind: "put", object: name, receptacle: target },
  ];
  if (goal.type === "pick_two_obj")
    return [...fetch(targets[0]), ...place(targets[0]), ...fetch(targets[1]), ...place(targets[1])];
  const steps: PlanStep[] = heldAtStart ? [] : fetch(object);
  const appliance = {
    pick_clean_then_place: ["clean", "sinkbasin"],
    pick_heat_then_place: ["heat", "microwave"],
    pick_cool_then_place: ["cool", "fridge"],
  } as const;
  if (goal.type in appliance) {
    const [verb, type] = appliance[goal.type as keyof typeof appliance];
    const station = firstOfType(instance, type);
    steps.push(
      { kind: "goto", receptacle: station },
      { kind: "apply", verb, object, receptacle: station },
    );
  }
  return [...steps, ...place(object)];
}

/** The names listed after "you see" in an observation. */
export function seenNames(observation: string): string[] {
  const match = /you see (.*?)\./.exec(observation);
  if (!match || match[1] === "nothing") return [];
  return match[1].split(/, (?:and )?/).map((item) => item.replace(/^a /, "").trim());
}

/** Solves an instance through the session API (see the module comment). */
export class AlfworldExpert implements Expert {
  private readonly plan: PlanStep[];
  private position = 0;
  private turn = 0;
  private at: string | null;
  /** Receptacles seen open (true) or closed (false) so far. */
  private readonly openState = new Map<string, boolean>();
  /** What the newest observation listed. */
  private lastSeen: string[] = [];
  /** The object this expert took and still holds (by the name it saw). */
  private holding: string | undefined;

  constructor(private readonly instance: Instance) {
    this.plan = planFor(instance);
    this.at = instance.world.agentAt;
  }

  act(history: Message[]): AssistantMessage {
    this.observe(lastObservation(history));
    this.turn += 1;
    while (this.position < this.plan.length) {
      const step = this.plan[this.position];
      const action = this.commandFor(step);
      if (action === undefined) {
        this.position += 1;
        continue;
      }
      return toolCall(action, this.turn);
    }
    return toolCall("look", this.turn);
  }

  /** Learns from the newest observation which receptacles are open or closed. */
  private observe(observation: string): void {
    for (const match of observation.matchAll(/The ([a-z]+ \d+) is (open|closed)\./g)) {
      this.openState.set(match[1], match[2] === "open");
    }
    this.lastSeen = seenNames(observation);
  }

  /** The command for a step, or undefined when the step is already done. May insert `open`. */
  private commandFor(step: PlanStep): string | undefined {
    switch (step.kind) {
      case "goto":
        if (this.at === step.receptacle) return undefined;
        this.at = step.receptacle;
        this.position += 1;
        return `go to ${step.receptacle}`;
      case "take":
      case "put": {
        const type = step.receptacle.slice(0, step.receptacle.lastIndexOf(" "));
        if (isOpenable(type) && this.openState.get(step.receptacle) !== true) {
          this.openState.set(step.receptacle, true);
          return `open ${step.receptacle}`;
        }
        this.position += 1;
        if (step.kind === "put") {
          const held = this.holding ?? step.object;
          this.holding = undefined;
          return `put ${held} in/on ${step.receptacle}`;
        }
        this.holding = this.visibleTarget(step.object);
        return `take ${this.holding} from ${step.receptacle}`;
      }
      case "apply":
        this.position += 1;
        return `${step.verb} ${this.holding ?? step.object} with ${step.receptacle}`;
      case "use":
        this.position += 1;
        return `use ${step.lamp}`;
    }
  }

  /** The planned object if listed in what was just seen, else a listed one of its type. */
  private visibleTarget(planned: string): string {
    if (this.lastSeen.includes(planned)) return planned;
    const type = planned.slice(0, planned.lastIndexOf(" "));
    const other = this.lastSeen.find((name) => name.slice(0, name.lastIndexOf(" ")) === type);
    return other ?? planned;
  }
}

/** Walks to receptacles the goal does not name, then repeats `look`: never wins. */
export class WrongExpert implements Expert {
  private turn = 0;
  private readonly route: string[];

  constructor(instance: Instance) {
    const avoid = new Set([instance.goal.receptacle, "sinkbasin", "microwave", "fridge"]);
    const lampPlace = instance.world.objects.find(
      (o) => objectKind(instance.world.room, o.type).toggleable,
    )?.location;
    this.route = instance.world.receptacles
      .filter(
        (r) => !avoid.has(r.type) && r.name !== lampPlace && r.name !== instance.world.agentAt,
      )
      .slice(0, 2)
      .map((r) => `go to ${r.name}`);
  }

  act(): AssistantMessage {
    const action = this.route[this.turn] ?? "look";
    this.turn += 1;
    return toolCall(action, this.turn);
  }
}
