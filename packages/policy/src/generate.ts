/**
 * Sampling and batched generation on top of the model's KV-cache API.
 *
 * The log-prob recorded for each sampled token is log softmax(logits / T)[token] with T the
 * temperature (T = 1 when greedy): the temperature-scaled distribution BEFORE top-k / top-p
 * truncation. It equals what `tokenLogProbs(model, ids, { temperature: T })` computes for
 * that token, which is what the trainer's PPO ratio needs.
 */
import type { Transformer, KVSequence } from "./model.js";
import { Rng } from "./rng.js";

export interface SamplingOptions {
  /** Softmax temperature; 0 means greedy (argmax). Default 1. */
  temperature?: number;
  /** Nucleus sampling: keep the smallest set of tokens whose probability reaches topP. Default 1 (off). */
  topP?: number;
  /** Keep only the k most likely tokens; 0 = off. Default 0. */
  topK?: number;
}

export interface GenerateOptions extends SamplingOptions {
  /** Most tokens to generate per prompt. Default 64. */
  maxNewTokens?: number;
  /** Generation stops after one of these tokens (it is included in the output). Default []. */
  stopTokenIds?: number[];
  /** Generation stops once the decoded completion contains one of these (needs `decode`). Default []. */
  stopStrings?: string[];
  /** Token ids → text, used for stop strings. */
  decode?: (tokenIds: number[]) => string;
  /** Random source; default a new Rng(seed). */
  rng?: Rng;
  /** Seed when no rng is given; default 0. */
  seed?: number;
  /** Most sequences decoded together; default 64. */
  maxBatchSize?: number;
}

export type FinishReason = "stop_token" | "stop_string" | "length";

export interface GenerationResult {
  /** Generated token ids (the stop token, if any, included). */
  tokens: number[];
  /** log softmax(logits / T) of each generated token (natural log). */
  logProbs: number[];
  finishReason: FinishReason;
}

export interface SampledToken {
  token: number;
  /** log softmax(logits / T)[token], T = temperature (1 when greedy). */
  logProb: number;
}

/** Samples one token from logits [V]. */
export function sampleToken(
  logits: Float32Array,
  options: SamplingOptions,
  rng: Rng,
): SampledToken {
  const temperature = options.temperature ?? 1;
  if (!(temperature >= 0)) throw new RangeError(`temperature must be >= 0, got ${temperature}`);
  const scale = temperature === 0 ? 1 : 1 / temperature;
  const vocab = logits.length;
  let maximum = -Infinity;
  let argmax = 0;
  for (let i = 0; i < vocab; i++) {
    if (logits[i] > maximum) {
      maximum = logits[i];
      argmax = i;
    }
  }
  const probabilities = new Float64Array(vocab);
  let total = 0;
  for (let i = 0; i < vocab; i++) {
    const p = Math.exp((logits[i] - maximum) * scale);
    probabilities[i] = p;
    total += p;
  }
  const logTotal = Math.log(total);
  const logProbOf = (token: number) => (logits[token] - maximum) * scale - logTotal;
  if (temperature === 0) return { token: argmax, logProb: logProbOf(argmax) };

  const topK = options.topK ?? 0;
  const topP = options.topP ?? 1;
  let candidates: number[] | undefined;
  if ((topK > 0 && topK < vocab) || topP < 1) {
    candidates = Array.from({ length: vocab }, (_, i) => i).sort(
      (a, b) => probabilities[b] - probabilities[a],
    );
    if (topK > 0 && topK < vocab) candidates.length = topK;
    if (topP < 1) {
      let cumulative = 0;
      let keep = 0;
      while (keep < candidates.length) {
        cumulative += probabilities[candidates[keep++]] / total;
        if (cumulative >= topP) break;
      }
      candidates.length = Math.max(1, keep);
    }
  }
  const pool = candidates ?? null;
  let mass = 0;
  if (pool) for (const i of pool) mass += probabilities[i];
  else mass = total;
  let threshold = rng.next() * mass;
  if (pool) {
    for (const i of pool) {
      threshold -= probabilities[i];
      if (threshold < 0) return { token: i, logProb: logProbOf(i) };
    }
    const last = pool[pool.length - 1];
    return { token: last, logProb: logProbOf(last) };
  }
  for (let i = 0; i < vocab; i++) {
    threshold -= probabilities[i];
    if (threshold < 0) return { token: i, logProb: logProbOf(i) };
  }
  return { token: argmax, logProb: logProbOf(argmax) };
}

/** Anything holding a model (a Policy) or the model itself. */
export type ModelSource = Transformer | { model: Transformer };

/**
 * Generates a completion for each prompt (token ids), decoding them together with a KV cache.
 * Prompts longer than `maxBatchSize` are processed in waves. Results are in prompt order.
 */
export function generate(
  source: ModelSource,
  prompts: number[][],
  options: GenerateOptions = {},
): GenerationResult[] {
  const model = "model" in source ? source.model : source;
  const maxNewTokens = options.maxNewTokens ?? 64;
  const stopTokens = new Set(options.stopTokenIds ?? []);
  const stopStrings = options.stopStrings ?? [];
  if (stopStrings.length > 0 && !options.decode)
    throw new Error("stopStrings need a decode function");
  const tailTokens = Math.max(0, ...stopStrings.map((s) => s.length)) + 8;
  const rng = options.rng ?? new Rng(options.seed ?? 0);
  const maxBatch = options.maxBatchSize ?? 64;
  const results: GenerationResult[] = prompts.map(() => ({
    tokens: [],
    logProbs: [],
    finishReason: "length",
  }));

  for (let start = 0; start < prompts.length; start += maxBatch) {
    const wave = prompts
      .slice(start, start + maxBatch)
      .map((prompt, offset) => ({ prompt, index: start + offset }));
    const active: { sequence: KVSequence; index: number; next: number }[] = [];
    try {
      for (const { prompt, index } of wave) {
        const sequence = model.createSequence();
        active.push({ sequence, index, next: -1 });
        if (maxNewTokens === 0) continue;
        const logits = model.prefill(sequence, prompt);
        active[active.length - 1].next = accept(index, logits) ? -1 : results[index].tokens.at(-1)!;
      }
      let running = active.filter((a) => a.next >= 0);
      while (running.length > 0) {
        const logits = model.decodeStep(
          running.map((a) => a.sequence),
          running.map((a) => a.next),
        );
        running.forEach((entry, i) => {
          entry.next = accept(entry.index, logits[i]) ? -1 : results[entry.index].tokens.at(-1)!;
        });
        running = running.filter((a) => a.next >= 0);
      }
    } finally {
      for (const entry of active) entry.sequence.dispose();
    }
  }
  return results;

  /** Samples the next token of prompt `index`; returns true when that completion is finished. */
  function accept(index: number, logits: Float32Array): boolean {
    const result = results[index];
    const { token, logProb } = sampleToken(logits, options, rng);
    result.tokens.push(token);
    result.logProbs.push(logProb);
    if (stopTokens.has(token)) {
      result.finishReason = "stop_token";
      return true;
    }
    if (stopStrings.length > 0) {
      const tail = options.decode!(result.tokens.slice(-tailTokens));
      if (stopStrings.some((s) => tail.includes(s))) {
        result.finishReason = "stop_string";
        return true;
      }
    }
    return result.tokens.length >= maxNewTokens;
  }
}
