/**
 * The remote rollout backend: a `GenerationEngine` whose turns run on N `agentrl serve`
 * servers (OpenAI chat-completions with agentrl's token-in/token-out fields, see
 * docs/serve.md), so a trainer drives a fleet of inference servers the way AReaL, slime and
 * verl drive SGLang/vLLM.
 *
 *   turn  ──► least-loaded live server (in-flight sequences; an episode stays on the server
 *             holding its KV cache unless that one has `affinitySlack` more in flight)
 *         ──► POST /v1/chat/completions {prompt_token_ids, return_token_ids: true, cache_key}
 *         ◄── token_ids, token_logprobs, token_versions  (the trajectory's exact tokens)
 *   update ─► POST /v1/weights (one safetensors body, sent to every live server)
 *
 * A server that fails (connection refused or reset, 5xx) is marked down: the requests it
 * held reject with `InferenceServerError` (their episodes end with the incomplete penalty),
 * new turns go to the others, and it is probed every `retryAfterMs`; once it answers it
 * gets the newest weights before it takes turns again. With no live server a turn waits at
 * most `unavailableTimeoutMs` (or until its own deadline), then fails: nothing hangs.
 *
 * Every call has a deadline (`healthTimeoutMs`, `requestTimeoutMs`, `pushTimeoutMs`): a server
 * that accepts a connection and never answers fails the call with an `InferenceServerError`
 * naming the server, the route and the deadline, and is marked down. Deadlines count this
 * process's live time (live-deadline.ts): the seconds its own event loop is blocked (a learner
 * step on the main thread) are not blamed on a server whose answer waits to be read. A weight push that no
 * live server took rejects.
 *
 * Wire types are exported here (the server in @agentrl/cli imports them; rollout does not
 * depend on cli).
 */
import { AgentRLError } from "@agentrl/spec";
import { randomBytes } from "node:crypto";
import { serializeSafetensors, type ExportedWeights } from "@agentrl/policy";
import {
  ContextLimitError,
  EngineClosedError,
  type EngineStats,
  type GenerationEngine,
  type GenerationRequest,
  type GenerationResult,
} from "./engine/index.js";
import { serveKeyFromEnvironment } from "./serve/key.js";
import { liveDeadline } from "./live-deadline.js";

/** The agentrl fields of a token-in chat-completions request (beside OpenAI's `model`, `max_tokens`, `temperature`, `n`). */
export interface TokenCompletionRequest {
  model: string;
  prompt_token_ids: number[];
  max_tokens: number;
  temperature: number;
  n?: 1;
  return_token_ids: true;
  stop_token_ids?: number[];
  cache_key?: string;
}

/** The agentrl fields of a choice of a `return_token_ids` answer. */
export interface TokenCompletionChoice {
  index: number;
  finish_reason: "stop" | "length" | "tool_calls";
  token_ids: number[];
  /** Sampler log-prob of each token (softmax of logits / temperature). */
  token_logprobs: number[];
  /** Policy version of the weights that produced each token's logits. */
  token_versions: number[];
}

/** Header of `POST /v1/weights` naming the pushed version. */
export const POLICY_VERSION_HEADER = "x-agentrl-policy-version";

/** An inference server failed a request (down, or answered an error). */
export class InferenceServerError extends AgentRLError {
  constructor(
    message: string,
    readonly server: string,
    readonly status?: number,
    /** Set when the server did not answer within this deadline (milliseconds). */
    readonly deadlineMs?: number,
  ) {
    super(message);
  }
}

export interface RemoteEngineOptions {
  /** Base URLs of the servers (`http://host:port` or `http://host:port/v1`). */
  servers: string[];
  /** Sent as `Authorization: Bearer <apiKey>` on the chat routes. Default none. */
  apiKey?: string;
  /**
   * Sent as `Authorization: Bearer <weightsKey>` on `POST /v1/weights` (a server's weight routes
   * need their own key). Default: env `AGENTRL_SERVE_KEY`, else the key file servers on this
   * machine write (`AGENTRL_SERVE_KEY_FILE`, else `~/.agentrl/serve-key`), else none.
   */
  weightsKey?: string;
  /** Model id the servers serve. Default: each server's own (from GET /health). */
  model?: string;
  /** Temperature of requests that give none. Default 1. */
  temperature?: number;
  /** Extra stop token ids of every request (the server's tokenizer stop ids always apply). Default none. */
  stopTokenIds?: number[];
  /** A down server is probed again after this many milliseconds. Default 2,000. */
  retryAfterMs?: number;
  /** With no live server, a turn waits at most this long for one. Default 30,000. */
  unavailableTimeoutMs?: number;
  /** Time limit of one weight push to one server, milliseconds. Default 600,000. */
  pushTimeoutMs?: number;
  /** Time limit of one turn (a chat-completions request), milliseconds. Default 600,000. */
  requestTimeoutMs?: number;
  /** Time limit of one health probe (GET /health), milliseconds. Default 5,000. */
  healthTimeoutMs?: number;
  /** An episode stays on the server holding its KV cache unless that server has more than this many sequences in flight above the least loaded. Default 4. */
  affinitySlack?: number;
  /** Warnings (a server went down or came back). Default `console.warn`. */
  log?: (line: string) => void;
}

