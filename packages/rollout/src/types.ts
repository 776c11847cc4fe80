/**
 * The data the rollout hands to the trainer: one `Trajectory` per episode, grouped by
 * task instance into `TrajectoryGroup`s.
 */
import type { SampleStatus } from "@agentrl/envs";

/** Which member of the policy pool produced a turn. */
export type PolicyId = "current" | "stale" | "external";
export const POLICY_IDS: readonly PolicyId[] = ["current", "stale", "external"];
/** Numeric code of each policy id, as stored per token in `Trajectory.policyIds`. */
export const POLICY_CODES: Record<PolicyId, number> = { current: 0, stale: 1, external: 2 };
/** Per-token policy code of prompt and environment tokens (no policy produced them). */
export const NO_POLICY = -1;
/** Per-token version of prompt, environment and external-model tokens. */
export const NO_VERSION = -1;

/**
 * Who ended an episode:
 * - `verdict`: the environment's own verdict (status `completed`);
 * - `agent`: the agent's doing — turn limit, context limit, invalid actions, validation
 *   failures, or its own time running out while it generated;
 * - `infrastructure`: not the agent's doing — an environment or task error (a container or
 *   worker that died, a tool that crashed), an engine error, an unreachable controller, a
 *   time limit hit while waiting for the environment, cancellation.
 */
export type EndCause = "verdict" | "agent" | "infrastructure";

/** The end cause a status stands for (see EndCause). */
export function endCauseOf(status: SampleStatus): EndCause {
  switch (status) {
    case "completed":
      return "verdict";
    case "agent context limit":
    case "agent validation failed":
    case "agent invalid action":
    case "task limit reached":
      return "agent";
    default: // task error, cancelled, unknown (and running, which an ended episode never has)
      return "infrastructure";
  }
}

/** Where one turn lies in the trajectory's token sequence (half-open ranges of token positions). */
export interface TurnRecord {
  /** Tokens before the turn's generation: the templated conversation so far. */
  promptLength: number;
  /** `[start, end)` of the tokens the policy generated (or the external model's tokens). */
  generated: [number, number];
  /** `[start, end)` of the environment's reply tokens (empty after the last turn). */
  environment: [number, number];
  policy: PolicyId;
  /** Policy version that produced the first / last token of the turn (-1 for external). */
  minVersion: number;
  maxVersion: number;
  /** The generation stopped at the end-of-turn token (`stop`) or at a length limit. */
  finishReason: "stop" | "length" | "aborted";
  /** The text did not parse into tool calls (the environment got content only). */
  formatError?: string;
  /** The environment reply's tokens came from the fallback path (template not prefix-stable). */
  templateFallback: boolean;
}

/** One episode as ONE token sequence, with per-token training data. */
export interface Trajectory {
  task: string;
  /** Sample index of the task instance. */
  index: number;
  /** Id of the group (the n episodes of one task instance). */
  groupId: string;
  /** Position of the episode in its group, 0 … n-1. */
  member: number;
  /** The whole sequence: prompt, then per turn the generated tokens and the environment's reply. */
  tokens: Int32Array;
  /** 1 on tokens the current or stale policy generated (trainable), 0 elsewhere (prompt, environment, external model). */
  lossMask: Uint8Array;
  /** Log-prob (natural log, at the sampling temperature) the sampler saw for each generated token; 0 elsewhere. */
  logprobs: Float32Array;
  /** Policy version that generated each token; -1 elsewhere. */
  versions: Int32Array;
  /** Per token: 0 current, 1 stale, 2 external, -1 prompt/environment (see POLICY_CODES). */
  policyIds: Int8Array;
  /**
   * Final reward: the environment's last reward when status is `completed`; the incomplete
   * penalty when the agent ended the episode (or the infrastructure did and faults are
   * penalised); 0 when the episode is `masked` (it never reaches the loss).
   */
  reward: number;
  /** The environment's own reward, before the penalty rule. */
  environmentReward: number;
  status: SampleStatus;
  /** Who ended the episode (see EndCause). */
  endCause: EndCause;
  /**
   * The episode ended by an infrastructure fault (after its retries) and faults are masked
   * (`infrastructureFaults: "mask"`): its group must not enter the loss.
   */
  masked: boolean;
  /** Why the episode ended early when the rollout ended it (timeout, environment fault, token limit, cancel). */
  error?: string;
  turns: TurnRecord[];
  /** Lowest / highest version of the CURRENT-pool turns (what staleness is measured on); -1 when none. */
  minVersion: number;
  maxVersion: number;
  /** Environment metrics of the last reply, plus `durationMs`, `generatedTokens`, `templateFallbacks`, `formatErrors`. */
  metrics: Record<string, number>;
  /** Sample weight (1, or less when down-weighted for staleness by the buffer). */
  weight: number;
}

/** The n episodes of one task instance; handed out only when all n have ended. */
export interface TrajectoryGroup {
  groupId: string;
  task: string;
  index: number;
  trajectories: Trajectory[];
  /** Lowest / highest current-pool version over the group's trajectories (-1 when none). */
  minVersion: number;
  maxVersion: number;
}

/** Whether a group holds a masked episode (an infrastructure fault): such a group is dropped from the loss. */
export function isMasked(group: Pick<TrajectoryGroup, "trajectories">): boolean {
  return group.trajectories.some((trajectory) => trajectory.masked);
}

/**
 * Whether a group's rewards are not all equal: only then does the group step give its
 * episodes non-zero advantages (GRPO learns nothing from a group that all failed or all succeeded).
 */
export function isInformative(group: Pick<TrajectoryGroup, "trajectories">): boolean {
  const [first, ...rest] = group.trajectories;
  return rest.some((trajectory) => trajectory.reward !== first.reward);
}
