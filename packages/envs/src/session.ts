/**
 * The shared machinery of a function-call session: validates what the agent sends,
 * counts turns, truncates output, and guarantees that a session always ends and frees its
 * resources exactly once — by the task's own rule, the turn limit, cancel, or a task error.
 *
 * A task family subclasses `FunctionCallSession` and implements `callTool` (and, for tasks
 * that accept plain text such as KG's `Final Answer: #k`, `onText`).
 */
import type {
  AssistantMessage,
  InteractResult,
  Message,
  SampleStatus,
  StartResult,
  TaskSession,
  ToolCall,
  ToolSpec,
} from "./types.js";

/** What ends an episode: the reward and the status it ends with. */
export interface Outcome {
  reward: number;
  status: SampleStatus;
  metrics?: Record<string, number>;
}

/** A tool's answer: text for the agent and, when the call ends the episode, its outcome. */
export interface ToolReply {
  content: string;
  outcome?: Outcome;
}

export interface SessionLimits {
  /** Turns (assistant messages) before the episode ends with `task limit reached`. */
  maxTurns: number;
  /** Tool output beyond this many characters is cut (800 in the original OS and DB). */
  maxOutputChars?: number;
  /** Assistant content beyond this many characters is refused as an invalid action. */
  maxInputChars?: number;
}

export const NO_TOOL_CALL_MESSAGE = "No executable tool calls found. Please call a tool instead.";
const DEFAULT_MAX_OUTPUT = 800;
const DEFAULT_MAX_INPUT = 16_384;

export function truncateOutput(text: string, maxChars = DEFAULT_MAX_OUTPUT): string {
  if (text.length <= maxChars) return text;
  return `${text.slice(0, maxChars)}\n[truncated because the output is too long]`;
}

/** Checks arguments against a tool's JSON schema (top-level fields: presence and type). */
export function validateArguments(
  tool: ToolSpec,
  raw: string,
): { ok: true; args: Record<string, unknown> } | { ok: false; error: string } {
  let parsed: unknown;
  try {
    parsed = raw.trim() === "" ? {} : JSON.parse(raw);
  } catch (error) {
    return {
      ok: false,
      error: `The arguments of ${tool.function.name} are not valid JSON (${(error as Error).message}).`,
    };
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    return { ok: false, error: `The arguments of ${tool.function.name} must be a JSON object.` };
  }
  const args = parsed as Record<string, unknown>;
  const { properties, required = [] } = tool.function.parameters;
  for (const name of required) {
    if (args[name] === undefined || args[name] === null) {
      return {
        ok: false,
        error: `${tool.function.name} is missing the required argument "${name}".`,
      };
    }
  }
  for (const [name, value] of Object.entries(args)) {
    const schema = properties[name];
    if (!schema) {
      return {
        ok: false,
        error: `${tool.function.name} has no argument "${name}"; it takes ${Object.keys(properties).join(", ") || "none"}.`,
      };
    }
    if (!matchesType(value, schema.type)) {
      return {
        ok: false,
        error: `Argument "${name}" of ${tool.function.name} must be of type ${String(schema.type)}.`,
      };
    }
  }
  return { ok: true, args };
}

function matchesType(value: unknown, type: string | string[] | undefined): boolean {
  if (type === undefined) return true;
  const types = Array.isArray(type) ? type : [type];
  return types.some((t) => {
    switch (t) {
      case "string":
        return typeof value === "string";
      case "number":
        return typeof value === "number" && Number.isFinite(value);
      case "integer":
        return Number.isInteger(value);
      case "boolean":
        return typeof value === "boolean";
      case "array":
        return Array.isArray(value);
      case "object":
        return typeof value === "object" && value !== null && !Array.isArray(value);
      case "null":
        return value === null;
      default:
        return true;
    }
  });
}

export abstract class FunctionCallSession implements TaskSession {
  readonly start: StartResult;
  protected readonly limits: Required<SessionLimits>;
  protected turns = 0;
  private status: SampleStatus = "running";
  private reward = 0;
  private metrics: Record<string, number> = {};
  private released = false;

  constructor(start: StartResult, limits: SessionLimits) {
    this.start = start;
    this.limits = {
      maxOutputChars: DEFAULT_MAX_OUTPUT,
      maxInputChars: DEFAULT_MAX_INPUT,
      ...limits,
    };
  }