/** What one server looks like from the client. */
export interface RemoteServerState {
  url: string;
  up: boolean;
  model: string | undefined;
  /** Newest version the server confirmed (health probe or weight push). */
  version: number;
  inFlight: number;
  requests: number;
  failures: number;
}

interface Server extends RemoteServerState {
  retry?: NodeJS.Timeout;
}

export class RemoteEngine implements GenerationEngine<ExportedWeights> {
  private readonly options: Required<
    Omit<RemoteEngineOptions, "apiKey" | "weightsKey" | "model" | "stopTokenIds">
  > &
    Pick<RemoteEngineOptions, "apiKey" | "weightsKey" | "model" | "stopTokenIds">;
  private readonly servers: Server[];
  /** Cache key (namespaced) → the server holding it. */
  private readonly affinity = new Map<string, Server>();
  private readonly releases = new Map<Server, string[]>();
  /** Caches of this engine never collide with another client's on a shared server. */
  private readonly namespace = randomBytes(6).toString("hex");
  private readonly closing = new AbortController();
  private latest: { bytes: Uint8Array; version: number } | undefined;
  private currentVersion = 0;
  private closed = false;
  private readonly counters = {
    generatedTokens: 0,
    prefilledTokens: 0,
    reusedCacheTokens: 0,
    completedRequests: 0,
    weightUpdates: 0,
  };

  private constructor(options: RemoteEngineOptions) {
    if (options.servers.length === 0)
      throw new RangeError("a remote engine needs at least one server URL");
    this.options = {
      temperature: 1,
      retryAfterMs: 2_000,
      unavailableTimeoutMs: 30_000,
      pushTimeoutMs: 600_000,
      requestTimeoutMs: 600_000,
      healthTimeoutMs: 5_000,
      affinitySlack: 4,
      log: (line) => console.warn(line),
      ...options,
    };
    this.options.weightsKey ??= serveKeyFromEnvironment();
    this.servers = options.servers.map((url) => ({
      url: baseUrl(url),
      up: false,
      model: options.model,
      version: -1,
      inFlight: 0,
      requests: 0,
      failures: 0,
    }));
  }

  /** Probes every server (GET /health); throws InferenceServerError when none answers. */
  static async connect(options: RemoteEngineOptions): Promise<RemoteEngine> {
    const engine = new RemoteEngine(options);
    const failures = await Promise.all(engine.servers.map((server) => engine.probe(server)));
    const live = engine.servers.filter((server) => server.up);
    if (live.length === 0) {
      engine.close();
      const reasons = engine.servers
        .map((server, index) => `${server.url}: ${failures[index] ?? "no answer"}`)
        .join("; ");
      throw new InferenceServerError(
        `no inference server answers GET /health (${reasons})`,
        options.servers.join(","),
      );
    }
    engine.currentVersion = Math.max(...live.map((server) => server.version));
    for (const server of engine.servers)
      if (!server.up) engine.markDown(server, "did not answer GET /health");
    return engine;
  }

  get version(): number {
    return this.currentVersion;
  }

  /** State of each server (for metrics and tests). */
  serverStates(): RemoteServerState[] {
    return this.servers.map(({ retry: _retry, ...state }) => ({ ...state }));
  }

