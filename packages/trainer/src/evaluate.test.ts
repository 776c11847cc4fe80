import { test } from "node:test";
import assert from "node:assert/strict";
import type { Trajectory } from "@agentrl/rollout";
import { fromOutputNote, successesFromOutput } from "./evaluate.js";

/** The fields successesFromOutput reads. */
const episode = (reward: number, metrics: Record<string, number>) => ({ status: "completed", environmentReward: reward, metrics }) as unknown as Trajectory;

test("successesFromOutput: successes whose answer a command printed; undefined when the family does not say", () => {
  const episodes = [
    episode(1, { answerFromOutput: 1 }),
    episode(1, { answerFromOutput: 0 }), // a right guess
    episode(0, { answerFromOutput: 1 }), // read, but wrong
    episode(1, {}), // finished without an answer
  ];
  assert.equal(successesFromOutput(episodes), 1);
  assert.equal(successesFromOutput([episode(1, {}), episode(0, { score: 0 })]), undefined);
  assert.equal(fromOutputNote({ task: "os", instances: 200, episodes: 200, success: 0.255, passAtK: 0.255, meanReward: 0.255, meanTurns: 3, successesFromOutput: 14 }), "14 of 51 successes answered a line a command printed");
  assert.equal(fromOutputNote({ task: "kg", instances: 200, episodes: 200, success: 0.8, passAtK: 0.8, meanReward: 0.8, meanTurns: 3 }), undefined);
});
