/**
 * Live streaming over an engine that reports a generation only when it ends: generate in
 * slices of `chunkTokens` tokens, each slice a request that continues the previous one's KV
 * cache (same `cacheKey`: the engine keeps the sequence between requests and prefills only
 * the one token sampled last). Tokens reach the client every `chunkTokens` tokens instead of
 * at the end; sampling, log-probs and versions are those of one long generation.
 *
 * The price: each slice leaves and re-joins the engine's decode batch (under load a join can
 * wait up to the engine's `joinIntervalSteps` decode steps).
 */
import {
  ContextLimitError,
  type GenerationRequest,
  type GenerationResult,
} from "../engine/index.js";

/** What chunked generation needs from an engine (`InferenceEngine` fits). */
export interface ChunkableEngine {
  generate(request: GenerationRequest): Promise<GenerationResult>;
  releaseCache(cacheKey: string): void;
}

export interface ChunkedGenerationOptions {
  /** Tokens per slice (≥ 1). */
  chunkTokens: number;
  /** A key no other request uses (the engine keeps this generation's cache under it). */
  cacheKey: string;
  /** Receives each slice's tokens; returning false stops the generation (e.g. a stop string appeared). */
  onTokens: (tokens: readonly number[]) => boolean | void;
}

/** Generates `request` slice by slice; resolves with the whole generation. */
export async function generateInChunks(
  engine: ChunkableEngine,
  request: GenerationRequest,
  options: ChunkedGenerationOptions,
): Promise<GenerationResult> {
  if (!(options.chunkTokens >= 1))
    throw new RangeError(`chunkTokens must be ≥ 1, got ${options.chunkTokens}`);
  const total: GenerationResult = {
    tokens: [],
    logprobs: [],
    versions: [],
    finishReason: "length",
    prefilledTokens: 0,
  };
  try {
    while (total.tokens.length < request.maxNewTokens) {
      const wanted = Math.min(options.chunkTokens, request.maxNewTokens - total.tokens.length);
      let part: GenerationResult;
      try {
        part = await engine.generate({
          ...request,
          promptTokens: [...request.promptTokens, ...total.tokens],
          maxNewTokens: wanted,
          cacheKey: options.cacheKey,
        });
      } catch (error) {
        // The context filled up exactly at a slice boundary: that is a length finish.
        if (error instanceof ContextLimitError && total.tokens.length > 0) break;
        throw error;
      }
      total.tokens.push(...part.tokens);
      total.logprobs.push(...part.logprobs);
      total.versions.push(...part.versions);
      total.prefilledTokens += part.prefilledTokens;
      const more = options.onTokens(part.tokens) !== false;
      if (part.finishReason === "stop") {
        total.finishReason = "stop";
        break;
      }
      // Fewer tokens than asked without a stop: the engine clamped to the context left.
      if (!more || part.tokens.length < wanted) break;
    }
  } finally {
    engine.releaseCache(options.cacheKey);
  }
  return total;
}
