/**
 * AgentBench's v0.2 protocol (THUDM/AgentBench `src/client/task.py`, `src/typings/*.py`,
 * `src/server/task_controller.py`) on our controller, beside the function-calling one.
 *
 * The v0.2 routes live under `/v0.2/api` (a v0.2 `TaskClient` is given
 * `controller_address="http://host:5020/v0.2/api"`); the FC routes under `/api` stay as they
 * are. v0.2 is a text protocol: the agent sees a chat history of `user`/`agent` items and
 * answers with text. Our tasks are function-calling, so this adapter
 *
 *   - renders the opening messages and the tool list as the first `user` item, with the
 *     format of a tool call: `<tool_call>{"name": …, "arguments": {…}}</tool_call>`;
 *   - parses the agent's text back into tool calls (that format, or a bare JSON object
 *     `{"name", "arguments"}` / a list of them, optionally in a ```json fence); text with no
 *     tool call goes to the task as plain content, which answers as it does in FC;
 *   - renders each answer's new messages (tool results, feedback) as one `user` item.
 *
 * Session ids are ints (the number of our `<prefix>-<n>` id; the string id is also sent in
 * the `session_id` header). Status codes as in v0.2: unknown task at start → 406, unknown
 * task elsewhere → 400, unknown session → 400, no free worker → 406, bad body → 422 as
 * FastAPI would answer.
 */
import { z } from "zod";
import {
  SAMPLE_STATUSES,
  type AssistantMessage,
  type InteractResult,
  type Message,
  type SampleStatus,
  type StartResult,
  type ToolSpec,
} from "../types.js";
import {
  EnvironmentApiError,
  SESSION_HEADER,
  TASK_NAME_ALIASES,
  parseRequest,
  sampleIndexSchema,
} from "./protocol.js";
import type { RouteRequest, RouteResponse } from "./http.js";

/** The route prefix of the v0.2 protocol. */
export const AGENTBENCH_PREFIX = "/v0.2/api";

/** v0.2's `SampleStatus`: ours without `cancelled`, which v0.2 clients cannot parse (it is sent as `task error`). */
export type AgentBenchSampleStatus = Exclude<SampleStatus, "cancelled">;
export const AGENTBENCH_SAMPLE_STATUSES: readonly AgentBenchSampleStatus[] = SAMPLE_STATUSES.filter(
  (status): status is AgentBenchSampleStatus => status !== "cancelled",
);

/** v0.2's `WorkerStatus` (an IntEnum). */
export const AGENTBENCH_WORKER_STATUS = { alive: 0, coma: 1, dead: 2 } as const;

/** One item of a v0.2 chat history. */
export interface ChatHistoryItem {
  role: "user" | "agent";
  content: string;
}

/** v0.2's `TaskOutput`. */
export interface TaskOutput {
  index: number | string | null;
  status: AgentBenchSampleStatus;
  /** Ours: `{reward, metrics}` once the sample ended, else null. */
  result: unknown;
  history: ChatHistoryItem[] | null;
}

// ── request schemas (v0.2's pydantic models) ────────────────────────────────

/** A v0.2 session id: an int (a numeric string is accepted, as pydantic does). */
const sessionNumberSchema = z.union([
  z.number().int().nonnegative(),
  z
    .string()
    .regex(/^\d{1,15}$/, "session_id must be an integer")
    .transform(Number),
]);

export const agentBenchStartSchema = z.object({
  name: z.string().min(1, "name must be a non-empty task name"),
  index: sampleIndexSchema,
});

export const agentOutputSchema = z
  .object({
    status: z.enum(["normal", "cancelled", "agent context limit"]).default("normal"),
    content: z.string().nullable().optional(),
    length: z.number().int().optional(),
  })
  .refine((output) => output.status !== "normal" || typeof output.content === "string", {
    message: "If status is NORMAL, content should not be None",
  });

export const agentBenchInteractSchema = z.object({
  session_id: sessionNumberSchema,
  agent_response: agentOutputSchema,
});

export const agentBenchCancelSchema = z.object({ session_id: sessionNumberSchema });

const chatHistoryItemSchema = z.object({ role: z.enum(["user", "agent"]), content: z.string() });

export const taskOutputSchema = z.object({
  index: z.union([z.number().int(), z.string()]).nullable().optional(),
  status: z.enum(SAMPLE_STATUSES).default("running"),
  result: z.unknown().optional(),
  history: z.array(chatHistoryItemSchema).nullable().optional(),
});

