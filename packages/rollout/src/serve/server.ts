/**
 * An OpenAI-compatible chat-completions server over ONE inference engine (continuous
 * batching: concurrent requests, and the `n` choices of one request, share decode steps).
 *
 *   GET  /health                 {status: "ok", model, engine: EngineStats}   (no key needed)
 *   GET  /v1/models              {object: "list", data: [{id, object: "model", created, owned_by}]}
 *   POST /v1/chat/completions    OpenAI request → chat.completion, or SSE chat.completion.chunk
 *                                (token-in `prompt_token_ids`, `return_token_ids`: see docs/serve.md)
 *   GET  /v1/weights             {object: "policy_version", version}                   (weights key)
 *   POST /v1/weights             install a new policy version (safetensors body, or   (weights key)
 *                                JSON {path | url, version?} from an allowed location)
 *   POST /v1/cache/release       {cache_keys: [...]} drops KV caches kept under these keys
 *
 * The weight routes need the weights key (`weightsKey`), never the API key: a client of the
 * chat routes cannot change the model. Without a weights key they are off (403).
 *
 * Every failure is answered with `{error: {message, type, param, code}}`: 400 invalid
 * request, 401 missing or wrong key, 403 weight routes off or a pull from a location not
 * allowed, 404 unknown route or model, 413 body too large, 503 shutting down, 409 an older
 * policy version, 500 otherwise. Built on `node:http`.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { randomBytes, timingSafeEqual } from "node:crypto";
import type { AddressInfo } from "node:net";
import {
  ContextLimitError,
  EngineClosedError,
  type EngineStats,
  type GenerationRequest,
  type GenerationResult,
} from "../engine/index.js";
import {
  buildPrompt,
  interpretGeneration,
  samplingSettings,
  stopStrings,
  stopTokenIdsFor,
  type ChatPrompt,
  type ChoiceOutcome,
  type ServeTokenizer,
} from "./chat.js";
import { ChoiceStreamer, type StreamDelta } from "./stream.js";
import { generateInChunks } from "./chunked.js";
import { ApiError, parseChatCompletionRequest, type ChatCompletionRequest } from "./schema.js";
import type { ExportedWeights } from "@agentrl/policy";
import { parseWeightSources, readWeightsRequest, type WeightSources } from "./weights.js";
import { readJsonBody } from "./body.js";
import { ServeConfigError } from "./key.js";

/** What the server needs from an inference engine (`@agentrl/rollout`'s `InferenceEngine` fits). */
export interface ServeEngine {
  generate(request: GenerationRequest): Promise<GenerationResult>;
  /** Installs new weights between two decode steps; resolves once they are in use. */
  updateWeights(weights: ExportedWeights, version: number): Promise<void>;
  /** Drops the KV cache kept under `cacheKey` (streamed generations continue one). */
  releaseCache(cacheKey: string): void;
  stats(): EngineStats;
}

export interface ChatServerOptions {
  engine: ServeEngine;
  tokenizer: ServeTokenizer;
  /** The model id clients send in `model` and `/v1/models` lists. */
  modelName: string;
  /** Required as `Authorization: Bearer <key>` on `/v1/*` but the weight routes, when set. Default none (no auth). */
  apiKey?: string;
  /**
   * Required as `Authorization: Bearer <key>` on `GET|POST /v1/weights` (the API key does not
   * open them). Default none: the weight routes are off (403). `startModelServer` always sets one.
   */
  weightsKey?: string;
  /**
   * Where `POST /v1/weights` with JSON `{path | url}` may read weights from: folders, and URL
   * prefixes (`http(s)://host[:port]/path/`). Default none: JSON pulls are refused (403).
   */
  weightSources?: readonly string[];
  /** Time limit of fetching weights from a URL, milliseconds. Default 600,000. */
  pullTimeoutMs?: number;
  /** Temperature of requests that give none. Default 1 (OpenAI's default). */
  defaultTemperature?: number;
  /** `max_tokens` of requests that give none (the engine also clamps to the context left). Default 1,024. */
  defaultMaxTokens?: number;
  /**
   * Streamed generations run in slices of this many tokens, each continuing the last one's
   * KV cache, so text reaches the client every `streamChunkTokens` tokens (see chunked.ts).
   * 0 = one slice (the stream's chunks then all arrive when the generation ends). Default 16.
   */
  streamChunkTokens?: number;
  /** Largest request body accepted, bytes. Default 8 MiB. */
  maxBodyBytes?: number;
  /** Largest weights body (`POST /v1/weights`), bytes. Default 16 GiB. */
  maxWeightBytes?: number;
  /** Token ids of `prompt_token_ids` must lie below this (the model's vocabulary). Default: not checked. */
  vocabularySize?: number;
  /** One line per request (method, path, status, milliseconds, tokens); null = silent. Default `console.error`. */
  log?: ((line: string) => void) | null;
  /**
   * Request fields the engine does not take per request (it samples with server-wide
   * settings): when a request sets one to a value other than the server's, the response
   * names it in the header `x-agentrl-ignored-parameters`. Default `{ top_p: 1 }`.
   */
  serverSampling?: { top_p?: number; seed?: number };
}

