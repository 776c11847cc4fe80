/**
 * Scripted agents that play through the session API. The expert executes the gold logical
 * form's plan one tool call per turn, reading from the observations which variable number
 * each of its calls created, then answers `Final Answer: #k`. The wrong expert does the same
 * and then answers something that cannot match (the count of an entity answer, or the
 * counted set of a count answer).
 */
import type { AssistantMessage, Expert, Message } from "../types.js";
import type { PlanArgument, PlanStep } from "./instances.js";

const CALL_ID_PREFIX = "kg_step_";
const VARIABLE_IN_OBSERVATION = /variable #(\d+)/;
const QUESTION_MESSAGE = /\nEntities: \[.*\]$/;

/** What the conversation says about the plan's progress. */
interface Progress {
  /** Steps already sent. */
  sent: number;
  /** Variable id each step created, read from its observation. */
  variableOfStep: Map<number, number>;
}

/** Reads the episode after its question (a one-shot example before it is not ours). */
function readProgress(history: Message[]): Progress {
  const variableOfStep = new Map<number, number>();
  let sent = 0;
  let start = 0;
  history.forEach((message, position) => {
    if (message.role === "user" && QUESTION_MESSAGE.test(message.content)) start = position;
  });
  for (const message of history.slice(start)) {
    if (message.role === "assistant") {
      for (const call of message.tool_calls ?? []) {
        if (call.id.startsWith(CALL_ID_PREFIX))
          sent = Math.max(sent, Number(call.id.slice(CALL_ID_PREFIX.length)) + 1);
      }
    }
    if (message.role === "tool" && message.tool_call_id.startsWith(CALL_ID_PREFIX)) {
      const match = VARIABLE_IN_OBSERVATION.exec(message.content);
      if (match)
        variableOfStep.set(
          Number(message.tool_call_id.slice(CALL_ID_PREFIX.length)),
          Number(match[1]),
        );
    }
  }
  return { sent, variableOfStep };
}

function argumentText(argument: PlanArgument, progress: Progress): string {
  if ("entity" in argument) return argument.entity;
  if ("text" in argument) return argument.text;
  return `#${progress.variableOfStep.get(argument.step) ?? argument.step}`;
}

function callMessage(step: PlanStep, index: number, progress: Progress): AssistantMessage {
  const args = Object.fromEntries(
    Object.entries(step.arguments).map(([key, value]) => [key, argumentText(value, progress)]),
  );
  return {
    role: "assistant",
    content: null,
    tool_calls: [
      {
        id: `${CALL_ID_PREFIX}${index}`,
        type: "function",
        function: { name: step.tool, arguments: JSON.stringify(args) },
      },
    ],
  };
}

function answerMessage(variable: number): AssistantMessage {
  return { role: "assistant", content: `Final Answer: #${variable}` };
}

/** The variable the last variable-creating step of `plan` produced. */
function lastVariable(plan: PlanStep[], progress: Progress): number {
  for (let step = plan.length - 1; step >= 0; step--) {
    if (plan[step].createsVariable) return progress.variableOfStep.get(step) ?? 0;
  }
  return 0;
}

/** Plays `plan` and answers its last variable. */
export function planExpert(plan: PlanStep[]): Expert {
  return {
    act(history: Message[]): AssistantMessage {
      const progress = readProgress(history);
      if (progress.sent < plan.length)
        return callMessage(plan[progress.sent], progress.sent, progress);
      return answerMessage(lastVariable(plan, progress));
    },
  };
}

/**
 * Plays `plan`, then answers wrong: for an entity answer it counts the answer variable and
 * answers the count (a number never equals a set of entity ids); for a count answer it
 * answers the set that was counted.
 */
export function wrongPlanExpert(plan: PlanStep[]): Expert {
  const endsWithCount = plan.length > 0 && plan[plan.length - 1].tool === "count";
  const fullPlan: PlanStep[] = endsWithCount
    ? plan
    : [
        ...plan,
        {
          tool: "count",
          arguments: { variable: { step: lastCreatingStep(plan) } },
          createsVariable: true,
        },
      ];
  return {
    act(history: Message[]): AssistantMessage {
      const progress = readProgress(history);
      if (progress.sent < fullPlan.length)
        return callMessage(fullPlan[progress.sent], progress.sent, progress);
      if (endsWithCount) {
        const counted = fullPlan[fullPlan.length - 1].arguments.variable;
        return answerMessage(
          "step" in counted ? (progress.variableOfStep.get(counted.step) ?? 0) : 0,
        );
      }
      return answerMessage(lastVariable(fullPlan, progress));
    },
  };
}

function lastCreatingStep(plan: PlanStep[]): number {
  for (let step = plan.length - 1; step >= 0; step--) if (plan[step].createsVariable) return step;
  throw new Error("wrongPlanExpert: the plan creates no variable");
}
