/** What counts as a successful episode, for the training metrics and the evaluations alike. */
import type { Trajectory } from "@agentrl/rollout";

/** An episode succeeded when it ended `completed` with the full reward. */
export function isSuccess(trajectory: Pick<Trajectory, "status" | "environmentReward">): boolean {
  return trajectory.status === "completed" && trajectory.environmentReward >= 1 - 1e-9;
}

/**
 * Where a successful episode's answer came from, for families that say (OS): `read` — the
 * answer is a line or field an own command printed in the episode (the environment's
 * `answerFromOutput` = 1); `guessed` — it appears in no output (a learnt constant, a value
 * composed in the head); `other` — the task is graded on the system's state, not on an answer
 * (`answerGraded` = 0). Undefined for a failure and for families that report neither metric.
 */
export type AnswerSource = "read" | "guessed" | "other";

export function answerSource(
  trajectory: Pick<Trajectory, "status" | "environmentReward" | "metrics">,
): AnswerSource | undefined {
  if (!isSuccess(trajectory)) return undefined;
  const { answerGraded, answerFromOutput } = trajectory.metrics;
  if (answerGraded === 0) return "other";
  if (answerFromOutput === 1) return "read";
  if (answerFromOutput === 0 || answerGraded === 1) return "guessed";
  return undefined;
}

/** The successes of `trajectories` by answer source, or undefined when no episode says where its answer came from. */
export function answerSources(
  trajectories: readonly Pick<Trajectory, "status" | "environmentReward" | "metrics">[],
): Record<AnswerSource, number> | undefined {
  if (
    !trajectories.some(
      (t) => t.metrics.answerGraded !== undefined || t.metrics.answerFromOutput !== undefined,
    )
  )
    return undefined;
  const counts: Record<AnswerSource, number> = { read: 0, guessed: 0, other: 0 };
  for (const t of trajectories) {
    const source = answerSource(t);
    if (source) counts[source] += 1;
  }
  return counts;
}
