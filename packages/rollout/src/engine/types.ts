/**
 * The engine's types: what it needs from a model, what it is asked and answers, its options
 * and statistics, and `GenerationEngine`, what the rollout needs from whatever generates its
 * turns (the local `InferenceEngine`, a pool of them, or a fleet of servers).
 */
import { AgentRLError } from "@agentrl/spec";

/** A KV-cache sequence of the model (`@agentrl/policy`'s `KVSequence` fits). */
export interface EngineSequence {
  /** Tokens in the cache. */
  readonly length: number;
  dispose(): void;
}

/**
 * What the engine needs from a model (`@agentrl/policy`'s `Transformer` fits, via
 * `transformerEngineModel`). Logits rows are [V] floats.
 */
export interface EngineModel<Sequence extends EngineSequence = EngineSequence, Weights = unknown> {
  createSequence(): Sequence;
  /** Appends tokens to the sequence's cache; returns the logits after the last one. */
  prefill(sequence: Sequence, tokenIds: number[]): Float32Array;
  /** Feeds tokenIds[i] to sequences[i], all in one batch; returns logits per sequence. */
  decodeStep(sequences: Sequence[], tokenIds: number[]): Float32Array[];
  /** A new sequence holding a copy of this one's cache, or of its first `length` tokens (prefix caching); optional. */
  fork?(sequence: Sequence, length?: number): Sequence;
  /**
   * Appends tokenLists[i] to sequences[i] in one batch (shared matmuls); returns the logits
   * after each list's last token. Optional: without it each request is prefilled alone. Must
   * validate before changing any cache (on an error the engine prefills one by one).
   */
  prefillBatch?(sequences: Sequence[], tokenLists: number[][]): Float32Array[];
  /** Replaces the weights (called between decode steps only). */
  loadWeights(weights: Weights): void | Promise<void>;
}

/** What to do with in-flight requests when new weights arrive. */
export type WeightUpdateMode =
  /** Stop admitting, let in-flight requests finish on the old weights, then swap. */
  | "drain"
  /** Swap between two decode steps; in-flight requests continue on the new weights. */
  | "continue";

export interface InferenceEngineOptions {
  /** Most sequences in one decode step. Default 64. */
  maxBatchSize?: number;
  /** Budget of KV-cache tokens over all active requests (reserved: prompt + max new tokens) and kept caches. Default 65,536. */
  maxCacheTokens?: number;
  /** Longest sequence the model takes (prompt + generation). Default 4,096. */
  maxSequenceLength?: number;
  /** New requests admitted per loop iteration. Default 4. */
  maxPrefillsPerStep?: number;
  /**
   * Prompt tokens prefilled per loop iteration (chunked prefill): a long prompt is fed over
   * several iterations, so the decode batch never stalls behind it. Default 512.
   */
  maxPrefillTokensPerStep?: number;
  /**
   * Milliseconds one iteration's prefill should take at most: prefill runs synchronously on
   * the event loop, and a server answers nothing else meanwhile (/health, cache releases,
   * weight pushes). The token budget of an iteration then adapts: it starts at 64; after an
   * iteration's prefill took longer than this, it shrinks (down to 16) to what would have
   * taken half of it; after one that used its whole budget in under half of it, it doubles (up
   * to `maxPrefillTokensPerStep`). Default Infinity (the token budget alone). `agentrl serve`
   * uses 2,000: one 512-token call of the 2-layer test model took up to 2.2 s at load 9 (nice
   * 19), and a larger model's may outlast RemoteEngine's 5 s health deadline (not measured).
   * Smaller chunks cost more in all (each call attends over the whole context so far): at
   * 500 ms the test model's 8 x 900-token prefill took 2.5x longer.
   */
  prefillStepMs?: number;
  /**
   * Requests whose prefill is done join the decode batch together: when they number at
   * least `joinFraction` × the sequences decoding, or have waited `joinIntervalSteps` decode
   * steps, or nothing is decoding. Joining makes the model regroup the batch's caches
   * (a copy of all of them), so joining one by one would pay that copy at almost every step.
   * Defaults 0.25 and 8; `joinIntervalSteps: 0` joins at once.
   */
  joinFraction?: number;
  joinIntervalSteps?: number;
  /**
   * Prompt prefixes kept for reuse (needs `model.fork`): every prompt of at least
   * `minPrefixTokens` tokens (not continuing a kept cache) leaves a copy of its cache (all but
   * its last token); a later prompt sharing at least `minPrefixTokens` first tokens with one
   * (the other episodes of a group: the whole opening prompt; other instances of a task: the
   * system prompt) forks the cache of that shared beginning and prefills only the rest. Least
   * recently used first out; dropped on weight updates. Defaults 32 entries and 16 tokens; 0
   * entries turns it off.
   */
  prefixCacheEntries?: number;
  minPrefixTokens?: number;
  /**
   * A request that continues a cached sequence (kept between turns, or forked from a prefix)
   * with at most this many new prompt tokens feeds them through the shared decode steps,
   * one per step, instead of a prefill call of its own: an environment's short reply then
   * costs one batch row per token rather than a whole model call. Default 64; 0 turns it off.
   */
  decodeFeedTokens?: number;
  /** …but only while at least this many sequences are decoding (alone, a prefill call is cheaper). Default 4. */
  decodeFeedMinBatch?: number;
  /** Default sampling temperature (0 = greedy). Default 1. */
  temperature?: number;
  /** Nucleus sampling (the recorded log-prob stays that of the untruncated softmax(logits / T)). Default 1 (off). */
  topP?: number;
  /** Keep only the k most likely tokens; 0 = off. Default 0. */
  topK?: number;
  /** Token ids that end a generation (included in the output). Default none. */
  stopTokenIds?: number[];
  /** What happens to in-flight requests on a weight update. Default `continue`. */
  updateMode?: WeightUpdateMode;
  /**
   * Keep the caches episodes left between turns across a weight update (default false: drop
   * them, so every later turn re-prefills its whole context with the new weights). With
   * true, an episode's next turn attends to keys/values its earlier turns computed with the
   * older weights, as in-flight requests under `continue` already do (PipelineRL-style
   * in-flight updates). The sampled tokens' log-probs and versions stay exactly those of the
   * distribution that drew them, so the learner's importance ratios remain correct; what
   * changes is only that this distribution mixes versions within one context. The prefix
   * cache (shared prompts) is dropped either way.
   */
  keepCachesOnUpdate?: boolean;
  /** Policy version of the initial weights. Default 0. */
  initialVersion?: number;
  /** Seed of the sampler. Default 0. */
  seed?: number;
}

