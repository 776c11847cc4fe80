/**
 * Parses the tool calls a model writes as text (the Qwen / Hermes format) into an
 * OpenAI-style assistant message:
 *
 *     I will look it up.
 *     <tool_call>
 *     {"name": "get_relations", "arguments": {"variable": "#0"}}
 *     </tool_call>
 *
 * A turn whose `<tool_call>` blocks do not parse becomes a content-only message (the raw
 * text), so that the environment answers with its own format-error message.
 */
import { z } from "zod";
import type { AssistantMessage, ToolCall } from "@agentrl/envs";

export const TOOL_CALL_OPEN = "<tool_call>";
export const TOOL_CALL_CLOSE = "</tool_call>";

const ToolCallJsonSchema = z.object({
  name: z.string().min(1),
  arguments: z.union([z.record(z.string(), z.unknown()), z.string()]).optional(),
});

export interface ParsedTurn {
  /** The message to send to the environment. */
  message: AssistantMessage;
  /** Number of well-formed tool calls found. */
  toolCalls: number;
  /** Why the text did not parse, when it did not (then `message` is content-only). */
  formatError?: string;
}

export interface ParseToolCallsOptions {
  /** Prefix of the generated call ids: `${idPrefix}_${i}`. Default `"call"`. */
  idPrefix?: string;
}

/**
 * Splits `text` (the decoded generation, special tokens removed) into content and tool
 * calls. Text outside the blocks becomes the content (trimmed; `null` when empty and calls exist).
 */
export function parseToolCalls(text: string, options: ParseToolCallsOptions = {}): ParsedTurn {
  const idPrefix = options.idPrefix ?? "call";
  const calls: ToolCall[] = [];
  const outside: string[] = [];
  let position = 0;
  while (position < text.length) {
    const open = text.indexOf(TOOL_CALL_OPEN, position);
    if (open < 0) {
      outside.push(text.slice(position));
      break;
    }
    outside.push(text.slice(position, open));
    const close = text.indexOf(TOOL_CALL_CLOSE, open + TOOL_CALL_OPEN.length);
    if (close < 0)
      return formatFailure(text, `a ${TOOL_CALL_OPEN} block is not closed with ${TOOL_CALL_CLOSE}`);
    const body = text.slice(open + TOOL_CALL_OPEN.length, close).trim();
    const call = parseOneCall(body, `${idPrefix}_${calls.length}`);
    if ("error" in call) return formatFailure(text, call.error);
    calls.push(call);
    position = close + TOOL_CALL_CLOSE.length;
  }
  if (text.includes(TOOL_CALL_CLOSE) && calls.length === 0) {
    return formatFailure(text, `${TOOL_CALL_CLOSE} without an opening ${TOOL_CALL_OPEN}`);
  }
  const content = outside.join("").trim();
  if (calls.length === 0)
    return { message: { role: "assistant", content: text.trim() }, toolCalls: 0 };
  return {
    message: { role: "assistant", content: content === "" ? null : content, tool_calls: calls },
    toolCalls: calls.length,
  };
}

function parseOneCall(body: string, id: string): ToolCall | { error: string } {
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch (error) {
    return { error: `tool call is not valid JSON (${(error as Error).message})` };
  }
  const checked = ToolCallJsonSchema.safeParse(json);
  if (!checked.success)
    return {
      error: `tool call must be {"name": string, "arguments": object}: ${checked.error.issues[0]?.message ?? "invalid"}`,
    };
  const args = checked.data.arguments ?? {};
  return {
    id,
    type: "function",
    function: {
      name: checked.data.name,
      arguments: typeof args === "string" ? args : JSON.stringify(args),
    },
  };
}

function formatFailure(text: string, formatError: string): ParsedTurn {
  return { message: { role: "assistant", content: text.trim() }, toolCalls: 0, formatError };
}

/**
 * Renders tool calls in the Qwen/Hermes text form, exactly as the Qwen2.5 chat template
 * renders them (`tojson` spacing: `", "` and `": "`), so a model that writes this text is
 * prefix-stable under the template.
 */
export function formatToolCalls(
  calls: { name: string; arguments: Record<string, unknown> }[],
): string {
  return calls
    .map(
      (call) =>
        `${TOOL_CALL_OPEN}\n${jsonLikePython({ name: call.name, arguments: call.arguments })}\n${TOOL_CALL_CLOSE}`,
    )
    .join("\n");
}

/** JSON with Python's `json.dumps` separators (`", "`, `": "`), which Jinja's `tojson` uses. */
export function jsonLikePython(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(jsonLikePython).join(", ")}]`;
  if (value !== null && typeof value === "object") {
    return `{${Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `${JSON.stringify(k)}: ${jsonLikePython(v)}`)
      .join(", ")}}`;
  }
  return JSON.stringify(value) ?? "null";
}
