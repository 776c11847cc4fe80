/**
 * The decode threads of a training run (`rollout.decodeThreads`): engine threads started once
 * per run with the samplers' policy, joined with each sampling phase's in-process engine in an
 * `EnginePool` (an episode's turns stay on one engine; a new episode goes to the engine with
 * the fewest requests in flight). Every new policy version reaches them: in async mode through
 * the pool, with the in-process engine's (one shared copy of the weights for all threads); in
 * sync mode after each step's update, while no batch is being generated. Every token keeps the
 * version of the engine that decoded it, so the staleness rules and the learner's importance
 * ratios see exactly what sampled each token.
 *
 * With decode threads, which engine decodes an episode depends on timing, so a sampled
 * (temperature > 0) run is not reproduced token for token by a resume; greedy tokens are the
 * same on every engine.
 */
import type { ExportedWeights, Policy } from "@agentrl/policy";
import {
  EnginePool,
  decodeThreadsFor,
  startEngineThreads,
  type GenerationEngine,
  type InferenceEngineOptions,
  type PolicyWeights,
  type ThreadEngine,
} from "@agentrl/rollout";

export class DecodeThreads {
  /** The threads' generated tokens at the last `metrics()`. */
  private generatedBefore = 0;

  private constructor(private readonly engines: readonly ThreadEngine[]) {}

  /**
   * Starts `requested` engine threads on `policy`'s weights now (fewer when the model's copies
   * would not fit in memory, said on `log`); undefined when none is to run.
   */
  static async start(
    policy: Policy,
    options: InferenceEngineOptions,
    requested: number,
    log?: (line: string) => void,
  ): Promise<DecodeThreads | undefined> {
    const threads = requested > 0 ? decodeThreadsFor(policy, requested, log) : 0;
    if (threads <= 0) return undefined;
    return new DecodeThreads(await startEngineThreads(policy, options, threads));
  }

  /** How many threads decode. */
  get count(): number {
    return this.engines.length;
  }

  /** `local` and the threads as one engine. Close `local` alone when the phase ends: the threads stay for the next. */
  join(local: GenerationEngine<PolicyWeights>): EnginePool {
    return new EnginePool([local, ...this.engines]);
  }

  /** Sends `weights` (one shared copy) to every thread; resolves once all decode with `version`. */
  async updateWeights(weights: ExportedWeights, version: number): Promise<void> {
    await new EnginePool(this.engines).updateWeights(weights, version);
  }

  /** `rollout/decode_threads` and the tokens they generated since the last call (`rollout/thread_generated_tokens`). */
  metrics(): Record<string, number> {
    const generated = this.engines.reduce((sum, engine) => sum + engine.stats().generatedTokens, 0);
    const since = generated - this.generatedBefore;
    this.generatedBefore = generated;
    return { "rollout/decode_threads": this.count, "rollout/thread_generated_tokens": since };
  }

  close(): void {
    for (const engine of this.engines) engine.close();
  }
}
