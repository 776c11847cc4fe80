/**
 * The inference engine: one model serves many concurrent episodes by stepping a SHARED
 * decode batch (continuous batching).
 *
 * Each iteration of the loop, on the event loop:
 *   1. applies a pending weight update when allowed (see `updateMode`);
 *   2. admits waiting requests (prefill; at most `maxPrefillsPerStep`), while the batch
 *      has fewer than `maxBatchSize` sequences and the reserved KV cache (prompt +
 *      max new tokens of every active request, plus caches kept between turns) fits in
 *      `maxCacheTokens` — otherwise requests wait in a FIFO queue (back-pressure);
 *      (prefill: at most `maxPrefillTokensPerStep` prompt tokens per iteration, fewer when
 *      `prefillStepMs` bounds the time the event loop is held);
 *   3. runs ONE batched decode step over every active sequence and samples the next token
 *      of each;
 *   4. delivers the requests that stopped (end-of-turn token, length, abort): they leave
 *      the batch at once, nobody waits for the slowest sequence;
 *   5. yields with `setImmediate` so environments make progress.
 *
 * Every generated token records the log-prob the sampler saw and the policy version of
 * the weights that produced its logits.
 *
 * Caches kept between turns: a request with a `cacheKey` leaves its KV sequence behind when
 * it finishes; the next request with the same key whose prompt extends those tokens only
 * prefills the new suffix (the environment's reply). Kept caches are dropped on a weight
 * update (they were computed with the old weights; see `keepCachesOnUpdate`) and evicted
 * oldest-first under memory pressure.
 */
import { Rng, sampleToken } from "@agentrl/policy";
import { checkFits, clampNewTokens, reservationOf } from "./kv-budget.js";
import { type CachedTokens, PrefixCache } from "./prefix-cache.js";
import {
  EngineClosedError,
  type EngineModel,
  type EngineSequence,
  type EngineStats,
  type GenerationEngine,
  type GenerationRequest,
  type GenerationResult,
  type InferenceEngineOptions,
  type WeightUpdateMode,
} from "./types.js";

interface ActiveRequest<Sequence> {
  request: GenerationRequest;
  sequence: Sequence;
  /** Tokens fed into `sequence` (to validate cache reuse). */
  fed: number[];
  maxNewTokens: number;
  temperature: number;
  stop: Set<number>;
  reserved: number;
  result: GenerationResult;
  /** Prompt tokens still to prefill (chunked prefill); the request decodes once it is empty. */
  pending: number[];
  /** Sampled, not yet fed to the model (-1 while prefilling). */
  nextToken: number;
  /** In the decode batch (prefill done and joined). */
  joined: boolean;
  /** Its prompt tokens go through decode steps (see `decodeFeedTokens`). */
  feedByDecode: boolean;
  /** `nextToken` is a prompt token being fed, not a sampled one. */
  feeding: boolean;
  /** When `fed` reaches this length, a copy of the cache enters the prefix cache (-1: never). */
  cacheAt: number;
  resolve: (result: GenerationResult) => void;
  reject: (error: unknown) => void;
}

/** Prefill token budget of an engine's first call under `prefillStepMs`, and the least it shrinks to. */
const STARTING_PREFILL_TOKENS = 64;
const MIN_PREFILL_TOKENS = 16;

interface WaitingRequest {
  request: GenerationRequest;
  resolve: (result: GenerationResult) => void;
  reject: (error: unknown) => void;
}

interface PendingUpdate<Weights> {
  weights: Weights;
  version: number;
  resolve: () => void;
  reject: (error: unknown) => void;
}

export class InferenceEngine<
  Sequence extends EngineSequence = EngineSequence,
  Weights = unknown,