  /** Runs one validated tool call. Throwing ends the episode with status `task error`. */
  protected abstract callTool(name: string, args: Record<string, unknown>): Promise<ToolReply>;

  /** A turn of plain text with no tool call. Default: the original's format-error message. */
  protected async onText(_content: string): Promise<{ content: string; outcome?: Outcome }> {
    return { content: NO_TOOL_CALL_MESSAGE };
  }

  /** Frees the session's resources (containers, databases). Called exactly once. */
  protected async release(): Promise<void> {}

  get finished(): boolean {
    return this.status !== "running";
  }

  get turnCount(): number {
    return this.turns;
  }

  async interact(message: AssistantMessage): Promise<InteractResult> {
    if (this.finished) return this.result([]);
    this.turns += 1;
    const replies: Message[] = [];
    try {
      await this.handle(message, replies);
    } catch (error) {
      this.failureReason ??= (error as Error).message;
      replies.push({
        role: "user",
        content: `The environment failed: ${(error as Error).message}`,
      });
      await this.end({ reward: 0, status: "task error" });
    }
    if (!this.finished && this.turns >= this.limits.maxTurns) {
      await this.end({ reward: 0, status: "task limit reached" });
    }
    return this.result(replies);
  }

  async cancel(): Promise<void> {
    if (!this.finished) await this.end({ reward: 0, status: "cancelled" });
  }

  /** Ends the episode from outside a turn (e.g. its container died): status `task error`. */
  async fail(reason: string): Promise<void> {
    this.failureReason ??= reason;
    if (!this.finished) await this.end({ reward: 0, status: "task error" });
  }

  /** Why the session ended in `task error`, when it did. */
  failureReason: string | undefined;

  private async handle(message: AssistantMessage, replies: Message[]): Promise<void> {
    const content = typeof message.content === "string" ? message.content : "";
    const calls: ToolCall[] = Array.isArray(message.tool_calls) ? message.tool_calls : [];
    if (content.length > this.limits.maxInputChars) {
      replies.push({
        role: "user",
        content: `Your message is too long (${content.length} characters; at most ${this.limits.maxInputChars}).`,
      });
      return;
    }
    if (calls.length === 0) {
      if (content.trim() === "") {
        replies.push({ role: "user", content: `Your turn was empty. ${NO_TOOL_CALL_MESSAGE}` });
        return;
      }
      const reply = await this.onText(content);
      replies.push({ role: "user", content: reply.content });
      if (reply.outcome) await this.end(reply.outcome);
      return;
    }
    for (const call of calls) {
      if (this.finished) break;
      const id = typeof call?.id === "string" && call.id ? call.id : `call_${this.turns}`;
      const content = await this.runCall(call);
      replies.push({
        role: "tool",
        tool_call_id: id,
        content: truncateOutput(content.content, this.limits.maxOutputChars),
      });
      if (content.outcome) await this.end(content.outcome);
    }
  }

  private async runCall(call: ToolCall): Promise<ToolReply> {
    const name = call?.function?.name;
    const tool = this.start.tools.find((t) => t.function.name === name);
    if (!tool) {
      const known = this.start.tools.map((t) => t.function.name).join(", ");
      return { content: `Unknown tool "${String(name)}". Available tools: ${known}.` };
    }
    const raw = call.function.arguments;
    const checked = validateArguments(
      tool,
      typeof raw === "string" ? raw : JSON.stringify(raw ?? {}),
    );
    if (!checked.ok) return { content: checked.error };
    return this.callTool(tool.function.name, checked.args);
  }

  private async end(outcome: Outcome): Promise<void> {
    if (this.finished) return;
    this.status = outcome.status;
    this.reward = outcome.reward;
    this.metrics = { ...this.metrics, ...(outcome.metrics ?? {}), turns: this.turns };
    if (!this.released) {
      this.released = true;
      try {
        await this.release();
      } catch {
        // Freeing resources must never turn a finished episode into a crash.
      }
    }
  }

  private result(messages: Message[]): InteractResult {
    return {
      finish: this.finished,
      reward: this.reward,
      status: this.status,
      messages,
      metrics: { ...this.metrics, turns: this.turns },
    };
  }
}
