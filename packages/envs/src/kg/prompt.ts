/**
 * What the agent reads: the system instructions (a condensed form of AgentBench FC's KG
 * instructions), the first user message and the seven tools as OpenAI-style JSON schema.
 */
import type { ToolSpec } from "../types.js";

/** The system message; `maxTurns` is the action budget (15 in the original). */
export function instructions(maxTurns: number): string {
  return [
    "You are an agent that answers questions with the knowledge stored in a knowledge base (KB). Use the tools to query the KB.",
    '- A variable is an entity or a set of entities produced by an earlier tool call. Entities are referred to by the names given after "Entities:"; variables by their id: #0 is the first variable, #1 the second, and so on.',
    "- Follow the logical order: find the relations of a variable before following one with get_neighbors, and its attributes before argmax or argmin.",
    "- After each new variable, judge whether it is the final answer. When it is, reply with plain text 'Final Answer: #id' and no tool call, e.g. 'Final Answer: #3'.",
    `- Take one action at a time. You can take at most ${maxTurns} actions.`,
  ].join("\n");
}

/** The first user message: the question and its topic entities, as in the original. */
export function questionMessage(question: string, entityNames: string[]): string {
  return `${question}\nEntities: [${entityNames.join(", ")}]`;
}

function tool(name: string, description: string, properties: Record<string, string>): ToolSpec {
  return {
    type: "function",
    function: {
      name,
      description,
      parameters: {
        type: "object",
        properties: Object.fromEntries(
          Object.entries(properties).map(([key, text]) => [
            key,
            { type: "string", description: text },
          ]),
        ),
        required: Object.keys(properties),
      },
    },
  };
}

/** The seven tools of the original, with its argument names. */
export const KG_TOOLS: ToolSpec[] = [
  tool(
    "get_relations",
    "Lists the relations leaving an entity or a variable, to decide which one leads to the answer.",
    {
      variable: "An entity named in the question or a variable such as #0.",
    },
  ),
  tool(
    "get_neighbors",
    "Follows a relation from an entity or a variable; the entities reached become a new variable. Use a relation listed by get_relations.",
    {
      variable: "An entity named in the question or a variable such as #0.",
      relation: "A relation of the variable, e.g. film.director.film.",
    },
  ),
  tool(
    "intersection",
    "The entities in both of two variables of the same type, as a new variable.",
    {
      variable1: "The first variable, e.g. #0.",
      variable2: "The second variable, e.g. #1.",
    },
  ),
  tool(
    "get_attributes",
    "Lists the numerical and date attributes of a variable; use it before argmax or argmin.",
    {
      variable: "A variable such as #0.",
    },
  ),
  tool(
    "argmax",
    "The entities of a variable with the largest value of an attribute, as a new variable.",
    {
      variable: "A variable such as #0.",
      attribute: "An attribute listed by get_attributes.",
    },
  ),
  tool(
    "argmin",
    "The entities of a variable with the smallest value of an attribute, as a new variable.",
    {
      variable: "A variable such as #0.",
      attribute: "An attribute listed by get_attributes.",
    },
  ),
  tool("count", "The number of entities in a variable, as a new variable.", {
    variable: "A variable such as #0.",
  }),
];

/** The original's reply to a plain-text turn without a final answer. */
export const NO_VALID_CALL_MESSAGE =
  "No valid function calls found! Need to recheck the function calls.";
