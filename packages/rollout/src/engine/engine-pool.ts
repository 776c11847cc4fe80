/**
 * `EnginePool`: several engines serving one policy as one `GenerationEngine`, e.g. the
 * in-process engine and one `ThreadEngine` a further core. A request goes to the engine that
 * holds its `cacheKey`'s kept cache (an episode's turns stay on one engine), else to the engine
 * with the fewest requests in flight; weight updates go to every engine (one shared copy of
 * the weights for all threads), and the pool's version is the oldest of its engines'.
 */
import { availableParallelism } from "node:os";
import type { KVSequence, Policy } from "@agentrl/policy";
import type { InferenceEngine } from "./engine.js";
import { createPolicyEngine, type PolicyWeights } from "./policy-model.js";
import { ThreadEngine, engineThreadData, threadWeights } from "./thread.js";
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
 * The in-process engine over `policy` and `threads` engine threads with copies of its weights
 * (each with its own sampler seed: `seed + i`); with `threads` 0, the in-process engine alone.
 */
export async function createPolicyEnginePool(
  policy: Policy,
  options: InferenceEngineOptions = {},
  threads = defaultDecodeThreads(),
): Promise<GenerationEngine<PolicyWeights>> {
  const local: InferenceEngine<KVSequence, PolicyWeights> = createPolicyEngine(policy, options);
  if (threads <= 0) return local;
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
    local.close();
    for (const outcome of started) if (outcome.status === "fulfilled") outcome.value.close();
    throw (failed as PromiseRejectedResult).reason;
  }
  return new EnginePool([
    local,
    ...started.map((outcome) => (outcome as PromiseFulfilledResult<ThreadEngine>).value),
  ]);
}
