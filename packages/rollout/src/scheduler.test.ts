import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import * as tf from "@tensorflow/tfjs-core";
import { tokenLogProbs, type Policy } from "@agentrl/policy";
import { TrajectoryBuffer } from "./buffer.js";
import { InferenceEngine, createPolicyEngine } from "./engine/index.js";
import { PolicyPool } from "./pool.js";
import { RolloutScheduler } from "./scheduler.js";
import {
  FaultyClient,
  ScriptedModel,
  echoFamily,
  testPolicy,
  testTokenizer,
  turnScript,
} from "./testing/fixtures.js";
import { formatToolCalls } from "./toolcall.js";
import { POLICY_CODES, type Trajectory } from "./types.js";

/** Largest |recorded − scored| log-prob over the loss-mask positions of a trajectory. */
function worstLogprobError(policy: Policy, trajectory: Trajectory, temperature: number): number {
  const ids = Array.from(trajectory.tokens);
  const scored = tf.tidy(
    () =>
      tokenLogProbs(policy.model, tf.tensor2d([ids], [1, ids.length], "int32"), { temperature })
        .logProbs,
  );
  const data = scored.dataSync();
  scored.dispose();
  let worst = 0;
  for (let t = 1; t < ids.length; t++)
    if (trajectory.lossMask[t] === 1)
      worst = Math.max(worst, Math.abs(trajectory.logprobs[t] - data[t - 1]));
  return worst;
}