/** Where a started server listens. */
export interface ListeningAddress {
  host: string;
  port: number;
  /** `http://host:port/v1`, the base URL OpenAI clients take. */
  baseUrl: string;
}

const LOOPBACK_HOSTS = new Set(["127.0.0.1", "::1", "localhost", "::ffff:127.0.0.1"]);

/** True for addresses that only this machine can reach (127.0.0.0/8, ::1, localhost). */
export function isLoopbackHost(host: string): boolean {
  return LOOPBACK_HOSTS.has(host) || /^127\.\d+\.\d+\.\d+$/.test(host);
}

export class ChatServer {
  readonly modelName: string;
  private readonly options: ChatServerOptions;
  private readonly server: Server;
  private readonly created = Math.floor(Date.now() / 1000);
  private readonly inFlight = new Set<AbortController>();
  private closing = false;
  private readonly log: ((line: string) => void) | null;
  private readonly weightSources: WeightSources;

  constructor(options: ChatServerOptions) {
    this.options = options;
    this.weightSources = parseWeightSources(options.weightSources ?? []);
    this.modelName = options.modelName;
    this.log = options.log === undefined ? (line) => console.error(line) : options.log;
    this.server = createServer((request, response) => void this.handle(request, response));
    // Longer than a client's event loop may stall (a trainer blocked in an update): a shorter
    // timeout closes kept-alive connections the client is about to reuse.
    this.server.keepAliveTimeout = 65_000;
  }

  /** Starts listening (port 0 = any free port). Refuses a non-loopback host without an API key. */
  async listen(port = 8000, host = "127.0.0.1"): Promise<ListeningAddress> {
    if (!isLoopbackHost(host) && !this.options.apiKey) {
      throw new ServeConfigError(
        `binding ${host} (reachable from other machines) needs an API key (--api-key)`,
      );
    }
    await new Promise<void>((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(port, host, () => {
        this.server.off("error", reject);
        resolve();
      });
    });
    return this.address()!;
  }

  /** The address listened on, once listening. */
  address(): ListeningAddress | undefined {
    const address = this.server.address() as AddressInfo | null;
    if (!address) return undefined;
    const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
    return {
      host: address.address,
      port: address.port,
      baseUrl: `http://${host}:${address.port}/v1`,
    };
  }

  /** Requests being answered now. */
  get activeRequests(): number {
    return this.inFlight.size;
  }

