import { test } from "node:test";
import assert from "node:assert/strict";
import type { Trajectory, TrajectoryGroup } from "@agentrl/rollout";
import { batchMetrics } from "./batch-metrics.js";

/** A hand-made finished episode: the fields batchMetrics reads. */
const episode = (reward: number, metrics: Record<string, number>, masked = false) =>
  ({
    status: "completed",
    reward,
    environmentReward: reward,
    metrics,
    masked,
    turns: [{ policy: "current" }],
    tokens: new Int32Array(4),
    lossMask: new Uint8Array(4),
    versions: new Int32Array(4),
  }) as unknown as Trajectory;

const group = (task: string, trajectories: Trajectory[]): TrajectoryGroup => ({
  groupId: `${task}-0`,
  task,
  index: 0,
  trajectories,
  minVersion: 0,
  maxVersion: 0,
});

test("batchMetrics: OS successes by answer source (read, guessed, other) and the share read; families that do not say get none", () => {
  const metrics = batchMetrics(
    [
      group("os", [
        episode(1, { answerGraded: 1, answerFromOutput: 1 }),
        episode(1, { answerGraded: 1, answerFromOutput: 0 }),
        episode(1, { answerGraded: 1, answerFromOutput: 0 }),
        episode(0, { answerGraded: 1, answerFromOutput: 1 }),
      ]),
      group("os", [
        episode(1, { answerGraded: 0 }),
        episode(1, { answerGraded: 1, answerFromOutput: 1 }),
        // Masked (an infrastructure fault): counted in no success.
        episode(1, { answerGraded: 1, answerFromOutput: 1 }, true),
      ]),
      group("kg", [episode(1, {}), episode(0, {})]),
    ],
    0,
  );
  assert.equal(metrics["successes_read/os"], 2);
  assert.equal(metrics["successes_guessed/os"], 2);
  assert.equal(metrics["successes_other/os"], 1);
  assert.equal(metrics["read_share/os"], 2 / 5);
  assert.equal(metrics["success/os"], 5 / 6);
  assert.equal(metrics["successes_read/kg"], undefined);
  assert.equal(metrics["read_share/kg"], undefined);
});
