/**
 * ALFWorld's reward (AgentBench's alfworld task), decided after each action: 1 (completed)
 * when the goal holds in the world, 0 (agent invalid action) when the last `REPEAT_LIMIT`
 * actions were one and the same text; otherwise the episode goes on. A win counts even when it
 * is the third repeat (the original checks the goal first). No partial credit.
 */
import type { Outcome } from "../session.js";

/** How many identical actions in a row end the episode (the original's failure test). */
export const REPEAT_LIMIT = 3;

export const REPEAT_MESSAGE = "You repeated the same action 3 times in a row. The episode ends.";

/** Whether the last `REPEAT_LIMIT` actions are one and the same text. */
export function repeatedTooOften(actions: readonly string[], limit = REPEAT_LIMIT): boolean {
  if (actions.length < limit) return false;
  const last = actions.slice(-limit);
  return last.every((action) => action === last[0]);
}

/**
 * The episode's outcome after an action, or undefined while it goes on: `goalReached` is the
 * world's goal test after the action, `actions` the raw action texts so far (this one last).
 */
export function gradeAction(goalReached: boolean, actions: readonly string[]): Outcome | undefined {
  if (goalReached) return { reward: 1, status: "completed", metrics: { success: 1 } };
  if (repeatedTooOften(actions))
    return { reward: 0, status: "agent invalid action", metrics: { success: 0 } };
  return undefined;
}