  /**
   * Stops accepting connections, lets requests in flight finish for up to `graceMs`
   * milliseconds, then aborts the rest and closes every connection. Idempotent.
   */
  async close(graceMs = 10_000): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    const deadline = Date.now() + graceMs;
    while (this.inFlight.size > 0 && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 20));
    for (const controller of this.inFlight)
      controller.abort(new ApiError(503, "the server is shutting down", "service_unavailable"));
    this.server.closeAllConnections();
    await closed;
  }

  // ------------------------------------------------------------------ routing

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const began = performance.now();
    const path = (request.url ?? "/").split("?")[0].replace(/\/+$/, "") || "/";
    let tokens = "";
    try {
      if (this.closing)
        throw new ApiError(503, "the server is shutting down", "service_unavailable");
      if (path === "/health" && request.method === "GET") {
        sendJson(response, 200, {
          status: "ok",
          model: this.modelName,
          active_requests: this.inFlight.size,
          engine: this.options.engine.stats(),
        });
      } else if (path === "/v1/models" && request.method === "GET") {
        this.authorize(request);
        sendJson(response, 200, { object: "list", data: [this.modelCard()] });
      } else if (
        path === `/v1/models/${encodeURIComponent(this.modelName)}` &&
        request.method === "GET"
      ) {
        this.authorize(request);
        sendJson(response, 200, this.modelCard());
      } else if (path === "/v1/chat/completions" && request.method === "POST") {
        this.authorize(request);
        tokens = await this.chatCompletion(request, response);
      } else if (path === "/v1/weights" && request.method === "GET") {
        this.authorizeWeights(request);
        sendJson(response, 200, {
          object: "policy_version",
          version: this.options.engine.stats().version,
        });
      } else if (path === "/v1/weights" && request.method === "POST") {
        this.authorizeWeights(request);
        tokens = await this.installWeights(request, response);
      } else if (path === "/v1/cache/release" && request.method === "POST") {
        this.authorize(request);
        const body = (await readJsonBody(
          request,
          this.options.maxBodyBytes ?? 8 * 1024 * 1024,
        )) as { cache_keys?: unknown };
        const keys = Array.isArray(body?.cache_keys)
          ? body.cache_keys.filter((key): key is string => typeof key === "string")
          : undefined;
        if (!keys)
          throw new ApiError(
            400,
            "cache_keys: an array of strings is required",
            "invalid_request_error",
            "cache_keys",
            "invalid_value",
          );
        for (const key of keys) this.options.engine.releaseCache(key);
        sendJson(response, 200, { released: keys.length });
      } else {
        throw new ApiError(
          404,
          `no route ${request.method} ${path}`,
          "not_found_error",
          null,
          "unknown_route",
        );
      }
    } catch (error) {
      const apiError = toApiError(error);
      if (!response.headersSent) sendJson(response, apiError.status, apiError.body());
      else if (!response.writableEnded) {
        // Mid-stream: report the error as an event, then end the stream.
        response.write(`data: ${JSON.stringify(apiError.body())}\n\n`);
        response.end();
      }
    }
    this.log?.(
      `${request.method} ${path} ${response.statusCode} ${(performance.now() - began).toFixed(0)}ms${tokens}`,
    );
  }

  private modelCard() {
    return { id: this.modelName, object: "model", created: this.created, owned_by: "agentrl" };
  }

  private authorize(request: IncomingMessage, key = this.options.apiKey, what = "API key"): void {
    if (!key) return;
    const header = request.headers.authorization ?? "";
    const given = header.startsWith("Bearer ") ? header.slice("Bearer ".length).trim() : "";
    const a = Buffer.from(given);
    const b = Buffer.from(key);
    if (given === "" || a.length !== b.length || !timingSafeEqual(a, b)) {
      throw new ApiError(
        401,
        given === "" ? `missing ${what}: send Authorization: Bearer <key>` : `incorrect ${what}`,
        "authentication_error",
        null,
        "invalid_api_key",
      );
    }
  }

  /** The weight routes: the weights key, always; off without one. */
  private authorizeWeights(request: IncomingMessage): void {
    if (!this.options.weightsKey)
      throw new ApiError(
        403,
        "the weight routes are off: this server has no weights key",
        "authentication_error",
        null,
        "weights_routes_off",
      );
    this.authorize(
      request,
      this.options.weightsKey,
      "weights key (the serve key file, --weights-key or AGENTRL_SERVE_KEY)",
    );
  }

  // ------------------------------------------------------------------ chat completions

  /** Answers one chat-completions request; returns a log suffix with token counts. */
  private async chatCompletion(
    httpRequest: IncomingMessage,
    response: ServerResponse,
  ): Promise<string> {
    const request = parseChatCompletionRequest(
      await readJsonBody(httpRequest, this.options.maxBodyBytes ?? 8 * 1024 * 1024),
    );
    if (request.model !== this.modelName) {
      throw new ApiError(
        404,
        `the model "${request.model}" does not exist; this server serves "${this.modelName}"`,
        "not_found_error",
        "model",
        "model_not_found",
      );
    }
    const vocabulary = this.options.vocabularySize;
    const outside =
      vocabulary === undefined
        ? -1
        : (request.prompt_token_ids ?? []).findIndex((id) => id >= vocabulary);
    if (outside >= 0) {
      throw new ApiError(
        400,
        `prompt_token_ids[${outside}] = ${request.prompt_token_ids![outside]} is outside the vocabulary (${vocabulary} tokens)`,
        "invalid_request_error",
        "prompt_token_ids",
        "invalid_value",
      );
    }
    const prompt = buildPrompt(this.options.tokenizer, request);
    const sampling = samplingSettings(request, {
      temperature: this.options.defaultTemperature ?? 1,
      maxTokens: this.options.defaultMaxTokens ?? 1024,
    });
    const stops = stopStrings(request);
    const stopTokenIds = [
      ...new Set([
        ...stopTokenIdsFor(this.options.tokenizer, stops),
        ...(request.stop_token_ids ?? []),
      ]),
    ];
    const ignored = this.ignoredParameters(request);
    if (ignored.length > 0) response.setHeader("x-agentrl-ignored-parameters", ignored.join(","));

    const controller = new AbortController();
    const onClose = () => {
      if (!response.writableFinished)
        controller.abort(
          new ApiError(499, "the client closed the connection", "invalid_request_error"),
        );
    };
    response.on("close", onClose);
    this.inFlight.add(controller);
    const id = `chatcmpl-${randomBytes(12).toString("hex")}`;
    const created = Math.floor(Date.now() / 1000);
    try {
      const engineRequest: GenerationRequest = {
        promptTokens: prompt.tokens,
        maxNewTokens: sampling.maxNewTokens,
        temperature: sampling.temperature,
        stopTokenIds,
        signal: controller.signal,
        ...(request.cache_key ? { cacheKey: request.cache_key } : {}),
      };
      const interpret = (result: GenerationResult, index: number): ChoiceOutcome =>
        interpretGeneration(this.options.tokenizer, result, {
          prompt,
          stops,
          idPrefix: `call_${id.slice(8, 20)}_${index}`,
          singleToolCall: request.parallel_tool_calls === false,
        });
      let completionTokens = 0;
      if (request.stream) {
        completionTokens = await this.streamChoices(response, request, {
          id,
          created,
          prompt,
          stops,
          engineRequest,
          choices: sampling.choices,
          interpret,
        });
      } else {
        const generations = Array.from({ length: sampling.choices }, () =>
          this.options.engine.generate(engineRequest),
        );
        // Reject early: one failed choice fails the request (and the others are aborted).
        const results = await Promise.all(generations).catch((error) => {
          controller.abort(error);
          throw error;
        });
        completionTokens = results.reduce((sum, result) => sum + result.tokens.length, 0);
        sendJson(response, 200, {
          id,
          object: "chat.completion",
          created,
          model: this.modelName,
          system_fingerprint: `agentrl-v${this.options.engine.stats().version}`,
          choices: results.map((result, index) => {
            const outcome = interpret(result, index);
            const choice = {
              index,
              message: outcome.message,
              logprobs: request.logprobs ? this.logprobs(result, request) : null,
              finish_reason: outcome.finishReason,
            };
            // What training needs: the exact ids, their sampler log-probs and the version of each.
            return request.return_token_ids
              ? {
                  ...choice,
                  token_ids: result.tokens,
                  token_logprobs: result.logprobs,
                  token_versions: result.versions,
                }
              : choice;
          }),
          ...(request.return_token_ids && !request.prompt_token_ids
            ? { prompt_token_ids: prompt.tokens }
            : {}),
          usage: {
            ...usage(prompt.tokens.length, completionTokens),
            prompt_tokens_details: {
              cached_tokens: Math.max(
                0,
                prompt.tokens.length - Math.min(...results.map((result) => result.prefilledTokens)),
              ),
            },
          },
        });
      }
      return ` prompt=${prompt.tokens.length} completion=${completionTokens}`;
    } finally {
      response.off("close", onClose);
      this.inFlight.delete(controller);
      // Whatever is still running (a failed sibling choice, a closed stream) frees its slot.
      if (!controller.signal.aborted)
        controller.abort(new ApiError(499, "request finished", "invalid_request_error"));
    }
  }

  /**
   * Server-sent events: a first chunk with the role of every choice, then each choice's
   * chunks as its tokens arrive (generated in slices, see chunked.ts; content deltas token by
   * token, see ChoiceStreamer; tool calls as one delta at the end), a last chunk with its
   * finish reason; then an optional usage chunk and `[DONE]`.
   */
  private async streamChoices(
    response: ServerResponse,
    request: ChatCompletionRequest,
    run: {
      id: string;
      created: number;
      prompt: ChatPrompt;
      stops: readonly string[];
      engineRequest: GenerationRequest;
      choices: number;
      interpret: (result: GenerationResult, index: number) => ChoiceOutcome;
    },
  ): Promise<number> {
    response.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive",
    });
    response.flushHeaders();
    const fingerprint = `agentrl-v${this.options.engine.stats().version}`;
    const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
      writeEvent(response, {
        id: run.id,
        object: "chat.completion.chunk",
        created: run.created,
        model: this.modelName,
        system_fingerprint: fingerprint,
        choices,
        ...extra,
      });
    const indices = Array.from({ length: run.choices }, (_, index) => index);
    for (const index of indices)
      chunk([
        { index, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null },
      ]);
    const chunkTokens = this.options.streamChunkTokens ?? 16;
    let completionTokens = 0;
    await Promise.all(
      indices.map(async (index) => {
        const streamer = new ChoiceStreamer(this.options.tokenizer, run.prompt, run.stops);
        const send = (deltas: StreamDelta[]) =>
          deltas.forEach((delta) => chunk([{ index, delta, logprobs: null, finish_reason: null }]));
        const result = await generateInChunks(this.options.engine, run.engineRequest, {
          chunkTokens: chunkTokens >= 1 ? chunkTokens : run.engineRequest.maxNewTokens,
          cacheKey: `${run.id}-${index}`,
          onTokens: (tokens) => {
            for (const token of tokens) send(streamer.push(token));
            return !streamer.stopped;
          },
        });
        completionTokens += result.tokens.length;
        const outcome = run.interpret(result, index);
        send(streamer.finish(outcome));
        chunk([
          {
            index,
            delta: {},
            logprobs: request.logprobs ? this.logprobs(result, request) : null,
            finish_reason: outcome.finishReason,
          },
        ]);
      }),
    );
    if (request.stream_options?.include_usage)
      chunk([], { usage: usage(run.prompt.tokens.length, completionTokens) });
    response.write("data: [DONE]\n\n");
    response.end();
    return completionTokens;
  }

  /** OpenAI's `logprobs.content`: the sampled tokens with their log-probs (no alternatives). */
  private logprobs(result: GenerationResult, request: ChatCompletionRequest) {
    const tokenizer = this.options.tokenizer;
    return {
      content: result.tokens.map((token, i) => {
        const text = request.return_tokens_as_token_ids
          ? `token_id:${token}`
          : tokenizer.decode([token]);
        return {
          token: text,
          logprob: result.logprobs[i],
          bytes: [...Buffer.from(text, "utf8")],
          top_logprobs: [],
        };
      }),
    };
  }

  /**
   * `POST /v1/weights`: a new policy version, as a safetensors body (version in the header
   * `x-agentrl-policy-version` or the file's `__metadata__.version`) or JSON `{path | url,
   * version?}` naming a model or checkpoint folder. Answers once the engine samples with it
   * (installed between two decode steps). A version older than the one served is refused (409).
   */
  private async installWeights(
    request: IncomingMessage,
    response: ServerResponse,
  ): Promise<string> {
    const began = performance.now();
    const previous = this.options.engine.stats().version;
    const weights = await readWeightsRequest(request, {
      maxBytes: this.options.maxWeightBytes ?? 16 * 1024 ** 3,
      currentVersion: previous,
      sources: this.weightSources,
      pullTimeoutMs: this.options.pullTimeoutMs ?? 600_000,
    });
    if (weights.version < previous) {
      throw new ApiError(
        409,
        `version ${weights.version} is older than the version served (${previous})`,
        "invalid_request_error",
        "version",
        "stale_version",
      );
    }
    try {
      await this.options.engine.updateWeights(weights, weights.version);
    } catch (error) {
      if ((error as Error)?.name === "WeightsError")
        throw new ApiError(
          400,
          `the weights do not fit the model: ${(error as Error).message}`,
          "invalid_request_error",
          null,
          "weights_mismatch",
        );
      throw error;
    }
    sendJson(response, 200, {
      object: "policy_version",
      version: weights.version,
      previous_version: previous,
      tensors: weights.tensors.length,
      milliseconds: Math.round(performance.now() - began),
    });
    return ` version=${weights.version}`;
  }

  private ignoredParameters(request: ChatCompletionRequest): string[] {
    const server = { top_p: 1, ...this.options.serverSampling };
    const ignored: string[] = [];
    if (request.top_p !== undefined && request.top_p !== null && request.top_p !== server.top_p)
      ignored.push("top_p");
    if (request.seed !== undefined && request.seed !== null && request.seed !== server.seed)
      ignored.push("seed");
    return ignored;
  }
}

function usage(promptTokens: number, completionTokens: number) {
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
  };
}

function writeEvent(response: ServerResponse, data: unknown): void {
  response.write(`data: ${JSON.stringify(data)}\n\n`);
}

function sendJson(response: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
  });
  response.end(text);
}

function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof ContextLimitError)
    return new ApiError(
      400,
      error.message,
      "invalid_request_error",
      "messages",
      "context_length_exceeded",
    );
  if (error instanceof RangeError)
    return new ApiError(400, error.message, "invalid_request_error", null, "invalid_value");
  if (error instanceof EngineClosedError)
    return new ApiError(503, error.message, "service_unavailable");
  return new ApiError(
    500,
    `internal error: ${(error as Error)?.message ?? String(error)}`,
    "server_error",
  );
}