describe("RolloutScheduler", () => {
  let policy: Policy;
  let client: FaultyClient;
  before(async () => {
    policy = await testPolicy({ seed: 4 });
    client = new FaultyClient([
      echoFamily({ maxTurnsNeeded: 3, latency: () => Math.random() * 5 }),
    ]);
  });
  after(() => client.close());

  test("64 concurrent episodes of mixed length all finish with correct loss masks and log-probs", async () => {
    const engine = createPolicyEngine(policy, { temperature: 0.8, maxBatchSize: 64, seed: 1 });
    const buffer = new TrajectoryBuffer({ capacityGroups: 16 });
    const scheduler = new RolloutScheduler({
      client,
      tokenizer: testTokenizer(),
      pool: new PolicyPool({ current: engine }),
      buffer,
      tasks: [{ name: "echo" }],
      groupSize: 8,
      maxConcurrentEpisodes: 64,
      maxGroups: 8,
      seed: 3,
      episode: { maxNewTokensPerTurn: 8, maxTurns: 6 },
    });
    let peakRunning = 0;
    const timer = setInterval(
      () => (peakRunning = Math.max(peakRunning, scheduler.snapshot().runningEpisodes)),
      1,
    );
    await scheduler.start();
    clearInterval(timer);
    const groups = await buffer.take(8);
    const trajectories = groups.flatMap((g) => g.trajectories);
    assert.equal(trajectories.length, 64);
    assert.ok(peakRunning >= 48, `peak running ${peakRunning}`);
    assert.ok(new Set(trajectories.map((t) => t.turns.length)).size >= 3, "mixed lengths");
    let worst = 0;
    for (const trajectory of trajectories) {
      assert.equal(trajectory.status, "completed", trajectory.error);
      assert.equal(trajectory.tokens.length, trajectory.lossMask.length);
      for (const turn of trajectory.turns) {
        assert.ok(turn.generated[1] > turn.generated[0]);
        for (let t = turn.generated[0]; t < turn.generated[1]; t++)
          assert.equal(trajectory.lossMask[t], 1);
        for (let t = turn.environment[0]; t < turn.environment[1]; t++)
          assert.equal(trajectory.lossMask[t], 0);
      }
      for (let t = 0; t < trajectory.turns[0].promptLength; t++)
        assert.equal(trajectory.lossMask[t], 0);
      for (let t = 0; t < trajectory.tokens.length; t++) {
        assert.equal(trajectory.versions[t] >= 0, trajectory.lossMask[t] === 1);
        assert.equal(
          trajectory.policyIds[t] === POLICY_CODES.current,
          trajectory.lossMask[t] === 1,
        );
      }
      worst = Math.max(worst, worstLogprobError(policy, trajectory, 0.8));
    }
    assert.ok(worst < 1e-4, `largest log-prob difference ${worst}`);
    const snapshot = scheduler.snapshot();
    assert.equal(snapshot.episodes, 64);
    assert.ok(
      snapshot.engines.current.meanBatchSize > 8,
      `mean batch ${snapshot.engines.current.meanBatchSize}`,
    );
    assert.ok(snapshot.engines.current.reusedCacheTokens > 0);
    assert.ok(
      snapshot.engines.current.decodeFedTokens > 0,
      "environment replies fed through decode steps",
    );
  });

  test("uninformativeWeight leans the mix away from a task whose groups all get equal rewards", async () => {
    const tokenizer = testTokenizer();
    const model = new ScriptedModel(
      tokenizer.vocabSize,
      turnScript(tokenizer, (k) =>
        formatToolCalls([{ name: "echo", arguments: { text: `t${k}` } }]),
      ),
    );
    const pool = new PolicyPool({
      current: new InferenceEngine(model, { temperature: 0, stopTokenIds: tokenizer.stopTokenIds }),
    });
    // `echo` always pays 1 (every group uniform); `coin` pays 0 or 1 at random (most groups informative).
    const coins = new FaultyClient([
      echoFamily({ maxTurnsNeeded: 1 }),
      echoFamily({ name: "coin", maxTurnsNeeded: 1, reward: () => (Math.random() < 0.5 ? 1 : 0) }),
    ]);
    const launched = async (uninformativeWeight: number) => {
      const buffer = new TrajectoryBuffer({ capacityGroups: 64 });
      const scheduler = new RolloutScheduler({
        client: coins,
        tokenizer,
        pool,
        buffer,
        groupSize: 4,
        maxGroups: 48,
        maxConcurrentEpisodes: 4,
        seed: 2,
        tasks: [{ name: "echo" }, { name: "coin" }],
        uninformativeWeight,
        informativeWindow: 4,
      });
      await scheduler.start();
      const groups = await buffer.take(48);
      const count = (task: string) => groups.filter((group) => group.task === task).length;
      return {
        echo: count("echo"),
        coin: count("coin"),
        echoWeight: scheduler.effectiveWeight({ name: "echo" }),
      };
    };
    const plain = await launched(1);
    assert.ok(plain.echo >= 12 && plain.coin >= 12, `plain mix: ${JSON.stringify(plain)}`);
    assert.equal(plain.echoWeight, 1);
    const leaning = await launched(0.05);
    assert.equal(leaning.echoWeight, 0.05, "echo's recent groups were all uniform");
    assert.ok(leaning.coin >= 3 * leaning.echo, `leaning mix: ${JSON.stringify(leaning)}`);
    assert.ok(leaning.echo >= 2, "the uninformative task keeps a share of the draws");
    assert.throws(
      () =>
        new RolloutScheduler({
          client: coins,
          tokenizer,
          pool,
          buffer: new TrajectoryBuffer(),
          tasks: [{ name: "echo" }],
          uninformativeWeight: 2,
        }),
      /uninformativeWeight/,
    );
    await coins.close();
  });

  test("faulty environments still complete their groups, retried then masked; no group waits forever", async () => {
    const tokenizer = testTokenizer();
    const model = new ScriptedModel(
      tokenizer.vocabSize,
      turnScript(tokenizer, (k) =>
        formatToolCalls([{ name: "echo", arguments: { text: `t${k}` } }]),
      ),
    );
    const pool = new PolicyPool({
      current: new InferenceEngine(model, { temperature: 0, stopTokenIds: tokenizer.stopTokenIds }),
    });
    const buffer = new TrajectoryBuffer();
    // Faults at the first interaction, so that even one-turn instances meet them.
    const faulty = new FaultyClient(
      [
        echoFamily({ maxTurnsNeeded: 3 }),
        echoFamily({ name: "throws" }),
        echoFamily({ name: "hangs" }),
        echoFamily({ name: "dies" }),
      ],
      1,
    );
    const scheduler = new RolloutScheduler({
      client: faulty,
      tokenizer,
      pool,
      buffer,
      groupSize: 4,
      maxGroups: 12,
      seed: 5,
      tasks: [
        { name: "echo", weight: 1 },
        { name: "throws", weight: 1 },
        { name: "hangs", weight: 1 },
        { name: "dies", weight: 1 },
      ],
      episode: { turnTimeoutMs: 1000, incompletePenalty: -0.2, infrastructureRetries: 1 },
    });
    await scheduler.start();
    const groups = await buffer.take(12);
    const byTask = new Map<string, Trajectory[]>();
    for (const group of groups) {
      assert.equal(group.trajectories.length, 4);
      byTask.set(group.task, [...(byTask.get(group.task) ?? []), ...group.trajectories]);
    }
    assert.ok(byTask.size >= 3, `tasks drawn: ${[...byTask.keys()]}`);
    for (const [task, trajectories] of byTask) {
      for (const trajectory of trajectories) {
        if (task === "echo") assert.equal(trajectory.status, "completed", trajectory.error);
        else {
          assert.equal(trajectory.status, "task error", task);
          assert.equal(trajectory.endCause, "infrastructure");
          assert.ok(trajectory.masked);
          assert.equal(trajectory.reward, 0, "an infrastructure fault is never given a reward");
          assert.equal(trajectory.metrics.infrastructureRetries, 1);
        }
      }
    }
    const metrics = scheduler.snapshot();
    assert.equal(metrics.groups, 12);
    const faulted = groups.flatMap((g) => g.trajectories).filter((t) => t.masked).length;
    assert.equal(metrics.maskedEpisodes, faulted);
    assert.equal(metrics.infrastructureRetries, faulted, "one retry each");
    assert.ok(metrics.perTask.echo === undefined || metrics.perTask.echo.successRate === 1);
    await faulty.close();
  });

  test("stop() cancels running episodes; their groups still complete with status cancelled", async () => {
    const tokenizer = testTokenizer();
    const slow = new FaultyClient([
      echoFamily({ latency: () => 30, maxTurnsNeeded: 8, maxTurns: 20 }),
    ]);
    const model = new ScriptedModel(
      tokenizer.vocabSize,
      turnScript(tokenizer, () => "hi"),
    );
    const pool = new PolicyPool({
      current: new InferenceEngine(model, { temperature: 0, stopTokenIds: tokenizer.stopTokenIds }),
    });
    const buffer = new TrajectoryBuffer();
    const scheduler = new RolloutScheduler({
      client: slow,
      tokenizer,
      pool,
      buffer,
      groupSize: 2,
      maxConcurrentEpisodes: 4,
      tasks: [{ name: "echo", concurrency: 2 }],
    });
    const done = scheduler.start();
    await new Promise((r) => setTimeout(r, 100));
    await scheduler.stop();
    await done;
    const groups = buffer.takeAvailable();
    assert.ok(groups.length >= 1);
    assert.ok(groups.every((g) => g.trajectories.length === 2));
    assert.ok(groups.flatMap((g) => g.trajectories).some((t) => t.status === "cancelled"));
    assert.equal(scheduler.snapshot().runningEpisodes, 0);
    await slow.close();
  });
});
