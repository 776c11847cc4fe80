/**
 * MCP tools as an environment: a task family whose tools come from an MCP server (stdio or
 * streamable HTTP, through the official `@modelcontextprotocol/sdk` client), with the
 * user's task list and reward function.
 *
 *   const family = createMcpTaskFamily({
 *     name: "prices",
 *     server: { command: "node", args: ["prices-server.js"] },        // or { url: "http://…/mcp" }
 *     tasks: [{ prompt: "What do two apples cost?", answer: "4" }],
 *     reward: (task, { answer }) => (answer.includes(task.answer) ? 1 : 0),
 *   });
 *
 * An episode: the system prompt and the task's prompt; the agent calls the server's tools
 * (arguments checked against their input schemas; results as text, an MCP error result as
 * `Error: …`) and ends by answering in plain text, which the reward function scores (status
 * `completed`). The turn limit ends it with `task limit reached`; a server that fails ends it
 * with `task error` (an infrastructure fault for the trainer).
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { FunctionCallSession, type ToolReply } from "../session.js";
import {
  EnvironmentError,
  type JsonSchema,
  type Split,
  type TaskFamily,
  type TaskSession,
  type ToolSpec,
} from "../types.js";

/** How to reach an MCP server: a command to start (stdio) or a streamable-HTTP URL. */
export type McpServerSpec =
  | { command: string; args?: string[]; env?: Record<string, string>; cwd?: string }
  | { url: string; headers?: Record<string, string> };

/** One task of the family: the prompt the agent gets, plus whatever the reward function needs. */
export interface McpTask {
  prompt: string;
}

/** One tool call of an episode, for the reward function. */
export interface McpCallRecord {
  name: string;
  arguments: Record<string, unknown>;
  result: string;
  isError: boolean;
}

export interface McpTaskFamilyOptions<Task extends McpTask> {
  name: string;
  server: McpServerSpec;
  /** The tasks: one list (all of them the train split; the test split is the same list) or both splits. */
  tasks: readonly Task[] | { train: readonly Task[]; test: readonly Task[] };
  /** The episode's reward, from the agent's final answer and its calls. */
  reward: (
    task: Task,
    ending: { answer: string; calls: readonly McpCallRecord[] },
  ) => number | Promise<number>;
  /** System prompt. Default: a short instruction to use the tools and answer in plain text. */
  system?: string;
  /** Assistant turns before `task limit reached`. Default 10. */
  maxTurns?: number;
  /** Only these of the server's tools are offered. Default: all. */
  tools?: readonly string[];
  /** A fresh connection (for stdio: a fresh server process) per episode, for servers with per-client state. Default false: one shared. */
  connectionPerEpisode?: boolean;
  /** Time limit of one tool call, milliseconds. Default 60,000. */
  toolTimeoutMs?: number;
}

const DEFAULT_SYSTEM =
  "You are an agent with tools. Call the tools you need, then give your final answer as plain text without a tool call.";

/** Connects an MCP client to a server. */
export async function connectMcpServer(
  spec: McpServerSpec,
  clientName = "agentrl",
): Promise<Client> {
  const client = new Client({ name: clientName, version: "0.1.0" });
  const transport =
    "url" in spec
      ? new StreamableHTTPClientTransport(new URL(spec.url), {
          requestInit: { headers: spec.headers ?? {} },
        })
      : new StdioClientTransport({
          command: spec.command,
          args: spec.args ?? [],
          env: spec.env ? { ...(process.env as Record<string, string>), ...spec.env } : undefined,
          cwd: spec.cwd,
          stderr: "ignore",
        });
  try {
    await client.connect(transport);
  } catch (error) {
    throw new EnvironmentError(
      `could not connect to the MCP server ${"url" in spec ? spec.url : spec.command}: ${(error as Error).message}`,
      { cause: error },
    );
  }
  return client;
}

