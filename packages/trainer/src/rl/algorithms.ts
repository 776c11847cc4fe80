/**
 * Advantage estimators and policy losses, as small registered functions (in the manner of
 * verl's `core_algos.py`). Shapes are stated in every doc comment:
 *   G = episodes in one group, B = sequences in a (micro-)batch, T = tokens per sequence.
 *
 * Everything here is pure: numbers in, numbers (or tensors) out. The training loop decides
 * when to call what.
 */
import * as tf from "@tensorflow/tfjs-core";
import { AgentRLError } from "@agentrl/spec";
import { Random } from "@agentrl/envs";
import { RL_DEFAULTS } from "./defaults.js";

/** An estimator or loss named that no one registered, or a loss term missing its input. */
export class AlgorithmError extends AgentRLError {}

export const EPSILON = 1e-6;

// ---------------------------------------------------------------------------------------
// Advantages
// ---------------------------------------------------------------------------------------

/**
 * Maps the rewards of one group to one advantage per episode.
 * @param rewards [G] scalar reward of each episode of the group
 * @returns [G] advantage of each episode (broadcast later to its generated tokens)
 */
export type AdvantageEstimator = (rewards: readonly number[]) => number[];

const advantageEstimators = new Map<string, AdvantageEstimator>();

export function registerAdvantageEstimator(name: string, estimator: AdvantageEstimator): void {
  advantageEstimators.set(name, estimator);
}

/** The registered advantage estimators' names (the schema accepts these for `rl.advantageEstimator`). */
export function advantageEstimatorNames(): string[] {
  return [...advantageEstimators.keys()];
}

export function getAdvantageEstimator(name: string): AdvantageEstimator {
  const estimator = advantageEstimators.get(name);
  if (!estimator) {
    throw new AlgorithmError(
      `unknown advantage estimator "${name}"; known: ${[...advantageEstimators.keys()].join(", ")}`,
    );
  }
  return estimator;
}

export function mean(values: readonly number[]): number {
  return values.length === 0 ? 0 : values.reduce((a, b) => a + b, 0) / values.length;
}

/** Standard deviation; `unbiased` divides by n − 1 (torch.std's default), else by n. */
export function standardDeviation(values: readonly number[], unbiased: boolean): number {
  const n = values.length;
  if (n < (unbiased ? 2 : 1)) return 0;
  const m = mean(values);
  const squares = values.reduce((sum, v) => sum + (v - m) ** 2, 0);
  return Math.sqrt(squares / (unbiased ? n - 1 : n));
}

/**
 * GRPO: `A = (R − mean(R)) / (std(R) + 1e-6)` over the group, std unbiased as in the
 * original (torch.std). A group whose rewards are all equal, or a group of one, carries no
 * relative signal: every advantage is 0.
 */
export const grpoAdvantage: AdvantageEstimator = (rewards) => {
  if (rewards.length < 2) return rewards.map(() => 0);
  const m = mean(rewards);
  const s = standardDeviation(rewards, true);
  return rewards.map((r) => (r - m) / (s + EPSILON));
};

/** GRPO without the std division (Dr. GRPO): `A = R − mean(R)`; a group of one gets 0. */
export const grpoMeanOnlyAdvantage: AdvantageEstimator = (rewards) => {
  if (rewards.length < 2) return rewards.map(() => 0);
  const m = mean(rewards);
  return rewards.map((r) => r - m);
};

/**
 * A control, not a method: GRPO's advantages permuted at random within the group, so each
 * episode carries another episode's advantage. The update keeps GRPO's size, spread and
 * zero group mean but loses its signal (which episode earned what): a run that moves the
 * model as much under it as under `grpo` is moved by the update's noise, not by the reward.
 * `seed` fixes the stream of permutations (envs' `Random`); the registered `grpo_shuffled`
 * starts at seed 0 in each process.
 */
export function shuffledGrpoAdvantage(seed: number): AdvantageEstimator {
  const random = new Random(seed);
  return (rewards) => random.shuffle(grpoAdvantage(rewards));
}

registerAdvantageEstimator("grpo", grpoAdvantage);
registerAdvantageEstimator("grpo_no_std", grpoMeanOnlyAdvantage);
registerAdvantageEstimator("grpo_shuffled", shuffledGrpoAdvantage(0));

