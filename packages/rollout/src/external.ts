/**
 * An external model behind an OpenAI-compatible `POST {baseUrl}/chat/completions`, used
 * as a member of the cross-policy pool (its turns enter the trajectory with loss mask 0).
 */
import { AgentRLError } from "@agentrl/spec";
import { z } from "zod";
import type { AssistantMessage, Message, ToolSpec } from "@agentrl/envs";

export class ExternalModelError extends AgentRLError {}

export interface ExternalChatModelOptions {
  /** Base URL, e.g. `http://127.0.0.1:8000/v1` (the request goes to `${baseUrl}/chat/completions`). */
  baseUrl: string;
  /** The `model` field of the request. */
  model: string;
  /** Sent as `Authorization: Bearer …` when given. Default none. */
  apiKey?: string;
  /** Sampling temperature sent. Default 0.8. */
  temperature?: number;
  /** `max_tokens` sent. Default 1,024. */
  maxTokens?: number;
  /**
   * More tries of a request whose connection the server reset before answering (a kept-alive
   * connection it closed while this thread was busy, e.g. in a training step, past its idle
   * timeout). Default 2.
   */
  connectionRetries?: number;
  /** The fetch to use (tests). Default the global `fetch`. */
  fetch?: typeof fetch;
}

/** Socket errors (the `code` of fetch's cause) after which a request is sent again on a new connection. */
const RETRIED_CONNECTION_ERRORS = new Set([
  "ECONNRESET",
  "EPIPE",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
]);

/** The socket error code behind a failed fetch (`TypeError: fetch failed` carries it in `cause`), if any. */
function connectionErrorCode(error: unknown): string | undefined {
  const cause = (error as { cause?: { code?: unknown } } | undefined)?.cause;
  const code = cause?.code ?? (error as { code?: unknown } | undefined)?.code;
  return typeof code === "string" ? code : undefined;
}

const ResponseSchema = z.object({
  choices: z
    .array(
      z.object({
        message: z.object({
          content: z.string().nullable().optional(),
          tool_calls: z
            .array(
              z.object({
                id: z.string().optional(),
                function: z.object({
                  name: z.string(),
                  arguments: z.union([z.string(), z.record(z.string(), z.unknown())]),
                }),
              }),
            )
            .nullable()
            .optional(),
        }),
      }),
    )
    .min(1),
});

export class ExternalChatModel {
  readonly options: Required<Omit<ExternalChatModelOptions, "apiKey">> & { apiKey?: string };

  constructor(options: ExternalChatModelOptions) {
    this.options = {
      temperature: 0.8,
      maxTokens: 1024,
      connectionRetries: 2,
      fetch: globalThis.fetch,
      ...options,
    };
  }

  /**
   * POSTs `body`; a connection reset before the answer is retried (up to `connectionRetries`
   * times), any other failure to reach the server is an ExternalModelError. Aborts propagate as they are.
   */
  private async post(
    url: string,
    headers: Record<string, string>,
    body: string,
    signal: AbortSignal | undefined,
  ): Promise<Response> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.options.fetch(url, { method: "POST", headers, body, signal });
      } catch (error) {
        if (signal?.aborted) throw error;
        const code = connectionErrorCode(error);
        if (
          code !== undefined &&
          RETRIED_CONNECTION_ERRORS.has(code) &&
          attempt < this.options.connectionRetries
        )
          continue;
        const tries = attempt + 1;
        throw new ExternalModelError(
          `${url} could not be reached (${code ?? (error as Error).message}${tries > 1 ? `, ${tries} tries` : ""})`,
          { cause: error },
        );
      }
    }
  }

  /** The model's next assistant message for the conversation. Throws ExternalModelError. */
  async complete(
    messages: readonly Message[],
    tools: readonly ToolSpec[],
    signal?: AbortSignal,
  ): Promise<AssistantMessage> {
    const url = `${this.options.baseUrl.replace(/\/+$/, "")}/chat/completions`;
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (this.options.apiKey) headers.authorization = `Bearer ${this.options.apiKey}`;
    const body = {
      model: this.options.model,
      messages,
      ...(tools.length > 0 ? { tools } : {}),
      temperature: this.options.temperature,
      max_tokens: this.options.maxTokens,
    };
    const response = await this.post(url, headers, JSON.stringify(body), signal);
    if (!response.ok)
      throw new ExternalModelError(
        `${url} answered HTTP ${response.status}: ${(await response.text()).slice(0, 200)}`,
      );
    const parsed = ResponseSchema.safeParse(await response.json());
    if (!parsed.success)
      throw new ExternalModelError(
        `${url} answered an unexpected body: ${parsed.error.issues[0]?.message}`,
      );
    const message = parsed.data.choices[0].message;
    const calls = (message.tool_calls ?? []).map((call, i) => ({
      id: call.id ?? `external_${i}`,
      type: "function" as const,
      function: {
        name: call.function.name,
        arguments:
          typeof call.function.arguments === "string"
            ? call.function.arguments
            : JSON.stringify(call.function.arguments),
      },
    }));
    return calls.length > 0
      ? { role: "assistant", content: message.content ?? null, tool_calls: calls }
      : { role: "assistant", content: message.content ?? "" };
  }
}