export const calculateOverallSchema = z.object({
  name: z.string().min(1),
  results: z.array(taskOutputSchema),
});

// ── text ↔ function calls ───────────────────────────────────────────────────

/** The first `user` item: the opening messages and how to call the tools. */
export function openingText(start: StartResult): string {
  const opening = start.messages
    .map((message) => ("content" in message && message.content ? message.content : ""))
    .filter(Boolean)
    .join("\n\n");
  if (start.tools.length === 0) return opening;
  const tools = start.tools.map((tool: ToolSpec) => JSON.stringify(tool.function)).join("\n");
  return (
    `${opening}\n\n# Tools\n\nYou may call these tools (JSON schema of each):\n${tools}\n\n` +
    `To call a tool, answer with\n<tool_call>{"name": "<tool name>", "arguments": {<arguments as JSON>}}</tool_call>`
  );
}

/** The new messages of one answer as one `user` item's text (tool results verbatim). */
export function feedbackText(messages: Message[]): string {
  return messages
    .map((message) => ("content" in message && message.content ? message.content : ""))
    .filter(Boolean)
    .join("\n\n");
}

const TOOL_CALL_BLOCK = /<tool_call>\s*([\s\S]*?)\s*<\/tool_call>/g;
const JSON_FENCE = /^```(?:json)?\s*([\s\S]*?)\s*```$/;

/** A call `{name, arguments}` as the agent wrote it, or undefined when `value` is not one. */
function asCall(value: unknown): { name: string; arguments: unknown } | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const record = value as Record<string, unknown>;
  return typeof record.name === "string"
    ? { name: record.name, arguments: record.arguments ?? record.parameters ?? {} }
    : undefined;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Turns an agent's text into an assistant message: `<tool_call>` blocks, or the whole text as
 * a JSON call / list of calls. A block that is not valid JSON is kept as a call with its raw
 * text as arguments, so the task answers it with its own "invalid arguments" message.
 */
export function parseTextAction(content: string): AssistantMessage {
  const calls: { name: string; arguments: unknown }[] = [];
  for (const match of content.matchAll(TOOL_CALL_BLOCK)) {
    const parsed = parseJson(match[1]);
    const call = asCall(parsed);
    if (call) calls.push(call);
    else {
      const name = /"name"\s*:\s*"([^"]+)"/.exec(match[1])?.[1];
      if (name) calls.push({ name, arguments: match[1] });
    }
  }
  if (calls.length === 0) {
    const trimmed = content.trim();
    const whole = parseJson(JSON_FENCE.exec(trimmed)?.[1] ?? trimmed);
    for (const item of Array.isArray(whole) ? whole : [whole]) {
      const call = asCall(item);
      if (call) calls.push(call);
    }
  }
  if (calls.length === 0) return { role: "assistant", content };
  return {
    role: "assistant",
    content: content.replace(TOOL_CALL_BLOCK, "").trim() || null,
    tool_calls: calls.map((call, position) => ({
      id: `call_${position}`,
      type: "function" as const,
      function: {
        name: call.name,
        arguments:
          typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments),
      },
    })),
  };
}

/** Our status as v0.2 clients can parse it. */
export function agentBenchStatus(status: SampleStatus): AgentBenchSampleStatus {
  return status === "cancelled" ? "task error" : status;
}

// ── calculate_overall ───────────────────────────────────────────────────────

/** Reward of one v0.2 result as this adapter wrote it (`result.reward`), else 0. */
function rewardOf(output: z.infer<typeof taskOutputSchema>): number {
  const result = output.result as { reward?: unknown } | null | undefined;
  return typeof result?.reward === "number" && Number.isFinite(result.reward) ? result.reward : 0;
}

/**
 * The task's own overall numbers over v0.2 results: success rate (reward ≥ 1), mean reward,
 * the share of each status, and the mean of each numeric metric.
 */
