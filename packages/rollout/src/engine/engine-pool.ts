/**
 * `EnginePool`: several engines serving one policy as one `GenerationEngine`, e.g. the
 * in-process engine and one `ThreadEngine` a further core. A request goes to the engine that
 * holds its `cacheKey`'s kept cache (an episode's turns stay on one engine), else to the engine
 * with the fewest requests in flight; weight updates go to every engine (one shared copy of
 * the weights for all threads), and the pool's version is the oldest of its engines'.
 */
import { availableParallelism, totalmem } from "node:os";
import type { KVSequence, ModelConfig, Policy } from "@agentrl/policy";
import type { InferenceEngine } from "./engine.js";
import { createPolicyEngine, type PolicyWeights } from "./policy-model.js";
import { ThreadEngine, engineThreadData, threadWeights, weightBytes } from "./thread.js";
import type {
  EngineStats,
  GenerationEngine,
  GenerationRequest,
  GenerationResult,
  InferenceEngineOptions,
} from "./types.js";

export class EnginePool implements GenerationEngine<PolicyWeights> {
  /** Requests in flight per engine. */
  private readonly inFlight: number[];
  /** Cache key → the engine holding (or about to hold) its kept cache. */
  private readonly affinity = new Map<string, number>();

  constructor(readonly engines: readonly GenerationEngine<PolicyWeights>[]) {
    if (engines.length === 0) throw new RangeError("an engine pool needs at least one engine");
    this.inFlight = engines.map(() => 0);
  }

  get version(): number {
    return Math.min(...this.engines.map((engine) => engine.version));
  }

  generate(request: GenerationRequest): Promise<GenerationResult> {
    const key = request.cacheKey;
    let index = key === undefined ? undefined : this.affinity.get(key);
    if (index === undefined) {
      index = 0;
      for (let i = 1; i < this.engines.length; i++)
        if (this.inFlight[i] < this.inFlight[index]) index = i;
      if (key !== undefined) this.affinity.set(key, index);
    }
    const chosen = index;
    this.inFlight[chosen] += 1;
    return this.engines[chosen].generate(request).finally(() => {
      this.inFlight[chosen] -= 1;
    });
  }

  releaseCache(cacheKey: string): void {
    const index = this.affinity.get(cacheKey);
    if (index === undefined) return;
    this.affinity.delete(cacheKey);
    this.engines[index].releaseCache(cacheKey);
  }

  async updateWeights(weights: PolicyWeights, version: number): Promise<void> {
    // One shared copy of the weights for all threads, made once.
    const threads = this.engines.some((engine) => engine instanceof ThreadEngine);
    const shared = threads ? threadWeights(weights) : undefined;
    await Promise.all(
      this.engines.map((engine) =>
        engine instanceof ThreadEngine
          ? engine.updateWeights(shared!, version)
          : engine.updateWeights(weights, version),
      ),
    );
  }

  /** Counts summed over the engines; means weighted by decode steps; the version is the pool's. */
  stats(): EngineStats {
    const all = this.engines.map((engine) => engine.stats());
    const sum = (pick: (stats: EngineStats) => number) =>
      all.reduce((total, stats) => total + pick(stats), 0);
    const steps = sum((stats) => stats.decodeSteps);
    const weighted = (pick: (stats: EngineStats) => number) =>
      steps === 0 ? 0 : sum((stats) => pick(stats) * stats.decodeSteps) / steps;
    return {
      version: this.version,
      waiting: sum((stats) => stats.waiting),
      active: sum((stats) => stats.active),
      reservedCacheTokens: sum((stats) => stats.reservedCacheTokens),
      keptCaches: sum((stats) => stats.keptCaches),
      cachedPrefixes: sum((stats) => stats.cachedPrefixes),
      decodeSteps: steps,
      generatedTokens: sum((stats) => stats.generatedTokens),
      prefilledTokens: sum((stats) => stats.prefilledTokens),
      prefillCalls: sum((stats) => stats.prefillCalls),
      decodeFedTokens: sum((stats) => stats.decodeFedTokens),
      reusedCacheTokens: sum((stats) => stats.reusedCacheTokens),
      completedRequests: sum((stats) => stats.completedRequests),
      weightUpdates: Math.min(...all.map((stats) => stats.weightUpdates)),
      meanBatchOccupancy: weighted((stats) => stats.meanBatchOccupancy),
      meanBatchSize: weighted((stats) => stats.meanBatchSize),
      decodeMs: sum((stats) => stats.decodeMs),
      prefillMs: sum((stats) => stats.prefillMs),
    };
  }