  async generate(request: GenerationRequest): Promise<GenerationResult> {
    if (this.closed) throw new EngineClosedError("the remote engine is closed");
    if (request.signal?.aborted) throw request.signal.reason;
    const cacheKey =
      request.cacheKey === undefined ? undefined : `${this.namespace}-${request.cacheKey}`;
    const server = await this.pick(cacheKey, request.signal);
    const body: TokenCompletionRequest = {
      model: server.model!,
      prompt_token_ids: request.promptTokens,
      max_tokens: request.maxNewTokens,
      temperature: request.temperature ?? this.options.temperature,
      n: 1,
      return_token_ids: true,
      ...((request.stopTokenIds ?? this.options.stopTokenIds)
        ? { stop_token_ids: request.stopTokenIds ?? this.options.stopTokenIds }
        : {}),
      ...(cacheKey !== undefined ? { cache_key: cacheKey } : {}),
    };
    if (cacheKey !== undefined) this.affinity.set(cacheKey, server);
    server.inFlight += 1;
    server.requests += 1;
    const signal = request.signal
      ? AbortSignal.any([request.signal, this.closing.signal])
      : this.closing.signal;
    try {
      const answer = await this.call(
        server,
        "/chat/completions",
        {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(body),
          signal,
        },
        ["requestTimeoutMs", this.options.requestTimeoutMs],
      );
      return this.resultOf(server, answer, request.promptTokens.length);
    } catch (error) {
      if (cacheKey !== undefined) this.affinity.delete(cacheKey);
      if (signal.aborted)
        throw request.signal?.aborted
          ? request.signal.reason
          : new EngineClosedError("the remote engine was closed");
      throw error;
    } finally {
      server.inFlight -= 1;
    }
  }