/**
 * Task advantage normalization (AgentRL): across the whole batch, all advantages at
 * loss-mask positions of one task are re-normalised to zero mean and unit (population)
 * std: `A ← (A − μ_task) / (σ_task + 1e-6)`. It must run BEFORE the loss.
 *
 * @param episodes one entry per episode: its task, its advantage (one number, the same on
 *   every generated token) and its number of generated tokens (its weight in μ and σ).
 * @returns [episodes] the normalised advantage of each episode
 */
export function normalizeAdvantagesByTask(
  episodes: readonly { task: string; advantage: number; generatedTokens: number }[],
): number[] {
  const byTask = new Map<string, { sum: number; squares: number; count: number }>();
  for (const e of episodes) {
    const s = byTask.get(e.task) ?? { sum: 0, squares: 0, count: 0 };
    s.sum += e.advantage * e.generatedTokens;
    s.squares += e.advantage * e.advantage * e.generatedTokens;
    s.count += e.generatedTokens;
    byTask.set(e.task, s);
  }
  return episodes.map((e) => {
    const s = byTask.get(e.task)!;
    if (s.count === 0) return 0;
    const m = s.sum / s.count;
    const variance = Math.max(0, s.squares / s.count - m * m);
    return (e.advantage - m) / (Math.sqrt(variance) + EPSILON);
  });
}

