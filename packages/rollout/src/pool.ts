/**
 * Cross-policy sampling: the pool each TURN is drawn from.
 *
 * - `current`: the engine with the newest weights (always present): the local engine, or a
 *   `RemoteEngine` over `agentrl serve` servers;
 * - `stale`: an engine holding an older snapshot, refreshed every `refreshEvery` weight
 *   updates (AgentRL: k = 25), drawn with probability `staleProbability` (p = 0.25);
 * - `external`: an OpenAI-compatible model, drawn with probability `externalProbability`;
 *   its turns are tokenized and enter the trajectory with loss mask 0.
 */
import { Rng } from "@agentrl/policy";
import type { GenerationEngine } from "./engine/index.js";
import type { ExternalChatModel } from "./external.js";
import type { PolicyId } from "./types.js";

export interface PolicyPoolOptions<Weights> {
  current: GenerationEngine<Weights>;
  /** Engine with a stale copy of the policy. Default none (no stale turns). */
  stale?: GenerationEngine<Weights>;
  external?: ExternalChatModel;
  /** Probability that a turn is drawn from `stale`. Default 0.25 when `stale` is given, else 0. */
  staleProbability?: number;
  /** Probability that a turn is drawn from `external`. Default 0. */
  externalProbability?: number;
  /** The stale engine receives every `refreshEvery`-th weight update. Default 2 (the trainer config's `crossPolicy.refreshEvery`; AgentRL: 25 of 1,000 steps). */
  refreshEvery?: number;
  /** Seed of the per-turn draws. Default 0. */
  seed?: number;
}

export class PolicyPool<Weights = unknown> {
  readonly current: GenerationEngine<Weights>;
  readonly stale?: GenerationEngine<Weights>;
  readonly external?: ExternalChatModel;
  readonly staleProbability: number;
  readonly externalProbability: number;
  readonly refreshEvery: number;
  private readonly random: Rng;
  private updates = 0;
  private draws: Record<PolicyId, number> = { current: 0, stale: 0, external: 0 };

  constructor(options: PolicyPoolOptions<Weights>) {
    this.current = options.current;
    this.stale = options.stale;
    this.external = options.external;
    this.staleProbability = options.stale ? (options.staleProbability ?? 0.25) : 0;
    this.externalProbability = options.external ? (options.externalProbability ?? 0) : 0;
    this.refreshEvery = options.refreshEvery ?? 2;
    this.random = new Rng(options.seed ?? 0);
    if (
      this.staleProbability + this.externalProbability > 1 ||
      this.staleProbability < 0 ||
      this.externalProbability < 0
    ) {
      throw new RangeError(
        `staleProbability ${this.staleProbability} + externalProbability ${this.externalProbability} must lie in [0, 1]`,
      );
    }
    if (!(this.refreshEvery >= 1))
      throw new RangeError(`refreshEvery must be ≥ 1, got ${this.refreshEvery}`);
  }

  /** Draws which policy generates the next turn. */
  choose(): PolicyId {
    const u = this.random.next();
    const id: PolicyId =
      u < this.staleProbability
        ? "stale"
        : u < this.staleProbability + this.externalProbability
          ? "external"
          : "current";
    this.draws[id] += 1;
    return id;
  }

  /** The engine of a pool member (`current` or `stale`). */
  engine(id: "current" | "stale"): GenerationEngine<Weights> {
    if (id === "stale") {
      if (!this.stale) throw new Error("the policy pool has no stale engine");
      return this.stale;
    }
    return this.current;
  }

  /** Newest policy version (of the current engine). */
  get version(): number {
    return this.current.version;
  }

  /** Number of turns drawn from each member so far. */
  drawCounts(): Record<PolicyId, number> {
    return { ...this.draws };
  }

  /**
   * Sends new weights to the current engine, and every `refreshEvery`-th update to the
   * stale engine too. Resolves when every engine that takes them has them in use.
   * `weights` must stay valid until then.
   */
  async updateWeights(weights: Weights, version: number): Promise<void> {
    this.updates += 1;
    const pending = [this.current.updateWeights(weights, version)];
    if (this.stale && this.updates % this.refreshEvery === 0)
      pending.push(this.stale.updateWeights(weights, version));
    await Promise.all(pending);
  }

  /** Closes the engines. */
  close(): void {
    this.current.close();
    this.stale?.close();
  }
}