export function calculateOverall(
  results: z.infer<typeof taskOutputSchema>[],
): Record<string, unknown> {
  const total = results.length;
  const rewards = results.map(rewardOf);
  const statuses: Record<string, number> = {};
  for (const result of results)
    statuses[result.status] = (statuses[result.status] ?? 0) + 1 / total;
  const metricSums: Record<string, { sum: number; count: number }> = {};
  for (const result of results) {
    const metrics = (result.result as { metrics?: unknown } | null | undefined)?.metrics;
    if (typeof metrics !== "object" || metrics === null) continue;
    for (const [key, value] of Object.entries(metrics)) {
      if (typeof value !== "number" || !Number.isFinite(value)) continue;
      const entry = (metricSums[key] ??= { sum: 0, count: 0 });
      entry.sum += value;
      entry.count += 1;
    }
  }
  return {
    total,
    success_rate: total ? rewards.filter((reward) => reward >= 1).length / total : 0,
    average_reward: total ? rewards.reduce((a, b) => a + b, 0) / total : 0,
    status: statuses,
    metrics: Object.fromEntries(
      Object.entries(metricSums).map(([key, { sum, count }]) => [key, sum / count]),
    ),
  };
}

// ── the routes ──────────────────────────────────────────────────────────────

/** What the v0.2 routes need from the controller (its public API). */
export interface AgentBenchHost {
  resolveTaskName(name: string): string | undefined;
  startSample(
    name: string,
    index: number | string,
  ): Promise<{ sessionId: string; start: StartResult }>;
  interact(sessionId: string, message: AssistantMessage): Promise<InteractResult>;
  cancel(sessionId: string, status?: SampleStatus): Promise<void>;
  cancelAll(name: string | undefined): Promise<number>;
  getIndices(name: string): number[];
  isRunning(sessionId: string): boolean;
  sessionIdOfNumber(sessionNumber: number): string;
  sessionNumberOf(sessionId: string): number;
  listWorkers(): Record<
    string,
    {
      workers: Record<
        number,
        {
          id: number;
          address: string;
          capacity: number;
          current: number;
          status: string;
          last_visit: number;
        }
      >;
    }
  >;
  listSessions(): Record<
    string,
    {
      name: string;
      index: number;
      worker_id: number;
      start: number;
      last_update: number;
      busy: boolean;
    }
  >;
  taskNames(): string[];
}

/** The v0.2 transcript of one open session. */
interface Transcript {
  index: number | string;
  history: ChatHistoryItem[];
}

/** Rethrows `error` with v0.2's status when ours differs (404 → the given one, 409 → 400). */
function withAgentBenchStatus(error: unknown, notFound: number): never {
  if (error instanceof EnvironmentApiError && (error.status === 404 || error.status === 409)) {
    throw new EnvironmentApiError(error.status === 404 ? notFound : 400, error.message);
  }
  throw error;
}

/** FastAPI answers a body that fails its pydantic model with 422. */
function parseBody<T extends z.ZodType>(schema: T, body: unknown, what: string): z.infer<T> {
  try {
    return parseRequest(schema, body, what);
  } catch (error) {
    if (error instanceof EnvironmentApiError && error.status === 400)
      throw new EnvironmentApiError(422, error.message);
    throw error;
  }
}

