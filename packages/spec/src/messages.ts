/**
 * The conversation format every agentrl package speaks: OpenAI-style chat messages, tool
 * calls and tool descriptions (AgentRL / AgentBench FC use the same shapes).
 *
 * Defined once here, below `@agentrl/policy` (which renders them with a chat template) and
 * `@agentrl/envs` (whose tasks send and receive them), so both name the same types and a
 * conversation passes from one to the other without conversion or casts.
 */

/** The subset of JSON Schema that tool arguments are described (and validated) with. */
export type JsonSchema = {
  type?: string | string[];
  description?: string;
  items?: JsonSchema;
  enum?: unknown[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
};

/**
 * An OpenAI-style tool description with the JSON schema of its arguments: what an
 * environment offers the agent. Every `ToolSpec` is a {@link ChatToolSpec}.
 */
export interface ToolSpec {
  type: "function";
  function: {
    name: string;
    description: string;
    parameters: {
      type: "object";
      properties: Record<string, JsonSchema>;
      required?: string[];
    };
  };
}

/**
 * A tool description as a chat template reads it: only the name is required, any other field
 * (e.g. a full JSON schema in `parameters`) is passed through to the template's `tojson`.
 * Wider than {@link ToolSpec}, so Hugging Face-style tool dicts render too.
 */
export interface ChatToolSpec {
  type: "function";
  function: {
    name: string;
    description?: string;
    parameters?: object;
    [key: string]: unknown;
  };
}

/** One tool call of an assistant turn; `arguments` is a JSON string, as in OpenAI's API. */
export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** The instructions that open a conversation. */
export type SystemMessage = {
  role: "system";
  content: string;
};

/** What the user (or the task) says. */
export type UserMessage = {
  role: "user";
  content: string;
};

/** A turn of the model: text, tool calls, or both (`content` is `null` when it only calls tools). */
export type AssistantMessage = {
  role: "assistant";
  content: string | null;
  tool_calls?: ToolCall[];
  /**
   * Set by an expert on a turn its warm-start row shows but does not train on (a deliberate
   * mistake the next turn recovers from); never set on a model's turn.
   */
  untrained?: boolean;
};

/** The result of one tool call, answering the call with id `tool_call_id`. */
export type ToolMessage = {
  role: "tool";
  tool_call_id: string;
  content: string;
  /** Name of the tool that was called (some templates show it). */
  name?: string;
};

/**
 * One message of a conversation (OpenAI chat format). The members are type literals, not
 * interfaces, so that a message is assignable to `Record<string, unknown>` (JSON helpers).
 */
export type Message = SystemMessage | UserMessage | AssistantMessage | ToolMessage;

/** The roles of {@link Message}. */
export type Role = Message["role"];
