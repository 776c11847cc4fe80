/**
 * The recording gateway: an OpenAI-compatible chat-completions endpoint in front of the
 * rollout's policy, for agents written with the `openai` client, the AI SDK or anything
 * else that speaks OpenAI's API, unmodified. Each episode gets its own API key from the
 * trainer (`openEpisode`); every request of that key is recorded into the episode's exact
 * token sequence (see recorder.ts); `finishEpisode` turns the record into trajectories.
 *
 *   const gateway = new RecordingGateway({ engine, tokenizer, modelName: "policy" });
 *   const { baseURL } = await gateway.listen(0);
 *   const episode = gateway.openEpisode({ task: "kg", index: 3, groupId: "g1", member: 0 });
 *   // the agent: new OpenAI({ baseURL: episode.baseURL, apiKey: episode.apiKey }) …
 *   const [trajectory] = gateway.finishEpisode(episode.apiKey, reward);
 *
 * Routes: `POST /v1/chat/completions` (tools, tool_choice, streaming, n, stop, logprobs),
 * `GET /v1/models`, `GET /health`. Refused with OpenAI-shaped errors: 401 without an
 * episode key (`missing_episode_key`) or with an unknown one (`unknown_episode`), 410 with a
 * finished one (`episode_finished`), 400 for malformed requests (zod; also the serving
 * extensions that would bypass the record: `prompt_token_ids`, `cache_key`), 404 unknown
 * routes. A key reaches only its own episode's record.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import type { SampleStatus } from "@agentrl/envs";
import type { Trajectory } from "../types.js";
import {
  buildPrompt,
  interpretGeneration,
  samplingSettings,
  stopStrings,
  stopTokenIdsFor,
  type ChoiceOutcome,
  type ServeTokenizer,
} from "../serve/chat.js";
import { generateInChunks, type ChunkableEngine } from "../serve/chunked.js";
import { ChoiceStreamer, type StreamDelta } from "../serve/stream.js";
import {
  ApiError,
  parseChatCompletionRequest,
  type ChatCompletionRequest,
} from "../serve/schema.js";
import { readJsonBody } from "../serve/body.js";
import { EpisodeRecorder, GatewayError, type EpisodeIdentity } from "./recorder.js";

type GenerationRequest = Parameters<ChunkableEngine["generate"]>[0];
type GenerationResult = Awaited<ReturnType<ChunkableEngine["generate"]>>;

/** What the gateway needs from an engine (`InferenceEngine` and `RemoteEngine` fit). */
export interface GatewayEngine extends ChunkableEngine {
  /** Newest policy version the engine samples with. */
  readonly version: number;
}

export interface RecordingGatewayOptions {
  engine: GatewayEngine;
  tokenizer: ServeTokenizer;
  /** The model id answered (any `model` a client sends is accepted: the gateway serves one policy). Default `agentrl-policy`. */
  modelName?: string;
  /**
   * Every request samples at this temperature whatever it asks (the trainer's rollout
   * temperature: the recorded log-probs must be those the trainer scores). Default: the
   * request's temperature, else 1.
   */
  temperature?: number;
  /**
   * Requests sample at the engine's own temperature (the rollout's), whatever they ask, when
   * `temperature` is not given. Default false.
   */
  engineTemperature?: boolean;
  /** `max_tokens` of requests that give none. Default 1,024. */
  defaultMaxTokens?: number;
  /** Most tokens one request may generate (larger `max_tokens` are clamped). Default: only the episode's limit. */
  maxTokensPerRequest?: number;
  /** Tokens of an episode's sequence at most (prompt + generation); beyond, a 400 `context_length_exceeded`. Default 8,192. */
  maxEpisodeTokens?: number;
  /** Streamed generations reach the client in slices of this many tokens. Default 16. */
  streamChunkTokens?: number;
  /** The template's end-of-turn marker. Default `<|im_end|>`. */
  endOfTurnText?: string;
  /** Largest request body, bytes. Default 8 MiB. */
  maxBodyBytes?: number;
  /** One line per request; null = silent. Default null. */
  log?: ((line: string) => void) | null;
}

/** An episode's credentials, for the agent. */
export interface EpisodeHandle {
  /** The episode key, sent as the API key (`Authorization: Bearer <apiKey>`). */
  apiKey: string;
  /** The gateway's base URL (`http://host:port/v1`), once it listens. */
  baseURL: string;
}

export interface FinishOptions {
  /** Who ended the episode. Default `completed` (the reward is a verdict). */
  status?: SampleStatus;
  /** The episode failed for reasons not the agent's: its group must not enter the loss. */
  masked?: boolean;
  error?: string;
  metrics?: Record<string, number>;
}

