/**
 * A task family exposed as an MCP server, so that an MCP-speaking agent can play it. Built
 * on the official SDK's low-level `Server` (the family's tools keep their JSON schemas).
 *
 * Tools offered:
 * - `start_task {index?}`: starts an episode (default: the family's train instances in
 *   turn); answers the opening messages and the episode's `session` id;
 * - each of the family's tools, with one more required argument, `session`;
 * - `submit_answer {session, answer}`: a turn of plain text (KG's `Final Answer: #3`, …).
 * Every call of an episode is one turn of the function-call API. When the episode ends, the
 * result's text says so, and `structuredContent` carries `{finished, reward, status}`.
 *
 *   const server = await createTaskMcpServer(await createTaskFamily("kg"));
 *   await server.connect(new StdioServerTransport());      // or a streamable-HTTP transport
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  type CallToolResult,
} from "@modelcontextprotocol/sdk/types.js";
import { randomBytes } from "node:crypto";
import {
  EnvironmentError,
  type Message,
  type TaskFamily,
  type TaskSession,
  type ToolSpec,
} from "../types.js";

export interface TaskMcpServerOptions {
  /** Server name announced to clients. Default `agentrl-<family>`. */
  name?: string;
  /** Most episodes open at once (older unfinished ones are cancelled beyond). Default 64. */
  maxSessions?: number;
}

const START_TOOL = "start_task";
const ANSWER_TOOL = "submit_answer";

function messagesText(messages: readonly Message[]): string {
  return messages.map((message) => `[${message.role}] ${message.content ?? ""}`).join("\n\n");
}

/**
 * An MCP `Server` (not yet connected) that plays `family`. Its tool list is read from one
 * session of the family's first train instance (started and cancelled at once).
 */
export async function createTaskMcpServer(
  family: TaskFamily,
  options: TaskMcpServerOptions = {},
): Promise<Server> {
  const trainIndices = family.indices("train");
  if (trainIndices.length === 0)
    throw new EnvironmentError(`${family.name} has no train instances`);
  const probe = await family.startSession(trainIndices[0]);
  const tools: ToolSpec[] = probe.start.tools;
  await probe.cancel();
  const toolNames = new Set(tools.map((tool) => tool.function.name));
  for (const reserved of [START_TOOL, ANSWER_TOOL]) {
    if (toolNames.has(reserved))
      throw new EnvironmentError(
        `${family.name} has a tool named ${reserved}, which the MCP wrapper reserves`,
      );
  }
  const sessions = new Map<string, TaskSession>();
  const maxSessions = options.maxSessions ?? 64;
  let nextInstance = 0;

  const server = new Server(
    { name: options.name ?? `agentrl-${family.name}`, version: "0.1.0" },
    { capabilities: { tools: {} } },
  );
  const sessionArgument = {
    session: { type: "string", description: "The episode's session id, from start_task." },
  };
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      {
        name: START_TOOL,
        description: `Starts an episode of ${family.name}. Answers the task and the session id every other tool needs.`,
        inputSchema: {
          type: "object",
          properties: {
            index: {
              type: "integer",
              description: "Instance index (default: the next train instance).",
            },
          },
        },
      },
      ...tools.map((tool) => ({
        name: tool.function.name,
        description: tool.function.description,
        inputSchema: {
          ...tool.function.parameters,
          type: "object" as const,
          properties: { ...sessionArgument, ...tool.function.parameters.properties },
          required: ["session", ...(tool.function.parameters.required ?? [])],
        },
      })),
      {
        name: ANSWER_TOOL,
        description: "Gives the episode's final answer as text (a turn without a tool call).",
        inputSchema: {
          type: "object",
          properties: { ...sessionArgument, answer: { type: "string" } },
          required: ["session", "answer"],
        },
      },
    ],
  }));

  server.setRequestHandler(CallToolRequestSchema, async (request): Promise<CallToolResult> => {
    const { name } = request.params;
    const args = { ...(request.params.arguments ?? {}) } as Record<string, unknown>;
    const failure = (text: string): CallToolResult => ({
      content: [{ type: "text", text }],
      isError: true,
    });
    if (name === START_TOOL) {
      const index =
        typeof args.index === "number"
          ? args.index
          : trainIndices[nextInstance++ % trainIndices.length];
      const session = await family.startSession(index);
      const id = randomBytes(12).toString("hex");
      sessions.set(id, session);
      if (sessions.size > maxSessions) {
        const [oldest] = sessions.keys();
        void sessions.get(oldest)?.cancel();
        sessions.delete(oldest);
      }
      return {
        content: [
          { type: "text", text: `${messagesText(session.start.messages)}\n\nsession: ${id}` },
        ],
        structuredContent: { session: id, index, messages: session.start.messages },
      };
    }
    const id = typeof args.session === "string" ? args.session : "";
    const session = sessions.get(id);
    if (!session) return failure(`no open episode with session "${id}": call ${START_TOOL} first`);
    delete args.session;
    let message;
    if (name === ANSWER_TOOL) {
      message = { role: "assistant" as const, content: String(args.answer ?? "") };
    } else if (toolNames.has(name)) {
      message = {
        role: "assistant" as const,
        content: null,
        tool_calls: [
          {
            id: `call_${randomBytes(6).toString("hex")}`,
            type: "function" as const,
            function: { name, arguments: JSON.stringify(args) },
          },
        ],
      };
    } else {
      return failure(`unknown tool ${name}`);
    }
    const reply = await session.interact(message);
    let text = messagesText(reply.messages);
    if (reply.finish) {
      sessions.delete(id);
      text += `\n\n[episode finished: ${reply.status}, reward ${reply.reward}]`;
    }
    return {
      content: [{ type: "text", text }],
      structuredContent: {
        finished: reply.finish,
        reward: reply.reward,
        status: reply.status,
        metrics: reply.metrics,
      },
    };
  });

  server.onclose = () => {
    for (const session of sessions.values()) void session.cancel();
    sessions.clear();
  };
  return server;
}
