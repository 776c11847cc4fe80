/**
 * Graded rewards (WebShop's score: attribute, option, price and type matches) reach GRPO
 * without any success: a group whose episodes bought partly-right products is informative
 * for the uninformative-group rule (rollout's `isInformative`, which the scheduler's mix and
 * `skipUniformGroups` both use), and its advantages follow the rewards. Success (reward 1)
 * plays no part in either rule.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { endCauseOf, isInformative, type Trajectory, type TrajectoryGroup } from "@agentrl/rollout";
import { DEFAULT_GRPO, prepareBatch } from "./grpo.js";
import { isSuccess } from "./success.js";

function episode(
  groupId: string,
  member: number,
  reward: number,
  status: Trajectory["status"] = "completed",
): Trajectory {
  const tokens = Int32Array.from([1, 5, 9, 14, 20, 33, 2]);
  const lossMask = Uint8Array.from([0, 0, 0, 1, 1, 1, 1]);
  return {
    task: "webshop",
    index: 0,
    groupId,
    member,
    tokens,
    lossMask,
    logprobs: new Float32Array(tokens.length).map((_, i) => (lossMask[i] ? -1 : 0)),
    versions: new Int32Array(tokens.length),
    policyIds: new Int8Array(tokens.length),
    reward,
    environmentReward: Math.max(0, reward),
    status,
    endCause: endCauseOf(status),
    masked: false,
    turns: [],
    minVersion: 0,
    maxVersion: 0,
    metrics: {},
    weight: 1,
  };
}

function group(groupId: string, rewards: number[]): TrajectoryGroup {
  return {
    groupId,
    task: "webshop",
    index: 0,
    minVersion: 0,
    maxVersion: 0,
    trajectories: rewards.map((reward, member) =>
      episode(groupId, member, reward, reward < 0 ? "agent context limit" : "completed"),
    ),
  };
}

// Rewards as measured on WebShop difficulty 1 (docs/warmstart.md): partial purchases, wrong products, no purchase (−0.2).
const graded = group("graded", [0.75, 0.5, 0.5, 0, 0.33, -0.2, -0.2, 0.67]);

test("a WebShop group with graded, unequal rewards and no success is informative", () => {
  assert.equal(graded.trajectories.filter(isSuccess).length, 0, "no episode succeeded");
  assert.equal(isInformative(graded), true);
  assert.equal(
    isInformative(group("all-bought-the-same", [0.5, 0.5, 0.5])),
    false,
    "equal graded rewards teach nothing",
  );
});

test("skipUniformGroups keeps the graded group and its advantages follow the rewards", () => {
  const batch = prepareBatch(
    [graded, group("no-purchase", [-0.2, -0.2, -0.2, -0.2])],
    DEFAULT_GRPO,
  );
  assert.equal(batch.rows.length, graded.trajectories.length, "only the graded group trains");
  const byReward = batch.rows
    .map((row) => ({ reward: row.reward, advantage: row.advantage }))
    .sort((a, b) => a.reward - b.reward);
  for (let i = 1; i < byReward.length; i++) {
    const [lower, higher] = [byReward[i - 1], byReward[i]];
    if (higher.reward > lower.reward)
      assert.ok(
        higher.advantage > lower.advantage,
        `reward ${lower.reward} → ${higher.reward}: advantage ${lower.advantage} → ${higher.advantage}`,
      );
    else assert.ok(Math.abs(higher.advantage - lower.advantage) < 1e-9);
  }
  assert.ok(byReward.at(-1)!.advantage > 0 && byReward[0].advantage < 0);
});