/** Counters of the gateway. */
export interface GatewayStats {
  openEpisodes: number;
  finishedEpisodes: number;
  requests: number;
  refused: number;
  /** Requests whose rendering did not extend the episode's sequence (one sample more each). */
  templateRewrites: number;
  generatedTokens: number;
}

interface OpenEpisode {
  recorder: EpisodeRecorder;
  began: number;
  /** Requests of one episode are answered one after the other. */
  queue: Promise<unknown>;
  controllers: Set<AbortController>;
  cacheKey: string;
}

export class RecordingGateway {
  readonly modelName: string;
  private readonly options: RecordingGatewayOptions;
  private readonly server: Server;
  private readonly episodes = new Map<string, OpenEpisode>();
  private readonly finished = new Set<string>();
  private readonly counters = { requests: 0, refused: 0, templateRewrites: 0, generatedTokens: 0 };
  private baseURL = "";
  private closing = false;

  constructor(options: RecordingGatewayOptions) {
    this.options = options;
    this.modelName = options.modelName ?? "agentrl-policy";
    this.server = createServer((request, response) => void this.handle(request, response));
    this.server.keepAliveTimeout = 65_000;
  }

  /** Starts listening (port 0 = any free port; default host 127.0.0.1). */
  async listen(port = 0, host = "127.0.0.1"): Promise<{ baseURL: string; port: number }> {
    await new Promise<void>((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(port, host, () => {
        this.server.off("error", reject);
        resolve();
      });
    });
    const address = this.server.address() as AddressInfo;
    const shown = address.family === "IPv6" ? `[${address.address}]` : address.address;
    this.baseURL = `http://${shown}:${address.port}/v1`;
    return { baseURL: this.baseURL, port: address.port };
  }

  /** Opens an episode: its key, to hand to the agent. */
  openEpisode(identity: EpisodeIdentity): EpisodeHandle {
    const apiKey = `ep-${randomBytes(18).toString("base64url")}`;
    this.episodes.set(apiKey, {
      recorder: new EpisodeRecorder(this.options.tokenizer, identity, {
        endOfTurnText: this.options.endOfTurnText,
      }),
      began: performance.now(),
      queue: Promise.resolve(),
      controllers: new Set(),
      cacheKey: `gateway-${apiKey}`,
    });
    return { apiKey, baseURL: this.baseURL };
  }

  /**
   * Ends an episode: later requests with its key get 410, requests still running are
   * aborted, and its record becomes trajectories (one, or one more per template rewrite),
   * each with `reward`. An episode without a single answered request gives none.
   */
  finishEpisode(apiKey: string, reward: number, options: FinishOptions = {}): Trajectory[] {
    const episode = this.episodes.get(apiKey);
    if (!episode)
      throw new GatewayError(
        this.finished.has(apiKey) ? "this episode is already finished" : "no such episode",
      );
    this.episodes.delete(apiKey);
    this.finished.add(apiKey);
    for (const controller of episode.controllers)
      controller.abort(
        new ApiError(
          410,
          "the episode was finished",
          "invalid_request_error",
          null,
          "episode_finished",
        ),
      );
    this.options.engine.releaseCache(episode.cacheKey);
    return episode.recorder.trajectories(reward, {
      ...options,
      durationMs: performance.now() - episode.began,
    });
  }

  stats(): GatewayStats {
    return {
      openEpisodes: this.episodes.size,
      finishedEpisodes: this.finished.size,
      ...this.counters,
    };
  }