  releaseCache(cacheKey: string): void {
    const key = `${this.namespace}-${cacheKey}`;
    const server = this.affinity.get(key);
    if (!server) return;
    this.affinity.delete(key);
    if (!server.up || this.closed) return;
    // Batched: the releases of one tick go out in one request, answered or not (caches are also evicted under pressure).
    const pending = this.releases.get(server);
    if (pending) return void pending.push(key);
    this.releases.set(server, [key]);
    setImmediate(() => {
      const keys = this.releases.get(server) ?? [];
      this.releases.delete(server);
      void this.call(
        server,
        "/cache/release",
        {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ cache_keys: keys }),
        },
        ["healthTimeoutMs", this.options.healthTimeoutMs],
      ).catch(() => {});
    });
  }

  /**
   * Pushes new weights to every live server (one safetensors body, encoded once). Resolves
   * when each live server uses them; a server that fails meanwhile (or does not answer within
   * `pushTimeoutMs`) is marked down (it gets them when it comes back). Rejects when a server
   * refuses them (e.g. another architecture), or when every live server failed to take them.
   * With no live server at all it resolves and the version advances: the weights wait for the
   * first server that comes back, which takes them before it serves a turn (`probe`).
   */
  async updateWeights(weights: ExportedWeights, version: number): Promise<void> {
    if (this.closed) throw new EngineClosedError("the remote engine is closed");
    const bytes = serializeSafetensors(weights.tensors, {
      metadata: { format: "pt", version: String(version) },
    });
    this.latest = { bytes, version };
    const refused: string[] = [];
    const failed: InferenceServerError[] = [];
    const live = this.servers.filter((server) => server.up);
    await Promise.all(
      live.map(async (server) => {
        try {
          await this.push(server);
        } catch (error) {
          if (
            error instanceof InferenceServerError &&
            error.status !== undefined &&
            error.status < 500
          )
            refused.push(error.message);
          else
            failed.push(
              error instanceof InferenceServerError
                ? error
                : new InferenceServerError(
                    `${server.url}/weights: ${(error as Error).message}`,
                    server.url,
                  ),
            );
        }
      }),
    );
    if (refused.length > 0)
      throw new InferenceServerError(
        `weights of version ${version} refused: ${refused.join("; ")}`,
        "",
        400,
      );
    if (live.length > 0 && failed.length === live.length) {
      throw new InferenceServerError(
        `weights of version ${version} reached no server: ${failed.map((error) => error.message).join("; ")}`,
        failed.map((error) => error.server).join(","),
        failed[0].status,
        failed[0].deadlineMs,
      );
    }
    this.currentVersion = version;
    this.counters.weightUpdates += 1;
  }

  stats(): EngineStats {
    const inFlight = this.servers.reduce((sum, server) => sum + server.inFlight, 0);
    return {
      version: this.currentVersion,
      waiting: 0,
      active: inFlight,
      reservedCacheTokens: 0,
      keptCaches: this.affinity.size,
      cachedPrefixes: 0,
      decodeSteps: 0,
      generatedTokens: this.counters.generatedTokens,
      prefilledTokens: this.counters.prefilledTokens,
      prefillCalls: 0,
      decodeFedTokens: 0,
      reusedCacheTokens: this.counters.reusedCacheTokens,
      completedRequests: this.counters.completedRequests,
      weightUpdates: this.counters.weightUpdates,
      meanBatchOccupancy: 0,
      meanBatchSize: 0,
      decodeMs: 0,
      prefillMs: 0,
    };
  }

  /** Rejects the requests in flight and stops probing (the servers keep running). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.closing.abort(new EngineClosedError("the remote engine was closed"));
    for (const server of this.servers) clearTimeout(server.retry);
  }

  // ------------------------------------------------------------------ routing and health

  /** The server for a turn: least in flight, or the one holding the episode's cache when it is not much busier. */
  private async pick(
    cacheKey: string | undefined,
    signal: AbortSignal | undefined,
  ): Promise<Server> {
    const deadline = Date.now() + this.options.unavailableTimeoutMs;
    for (;;) {
      const live = this.servers.filter((server) => server.up);
      if (live.length > 0) {
        const least = live.reduce((best, server) =>
          server.inFlight < best.inFlight ? server : best,
        );
        const holder = cacheKey === undefined ? undefined : this.affinity.get(cacheKey);
        return holder?.up && holder.inFlight <= least.inFlight + this.options.affinitySlack
          ? holder
          : least;
      }
      if (this.closed) throw new EngineClosedError("the remote engine is closed");
      if (signal?.aborted) throw signal.reason;
      if (Date.now() >= deadline)
        throw new InferenceServerError(
          `no live inference server for ${this.options.unavailableTimeoutMs} ms`,
          this.servers.map((server) => server.url).join(","),
        );
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** GET /health (and the newest weights when it missed them); resolves with why it failed, if it did. */
  private async probe(server: Server): Promise<string | undefined> {
    // Counted in live time: a probe sent just before this process blocked is not failed by the block.
    const deadline = liveDeadline(this.options.healthTimeoutMs);
    const timeout = deadline.signal;
    try {
      let health: { model?: string; engine?: { version?: number } };
      try {
        const response = await fetch(server.url.replace(/\/v1$/, "/health"), {
          signal: AbortSignal.any([timeout, this.closing.signal]),
        });
        if (!response.ok) throw new Error(`HTTP ${response.status}`);
        health = (await response.json()) as typeof health;
      } catch (error) {
        if (timeout.aborted)
          throw new InferenceServerError(
            `no answer within ${this.options.healthTimeoutMs} ms (healthTimeoutMs)`,
            server.url,
            504,
            this.options.healthTimeoutMs,
          );
        throw error;
      } finally {
        deadline.clear();
      }
      server.model = this.options.model ?? health.model;
      server.version = health.engine?.version ?? -1;
      if (this.latest) await this.push(server, true);
      if (this.closed) return;
      if (!server.up && server.requests > 0)
        this.options.log(`inference server ${server.url} is back (version ${server.version})`);
      server.up = true;
      return undefined;
    } catch (error) {
      server.up = false;
      if (!this.closed) this.scheduleProbe(server);
      const cause = (error as { cause?: { code?: string } }).cause;
      return `${(error as Error).message}${cause?.code ? ` (${cause.code})` : ""}`;
    }
  }

  private markDown(server: Server, reason: string): void {
    if (server.up)
      this.options.log(
        `inference server ${server.url} is down (${reason}); its turns fail, others take new ones; retrying every ${this.options.retryAfterMs} ms`,
      );
    server.up = false;
    server.failures += 1;
    for (const [key, holder] of this.affinity) if (holder === server) this.affinity.delete(key);
    if (!server.retry && !this.closed) this.scheduleProbe(server);
  }

  private scheduleProbe(server: Server): void {
    clearTimeout(server.retry);
    server.retry = setTimeout(() => {
      server.retry = undefined;
      void this.probe(server);
    }, this.options.retryAfterMs);
    server.retry.unref();
  }

  /** Sends the newest weights to one server. `reviving`: failures propagate without marking it down again. */
  private async push(server: Server, reviving = false): Promise<void> {
    const latest = this.latest!;
    const signal = this.closing.signal;
    const headers = {
      "content-type": "application/octet-stream",
      [POLICY_VERSION_HEADER]: String(latest.version),
      ...(this.options.weightsKey ? { authorization: `Bearer ${this.options.weightsKey}` } : {}),
    };
    const init = { method: "POST", headers, body: latest.bytes, signal };
    const deadline: Deadline = ["pushTimeoutMs", this.options.pushTimeoutMs];
    const answer = (await (reviving
      ? this.request(server, "/weights", init, deadline)
      : this.call(server, "/weights", init, deadline))) as { version?: number };
    server.version = answer.version ?? latest.version;
  }

  /** One request to a server; a connection failure, a 5xx or no answer by the deadline marks it down. */
  private async call(
    server: Server,
    path: string,
    init: RequestInit,
    deadline: Deadline,
  ): Promise<unknown> {
    try {
      return await this.request(server, path, init, deadline);
    } catch (error) {
      const status = error instanceof InferenceServerError ? error.status : undefined;
      const aborted = (init.signal as AbortSignal | undefined)?.aborted;
      if (!aborted && (status === undefined || status >= 500))
        this.markDown(server, (error as Error).message);
      throw error;
    }
  }

  /** One request, answered within `deadline` (else an InferenceServerError naming the server, the route and the deadline). */
  private async request(
    server: Server,
    path: string,
    init: RequestInit,
    [deadlineName, deadlineMs]: Deadline,
  ): Promise<unknown> {
    const headers = {
      ...(this.options.apiKey ? { authorization: `Bearer ${this.options.apiKey}` } : {}),
      ...(init.headers as Record<string, string>),
    };
    // Live time (see live-deadline.ts): the seconds this process's own event loop was blocked
    // (a learner step on the main thread) do not count against the server.
    const deadline = liveDeadline(deadlineMs);
    const timeout = deadline.signal;
    const given = init.signal as AbortSignal | undefined;
    const signal = given ? AbortSignal.any([given, timeout]) : timeout;
    const late = () =>
      new InferenceServerError(
        `${server.url}${path}: no answer within ${deadlineMs} ms (${deadlineName}); the server hangs or is overloaded`,
        server.url,
        504,
        deadlineMs,
      );
    let response: Response | undefined;
    let text: string;
    try {
      // A socket closed under the request may be a kept-alive connection the server had just
      // closed (likely after the event loop was blocked): one retry on a new connection tells
      // that apart from a dead server (connection refused).
      for (let attempt = 0; !response; attempt++) {
        try {
          response = await fetch(server.url + path, { ...init, headers, signal });
        } catch (error) {
          if (given?.aborted) throw error;
          if (timeout.aborted) throw late();
          const cause = (error as { cause?: { code?: string; message?: string } }).cause;
          if (attempt === 0 && (cause?.code === "UND_ERR_SOCKET" || cause?.code === "ECONNRESET"))
            continue;
          throw new InferenceServerError(
            `${server.url}${path}: ${(error as Error).message}${cause ? ` (${cause.code ?? cause.message})` : ""}`,
            server.url,
          );
        }
      }
      try {
        text = await response.text();
      } catch (error) {
        if (given?.aborted) throw error;
        if (timeout.aborted) throw late();
        throw new InferenceServerError(
          `${server.url}${path}: the answer broke off: ${(error as Error).message}`,
          server.url,
        );
      }
    } finally {
      deadline.clear();
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new InferenceServerError(
        `${server.url}${path}: HTTP ${response.status}, not JSON: ${text.slice(0, 120)}`,
        server.url,
        response.status,
      );
    }
    if (!response.ok) {
      const error = (json as { error?: { message?: string; code?: string } }).error;
      if (error?.code === "context_length_exceeded")
        throw new ContextLimitError(error.message ?? "context length exceeded");
      throw new InferenceServerError(
        `${server.url}${path}: HTTP ${response.status}: ${error?.message ?? text.slice(0, 200)}`,
        server.url,
        response.status,
      );
    }
    return json;
  }

  private resultOf(server: Server, answer: unknown, promptLength: number): GenerationResult {
    const body = answer as {
      choices?: TokenCompletionChoice[];
      usage?: { prompt_tokens_details?: { cached_tokens?: number } };
    };
    const choice = body.choices?.[0];
    const valid =
      choice &&
      Array.isArray(choice.token_ids) &&
      choice.token_ids.length > 0 &&
      choice.token_logprobs?.length === choice.token_ids.length &&
      choice.token_versions?.length === choice.token_ids.length;
    if (!valid)
      throw new InferenceServerError(
        `${server.url}: the answer lacks token_ids, token_logprobs and token_versions of equal length (is it an agentrl serve server?)`,
        server.url,
        200,
      );
    const cached = Math.min(promptLength, body.usage?.prompt_tokens_details?.cached_tokens ?? 0);
    this.counters.generatedTokens += choice.token_ids.length;
    this.counters.prefilledTokens += promptLength - cached;
    this.counters.reusedCacheTokens += cached;
    this.counters.completedRequests += 1;
    return {
      tokens: choice.token_ids,
      logprobs: choice.token_logprobs,
      versions: choice.token_versions,
      finishReason: choice.finish_reason === "length" ? "length" : "stop",
      prefilledTokens: promptLength - cached,
    };
  }
}

/** A call's deadline: the option that sets it, and its milliseconds. */
type Deadline = [name: string, milliseconds: number];

/** `http://host:port` or `http://host:port/v1/` → `http://host:port/v1`. */
function baseUrl(url: string): string {
  const trimmed = url.replace(/\/+$/, "");
  return trimmed.endsWith("/v1") ? trimmed : `${trimmed}/v1`;
}
