/**
 * One ALFWorld episode behind the function-call API (AgentBench FC): the tool
 * `take_action(action)`, free text mapped to the closest admissible command, the step limit,
 * the repeated-action rule and reward 1 when the goal holds (graded in reward.ts).
 */
import { FunctionCallSession, type ToolReply } from "../session.js";
import type { Message, ToolSpec } from "../types.js";
import type { Instance } from "./generate.js";
import { matchAction } from "./match.js";
import { gradeAction, REPEAT_MESSAGE } from "./reward.js";

export { REPEAT_LIMIT, REPEAT_MESSAGE, repeatedTooOften } from "./reward.js";
import { World } from "./world.js";

export const TAKE_ACTION_TOOL: ToolSpec = {
  type: "function",
  function: {
    name: "take_action",
    description:
      'Take one action in the household, e.g. "go to countertop 1", "take apple 1 from countertop 1", "put apple 1 in/on fridge 1". Choose it from the AVAILABLE ACTIONS list; other text is mapped to the most similar available action.',
    parameters: {
      type: "object",
      properties: {
        action: {
          type: "string",
          description: "The action, written exactly as in the AVAILABLE ACTIONS list.",
        },
      },
      required: ["action"],
    },
  },
};

/** The original FC instruction, with its typos fixed and its filler trimmed. */
export const INSTRUCTION = [
  "Interact with a household to solve a task. Imagine you are an intelligent agent in a household environment and your target is to perform actions to complete the task goal. At the beginning of your interactions, you will be given the detailed description of the current environment and your goal to accomplish.",
  'Use the tool take_action to act: put the one action you choose in its "action" argument. For each of your turns, you will be given a list of available actions; choose one of them. After each turn, the environment gives you immediate feedback, based on which you plan your next steps. If the environment outputs "Nothing happens.", your previous action was invalid and you should try other options.',
  "Reminder:",
  "1. The action must be chosen from the given available actions. Any other action is illegal.",
  "2. Always call the tool to hand in your next action, and think when necessary.",
].join("\n");

export const EXTRA_CALL_MESSAGE = "Only one action per turn is carried out; this call was ignored.";

export interface AlfworldSessionOptions {
  /** Turns before the episode ends with `task limit reached`. Default 20 (AgentRL's `max_step`). */
  maxSteps?: number;
  /** Append the admissible commands to every observation, as the original does. Default true. */
  showAvailableActions?: boolean;
  /** Characters of tool output kept. Default 4,000 (the original does not cut ALFWorld output). */
  maxOutputChars?: number;
}

export function availableActionsText(commands: string[]): string {
  return `AVAILABLE ACTIONS:\n${commands.join("\n")}`;
}

/** The state of the agent at the start, beyond the room overview (difficulty 0 only). */
function startPosition(world: World): string {
  const here = world.state.agentAt === null ? undefined : world.receptacle(world.state.agentAt);
  const held = world.held();
  const parts: string[] = [];
  if (here) parts.push(`You are at the ${here.name}. ${world.describeReceptacle(here)}`);
  if (held) parts.push(`You are carrying: a ${held.name}.`);
  return parts.join(" ");
}

/** The opening messages: instruction, then room, task and available actions. */
export function openingMessages(
  instance: Instance,
  options: Required<AlfworldSessionOptions>,
): Message[] {
  const world = new World(instance.world);
  const lines = [`Here is your task. ${world.describeRoom()}`];
  const position = startPosition(world);
  if (position) lines.push(position);
  lines.push(`Your task is to: ${instance.taskText}`);
  if (options.showAvailableActions) lines.push(availableActionsText(world.admissibleCommands()));
  return [
    { role: "system", content: INSTRUCTION },
    { role: "user", content: lines.join("\n") },
  ];
}

export class AlfworldSession extends FunctionCallSession {
  private readonly world: World;
  private readonly instance: Instance;
  private readonly options: Required<AlfworldSessionOptions>;
  /** The raw `action` texts of the turns so far (what the repeat rule compares). */
  private readonly actionTexts: string[] = [];
  private lastActedTurn = -1;

  constructor(instance: Instance, options: Required<AlfworldSessionOptions>) {
    super(
      { messages: openingMessages(instance, options), tools: [TAKE_ACTION_TOOL] },
      { maxTurns: options.maxSteps, maxOutputChars: options.maxOutputChars },
    );
    this.instance = instance;
    this.options = options;
    this.world = new World(instance.world);
  }

  protected override async callTool(
    _name: string,
    args: Record<string, unknown>,
  ): Promise<ToolReply> {
    // The original acts on the first tool call of a turn only.
    if (this.lastActedTurn === this.turns) return { content: EXTRA_CALL_MESSAGE };
    this.lastActedTurn = this.turns;
    const text = String(args.action);
    const command = matchAction(text, this.world.admissibleCommands());
    const observation = this.world.step(command);
    this.actionTexts.push(text);
    // The grading is reward.ts's (a win counts even when it is the third repeat).
    const outcome = gradeAction(this.world.goalReached(this.instance.goal), this.actionTexts);
    if (outcome?.status === "completed") return { content: observation, outcome };
    if (outcome) return { content: `${observation}\n${REPEAT_MESSAGE}`, outcome };
    if (!this.options.showAvailableActions || this.turns >= this.options.maxSteps)
      return { content: observation };
    return { content: `${observation}\n${availableActionsText(this.world.admissibleCommands())}` };
  }
}
