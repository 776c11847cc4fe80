/** What counts as a successful episode, for the training metrics and the evaluations alike. */
import type { Trajectory } from "@agentrl/rollout";

/** An episode succeeded when it ended `completed` with the full reward. */
export function isSuccess(trajectory: Pick<Trajectory, "status" | "environmentReward">): boolean {
  return trajectory.status === "completed" && trajectory.environmentReward >= 1 - 1e-9;
}
