import { test } from "node:test";
import assert from "node:assert/strict";
import type { Trajectory } from "@agentrl/rollout";
import { rm } from "node:fs/promises";
import { InProcessEnvironmentClient, type EnvironmentClient, type TaskFamily } from "@agentrl/envs";
import { Policy, setBackend } from "@agentrl/policy";
import {
  answerSource,
  answerSources,
  evaluate,
  fromOutputNote,
  successesFromOutput,
} from "./evaluate.js";
import { makeSayModel, sayFamily } from "../rl/fixtures/say-run.js";

/** The fields answerSources reads. */
const episode = (reward: number, metrics: Record<string, number>, status = "completed") =>
  ({ status, environmentReward: reward, metrics }) as unknown as Trajectory;

test("answerSources: successes read from an output, guessed, or graded on the state; failures count in none; undefined when the family does not say", () => {
  const episodes = [
    episode(1, { answerGraded: 1, answerFromOutput: 1 }), // read
    episode(1, { answerGraded: 1, answerFromOutput: 1 }), // read
    episode(1, { answerGraded: 1, answerFromOutput: 0 }), // a right guess
    episode(0, { answerGraded: 1, answerFromOutput: 1 }), // read, but wrong
    episode(1, { answerGraded: 1, answerFromOutput: 1 }, "task limit reached"), // not a success
    episode(1, { answerGraded: 0 }), // a task graded on the system's state
    episode(1, { answerFromOutput: 0 }), // stored before answerGraded: a guess
    episode(1, {}), // says nothing: none
  ];
  assert.deepEqual(answerSources(episodes), { read: 2, guessed: 2, other: 1 });
  assert.equal(successesFromOutput(episodes), 2);
  assert.equal(answerSource(episodes[2]), "guessed");
  assert.equal(answerSource(episodes[3]), undefined);
  assert.equal(answerSources([episode(1, {}), episode(0, { score: 0 })]), undefined);
  const os = {
    task: "os",
    instances: 200,
    episodes: 200,
    success: 0.255,
    passAtK: 0.255,
    meanReward: 0.255,
    meanTurns: 3,
    successesFromOutput: 14,
  };
  assert.equal(
    fromOutputNote({ ...os, answerSources: { read: 14, guessed: 35, other: 2 } }),
    "of 51 successes 14 read, 35 guessed, 2 other (27 % read)",
  );
  // A result stored before the three-way split.
  assert.equal(fromOutputNote(os), "14 of 51 successes read");
  assert.equal(
    fromOutputNote({
      task: "kg",
      instances: 200,
      episodes: 200,
      success: 0.8,
      passAtK: 0.8,
      meanReward: 0.8,
      meanTurns: 3,
    }),
    undefined,
  );
});

test("evaluate: the tasks take turns in the queue (k-th instance of each, then the next), so that no family fills it alone", async () => {
  await setBackend("cpu", { log: null });
  const model = await makeSayModel();
  const policy = await Policy.load(model, { trainable: false });
  try {
    const short: TaskFamily = {
      ...sayFamily,
      name: "short",
      indices: (split) => (split === "train" ? [0] : [6]),
    };
    const inner = new InProcessEnvironmentClient([
      sayFamily,
      { ...sayFamily, name: "echo" },
      short,
    ]);
    const started: string[] = [];
    const client: EnvironmentClient = Object.assign(Object.create(inner) as EnvironmentClient, {
      startSample: (task: string, index: number) => (
        started.push(`${task} ${index}`),
        inner.startSample(task, index)
      ),
    });
    const results = await evaluate({
      client,
      policy,
      tasks: ["say", "echo", "short"],
      concurrency: 1,
      episode: { maxTurns: 1, maxNewTokensPerTurn: 4 },
    });
    assert.deepEqual(started, ["say 6", "echo 6", "short 6", "say 7", "echo 7"]);
    assert.deepEqual(
      Object.values(results).map((r) => [r.task, r.instances]),
      [
        ["say", 2],
        ["echo", 2],
        ["short", 1],
      ],
    );
  } finally {
    policy.dispose();
    await rm(model, { recursive: true, force: true });
  }
});