/** An MCP server's tools as the function-call API's tool specs. */
export async function mcpToolSpecs(client: Client, only?: readonly string[]): Promise<ToolSpec[]> {
  const listed = await client.listTools();
  const wanted = only ? new Set(only) : undefined;
  return listed.tools
    .filter((tool) => !wanted || wanted.has(tool.name))
    .map((tool) => ({
      type: "function",
      function: {
        name: tool.name,
        description: tool.description ?? "",
        parameters: {
          ...(tool.inputSchema as JsonSchema),
          type: "object" as const,
          properties: (tool.inputSchema.properties ?? {}) as Record<string, JsonSchema>,
          required: tool.inputSchema.required,
        },
      },
    }));
}

/** The text of an MCP tool result (text parts joined; other parts named). */
export function mcpResultText(result: object): string {
  const content = (result as { content?: unknown }).content;
  const parts = Array.isArray(content) ? (content as { type: string; text?: string }[]) : [];
  return parts
    .map((part) => (part.type === "text" ? (part.text ?? "") : `[${part.type} content]`))
    .join("\n");
}

class McpSession<Task extends McpTask> extends FunctionCallSession {
  private readonly calls: McpCallRecord[] = [];

  constructor(
    private readonly client: Client,
    private readonly task: Task,
    private readonly options: McpTaskFamilyOptions<Task>,
    tools: ToolSpec[],
    private readonly closeClient: boolean,
  ) {
    super(
      {
        messages: [
          { role: "system", content: options.system ?? DEFAULT_SYSTEM },
          { role: "user", content: task.prompt },
        ],
        tools,
      },
      { maxTurns: options.maxTurns ?? 10 },
    );
  }

  protected override async callTool(
    name: string,
    args: Record<string, unknown>,
  ): Promise<ToolReply> {
    const result = await this.client.callTool({ name, arguments: args }, undefined, {
      timeout: this.options.toolTimeoutMs ?? 60_000,
    });
    const text = mcpResultText(result);
    const isError = result.isError === true;
    this.calls.push({ name, arguments: args, result: text, isError });
    return { content: isError ? `Error: ${text}` : text };
  }

  protected override async onText(content: string): Promise<{
    content: string;
    outcome: { reward: number; status: "completed"; metrics: Record<string, number> };
  }> {
    const reward = await this.options.reward(this.task, { answer: content, calls: this.calls });
    return {
      content: "Answer received.",
      outcome: { reward, status: "completed", metrics: { toolCalls: this.calls.length } },
    };
  }

  protected override async release(): Promise<void> {
    if (this.closeClient) await this.client.close().catch(() => {});
  }
}

/** A task family over an MCP server's tools (see the module's comment). */
export function createMcpTaskFamily<Task extends McpTask>(
  options: McpTaskFamilyOptions<Task>,
): TaskFamily {
  const train = Array.isArray(options.tasks)
    ? (options.tasks as readonly Task[])
    : (options.tasks as { train: readonly Task[] }).train;
  const test = Array.isArray(options.tasks)
    ? []
    : (options.tasks as { test: readonly Task[] }).test;
  const all = [...train, ...test];
  let shared: Promise<{ client: Client; tools: ToolSpec[] }> | undefined;
  const connect = async () => {
    const client = await connectMcpServer(options.server, `agentrl-${options.name}`);
    try {
      return { client, tools: await mcpToolSpecs(client, options.tools) };
    } catch (error) {
      await client.close().catch(() => {});
      throw error;
    }
  };
  return {
    name: options.name,
    indices(split: Split): number[] {
      if (split === "train") return train.map((_, i) => i);
      // One list: the test split is the same tasks.
      return test.length > 0 ? test.map((_, i) => train.length + i) : train.map((_, i) => i);
    },
    async startSession(index: number): Promise<TaskSession> {
      const task = all[index];
      if (!task)
        throw new EnvironmentError(`${options.name} has no task ${index} (${all.length} tasks)`);
      if (options.connectionPerEpisode) {
        const { client, tools } = await connect();
        return new McpSession(client, task, options, tools, true);
      }
      shared ??= connect();
      const { client, tools } = await shared.catch((error) => {
        shared = undefined;
        throw error;
      });
      return new McpSession(client, task, options, tools, false);
    },
    async close(): Promise<void> {
      const connection = shared;
      shared = undefined;
      if (connection)
        await (await connection.catch(() => undefined))?.client.close().catch(() => {});
    },
  };
}
