/**
 * The KV budget: what a request reserves in the engine's cache (its prompt plus the tokens it
 * may still generate), clamped to the model's context, and whether it can fit at all. The
 * engine admits a request only while the reservations of the active requests, the caches kept
 * between turns and the prefix cache stay within `maxCacheTokens` (see `InferenceEngine.makeRoom`).
 */
import { ContextLimitError, type GenerationRequest } from "./types.js";

/** The tokens a request may generate: its `maxNewTokens`, but never past the model's context (at least 1). */
export function clampNewTokens(request: GenerationRequest, maxSequenceLength: number): number {
  return Math.max(
    1,
    Math.min(request.maxNewTokens, maxSequenceLength - request.promptTokens.length),
  );
}

/** KV tokens a request reserves while it runs: prompt + the tokens it may generate. */
export function reservationOf(request: GenerationRequest, maxSequenceLength: number): number {
  return request.promptTokens.length + clampNewTokens(request, maxSequenceLength);
}

/** Why a request can never run (empty prompt, no tokens to generate, a prompt that fills the context), or undefined. */
export function checkFits(
  request: GenerationRequest,
  maxSequenceLength: number,
): Error | undefined {
  if (request.promptTokens.length === 0)
    return new RangeError("a generation request needs at least one prompt token");
  if (!(request.maxNewTokens >= 1))
    return new RangeError(`maxNewTokens must be ≥ 1, got ${request.maxNewTokens}`);
  if (request.promptTokens.length >= maxSequenceLength) {
    return new ContextLimitError(
      `prompt of ${request.promptTokens.length} tokens leaves no room to generate (maxSequenceLength ${maxSequenceLength})`,
    );
  }
  return undefined;
}
