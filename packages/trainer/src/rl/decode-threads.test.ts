import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setBackend } from "@agentrl/policy";
import type { TrajectoryGroup } from "@agentrl/rollout";
import { runTraining } from "./loop.js";
import { makeSayModel, sayRunOptions } from "./fixtures/say-run.js";
import type { TrainingRunOptions } from "./training-options.js";

await setBackend("cpu", { log: null });
process.env.AGENTRL_BACKEND = "cpu"; // the learner, the decode threads and every Policy.load use the cpu backend too

/** Runs the tiny `say` training; returns every step's batch (in order) and metrics lines. */
async function train(
  model: string,
  overrides: Partial<TrainingRunOptions>,
  rollout: Partial<TrainingRunOptions["rollout"]>,
) {
  const directory = mkdtempSync(join(tmpdir(), "agentrl-decode-threads-"));
  const base = sayRunOptions(model, directory);
  const batches: TrajectoryGroup[][] = [];
  await runTraining({
    ...base,
    ...overrides,
    rollout: { ...base.rollout, ...rollout },
    onBatch: ({ groups }) => batches.push([...groups]),
    log: () => {},
  });
  const metrics = readFileSync(join(directory, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as Record<string, number>);
  return { batches, metrics };
}

/** Trajectories in a stable order (group id, member). */
function trajectories(batches: TrajectoryGroup[][]) {
  return batches.map((groups) =>
    groups
      .flatMap((group) => group.trajectories)
      .sort((a, b) => a.groupId.localeCompare(b.groupId) || a.member - b.member),
  );
}

test("sync, greedy: tokens, log-probs and versions recorded through the engine pool equal the single engine's, over weight updates", async () => {
  const model = await makeSayModel();
  const greedy = { engine: { temperature: 0 }, maxConcurrentEpisodes: 4 };
  const base = sayRunOptions(model, "");
  // Greedy group members are alike (zero advantages): an entropy bonus on every group makes each step change the weights.
  const settings = {
    steps: 3,
    crossPolicy: { staleProbability: 0, refreshEvery: 2 },
    learner: {
      ...base.learner,
      grpo: { ...base.learner.grpo, entropyCoefficient: 0.05, skipUniformGroups: false },
    },
  };
  const single = await train(model, settings, greedy);
  const pooled = await train(model, settings, { ...greedy, decodeThreads: 1 });
  const [a, b] = [trajectories(single.batches), trajectories(pooled.batches)];
  assert.equal(b.length, 3);
  for (let step = 0; step < a.length; step++) {
    assert.equal(b[step].length, a[step].length);
    a[step].forEach((expected, i) => {
      const got = b[step][i];
      assert.deepEqual([...got.tokens], [...expected.tokens], `step ${step + 1}, episode ${i}`);
      assert.deepEqual([...got.versions], [...expected.versions]);
      got.logprobs.forEach((logprob, j) =>
        assert.ok(
          Math.abs(logprob - expected.logprobs[j]) < 1e-4,
          `step ${step + 1}, episode ${i}, token ${j}: ${logprob} vs ${expected.logprobs[j]}`,
        ),
      );
    });
    // each step decodes with the version the previous step's update made
    assert.ok(
      b[step].every((t) => t.versions.every((v) => v === -1 || v === step)),
      `step ${step + 1}: versions ${[...new Set(b[step].flatMap((t) => [...t.versions]))]}`,
    );
  }
  // the updates changed what greedy decoding gives (else equal tokens would prove nothing of the threads' weights)
  assert.ok(
    a[2].some((t, i) =>
      t.logprobs.some((logprob, j) => Math.abs(logprob - a[0][i].logprobs[j]) > 1e-3),
    ),
    "the weights did not change",
  );
  // The thread decoded a share of every step's tokens.
  assert.ok(
    pooled.metrics.every((m) => m["rollout/decode_threads"] === 1),
    "decode threads metric",
  );
  assert.ok(
    pooled.metrics.every((m) => m["rollout/thread_generated_tokens"] > 0),
    `tokens from the thread per step: ${pooled.metrics.map((m) => m["rollout/thread_generated_tokens"])}`,
  );
});

test("sampler vs trainer: with decode threads the recorded log-probs are the trainer's (sync and async), each token tagged with its version", async () => {
  const model = await makeSayModel();
  for (const mode of ["sync", "async"] as const) {
    const run = await train(
      model,
      { mode, steps: 3, crossPolicy: { staleProbability: 0, refreshEvery: 2 } },
      { engine: { temperature: 1 }, decodeThreads: 1 },
    );
    // The single engine's mismatch KL on this run is 2.7e-4 to 5.8e-4 a step (decode-time numerics):
    // a thread sampling with other weights than the version it tags would stand out.
    run.metrics.forEach((m, i) =>
      assert.ok(
        m["train/mismatchKl"] < 3e-3,
        `${mode} step ${i + 1}: mismatch KL ${m["train/mismatchKl"]}`,
      ),
    );
    assert.ok(
      run.metrics.some((m) => m["rollout/thread_generated_tokens"] > 0),
      `${mode}: the thread decoded nothing`,
    );
    run.batches.forEach((groups, step) => {
      for (const t of groups.flatMap((group) => group.trajectories))
        t.versions.forEach((version, j) => {
          if (t.lossMask[j])
            assert.ok(
              version >= 0 && version <= step,
              `${mode}: version ${version} at step ${step + 1}`,
            );
        });
    });
  }
});
