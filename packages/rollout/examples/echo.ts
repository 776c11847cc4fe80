/**
 * A complete rollout loop on the `test` preset against small in-process echo tasks:
 *   node --conditions=source --import tsx packages/rollout/examples/echo.ts
 * Prints each complete group as it is taken, a weight update in between, and the metrics.
 */
import { InProcessEnvironmentClient } from "@agentrl/envs";
import {
  PolicyPool,
  RolloutScheduler,
  TrajectoryBuffer,
  createPolicyEngine,
} from "@agentrl/rollout";
import { echoFamily, testPolicy, testTokenizer } from "../src/testing/fixtures.js";

const tokenizer = testTokenizer();
const trainee = await testPolicy({ tokenizer, seed: 1 });
// The engines own copies of the weights: training never changes them behind their back.
const pool = new PolicyPool({
  current: createPolicyEngine(trainee.fromSnapshot(trainee.snapshot()), {
    temperature: 0.8,
    maxBatchSize: 32,
  }),
  stale: createPolicyEngine(trainee.fromSnapshot(trainee.snapshot()), {
    temperature: 0.8,
    maxBatchSize: 16,
  }),
  staleProbability: 0.25,
  refreshEvery: 25,
});
const client = new InProcessEnvironmentClient(
  [echoFamily({ latency: () => 20 }), echoFamily({ name: "echo-long", maxTurnsNeeded: 6 })],
  { concurrency: 64 },
);
const buffer = new TrajectoryBuffer({ capacityGroups: 8, maxStaleness: 2 });
const scheduler = new RolloutScheduler({
  client,
  tokenizer,
  pool,
  buffer,
  tasks: [
    { name: "echo", weight: 2 },
    { name: "echo-long", weight: 1 },
  ],
  groupSize: 4,
  maxConcurrentEpisodes: 16,
  seed: 0,
  episode: { maxTurns: 8, maxTokens: 2048, maxNewTokensPerTurn: 16, turnTimeoutMs: 30_000 },
});
const running = scheduler.start();

for (let step = 1; step <= 3; step++) {
  const groups = await buffer.take(2);
  for (const group of groups) {
    const rewards = group.trajectories.map((t) => t.reward.toFixed(1)).join(" ");
    const tokens = group.trajectories
      .map((t) => `${t.tokens.length}/${t.lossMask.reduce((a, b) => a + b, 0)}`)
      .join(" ");
    console.log(
      `step ${step}: group ${group.groupId} versions ${group.minVersion}-${group.maxVersion} rewards [${rewards}] tokens/trainable [${tokens}]`,
    );
  }
  // Here the trainer would run its GRPO update on `trainee`; we only bump the version.
  trainee.bumpVersion();
  const snapshot = trainee.snapshot();
  await pool.updateWeights(snapshot, trainee.version);
  snapshot.dispose();
  buffer.setPolicyVersion(trainee.version);
}
await scheduler.stop();
await running;
const metrics = scheduler.snapshot();
console.log(
  JSON.stringify(
    {
      episodes: metrics.episodes,
      tokensPerSecond: Math.round(metrics.generatedTokensPerSecond),
      turnsByPolicy: metrics.turnsByPolicy,
      perTask: metrics.perTask,
      buffer: metrics.buffer?.stalenessHistogram,
    },
    null,
    1,
  ),
);
pool.close();
await client.close();