/** The v0.2 routes, keyed `"METHOD /v0.2/api/..."`. */
export function agentBenchRoutes(
  host: AgentBenchHost,
): Record<string, (request: RouteRequest) => Promise<RouteResponse>> {
  const transcripts = new Map<string, Transcript>();
  const forgetEnded = (): void => {
    for (const id of transcripts.keys()) if (!host.isRunning(id)) transcripts.delete(id);
  };
  const knownTask = (name: string, status: number): string => {
    const resolved = host.resolveTaskName(name);
    if (!resolved)
      throw new EnvironmentApiError(
        status,
        `Error: Task does not exist: "${name}"; known: ${host.taskNames().join(", ") || "none"}`,
      );
    return resolved;
  };
  const output = (
    sessionId: string,
    transcript: Transcript,
    status: SampleStatus,
    result: unknown,
  ): { session_id: number; output: TaskOutput } => ({
    session_id: host.sessionNumberOf(sessionId),
    output: {
      index: transcript.index,
      status: agentBenchStatus(status),
      result,
      history: transcript.history,
    },
  });
  const openSession = (sessionNumber: number): { sessionId: string; transcript: Transcript } => {
    const sessionId = host.sessionIdOfNumber(sessionNumber);
    const transcript = transcripts.get(sessionId);
    if (!transcript)
      throw new EnvironmentApiError(400, `Error: Session does not exist: ${sessionNumber}`);
    return { sessionId, transcript };
  };

  return {
    [`GET ${AGENTBENCH_PREFIX}/get_indices`]: async (request) => {
      const name = request.query.get("name");
      if (!name) throw new EnvironmentApiError(422, "missing query parameter name");
      return { body: host.getIndices(knownTask(name, 400)) };
    },
    [`GET ${AGENTBENCH_PREFIX}/list_workers`]: async () => {
      const listed: Record<string, unknown> = {};
      const workers = host.listWorkers();
      for (const [name, task] of Object.entries(workers)) {
        listed[name] = {
          indices: host.getIndices(name),
          workers: Object.fromEntries(
            Object.entries(task.workers).map(([id, worker]) => [
              id,
              {
                id: worker.id,
                address: worker.address,
                capacity: worker.capacity,
                current: worker.current,
                last_visit: worker.last_visit,
                status:
                  AGENTBENCH_WORKER_STATUS[worker.status as "alive" | "dead"] ??
                  AGENTBENCH_WORKER_STATUS.dead,
                locked: false,
              },
            ]),
          ),
        };
      }
      // The FC names, so that a client asking for `kg-std` finds its workers.
      for (const [alias, name] of Object.entries(TASK_NAME_ALIASES))
        if (listed[name] && !listed[alias]) listed[alias] = listed[name];
      return { body: listed };
    },
    [`GET ${AGENTBENCH_PREFIX}/list_sessions`]: async () => {
      const sessions = host.listSessions();
      return {
        body: Object.fromEntries(
          Object.entries(sessions).map(([id, s]) => [
            host.sessionNumberOf(id),
            {
              name: s.name,
              index: s.index,
              start: s.start,
              last_update: s.last_update,
              worker_id: s.worker_id,
              locked: s.busy,
            },
          ]),
        ),
      };
    },
    [`POST ${AGENTBENCH_PREFIX}/start_sample`]: async (request) => {
      const { name, index } = parseBody(agentBenchStartSchema, request.body, "start_sample body");
      forgetEnded();
      const task = knownTask(name, 406);
      const { sessionId, start } = await host
        .startSample(task, index)
        .catch((error) => withAgentBenchStatus(error, 406));
      const transcript: Transcript = {
        index: typeof index === "string" && /^\d+$/.test(index) ? Number(index) : index,
        history: [{ role: "user", content: openingText(start) }],
      };
      transcripts.set(sessionId, transcript);
      return {
        body: output(sessionId, transcript, "running", null),
        headers: { [SESSION_HEADER]: sessionId },
      };
    },
    [`POST ${AGENTBENCH_PREFIX}/interact`]: async (request) => {
      const { session_id, agent_response } = parseBody(
        agentBenchInteractSchema,
        request.body,
        "interact body",
      );
      const { sessionId, transcript } = openSession(session_id);
      if (agent_response.status !== "normal") {
        const status: SampleStatus =
          agent_response.status === "cancelled" ? "cancelled" : "agent context limit";
        await host.cancel(sessionId, status).catch((error) => withAgentBenchStatus(error, 400));
        transcripts.delete(sessionId);
        return { body: output(sessionId, transcript, status, { reward: 0, metrics: {} }) };
      }
      const content = agent_response.content ?? "";
      const result = await host
        .interact(sessionId, parseTextAction(content))
        .catch((error) => withAgentBenchStatus(error, 400));
      transcript.history.push({ role: "agent", content });
      const feedback = feedbackText(result.messages);
      if (feedback) transcript.history.push({ role: "user", content: feedback });
      if (result.finish) transcripts.delete(sessionId);
      return {
        body: output(
          sessionId,
          transcript,
          result.status,
          result.finish ? { reward: result.reward, metrics: result.metrics } : null,
        ),
      };
    },
    [`POST ${AGENTBENCH_PREFIX}/cancel`]: async (request) => {
      const { session_id } = parseBody(agentBenchCancelSchema, request.body, "cancel body");
      const { sessionId } = openSession(session_id);
      await host.cancel(sessionId).catch((error) => withAgentBenchStatus(error, 400));
      transcripts.delete(sessionId);
      return { body: { session_id } };
    },
    [`POST ${AGENTBENCH_PREFIX}/cancel_all`]: async () => {
      const cancelled = await host.cancelAll(undefined);
      forgetEnded();
      return { body: { cancelled } };
    },
    [`POST ${AGENTBENCH_PREFIX}/calculate_overall`]: async (request) => {
      const { name, results } = parseBody(
        calculateOverallSchema,
        request.body,
        "calculate_overall body",
      );
      knownTask(name, 400);
      return { body: calculateOverall(results) };
    },
  };
}