/** Per-task mean and std of the advantages at loss-mask positions (for logs). */
export function advantageStatisticsByTask(
  episodes: readonly { task: string; advantage: number; generatedTokens: number }[],
): Record<string, { mean: number; std: number; tokens: number }> {
  const out: Record<string, { mean: number; std: number; tokens: number }> = {};
  const groups = new Map<string, { advantage: number; generatedTokens: number }[]>();
  for (const e of episodes) groups.set(e.task, [...(groups.get(e.task) ?? []), e]);
  for (const [task, list] of groups) {
    const tokens = list.reduce((a, e) => a + e.generatedTokens, 0);
    const m = tokens ? list.reduce((a, e) => a + e.advantage * e.generatedTokens, 0) / tokens : 0;
    const v = tokens
      ? list.reduce((a, e) => a + (e.advantage - m) ** 2 * e.generatedTokens, 0) / tokens
      : 0;
    out[task] = { mean: m, std: Math.sqrt(v), tokens };
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Losses
// ---------------------------------------------------------------------------------------

export interface PolicyLossOptions {
  /** Registered policy loss (see `registerPolicyLoss`): `ppo_clip` (the original), `tis_token`, `tis_sequence` or `icepop`. Default `ppo_clip`. */
  policyLoss: string;
  /** Lower clip range ε_low: the ratio is clipped below at 1 − ε_low. Default 0.2. */
  clipLow: number;
  /** Upper clip range ε_high: the ratio is clipped above at 1 + ε_high. Default 0.2. */
  clipHigh: number;
  /** Dual-clip constant c (> 1) bounding the loss of negative-advantage tokens at −c·A. Default 3; 0 turns it off. */
  dualClip: number;
  /** Cap C of the truncated importance weights of `tis_token` and `tis_sequence`: w = min(ρ, C). Default 2. */
  importanceCap: number;
  /** Lower bound of the trainer-to-sampler ratio ρ: `icepop` rejects tokens below it; the metrics count the share below. Default 0.5. */
  importanceRatioLow: number;
  /** Upper bound of ρ: `icepop` rejects tokens above it; the metrics count the share above. Default 2. */
  importanceRatioHigh: number;
}

export const DEFAULT_POLICY_LOSS: PolicyLossOptions = {
  policyLoss: RL_DEFAULTS.policyLoss,
  clipLow: RL_DEFAULTS.clipLow,
  clipHigh: RL_DEFAULTS.clipHigh,
  dualClip: RL_DEFAULTS.dualClip,
  importanceCap: RL_DEFAULTS.importanceCap,
  importanceRatioLow: RL_DEFAULTS.importanceRatioLow,
  importanceRatioHigh: RL_DEFAULTS.importanceRatioHigh,
};

/** Per-token tensors of one (micro-)batch, all [B, T] float32; `mask` is 1 on generated tokens. */
export interface TokenBatch {
  /** The trainer's log-probs of the generated tokens (differentiated). */
  logProbs: tf.Tensor2D;
  /** The sampler's log-probs of the same tokens (the behaviour policy; constants). */
  oldLogProbs: tf.Tensor2D;
  advantages: tf.Tensor2D;
  mask: tf.Tensor2D;
  /**
   * The trainer's log-probs at the weights before the update (the proximal policy of
   * decoupled PPO; constants). Default: `logProbs` with its gradient stopped, which is exact
   * for the first (and, with the off-policy losses, only) PPO epoch.
   */
  proximalLogProbs?: tf.Tensor2D;
}

/**
 * A policy loss: per-token loss [B, T] (unmasked; the caller reduces it under `mask`) and
 * per-token 0/1 indicators [B, T] of the tokens where a clip (or a rejection) was active.
 */
export type PolicyLoss = (
  batch: TokenBatch,
  options: PolicyLossOptions,
) => { loss: tf.Tensor2D; clipped: tf.Tensor2D };

const policyLosses = new Map<string, PolicyLoss>();

export function registerPolicyLoss(name: string, loss: PolicyLoss): void {
  policyLosses.set(name, loss);
}

export function getPolicyLoss(name: string): PolicyLoss {
  const loss = policyLosses.get(name);
  if (!loss)
    throw new AlgorithmError(
      `unknown policy loss "${name}"; known: ${[...policyLosses.keys()].join(", ")}`,
    );
  return loss;
}

/** Names of the registered policy losses. */
export function policyLossNames(): string[] {
  return [...policyLosses.keys()];
}

/** The losses that correct for the sampler with importance weights: they need the proximal log-probs, so one PPO epoch. */
export const OFF_POLICY_CORRECTED_LOSSES: readonly string[] = [
  "tis_token",
  "tis_sequence",
  "icepop",
];

/**
 * `x` as a constant: a new tensor with the same values and shape, with no link to the
 * gradient tape (so no op after it is differentiated, including comparisons that have no
 * gradient). Costs one read of the values.
 */
export function stopGradient<T extends tf.Tensor>(x: T): T {
  return tf.tensor(x.dataSync(), x.shape, x.dtype) as T;
}

/**
 * PPO-clip with separate low/high ε and dual-clip for negative advantages.
 *   ratio = exp(logp − logp_old)
 *   L     = max(−A·ratio, −A·clip(ratio, 1 − ε_low, 1 + ε_high))
 *   L     = min(L, −c·A)   where A < 0 (dual clip)
 * @returns per-token loss [B, T] (unmasked) and per-token 0/1 indicators [B, T] of the
 *   tokens where the clip was active (for the clip fraction).
 */
export function ppoClipTokenLoss(
  batch: TokenBatch,
  options: PolicyLossOptions = DEFAULT_POLICY_LOSS,
): { loss: tf.Tensor2D; clipped: tf.Tensor2D } {
  return tf.tidy(() =>
    ppoClipOnRatio(
      tf.exp(tf.sub(batch.logProbs, batch.oldLogProbs)) as tf.Tensor2D,
      batch.advantages,
      options,
    ),
  );
}

/** PPO-clip (+ dual-clip) of a given ratio [B, T] and advantages [B, T]: per-token loss and clip indicators, [B, T]. */
function ppoClipOnRatio(
  ratio: tf.Tensor2D,
  advantages: tf.Tensor2D,
  options: Pick<PolicyLossOptions, "clipLow" | "clipHigh" | "dualClip">,
): { loss: tf.Tensor2D; clipped: tf.Tensor2D } {
  return tf.tidy(() => {
    const unclipped = tf.neg(tf.mul(advantages, ratio));
    const clippedRatio = tf.clipByValue(ratio, 1 - options.clipLow, 1 + options.clipHigh);
    const clippedLoss = tf.neg(tf.mul(advantages, clippedRatio));
    let loss = tf.maximum(unclipped, clippedLoss);
    let clipped = tf.cast(tf.greater(clippedLoss, unclipped), "float32");
    if (options.dualClip > 0) {
      const bound = tf.neg(tf.mul(advantages, options.dualClip));
      const negative = tf.less(advantages, 0);
      const dual = tf.minimum(loss, bound);
      clipped = tf.where(
        tf.logicalAnd(negative, tf.greater(loss, bound)),
        tf.onesLike(clipped),
        clipped,
      );
      loss = tf.where(negative, dual, loss);
    }
    return { loss: loss as tf.Tensor2D, clipped: clipped as tf.Tensor2D };
  });
}

/**
 * The decoupled-PPO pieces (AReaL; verl's rollout correction) of a batch [B, T]:
 *   ρ      = exp(logp_prox − logp_sampler)   the trainer-to-sampler ratio (constant): mismatch and staleness
 *   ratio  = exp(logp − logp_prox)           the PPO ratio against the proximal policy (1 in value at the first epoch)
 */
function decoupledRatios(batch: TokenBatch): { behaviourRatio: tf.Tensor2D; ratio: tf.Tensor2D } {
  const proximal = batch.proximalLogProbs ?? stopGradient(batch.logProbs);
  return {
    behaviourRatio: tf.exp(tf.sub(proximal, batch.oldLogProbs)) as tf.Tensor2D,
    ratio: tf.exp(tf.sub(batch.logProbs, proximal)) as tf.Tensor2D,
  };
}

/**
 * Truncated importance sampling, token level (TIS: Yao et al.; OpenRLHF / verl `token`):
 *   w_t = min(ρ_t, C)                         per token [B, T], a constant
 *   L_t = w_t · PPO-clip(ratio_t, A_t)        with ratio against the proximal policy
 * so the gradient is w_t times PPO's, and a token the sampler over-drew (ρ < 1) counts less.
 * @returns per-token loss [B, T] and clip indicators [B, T] (of the PPO clip).
 */
export function truncatedImportanceTokenLoss(
  batch: TokenBatch,
  options: PolicyLossOptions,
): { loss: tf.Tensor2D; clipped: tf.Tensor2D } {
  return tf.tidy(() => {
    const { behaviourRatio, ratio } = decoupledRatios(batch);
    const weight = tf.minimum(behaviourRatio, options.importanceCap);
    const inner = ppoClipOnRatio(ratio, batch.advantages, options);
    return { loss: tf.mul(weight, inner.loss) as tf.Tensor2D, clipped: inner.clipped };
  });
}

/**
 * Truncated importance sampling, sequence level (verl's `sequence` rollout correction):
 *   w_b = min(exp(Σ_t mask_bt · log ρ_bt), C)   one weight per sequence [B, 1], a constant
 *   L_bt = w_b · PPO-clip(ratio_bt, A_bt)
 * The product of the token ratios is the exact trajectory-level correction, hence its cap.
 * @returns per-token loss [B, T] and clip indicators [B, T].
 */
export function truncatedImportanceSequenceLoss(
  batch: TokenBatch,
  options: PolicyLossOptions,
): { loss: tf.Tensor2D; clipped: tf.Tensor2D } {
  return tf.tidy(() => {
    const { behaviourRatio, ratio } = decoupledRatios(batch);
    const logWeight = tf.sum(tf.mul(tf.log(behaviourRatio), batch.mask), 1, true); // [B, 1]
    const weight = tf.exp(tf.minimum(logWeight, Math.log(options.importanceCap))); // min(exp(x), C) without overflow
    const inner = ppoClipOnRatio(ratio, batch.advantages, options);
    return { loss: tf.mul(weight, inner.loss) as tf.Tensor2D, clipped: inner.clipped };
  });
}

/**
 * Masked importance sampling with rejection of tokens whose ratio is out of bounds
 * (IcePop, Ring-1T; OpenRLHF `icepop`; verl's token rejection):
 *   M(ρ_t) = ρ_t  if low ≤ ρ_t ≤ high, else 0     per token [B, T], a constant
 *   L_t    = M(ρ_t) · PPO-clip(ratio_t, A_t)
 * A rejected token keeps its place in the token-mean denominator (its loss is 0), so the
 * loss scale does not depend on how many tokens were rejected.
 * @returns per-token loss [B, T] and indicators [B, T] of the tokens that were rejected or clipped.
 */
export function icepopTokenLoss(
  batch: TokenBatch,
  options: PolicyLossOptions,
): { loss: tf.Tensor2D; clipped: tf.Tensor2D } {
  return tf.tidy(() => {
    const { behaviourRatio, ratio } = decoupledRatios(batch);
    const kept = importanceRatioKept(behaviourRatio, options);
    const inner = ppoClipOnRatio(ratio, batch.advantages, options);
    const loss = tf.mul(tf.mul(behaviourRatio, kept), inner.loss) as tf.Tensor2D;
    const clipped = tf.maximum(inner.clipped, tf.sub(1, kept)) as tf.Tensor2D;
    return { loss, clipped };
  });
}

/** The masking rule: 1 where `importanceRatioLow` ≤ ρ ≤ `importanceRatioHigh`, else 0. [B, T] in, [B, T] out. */
export function importanceRatioKept(
  behaviourRatio: tf.Tensor2D,
  options: Pick<PolicyLossOptions, "importanceRatioLow" | "importanceRatioHigh">,
): tf.Tensor2D {
  return tf.tidy(
    () =>
      tf.cast(
        tf.logicalAnd(
          tf.greaterEqual(behaviourRatio, options.importanceRatioLow),
          tf.lessEqual(behaviourRatio, options.importanceRatioHigh),
        ),
        "float32",
      ) as tf.Tensor2D,
  );
}

registerPolicyLoss("ppo_clip", ppoClipTokenLoss);
registerPolicyLoss("tis_token", truncatedImportanceTokenLoss);
registerPolicyLoss("tis_sequence", truncatedImportanceSequenceLoss);
registerPolicyLoss("icepop", icepopTokenLoss);

/** Scalar diagnostics of the sampler/trainer mismatch over the tokens of `mask`. */
export interface MismatchStatistics {
  /** Mean k3 estimate of KL(π_sampler ‖ π_trainer) per token: ρ − 1 − log ρ, with ρ = π_trainer / π_sampler (the tokens are the sampler's draws). */
  kl: tf.Scalar;
  /** Mean, min and max of ρ. */
  ratioMean: tf.Scalar;
  ratioMin: tf.Scalar;
  ratioMax: tf.Scalar;
  /** Share of tokens with ρ below `importanceRatioLow` / above `importanceRatioHigh`. */
  shareBelow: tf.Scalar;
  shareAbove: tf.Scalar;
}

/**
 * Mismatch between the sampler's and the trainer's log-probs of the same tokens (prime-rl's
 * `mismatch_kl`), and the distribution of their ratio. Inputs [B, T]; min and max are over
 * the masked tokens (±Infinity when there are none).
 */
export function mismatchStatistics(
  logProbs: tf.Tensor2D,
  samplerLogProbs: tf.Tensor2D,
  mask: tf.Tensor2D,
  options: Pick<PolicyLossOptions, "importanceRatioLow" | "importanceRatioHigh">,
): MismatchStatistics {
  return tf.tidy(() => {
    const logRatio = tf.sub(logProbs, samplerLogProbs);
    const ratio = tf.exp(logRatio);
    const k3 = tf.sub(tf.sub(ratio, logRatio), 1);
    const on = tf.greater(mask, 0);
    return {
      kl: maskedMean(k3, mask),
      ratioMean: maskedMean(ratio, mask),
      ratioMin: tf.min(tf.where(on, ratio, tf.fill(ratio.shape, Infinity))) as tf.Scalar,
      ratioMax: tf.max(tf.where(on, ratio, tf.fill(ratio.shape, -Infinity))) as tf.Scalar,
      shareBelow: maskedMean(tf.cast(tf.less(ratio, options.importanceRatioLow), "float32"), mask),
      shareAbove: maskedMean(
        tf.cast(tf.greater(ratio, options.importanceRatioHigh), "float32"),
        mask,
      ),
    };
  });
}

/**
 * k3 estimator of KL(π‖π_ref) per token, `exp(ref − logp) − (ref − logp) − 1`, clamped to
 * [−10, 10] as in the original. Inputs and output [B, T].
 */
export function klK3(logProbs: tf.Tensor2D, referenceLogProbs: tf.Tensor2D): tf.Tensor2D {
  return tf.tidy(() => {
    const delta = tf.sub(referenceLogProbs, logProbs);
    const kl = tf.sub(tf.sub(tf.exp(delta), delta), 1);
    return tf.clipByValue(kl, -10, 10) as tf.Tensor2D;
  });
}

export type LossReduction = "token-mean" | "sequence-mean";

/**
 * Reduces a per-token loss [B, T] under `mask` [B, T] to a scalar.
 * - `token-mean`: Σ loss·mask / `tokenCount` (pass the token count of the WHOLE batch when
 *   the batch is split in micro-batches, so that accumulated gradients equal the full batch's).
 * - `sequence-mean`: mean over sequences of (Σ_t loss·mask / Σ_t mask), divided by
 *   `sequenceCount` (the whole batch's number of sequences).
 */
export function reduceLoss(
  tokenLoss: tf.Tensor2D,
  mask: tf.Tensor2D,
  reduction: LossReduction,
  counts: { tokenCount: number; sequenceCount: number },
): tf.Scalar {
  return tf.tidy(() => {
    const masked = tf.mul(tokenLoss, mask);
    if (reduction === "token-mean")
      return tf.div(tf.sum(masked), Math.max(1, counts.tokenCount)) as tf.Scalar;
    const perSequence = tf.div(tf.sum(masked, 1), tf.maximum(tf.sum(mask, 1), 1));
    return tf.div(tf.sum(perSequence), Math.max(1, counts.sequenceCount)) as tf.Scalar;
  });
}

/** Mean of `values` [B, T] over the tokens where `mask` is 1 (a scalar; 0 when the mask is empty). */
export function maskedMean(values: tf.Tensor, mask: tf.Tensor): tf.Scalar {
  return tf.tidy(
    () => tf.div(tf.sum(tf.mul(values, mask)), tf.maximum(tf.sum(mask), 1)) as tf.Scalar,
  );
}

export interface PolicyObjectiveOptions extends PolicyLossOptions {
  /** Coefficient of the KL penalty to the reference policy (k3). Default `rl.klCoefficient` (0.05); 0 skips the reference. */
  klCoefficient: number;
  /** Coefficient of the entropy bonus (subtracted from the loss). Default 0 (none, as the original). */
  entropyCoefficient: number;
  reduction: LossReduction;
}

export const DEFAULT_POLICY_OBJECTIVE: PolicyObjectiveOptions = {
  ...DEFAULT_POLICY_LOSS,
  klCoefficient: RL_DEFAULTS.klCoefficient,
  entropyCoefficient: RL_DEFAULTS.entropyCoefficient,
  reduction: RL_DEFAULTS.reduction,
};

/**
 * The full policy objective of one micro-batch: the policy loss (PPO-clip + dual-clip, or an
 * importance-corrected one, see `policyLoss`) + β·KL − η·entropy,
 * reduced as configured. All inputs [B, T]; `referenceLogProbs` only when β > 0,
 * `entropy` needed when η > 0 (given, its masked mean is returned as a diagnostic whatever η).
 * @returns the scalar loss to differentiate, and scalar diagnostics (not to differentiate).
 */
export function policyObjective(
  batch: TokenBatch & { referenceLogProbs?: tf.Tensor2D; entropy?: tf.Tensor2D },
  options: PolicyObjectiveOptions,
  counts: { tokenCount: number; sequenceCount: number },
): {
  loss: tf.Scalar;
  policyLoss: tf.Scalar;
  clipFraction: tf.Scalar;
  kl: tf.Scalar;
  entropy: tf.Scalar;
} {
  return tf.tidy(() => {
    const { loss: tokenLoss, clipped } = getPolicyLoss(options.policyLoss)(batch, options);
    const policyLoss = reduceLoss(tokenLoss, batch.mask, options.reduction, counts);
    let loss: tf.Scalar = policyLoss;
    let kl: tf.Scalar = tf.scalar(0);
    if (options.klCoefficient > 0) {
      if (!batch.referenceLogProbs)
        throw new AlgorithmError("klCoefficient > 0 needs referenceLogProbs");
      const tokenKl = klK3(batch.logProbs, batch.referenceLogProbs);
      kl = maskedMean(tokenKl, batch.mask);
      loss = tf.add(
        loss,
        tf.mul(reduceLoss(tokenKl, batch.mask, options.reduction, counts), options.klCoefficient),
      );
    }
    // The entropy is a diagnostic whenever it is given; it enters the loss only with a coefficient.
    const entropy: tf.Scalar = batch.entropy ? maskedMean(batch.entropy, batch.mask) : tf.scalar(0);
    if (options.entropyCoefficient > 0) {
      if (!batch.entropy) throw new AlgorithmError("entropyCoefficient > 0 needs entropy");
      loss = tf.sub(
        loss,
        tf.mul(
          reduceLoss(batch.entropy, batch.mask, options.reduction, counts),
          options.entropyCoefficient,
        ),
      );
    }
    return { loss, policyLoss, clipFraction: maskedMean(clipped, batch.mask), kl, entropy };
  });
}