  close(): void {
    for (const engine of this.engines) engine.close();
    this.affinity.clear();
  }
}

/**
 * Decode threads besides the main thread's engine by default: one a further core
 * (`availableParallelism() - 1`, at most 3). See docs/benchmarks.md (engine-pool) for the
 * measurement behind it on 2 cores.
 */
export function defaultDecodeThreads(): number {
  return Math.max(0, Math.min(3, availableParallelism() - 1));
}

/**
 * Largest share of the machine's memory that the engines' copies of the weights may take
 * together (the main thread's and one per decode thread: tfjs's wasm backend keeps a model's
 * weights in its own thread's memory, so threads cannot share one copy).
 */
export const WEIGHT_COPIES_MEMORY_SHARE = 0.25;

/**
 * How many of `threads` decode threads a model of `config` may have: as many as keep
 * `1 + threads` copies of its weights within `WEIGHT_COPIES_MEMORY_SHARE` of `totalMemory`
 * (Qwen2.5-0.5B, 1.84 GiB a copy, keeps 2 threads on 24 GiB and none on 12 GiB).
 */
export function affordableDecodeThreads(
  config: ModelConfig,
  threads: number,
  totalMemory = totalmem(),
): number {
  const copies = Math.floor((WEIGHT_COPIES_MEMORY_SHARE * totalMemory) / weightBytes(config));
  return Math.max(0, Math.min(threads, copies - 1));
}

/**
 * Decode threads for `policy`: `threads`, fewer when the copies of a large model's weights
 * would not fit (`affordableDecodeThreads`), said on `log`.
 */
export function decodeThreadsFor(
  policy: Policy,
  threads: number,
  log: (line: string) => void = (line) => console.warn(`agentrl: ${line}`),
): number {
  const affordable = affordableDecodeThreads(policy.config, threads);
  if (affordable < threads) {
    const gigabytes = (weightBytes(policy.config) / 1024 ** 3).toFixed(1);
    log(
      `decoding with ${affordable} decode thread${affordable === 1 ? "" : "s"} instead of ${threads}: each holds its own ${gigabytes} GB copy of the model's weights, and ${1 + threads} copies would pass ${WEIGHT_COPIES_MEMORY_SHARE * 100} % of this machine's ${(totalmem() / 1024 ** 3).toFixed(0)} GB`,
    );
  }
  return affordable;
}

/**
 * The in-process engine over `policy` and `threads` engine threads with copies of its weights
 * (each with its own sampler seed: `seed + i`); with `threads` 0, the in-process engine alone.
 * A model too large for that many copies gets fewer threads (`decodeThreadsFor`, said on `log`).
 */
export async function createPolicyEnginePool(
  policy: Policy,
  options: InferenceEngineOptions = {},
  requestedThreads = defaultDecodeThreads(),
  log?: (line: string) => void,
): Promise<GenerationEngine<PolicyWeights>> {
  const threads = requestedThreads > 0 ? decodeThreadsFor(policy, requestedThreads, log) : 0;
  const local: InferenceEngine<KVSequence, PolicyWeights> = createPolicyEngine(policy, options);
  if (threads <= 0) return local;
  try {
    return new EnginePool([local, ...(await startEngineThreads(policy, options, threads))]);
  } catch (error) {
    local.close();
    throw error;
  }
}

/**
 * `threads` engine threads with copies of `policy`'s weights now (one shared buffer sent to
 * all), each with its own sampler seed (`options.seed + 1 + i`); all or none (a failed start
 * closes the others).
 */
export async function startEngineThreads(
  policy: Policy,
  options: InferenceEngineOptions,
  threads: number,
): Promise<ThreadEngine[]> {
  const data = engineThreadData(policy, options);
  const started = await Promise.allSettled(
    Array.from({ length: threads }, (_, i) =>
      ThreadEngine.fromData({
        ...data,
        options: { ...data.options, seed: (options.seed ?? 0) + i + 1 },
      }),
    ),
  );
  const failed = started.find((outcome) => outcome.status === "rejected");
  if (failed) {
    for (const outcome of started) if (outcome.status === "fulfilled") outcome.value.close();
    throw (failed as PromiseRejectedResult).reason;
  }
  return started.map((outcome) => (outcome as PromiseFulfilledResult<ThreadEngine>).value);
}