  /** Stops listening; requests in flight are aborted. Idempotent. */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    for (const episode of this.episodes.values())
      for (const controller of episode.controllers)
        controller.abort(new ApiError(503, "the gateway is shutting down", "service_unavailable"));
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }

  // ------------------------------------------------------------------ HTTP

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const began = performance.now();
    const path = (request.url ?? "/").split("?")[0].replace(/\/+$/, "") || "/";
    let note = "";
    try {
      if (this.closing)
        throw new ApiError(503, "the gateway is shutting down", "service_unavailable");
      if (path === "/health" && request.method === "GET") {
        sendJson(response, 200, { status: "ok", model: this.modelName, ...this.stats() });
      } else if (path === "/v1/models" && request.method === "GET") {
        this.episodeOf(request);
        sendJson(response, 200, {
          object: "list",
          data: [{ id: this.modelName, object: "model", created: 0, owned_by: "agentrl" }],
        });
      } else if (path === "/v1/chat/completions" && request.method === "POST") {
        const [key, episode] = this.episodeOf(request);
        const body = await readJsonBody(request, this.options.maxBodyBytes ?? 8 * 1024 * 1024);
        const parsed = parseChatCompletionRequest(body);
        if (parsed.prompt_token_ids)
          throw new ApiError(
            400,
            "prompt_token_ids (token-in) is not accepted by the recording gateway: send messages",
            "invalid_request_error",
            "prompt_token_ids",
            "invalid_value",
          );
        if (parsed.cache_key)
          throw new ApiError(
            400,
            "cache_key is not accepted by the recording gateway (it keeps each episode's cache itself)",
            "invalid_request_error",
            "cache_key",
            "invalid_value",
          );
        // One request of an episode at a time: its turns are joined in order.
        const run = episode.queue.then(() => this.chatCompletion(key, episode, parsed, response));
        episode.queue = run.catch(() => {});
        note = await run;
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
      if (apiError.status < 500) this.counters.refused += 1;
      if (!response.headersSent) sendJson(response, apiError.status, apiError.body());
      else if (!response.writableEnded) {
        response.write(`data: ${JSON.stringify(apiError.body())}\n\n`);
        response.end();
      }
    }
    this.options.log?.(
      `${request.method} ${path} ${response.statusCode} ${(performance.now() - began).toFixed(0)}ms${note}`,
    );
  }

  /** The episode of a request's key; 401 without one or with an unknown one, 410 with a finished one. */
  private episodeOf(request: IncomingMessage): [string, OpenEpisode] {
    const header = request.headers.authorization ?? "";
    const key = header.startsWith("Bearer ") ? header.slice("Bearer ".length).trim() : "";
    if (key === "")
      throw new ApiError(
        401,
        "missing episode key: send the episode's API key as Authorization: Bearer <key>",
        "authentication_error",
        null,
        "missing_episode_key",
      );
    const episode = this.episodes.get(key);
    if (episode) return [key, episode];
    if (this.finished.has(key))
      throw new ApiError(
        410,
        "this episode is finished: its key takes no more requests",
        "invalid_request_error",
        null,
        "episode_finished",
      );
    throw new ApiError(401, "unknown episode key", "authentication_error", null, "unknown_episode");
  }

  private async chatCompletion(
    key: string,
    episode: OpenEpisode,
    request: ChatCompletionRequest,
    response: ServerResponse,
  ): Promise<string> {
    if (!this.episodes.has(key))
      throw new ApiError(
        410,
        "this episode is finished: its key takes no more requests",
        "invalid_request_error",
        null,
        "episode_finished",
      );
    const tokenizer = this.options.tokenizer;
    const prompt = buildPrompt(tokenizer, request);
    const prepared = episode.recorder.prepare(prompt.text);
    const controller = new AbortController();
    episode.controllers.add(controller);
    const onClose = () => {
      if (!response.writableFinished)
        controller.abort(
          new ApiError(499, "the client closed the connection", "invalid_request_error"),
        );
    };
    response.on("close", onClose);
    try {
      const maxEpisodeTokens = this.options.maxEpisodeTokens ?? 8192;
      const room = maxEpisodeTokens - prepared.promptTokens.length;
      if (room <= 0)
        throw new ApiError(
          400,
          `the episode's sequence holds ${prepared.promptTokens.length} tokens, the limit is ${maxEpisodeTokens}`,
          "invalid_request_error",
          "messages",
          "context_length_exceeded",
        );
      const sampling = samplingSettings(request, {
        temperature: 1,
        maxTokens: this.options.defaultMaxTokens ?? 1024,
      });
      const forced =
        this.options.temperature !== undefined || this.options.engineTemperature === true;
      const temperature =
        this.options.temperature ??
        (this.options.engineTemperature ? undefined : sampling.temperature);
      if (
        forced &&
        request.temperature !== undefined &&
        request.temperature !== null &&
        request.temperature !== temperature
      ) {
        response.setHeader("x-agentrl-ignored-parameters", "temperature");
      }
      const stops = stopStrings(request);
      const engineRequest: GenerationRequest = {
        promptTokens: prepared.promptTokens,
        maxNewTokens: Math.min(
          sampling.maxNewTokens,
          room,
          this.options.maxTokensPerRequest ?? Infinity,
        ),
        ...(temperature !== undefined ? { temperature } : {}),
        stopTokenIds: [
          ...new Set([...stopTokenIdsFor(tokenizer, stops), ...(request.stop_token_ids ?? [])]),
        ],
        signal: controller.signal,
      };
      const chatPrompt = { ...prompt, tokens: prepared.promptTokens };
      const id = `chatcmpl-${randomBytes(12).toString("hex")}`;
      const interpret = (result: GenerationResult, index: number): ChoiceOutcome =>
        interpretGeneration(tokenizer, result, {
          prompt: chatPrompt,
          stops,
          idPrefix: `call_${id.slice(9, 21)}_${index}`,
          singleToolCall: request.parallel_tool_calls === false,
        });
      const created = Math.floor(Date.now() / 1000);
      const fingerprint = `agentrl-v${this.options.engine.version}`;
      let results: GenerationResult[];
      if (request.stream) {
        response.writeHead(200, {
          "content-type": "text/event-stream; charset=utf-8",
          "cache-control": "no-cache",
          connection: "keep-alive",
        });
        response.flushHeaders();
        const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
          response.write(
            `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model: this.modelName, system_fingerprint: fingerprint, choices, ...extra })}\n\n`,
          );
        for (let index = 0; index < sampling.choices; index++)
          chunk([
            {
              index,
              delta: { role: "assistant", content: "" },
              logprobs: null,
              finish_reason: null,
            },
          ]);
        const chunkTokens = this.options.streamChunkTokens ?? 16;
        results = await Promise.all(
          Array.from({ length: sampling.choices }, async (_, index) => {
            const streamer = new ChoiceStreamer(tokenizer, chatPrompt, stops);
            const send = (deltas: StreamDelta[]) =>
              deltas.forEach((delta) =>
                chunk([{ index, delta, logprobs: null, finish_reason: null }]),
              );
            const result = await generateInChunks(this.options.engine, engineRequest, {
              chunkTokens: chunkTokens >= 1 ? chunkTokens : engineRequest.maxNewTokens,
              cacheKey: `${episode.cacheKey}-${id}-${index}`,
              onTokens: (tokens) => {
                for (const token of tokens) send(streamer.push(token));
                return !streamer.stopped;
              },
            });
            const outcome = interpret(result, index);
            send(streamer.finish(outcome));
            chunk([
              {
                index,
                delta: {},
                logprobs: request.logprobs ? logprobsOf(tokenizer, result) : null,
                finish_reason: outcome.finishReason,
              },
            ]);
            return result;
          }),
        ).catch((error) => {
          controller.abort(error);
          throw error;
        });
        episode.recorder.complete(results);
        const completion = results.reduce((sum, result) => sum + result.tokens.length, 0);
        if (request.stream_options?.include_usage)
          chunk([], { usage: usage(prepared.promptTokens.length, completion) });
        response.write("data: [DONE]\n\n");
        response.end();
      } else {
        // n = 1 keeps the episode's KV cache between turns (the next prompt extends this one).
        const cached = sampling.choices === 1 ? { cacheKey: episode.cacheKey } : {};
        results = await Promise.all(
          Array.from({ length: sampling.choices }, () =>
            this.options.engine.generate({ ...engineRequest, ...cached }),
          ),
        ).catch((error) => {
          controller.abort(error);
          throw error;
        });
        episode.recorder.complete(results);
        const completion = results.reduce((sum, result) => sum + result.tokens.length, 0);
        sendJson(response, 200, {
          id,
          object: "chat.completion",
          created,
          model: this.modelName,
          system_fingerprint: fingerprint,
          choices: results.map((result, index) => {
            const outcome = interpret(result, index);
            return {
              index,
              message: outcome.message,
              logprobs: request.logprobs ? logprobsOf(tokenizer, result) : null,
              finish_reason: outcome.finishReason,
            };
          }),
          usage: usage(prepared.promptTokens.length, completion),
        });
      }
      this.counters.requests += 1;
      if (prepared.rewrite) this.counters.templateRewrites += 1;
      const generated = results.reduce((sum, result) => sum + result.tokens.length, 0);
      this.counters.generatedTokens += generated;
      return ` prompt=${prepared.promptTokens.length} continued=${prepared.continuedTokens} completion=${generated}${prepared.rewrite ? " rewrite" : ""}`;
    } catch (error) {
      episode.recorder.abandon();
      throw error;
    } finally {
      response.off("close", onClose);
      episode.controllers.delete(controller);
      if (!controller.signal.aborted)
        controller.abort(new ApiError(499, "request finished", "invalid_request_error"));
    }
  }
}

function logprobsOf(tokenizer: ServeTokenizer, result: GenerationResult) {
  return {
    content: result.tokens.map((token, i) => {
      const text = tokenizer.decode([token]);
      return {
        token: text,
        logprob: result.logprobs[i],
        bytes: [...Buffer.from(text, "utf8")],
        top_logprobs: [],
      };
    }),
  };
}

function usage(promptTokens: number, completionTokens: number) {
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
  };
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
  const name = (error as Error)?.name;
  if (name === "ContextLimitError")
    return new ApiError(
      400,
      (error as Error).message,
      "invalid_request_error",
      "messages",
      "context_length_exceeded",
    );
  if (error instanceof RangeError)
    return new ApiError(400, error.message, "invalid_request_error", null, "invalid_value");
  if (name === "EngineClosedError")
    return new ApiError(503, (error as Error).message, "service_unavailable");
  return new ApiError(
    500,
    `internal error: ${(error as Error)?.message ?? String(error)}`,
    "server_error",
  );
}
