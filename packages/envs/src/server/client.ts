/**
 * `HttpEnvironmentClient`: the `EnvironmentClient` the rollout engine uses to drive sessions
 * on a controller over HTTP (ours or the original's), over keep-alive sockets.
 */
import type {
  AssistantMessage,
  EnvironmentClient,
  InteractResult,
  Split,
  StartResult,
} from "../types.js";
import { EnvironmentApiError, SESSION_HEADER } from "./protocol.js";
import { JsonRequester, errorMessageOf } from "./http.js";
import { controllerBase } from "./worker.js";
import { tokenFromEnvironment } from "./token.js";

export interface HttpEnvironmentClientOptions {
  /** Controller base URL, e.g. `http://127.0.0.1:5020` (a trailing `/api` is accepted). */
  url: string;
  /** Bearer token of the controller. Default: `AGENTRL_TOKEN`, else the token file `env serve` writes (`~/.agentrl/controller-token`), else none. */
  token?: string;
  /** Time limit of one request in ms; longer than the controller's interaction limit. Default 300,000. */
  requestTimeoutMs?: number;
  /** Most sockets kept open to the controller. Default: unlimited. */
  maxSockets?: number;
}

export class HttpEnvironmentClient implements EnvironmentClient {
  private readonly base: string;
  private readonly token?: string;
  private readonly requestTimeoutMs: number;
  private readonly requester: JsonRequester;

  constructor(options: HttpEnvironmentClientOptions) {
    this.base = `${controllerBase(options.url)}/api`;
    this.token = options.token ?? tokenFromEnvironment();
    this.requestTimeoutMs = options.requestTimeoutMs ?? 300_000;
    this.requester = new JsonRequester({ maxSockets: options.maxSockets });
  }

  async startSample(name: string, index: number): Promise<{ sessionId: string } & StartResult> {
    const { body, headers } = await this.call("POST", "/start_sample", { name, index });
    const header = headers[SESSION_HEADER];
    const sessionId = Array.isArray(header) ? header[0] : header;
    if (!sessionId)
      throw new EnvironmentApiError(
        502,
        "the controller answered start_sample without a session_id header",
      );
    const start = body as StartResult;
    return { sessionId, messages: start.messages, tools: start.tools };
  }

  async interact(sessionId: string, message: AssistantMessage): Promise<InteractResult> {
    const { body } = await this.call("POST", "/interact", { messages: [message] }, sessionId);
    return body as InteractResult;
  }

  async cancel(sessionId: string): Promise<void> {
    await this.call("POST", "/cancel", {}, sessionId);
  }

  /** Sample indices of `name`: all, one split, or one split at one difficulty (our controller's extension). */
  async getIndices(name: string, split?: Split, difficulty?: number): Promise<number[]> {
    const query = new URLSearchParams({
      name,
      ...(split ? { split } : {}),
      ...(difficulty !== undefined
        ? { split: split ?? "train", difficulty: String(difficulty) }
        : {}),
    });
    return (await this.call("GET", `/get_indices?${query}`)).body as number[];
  }

  /** Cancels every session (of task `name`, when given); resolves with how many. */
  async cancelAll(name?: string): Promise<number> {
    const query = name ? `?${new URLSearchParams({ name })}` : "";
    return ((await this.call("POST", `/cancel_all${query}`, {})).body as { cancelled: number })
      .cancelled;
  }

  /** The controller's view of its workers (`GET /api/list_workers`). */
  async listWorkers(): Promise<Record<string, unknown>> {
    return (await this.call("GET", "/list_workers")).body as Record<string, unknown>;
  }

  /** The running sessions (`GET /api/list_sessions`). */
  async listSessions(): Promise<Record<string, { name: string; index: number }>> {
    return (await this.call("GET", "/list_sessions")).body as Record<
      string,
      { name: string; index: number }
    >;
  }

  async close(): Promise<void> {
    this.requester.close();
  }

  private async call(method: "GET" | "POST", path: string, body?: unknown, sessionId?: string) {
    const response = await this.requester.request(`${this.base}${path}`, {
      method,
      body,
      timeoutMs: this.requestTimeoutMs,
      headers: {
        ...(sessionId ? { [SESSION_HEADER]: sessionId } : {}),
        ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
      },
    });
    if (response.status !== 200) {
      throw new EnvironmentApiError(
        response.status,
        `controller answered ${response.status} to ${method} ${path.split("?")[0]}: ${errorMessageOf(response.body)}`,
      );
    }
    return response;
  }
}
