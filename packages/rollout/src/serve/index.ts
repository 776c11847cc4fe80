/**
 * `agentrl serve` as a library: load a saved policy, put ONE inference engine (continuous
 * batching) in front of it, and answer OpenAI chat-completions requests over HTTP.
 *
 *   const running = await startModelServer({ model: "models/tiny", port: 0 });
 *   // … point any OpenAI client (or ExternalChatModel) at running.address.baseUrl …
 *   await running.close();
 */
import { basename, resolve } from "node:path";
import { Policy, type Policy as PolicyType } from "@agentrl/policy";
import { createPolicyEngine, type InferenceEngine } from "../engine/index.js";
import { ChatServer, type ListeningAddress } from "./server.js";
import { defaultServeKeyFile, serverWeightsKey } from "./key.js";

export * from "./schema.js";
export * from "./chat.js";
export * from "./server.js";
export * from "./stream.js";
export * from "./chunked.js";
export * from "./weights.js";
export * from "./key.js";

export interface ModelServerOptions {
  /** Model directory (config.json, safetensors, tokenizer.json with a chat template). */
  model: string;
  /** Port; 0 picks a free one. Default 8000. */
  port?: number;
  /** Address to bind. Default 127.0.0.1; any non-loopback address needs `apiKey`. */
  host?: string;
  /** Clients must send `Authorization: Bearer <apiKey>`. Default none. */
  apiKey?: string;
  /**
   * Key of the weight routes (`GET|POST /v1/weights`), always required. Default: env
   * `AGENTRL_SERVE_KEY`, else the key in `weightsKeyFile`, else a new one written there (0600).
   */
  weightsKey?: string;
  /** Where a generated weights key is kept. Default `AGENTRL_SERVE_KEY_FILE`, else `~/.agentrl/serve-key`. */
  weightsKeyFile?: string;
  /** Folders and URL prefixes `POST /v1/weights` may pull weights from (JSON `{path | url}`). Default none. */
  weightsFrom?: readonly string[];
  /** Most sequences in one decode step of the engine. Default 32. */
  maxBatch?: number;
  /** Model id served (the `model` field). Default: the directory's name. */
  name?: string;
  /** Default temperature of requests. Default: generation_config.json's, else 1. */
  temperature?: number;
  /** Nucleus sampling of the engine (server-wide). Default: generation_config.json's top_p, else 1. */
  topP?: number;
  /** Default `max_tokens` of requests. Default 1,024. */
  maxTokens?: number;
  /** Seed of the engine's sampler. Default 0. */
  seed?: number;
  /** Streamed generations reach the client in slices of this many tokens (0 = all at the end). Default 16. */
  streamChunkTokens?: number;
  /** KV-cache budget of the engine, tokens. Default 65,536. */
  maxCacheTokens?: number;
  /**
   * Milliseconds one engine iteration's prefill may hold the event loop (the prompt tokens per
   * iteration adapt; see the engine's `prefillStepMs`), so /health, cache releases and weight
   * pushes are answered while long prompts are prefilled. Default 2,000.
   */
  prefillStepMs?: number;
  /** Kept KV caches survive a weight update (`POST /v1/weights`); see the engine's `keepCachesOnUpdate`. Default false. */
  keepCachesOnUpdate?: boolean;
  /** Request log lines; null = silent. Default `console.error`. */
  log?: ((line: string) => void) | null;
}

export interface RunningModelServer {
  server: ChatServer;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- engines of any policy type
  engine: InferenceEngine<any, any>;
  policy: PolicyType;
  address: ListeningAddress;
  /** The weights key, and where it came from (`--weights-key`, `AGENTRL_SERVE_KEY` or a key file; `created`: written now). */
  weightsKey: { key: string; source: string; created: boolean };
  /** Stops the server (requests in flight get `graceMs`, default 10 s), the engine, and frees the model. */
  close(graceMs?: number): Promise<void>;
}

/** Loads `options.model` and starts serving it. */
export async function startModelServer(options: ModelServerOptions): Promise<RunningModelServer> {
  const weightsKey = serverWeightsKey(
    options.weightsKey,
    options.weightsKeyFile ?? defaultServeKeyFile(),
  );
  const policy = await Policy.load(options.model, { tokenizer: true, trainable: false });
  const tokenizer = policy.tokenizer!;
  const generation = policy.generationConfig;
  const topP = options.topP ?? (typeof generation.top_p === "number" ? generation.top_p : 1);
  const seed = options.seed ?? 0;
  const engine = createPolicyEngine(policy, {
    maxBatchSize: options.maxBatch ?? 32,
    maxCacheTokens: options.maxCacheTokens ?? 65_536,
    prefillStepMs: options.prefillStepMs ?? 2_000,
    topP,
    seed,
    keepCachesOnUpdate: options.keepCachesOnUpdate ?? false,
  });
  const server = new ChatServer({
    engine,
    tokenizer,
    modelName: options.name ?? basename(resolve(options.model)),
    apiKey: options.apiKey,
    weightsKey: weightsKey.key,
    weightSources: options.weightsFrom ?? [],
    defaultTemperature:
      options.temperature ??
      (typeof generation.temperature === "number" ? generation.temperature : 1),
    defaultMaxTokens: options.maxTokens ?? 1024,
    serverSampling: { top_p: topP, seed },
    streamChunkTokens: options.streamChunkTokens,
    vocabularySize: policy.config.vocabSize,
    log: options.log,
  });
  let address: ListeningAddress;
  try {
    address = await server.listen(options.port ?? 8000, options.host ?? "127.0.0.1");
  } catch (error) {
    engine.close();
    policy.dispose();
    throw error;
  }
  let closing: Promise<void> | undefined;
  const close = (graceMs?: number) =>
    (closing ??= (async () => {
      await server.close(graceMs);
      engine.close();
      policy.dispose();
    })());
  return { server, engine, policy, address, weightsKey, close };
}
