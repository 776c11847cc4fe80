/**
 * Whether a chat template is append-only for tool-calling conversations: rendering a
 * conversation and then the same conversation with more messages must only add text at the
 * end. Only then can the recording gateway join an episode's turns into ONE token sequence;
 * otherwise each turn becomes a training sample of its own (see recorder.ts).
 *
 * The check plays a small conversation the way an OpenAI client sends it back (tool-call
 * arguments as compact JSON strings, content null beside tool calls, two tool results in a
 * row, a final text answer) and compares every rendering with the next.
 */
import type { Message, ToolSpec } from "@agentrl/envs";
import type { RecorderTokenizer } from "./recorder.js";

export interface TemplateCheckStep {
  /** Messages rendered before / after. */
  from: number;
  to: number;
  appendOnly: boolean;
  /** Where the renderings first differ (character offset), when not append-only. */
  divergesAt?: number;
  /** The earlier rendering's text around the difference, and the later one's. */
  before?: string;
  after?: string;
}

export interface TemplateCheck {
  appendOnly: boolean;
  steps: TemplateCheckStep[];
}

const CHECK_TOOLS: ToolSpec[] = [
  {
    type: "function",
    function: {
      name: "get_relations",
      description: "Relations of an entity or variable.",
      parameters: {
        type: "object",
        properties: { variable: { type: "string" } },
        required: ["variable"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "answer",
      description: "The final answer.",
      parameters: {
        type: "object",
        properties: { variable: { type: "string" }, confidence: { type: "number" } },
        required: ["variable"],
      },
    },
  },
];

/** The conversation the check plays: each entry a step (the messages the client adds before its next request). */
export const CHECK_STEPS: Message[][] = [
  [
    { role: "system", content: "You answer questions about a knowledge base." },
    { role: "user", content: "Who directed Alien?" },
  ],
  [
    {
      role: "assistant",
      content: null,
      tool_calls: [
        {
          id: "call_1",
          type: "function",
          function: { name: "get_relations", arguments: JSON.stringify({ variable: "Alien" }) },
        },
      ],
    },
    { role: "tool", tool_call_id: "call_1", content: "film.director, film.year" },
  ],
  [
    {
      role: "assistant",
      content: "Two lookups.",
      tool_calls: [
        {
          id: "call_2",
          type: "function",
          function: { name: "get_relations", arguments: JSON.stringify({ variable: "#0" }) },
        },
        {
          id: "call_3",
          type: "function",
          function: { name: "get_relations", arguments: JSON.stringify({ variable: "#1" }) },
        },
      ],
    },
    { role: "tool", tool_call_id: "call_2", content: "Variable #2: people" },
    { role: "tool", tool_call_id: "call_3", content: "Variable #3: years" },
  ],
  [
    {
      role: "assistant",
      content: null,
      tool_calls: [
        {
          id: "call_4",
          type: "function",
          function: {
            name: "answer",
            arguments: JSON.stringify({ variable: "#2", confidence: 0.5 }),
          },
        },
      ],
    },
    { role: "tool", tool_call_id: "call_4", content: "Correct." },
  ],
  [
    { role: "assistant", content: "Ridley Scott." },
    { role: "user", content: "Thanks." },
  ],
];

/** Checks `tokenizer`'s chat template on a tool-calling conversation (see the module's comment). */
export function checkTemplate(
  tokenizer: Pick<RecorderTokenizer, "applyChatTemplate">,
  tools: readonly ToolSpec[] = CHECK_TOOLS,
): TemplateCheck {
  const steps: TemplateCheckStep[] = [];
  const conversation: Message[] = [];
  let previous: string | undefined;
  let previousLength = 0;
  for (const step of CHECK_STEPS) {
    conversation.push(...step);
    const rendered = tokenizer.applyChatTemplate(conversation, {
      tools,
      addGenerationPrompt: true,
    });
    if (previous !== undefined) {
      const appendOnly = rendered.startsWith(previous);
      const entry: TemplateCheckStep = {
        from: previousLength,
        to: conversation.length,
        appendOnly,
      };
      if (!appendOnly) {
        let at = 0;
        while (at < previous.length && previous[at] === rendered[at]) at += 1;
        entry.divergesAt = at;
        entry.before = previous.slice(Math.max(0, at - 40), at + 40);
        entry.after = rendered.slice(Math.max(0, at - 40), at + 40);
      }
      steps.push(entry);
    }
    previous = rendered;
    previousLength = conversation.length;
  }
  return { appendOnly: steps.every((step) => step.appendOnly), steps };
}
