/**
 * The wire protocol of the controller and its workers (AgentRL / AgentBench FC), as zod
 * schemas for everything that arrives from outside, and the error class every part of the
 * server and both clients raise.
 *
 * Controller routes (all under `/api`; the session id travels in the `session_id` header):
 *
 *   POST /start_sample      {name, index, custom_task?}        → {messages, tools}, header session_id
 *   POST /interact          {messages: [assistant message]}    → {finish, reward, status, messages, metrics}
 *   POST /cancel            (header)                           → {session_id}
 *   POST /cancel_all?name=                                     → {cancelled}
 *   GET  /list_workers                                         → {[task]: {indices, workers}}
 *   GET  /list_sessions                                        → {[session id]: {name, index, ...}}
 *   GET  /get_indices?name=&split=train|test&difficulty=       → number[]  (difficulty: curriculum families)
 *   POST /receive_heartbeat {name, address, concurrency, indices, splits?, difficulties?} → {ok}
 *
 * AgentBench's v0.2 routes are served beside these under `/v0.2/api` (`agentbench.ts`);
 * docs/protocol.md compares the two route by route.
 *
 * Worker routes (under the worker's advertised address, which ends in `/api`):
 *
 *   POST /start_sample {index, session_id} → {messages, tools}
 *   POST /interact, /cancel (header session_id), /cancel_all; GET /get_sessions, /worker_status, /get_indices
 */
import { z } from "zod";
import { EnvironmentError } from "../types.js";

/** An error with the HTTP status it maps to (4xx: the caller's fault, 5xx: the server's). */
export class EnvironmentApiError extends EnvironmentError {
  constructor(
    /** HTTP status code, e.g. 400, 401, 404, 406, 409, 413, 500, 502. */
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** A server set up wrongly (e.g. bound beyond loopback without a token); raised at start-up. */
export class ServerConfigError extends EnvironmentError {}

/** The header that carries the session id, as in the original. */
export const SESSION_HEADER = "session_id";

/** Default controller port of the original. */
export const DEFAULT_CONTROLLER_PORT = 5020;

const toolCallSchema = z.object({
  id: z.string().optional(),
  type: z.literal("function").optional(),
  function: z.object({
    name: z.string({ error: "tool_calls[].function.name must be a string" }),
    // The original sends a JSON string; an object is accepted and re-serialised. Whether the
    // string is valid JSON is the agent's problem: the session answers it with an error message.
    arguments: z.union([z.string(), z.record(z.string(), z.unknown())]).optional(),
  }),
});

/** One assistant turn as it arrives over HTTP (lenient where the agent, not the client, is at fault). */
export const assistantMessageSchema = z.object({
  role: z.literal("assistant", { error: 'the message must have role "assistant"' }),
  content: z.string().nullable().optional(),
  tool_calls: z.array(toolCallSchema).nullable().optional(),
});

/**
 * A sample index: an int, or a string as AgentBench's `SampleIndex = Union[int, str]` allows
 * (a numeric string names the same sample as the number; another string is no sample of ours).
 */
export const sampleIndexSchema = z.union([
  z.number().int("index must be an integer"),
  z.string().max(64, "index must be an integer or a short string"),
]);

/** The sample a (possibly string) index names, or undefined when it cannot name one of ours. */
export function sampleNumberOf(index: number | string): number | undefined {
  if (typeof index === "number") return index;
  return /^-?\d{1,15}$/.test(index.trim()) ? Number(index.trim()) : undefined;
}

/** AgentBench FC task names → ours; accepted by both protocols wherever a task name is. */
export const TASK_NAME_ALIASES: Readonly<Record<string, string>> = {
  "os-std": "os",
  "dbbench-std": "db",
  "kg-std": "kg",
  "alfworld-std": "alfworld",
  "webshop-std": "webshop",
};

export const startSampleRequestSchema = z.object({
  name: z.string().min(1, "name must be a non-empty task name"),
  index: sampleIndexSchema,
  /** Accepted for compatibility with the original; not used by our task families. */
  custom_task: z.unknown().optional(),
});

export const interactRequestSchema = z.object({
  /** The new assistant turn; when several messages are sent, the last one is the turn. */
  messages: z.array(z.unknown()).min(1, "messages must hold the assistant turn"),
});

export const heartbeatRequestSchema = z.object({
  name: z.string().min(1),
  /** The worker's base URL including `/api`, e.g. `http://127.0.0.1:5021/api`. */
  address: z.url({ protocol: /^https?$/ }),
  concurrency: z.number().int().positive(),
  /** All sample indices of the task (train and test). */
  indices: z.array(z.number().int()),
  /** Extension: the indices of each split, for `get_indices?split=`. */
  splits: z
    .object({ train: z.array(z.number().int()), test: z.array(z.number().int()) })
    .optional(),
  /** Extension: the indices of each split at each difficulty (curriculum families), for `get_indices?difficulty=`. */
  difficulties: z
    .record(
      z.string().regex(/^-?\d+$/, "difficulty keys must be integers"),
      z.object({ train: z.array(z.number().int()), test: z.array(z.number().int()) }),
    )
    .optional(),
});

/** The indices of each split at each difficulty, keyed by the difficulty's decimal string. */
export type DifficultyIndices = Record<string, { train: number[]; test: number[] }>;

/** A `difficulty=` query value: an integer. */
export const difficultySchema = z.string().regex(/^-?\d+$/, "difficulty must be an integer");

export const workerStartRequestSchema = z.object({
  index: sampleIndexSchema.transform((index, context) => {
    const sample = sampleNumberOf(index);
    if (sample === undefined)
      context.addIssue({
        code: "custom",
        message: `index ${JSON.stringify(index)} is not a sample index`,
      });
    return sample ?? -1;
  }),
  session_id: z.union([z.string().min(1), z.number().int()]).transform(String),
});

export const splitSchema = z.enum(["train", "test"], { error: 'split must be "train" or "test"' });

export type StartSampleRequest = z.infer<typeof startSampleRequestSchema>;
export type HeartbeatRequest = z.infer<typeof heartbeatRequestSchema>;

/** Validates `value` against `schema`, or throws a 400 naming every problem. */
export function parseRequest<T extends z.ZodType>(
  schema: T,
  value: unknown,
  what: string,
): z.infer<T> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const problems = result.error.issues
    .map((issue) => `${issue.path.length ? issue.path.join(".") + ": " : ""}${issue.message}`)
    .join("; ");
  throw new EnvironmentApiError(400, `invalid ${what}: ${problems}`);
}

/** Turns the last message of an interact body into an assistant message, or throws a 400. */
export function parseAssistantTurn(body: unknown): import("../types.js").AssistantMessage {
  const { messages } = parseRequest(interactRequestSchema, body, "interact body");
  const turn = parseRequest(
    assistantMessageSchema,
    messages[messages.length - 1],
    "assistant message",
  );
  return {
    role: "assistant",
    content: turn.content ?? null,
    ...(turn.tool_calls && turn.tool_calls.length
      ? {
          tool_calls: turn.tool_calls.map((call, position) => ({
            id: call.id ?? `call_${position}`,
            type: "function" as const,
            function: {
              name: call.function.name,
              arguments:
                typeof call.function.arguments === "string"
                  ? call.function.arguments
                  : JSON.stringify(call.function.arguments ?? {}),
            },
          })),
        }
      : {}),
  };
}