export interface GenerationRequest {
  /** The whole context (prompt) as token ids. */
  promptTokens: number[];
  /** Most tokens to generate. */
  maxNewTokens: number;
  /** Overrides the engine's temperature. */
  temperature?: number;
  /** Overrides the engine's stop tokens. */
  stopTokenIds?: number[];
  /** Aborting rejects the request with the signal's reason and frees its slot. */
  signal?: AbortSignal;
  /** Keep this request's KV cache for a later request with the same key (e.g. an episode id). */
  cacheKey?: string;
}

export interface GenerationResult {
  /** Generated ids, the stop token included when one ended the generation. */
  tokens: number[];
  /** Sampler log-prob of each token (softmax of logits / temperature). */
  logprobs: number[];
  /** Policy version that produced each token's logits. */
  versions: number[];
  finishReason: "stop" | "length";
  /** Prompt tokens computed for this request (by prefill, or fed through decode steps); the rest came from a cached sequence. */
  prefilledTokens: number;
}

/**
 * What the rollout needs from whatever generates its turns: the local `InferenceEngine`, or
 * `RemoteEngine` (a fleet of `agentrl serve` servers, see remote.ts).
 */
export interface GenerationEngine<Weights = unknown> {
  /** Newest policy version the engine samples with. */
  readonly version: number;
  generate(request: GenerationRequest): Promise<GenerationResult>;
  /** Drops the KV cache kept under `cacheKey` (its episode ended). */
  releaseCache(cacheKey: string): void;
  /** Installs new weights; resolves once they are in use. */
  updateWeights(weights: Weights, version: number): Promise<void>;
  stats(): EngineStats;
  close(): void;
}

/** The prompt does not fit the model's context. */
export class ContextLimitError extends AgentRLError {}

/** The engine was closed. */
export class EngineClosedError extends AgentRLError {}

export interface EngineStats {
  version: number;
  /** Requests waiting for a slot. */
  waiting: number;
  /** Sequences in the decode batch. */
  active: number;
  /** KV tokens reserved by active requests and kept caches. */
  reservedCacheTokens: number;
  keptCaches: number;
  /** Entries of the prefix cache. */
  cachedPrefixes: number;
  decodeSteps: number;
  generatedTokens: number;
  prefilledTokens: number;
  /** Calls of the model's prefill (chunks). */
  prefillCalls: number;
  /** Prompt tokens fed through shared decode steps instead of prefill. */
  decodeFedTokens: number;
  /** Prompt tokens served from kept caches instead of prefill. */
  reusedCacheTokens: number;
  completedRequests: number;
  weightUpdates: number;
  /** Mean (sequences in a decode step / maxBatchSize) over steps. */
  meanBatchOccupancy: number;
  /** Mean sequences per decode step. */
  meanBatchSize: number;
  /** Time spent in decode steps and prefill, milliseconds. */
  decodeMs: number;
  prefillMs: number;
}