> implements GenerationEngine<Weights> {
  readonly maxBatchSize: number;
  readonly maxCacheTokens: number;
  readonly maxSequenceLength: number;
  readonly maxPrefillsPerStep: number;
  readonly maxPrefillTokensPerStep: number;
  readonly prefillStepMs: number;
  readonly joinFraction: number;
  readonly joinIntervalSteps: number;
  readonly prefixCacheEntries: number;
  readonly minPrefixTokens: number;
  readonly decodeFeedTokens: number;
  readonly decodeFeedMinBatch: number;
  readonly temperature: number;
  readonly topP: number;
  readonly topK: number;
  readonly stopTokenIds: number[];
  readonly updateMode: WeightUpdateMode;
  readonly keepCachesOnUpdate: boolean;
  private readonly model: EngineModel<Sequence, Weights>;
  private readonly random: Rng;
  private currentVersion: number;
  private waiting: WaitingRequest[] = [];
  private active: ActiveRequest<Sequence>[] = [];
  private kept = new Map<string, CachedTokens<Sequence>>();
  private readonly prefixCache: PrefixCache<Sequence>;
  private pendingUpdates: PendingUpdate<Weights>[] = [];
  private running = false;
  private stepsSinceJoin = 0;
  /** Prompt tokens the next prefill call may take (see `prefillStepMs`). */
  private prefillTokenBudget: number;
  private closed = false;
  private counters = {
    decodeSteps: 0,
    generatedTokens: 0,
    prefilledTokens: 0,
    prefillCalls: 0,
    decodeFedTokens: 0,
    reusedCacheTokens: 0,
    completedRequests: 0,
    weightUpdates: 0,
    occupancySum: 0,
    batchSum: 0,
    decodeMs: 0,
    prefillMs: 0,
  };

  constructor(model: EngineModel<Sequence, Weights>, options: InferenceEngineOptions = {}) {
    this.model = model;
    this.maxBatchSize = options.maxBatchSize ?? 64;
    this.maxCacheTokens = options.maxCacheTokens ?? 65_536;
    this.maxSequenceLength = options.maxSequenceLength ?? 4096;
    this.maxPrefillsPerStep = options.maxPrefillsPerStep ?? 4;
    this.maxPrefillTokensPerStep = options.maxPrefillTokensPerStep ?? 512;
    this.prefillStepMs = options.prefillStepMs ?? Infinity;
    this.prefillTokenBudget = Number.isFinite(this.prefillStepMs)
      ? Math.min(this.maxPrefillTokensPerStep, STARTING_PREFILL_TOKENS)
      : this.maxPrefillTokensPerStep;
    this.joinFraction = options.joinFraction ?? 0.25;
    this.joinIntervalSteps = options.joinIntervalSteps ?? 8;
    this.prefixCacheEntries = model.fork ? (options.prefixCacheEntries ?? 32) : 0;
    this.minPrefixTokens = options.minPrefixTokens ?? 16;
    this.decodeFeedTokens = options.decodeFeedTokens ?? 64;
    this.decodeFeedMinBatch = options.decodeFeedMinBatch ?? 4;
    this.temperature = options.temperature ?? 1;
    this.topP = options.topP ?? 1;
    this.topK = options.topK ?? 0;
    this.stopTokenIds = options.stopTokenIds ?? [];
    this.updateMode = options.updateMode ?? "continue";
    this.keepCachesOnUpdate = options.keepCachesOnUpdate ?? false;
    this.currentVersion = options.initialVersion ?? 0;
    this.random = new Rng(options.seed ?? 0);
    this.prefixCache = new PrefixCache(this.prefixCacheEntries, (sequence) =>
      model.fork!(sequence),
    );
    if (!(this.maxBatchSize >= 1))
      throw new RangeError(`maxBatchSize must be ≥ 1, got ${this.maxBatchSize}`);
    if (!(this.maxCacheTokens >= 1))
      throw new RangeError(`maxCacheTokens must be ≥ 1, got ${this.maxCacheTokens}`);
  }

  /** Version of the weights in use now. */
  get version(): number {
    return this.currentVersion;
  }

  /**
   * Queues a generation. Resolves when it stops; rejects with ContextLimitError when the
   * prompt cannot fit, with the signal's reason on abort, EngineClosedError on close.
   */
  generate(request: GenerationRequest): Promise<GenerationResult> {
    if (this.closed) return Promise.reject(new EngineClosedError("the inference engine is closed"));
    if (request.signal?.aborted) return Promise.reject(request.signal.reason);
    const limitError = checkFits(request, this.maxSequenceLength);
    if (limitError) return Promise.reject(limitError);
    return new Promise((resolve, reject) => {
      this.waiting.push({ request, resolve, reject });
      this.wake();
    });
  }

  /**
   * Installs new weights as `version`, between two decode steps. Resolves once they are
   * in use. With `drain`, admission pauses until in-flight requests finish on the old weights.
   */
  updateWeights(weights: Weights, version: number): Promise<void> {
    if (this.closed) return Promise.reject(new EngineClosedError("the inference engine is closed"));
    return new Promise((resolve, reject) => {
      this.pendingUpdates.push({ weights, version, resolve, reject });
      this.wake();
    });
  }

  /** Drops a kept cache (e.g. when its episode ends). */
  releaseCache(cacheKey: string): void {
    const kept = this.kept.get(cacheKey);
    if (!kept) return;
    kept.sequence.dispose();
    this.kept.delete(cacheKey);
  }

  /** Rejects everything queued or running and frees all caches. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    const error = new EngineClosedError("the inference engine was closed");
    for (const waiting of this.waiting.splice(0)) waiting.reject(error);
    for (const active of this.active.splice(0)) {
      active.sequence.dispose();
      active.reject(error);
    }
    for (const update of this.pendingUpdates.splice(0)) update.reject(error);
    for (const key of [...this.kept.keys()]) this.releaseCache(key);
    this.prefixCache.clear();
  }

  stats(): EngineStats {
    const steps = Math.max(1, this.counters.decodeSteps);
    return {
      version: this.currentVersion,
      waiting: this.waiting.length,
      active: this.active.length,
      reservedCacheTokens: this.reservedTokens(),
      keptCaches: this.kept.size,
      cachedPrefixes: this.prefixCache.size,
      decodeSteps: this.counters.decodeSteps,
      generatedTokens: this.counters.generatedTokens,
      prefilledTokens: this.counters.prefilledTokens,
      prefillCalls: this.counters.prefillCalls,
      decodeFedTokens: this.counters.decodeFedTokens,
      reusedCacheTokens: this.counters.reusedCacheTokens,
      completedRequests: this.counters.completedRequests,
      weightUpdates: this.counters.weightUpdates,
      meanBatchOccupancy: this.counters.occupancySum / steps,
      meanBatchSize: this.counters.batchSum / steps,
      decodeMs: this.counters.decodeMs,
      prefillMs: this.counters.prefillMs,
    };
  }

  // ------------------------------------------------------------------ the loop

  private wake(): void {
    if (this.running || this.closed) return;
    this.running = true;
    setImmediate(() => this.iterate());
  }

  private async iterate(): Promise<void> {
    try {
      await this.applyWeightUpdates();
      this.dropAborted();
      this.admit();
      this.prefill();
      this.decode();
    } catch (error) {
      this.failAll(error);
    }
    const idle =
      this.active.length === 0 &&
      (this.waiting.length === 0 || this.blockedByUpdate()) &&
      this.pendingUpdates.length === 0;
    if (idle || this.closed) {
      this.running = false;
      return;
    }
    setImmediate(() => this.iterate());
  }

  private blockedByUpdate(): boolean {
    return this.updateMode === "drain" && this.pendingUpdates.length > 0;
  }

  private async applyWeightUpdates(): Promise<void> {
    if (this.pendingUpdates.length === 0) return;
    if (this.updateMode === "drain" && this.active.length > 0) return;
    // Only the newest weights matter; older pending updates resolve with it.
    const updates = this.pendingUpdates.splice(0);
    const newest = updates[updates.length - 1];
    try {
      await this.model.loadWeights(newest.weights);
    } catch (error) {
      for (const update of updates) update.reject(error);
      return;
    }
    this.currentVersion = newest.version;
    this.counters.weightUpdates += 1;
    if (!this.keepCachesOnUpdate) for (const key of [...this.kept.keys()]) this.releaseCache(key);
    this.prefixCache.clear();
    // keepCachesOnUpdate: contexts computed by older weights are kept on purpose.
    if (!this.keepCachesOnUpdate) this.restartUnsampledPrefills();
    for (const update of updates) update.resolve();
  }

  /**
   * After a weight update (`continue`): a request that has sampled nothing yet but whose context
   * is partly in its cache (a chunked prefill under way, or a kept or forked cache) starts its
   * prefill again on the new weights. Its tokens then all come from one version, as their
   * `versions` say; otherwise the context's older part stays computed by the old weights while
   * every token records the new version (a turn no single version rescores: |Δ log-prob|
   * 7e-3 in test/serve-fleet once, likely such a turn).
   */
  private restartUnsampledPrefills(): void {
    for (const active of this.active) {
      if (active.result.tokens.length > 0 || active.fed.length === 0) continue;
      active.sequence.dispose();
      active.sequence = this.model.createSequence();
      active.fed = [];
      active.pending = [...active.request.promptTokens];
      active.result.prefilledTokens = active.pending.length;
      active.joined = false;
      active.feeding = false;
      active.feedByDecode = false;
      active.nextToken = -1;
      active.cacheAt = -1;
    }
  }

  private dropAborted(): void {
    this.waiting = this.waiting.filter((waiting) => {
      if (!waiting.request.signal?.aborted) return true;
      waiting.reject(waiting.request.signal.reason);
      return false;
    });
    this.active = this.active.filter((active) => {
      if (!active.request.signal?.aborted) return true;
      active.sequence.dispose();
      active.reject(active.request.signal.reason);
      return false;
    });
  }

  private admit(): void {
    if (this.blockedByUpdate()) return;
    let prefills = 0;
    while (
      this.waiting.length > 0 &&
      this.active.length < this.maxBatchSize &&
      prefills < this.maxPrefillsPerStep
    ) {
      const next = this.waiting[0];
      const need = reservationOf(next.request, this.maxSequenceLength);
      if (!this.makeRoom(need, next.request.cacheKey)) break;
      this.waiting.shift();
      prefills += 1;
      try {
        this.start(next, need);
      } catch (error) {
        next.reject(error);
      }
    }
  }

  /** Frees kept caches (oldest first) until `need` more tokens fit. */
  private makeRoom(need: number, ownKey: string | undefined): boolean {
    while (this.prefixCache.size > 0 && this.reservedTokens() + need > this.maxCacheTokens)
      this.prefixCache.dropOldest(1);
    for (const [key] of this.kept) {
      if (this.reservedTokens() + need <= this.maxCacheTokens) break;
      if (key !== ownKey) this.releaseCache(key);
    }
    if (this.reservedTokens() + need <= this.maxCacheTokens) return true;
    // A request larger than the whole budget may still run alone (otherwise it would wait forever).
    return this.active.length === 0;
  }

  private start(waiting: WaitingRequest, reserved: number): void {
    const { request } = waiting;
    const { sequence, fed, suffix, kept } = this.sequenceFor(request);
    const promptEnd = request.promptTokens.length - 1;
    this.active.push({
      request,
      sequence,
      fed,
      maxNewTokens: clampNewTokens(request, this.maxSequenceLength),
      temperature: request.temperature ?? this.temperature,
      stop: new Set(request.stopTokenIds ?? this.stopTokenIds),
      reserved,
      result: {
        tokens: [],
        logprobs: [],
        versions: [],
        finishReason: "length",
        prefilledTokens: suffix.length,
      },
      pending: suffix,
      nextToken: -1,
      joined: false,
      feedByDecode:
        fed.length > 0 &&
        suffix.length <= this.decodeFeedTokens &&
        this.active.filter((other) => other.joined).length >= this.decodeFeedMinBatch,
      feeding: false,
      // A prompt not continuing an episode's kept cache, long enough, is remembered without its last token (unless the prefix cache gave all of that).
      cacheAt:
        this.prefixCacheEntries > 0 &&
        !kept &&
        promptEnd > fed.length &&
        promptEnd >= this.minPrefixTokens
          ? promptEnd
          : -1,
      resolve: waiting.resolve,
      reject: waiting.reject,
    });
  }

  /** Feeds up to `maxPrefillTokensPerStep` pending prompt tokens (fewer under `prefillStepMs`), oldest request first; a request whose prompt is done samples its first token. */
  private prefill(): void {
    const allowed = this.prefillTokenBudget;
    let budget = allowed;
    const work: { active: ActiveRequest<Sequence>; chunk: number[] }[] = [];
    for (const active of this.active) {
      if (budget <= 0) break;
      if (active.pending.length === 0 || active.feedByDecode) continue;
      const untilCache =
        active.cacheAt > active.fed.length ? active.cacheAt - active.fed.length : Infinity;
      const chunk = active.pending.slice(0, Math.min(budget, untilCache));
      budget -= chunk.length;
      work.push({ active, chunk });
    }
    if (work.length === 0) return;
    const began = performance.now();
    let batched: Float32Array[] | undefined;
    if (work.length > 1 && this.model.prefillBatch) {
      try {
        batched = this.model.prefillBatch(
          work.map((item) => item.active.sequence),
          work.map((item) => item.chunk),
        );
      } catch {
        batched = undefined; // validated before any change: find the failing request below, one by one
      }
    }
    for (const [index, { active, chunk }] of work.entries()) {
      let logits: Float32Array;
      if (batched) logits = batched[index];
      else {
        try {
          logits = this.model.prefill(active.sequence, chunk);
        } catch (error) {
          this.active = this.active.filter((other) => other !== active);
          active.sequence.dispose();
          active.reject(error);
          continue;
        }
      }
      active.pending.splice(0, chunk.length);
      this.counters.prefilledTokens += chunk.length;
      this.counters.prefillCalls += batched ? (index === 0 ? 1 : 0) : 1;
      active.fed.push(...chunk);
      if (active.fed.length === active.cacheAt)
        this.prefixCache.remember(active.fed, active.sequence);
      if (active.pending.length === 0) this.accept(active, logits);
    }
    const milliseconds = performance.now() - began;
    this.counters.prefillMs += milliseconds;
    this.adaptPrefillBudget(milliseconds, allowed - budget, allowed);
  }

  /**
   * Under `prefillStepMs`: after an iteration's prefill that took longer, the budget becomes what
   * would have taken half of it (prompt tokens cost more as the context grows); after one that
   * used its whole budget in under half of it, the budget doubles.
   */
  private adaptPrefillBudget(milliseconds: number, tokens: number, allowed: number): void {
    if (!Number.isFinite(this.prefillStepMs)) return;
    if (milliseconds > this.prefillStepMs)
      this.prefillTokenBudget = Math.max(
        MIN_PREFILL_TOKENS,
        Math.floor((allowed * this.prefillStepMs) / (2 * milliseconds)),
      );
    else if (tokens >= allowed && milliseconds < this.prefillStepMs / 2)
      this.prefillTokenBudget = Math.min(this.maxPrefillTokensPerStep, allowed * 2);
  }

  /** A kept cache whose tokens prefix the prompt (prefill only the rest), or a new sequence. */
  private sequenceFor(request: GenerationRequest): {
    sequence: Sequence;
    fed: number[];
    suffix: number[];
    kept: boolean;
  } {
    const key = request.cacheKey;
    const kept = key === undefined ? undefined : this.kept.get(key);
    if (kept && key !== undefined) {
      this.kept.delete(key);
      const prompt = request.promptTokens;
      const reusable =
        kept.tokens.length < prompt.length &&
        kept.tokens.length === kept.sequence.length &&
        kept.tokens.every((token, i) => token === prompt[i]);
      if (reusable) {
        this.counters.reusedCacheTokens += kept.tokens.length;
        return {
          sequence: kept.sequence,
          fed: kept.tokens,
          suffix: prompt.slice(kept.tokens.length),
          kept: true,
        };
      }
      kept.sequence.dispose();
    }
    const prompt = request.promptTokens;
    const shared = this.prefixCache.longestSharedBeginning(prompt, this.minPrefixTokens);
    if (shared && this.model.fork) {
      this.counters.reusedCacheTokens += shared.length;
      return {
        sequence: this.model.fork(shared.entry.sequence, shared.length),
        fed: shared.entry.tokens.slice(0, shared.length),
        suffix: prompt.slice(shared.length),
        kept: false,
      };
    }
    return { sequence: this.model.createSequence(), fed: [], suffix: [...prompt], kept: false };
  }

  /** Runs one decode step over every active sequence. */
  private decode(): void {
    this.join();
    const batch = this.active.filter((active) => active.joined);
    if (batch.length === 0) return;
    this.stepsSinceJoin += 1;
    const began = performance.now();
    const rows = this.model.decodeStep(
      batch.map((active) => active.sequence),
      batch.map((active) => active.nextToken),
    );
    this.counters.decodeMs += performance.now() - began;
    this.counters.decodeSteps += 1;
    this.counters.batchSum += batch.length;
    this.counters.occupancySum += batch.length / this.maxBatchSize;
    batch.forEach((active, i) => {
      active.fed.push(active.nextToken);
      if (active.fed.length === active.cacheAt)
        this.prefixCache.remember(active.fed, active.sequence);
      if (active.feeding) {
        this.counters.decodeFedTokens += 1;
        if (active.pending.length > 0) {
          active.nextToken = active.pending.shift()!;
          return;
        }
        active.feeding = false;
      }
      this.accept(active, rows[i]);
    });
  }

  /** Lets the requests whose prefill is done join the decode batch, in bulk (see `joinFraction`). */
  private join(): void {
    let decoding = 0;
    let ready = 0;
    for (const active of this.active) {
      if (active.joined) decoding += 1;
      else if (active.pending.length === 0 || active.feedByDecode) ready += 1;
    }
    if (ready === 0) return;
    const due =
      decoding === 0 ||
      ready >= this.joinFraction * decoding ||
      this.stepsSinceJoin >= this.joinIntervalSteps;
    if (!due) return;
    for (const active of this.active) {
      if (active.joined || (active.pending.length > 0 && !active.feedByDecode)) continue;
      active.joined = true;
      if (active.pending.length > 0) {
        active.feeding = true;
        active.nextToken = active.pending.shift()!;
      }
    }
    this.stepsSinceJoin = 0;
  }

  /** Samples the next token of `active` from its logits; finishes it on stop or length. */
  private accept(active: ActiveRequest<Sequence>, logits: Float32Array): void {
    const sampled = sampleToken(
      logits,
      { temperature: active.temperature, topP: this.topP, topK: this.topK },
      this.random,
    );
    const { result } = active;
    result.tokens.push(sampled.token);
    result.logprobs.push(sampled.logProb);
    result.versions.push(this.currentVersion);
    this.counters.generatedTokens += 1;
    active.nextToken = sampled.token;
    if (active.stop.has(sampled.token)) return this.finish(active, "stop");
    if (result.tokens.length >= active.maxNewTokens) return this.finish(active, "length");
  }

  private finish(active: ActiveRequest<Sequence>, reason: "stop" | "length"): void {
    active.result.finishReason = reason;
    this.active = this.active.filter((other) => other !== active);
    const key = active.request.cacheKey;
    if (key !== undefined && !this.closed) {
      this.releaseCache(key);
      this.kept.set(key, { sequence: active.sequence, tokens: active.fed });
    } else {
      active.sequence.dispose();
    }
    this.counters.completedRequests += 1;
    active.resolve(active.result);
  }

  private failAll(error: unknown): void {
    for (const active of this.active.splice(0)) {
      active.sequence.dispose();
      active.reject(error);
    }
  }

  // ------------------------------------------------------------------ accounting

  private reservedTokens(): number {
    let total = 0;
    for (const active of this.active) total += active.reserved;
    for (const kept of this.kept.values()) total += kept.tokens.length;
    return total + this.prefixCache.tokenCount;
  }
}
