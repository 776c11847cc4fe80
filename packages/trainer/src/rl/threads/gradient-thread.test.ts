import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tf from "@tensorflow/tfjs-core";
import { Policy, presetConfig, setBackend, type ExportedWeights } from "@agentrl/policy";
import type { Trajectory, TrajectoryGroup } from "@agentrl/rollout";
import {
  DEFAULT_GRPO,
  grpoUpdate,
  prepareBatch,
  type GradientPeer,
  type GrpoOptions,
} from "../grpo.js";
import { GradientThread } from "./gradient-thread.js";
import { Learner, type LearnerSettings } from "../learner.js";
import { shareOf, type SupervisedRow } from "../sft.js";

await setBackend("cpu", { log: null });
process.env.AGENTRL_BACKEND = "cpu"; // the gradient thread loads its policy on the cpu backend too

/** Groups of episodes of different lengths and rewards, with sampler log-probs a little off the policy's (so some ratios clip). */
function makeGroups(vocab: number): TrajectoryGroup[] {
  let seed = 7;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  return ["a", "b"].map((task, g) => {
    const trajectories: Trajectory[] = Array.from({ length: 6 }, (_, member) => {
      const length = 12 + Math.floor(random() * 30);
      const prompt = 4 + Math.floor(random() * 6);
      const tokens = Int32Array.from({ length }, () => Math.floor(random() * vocab));
      const lossMask = new Uint8Array(length).map((_, i) =>
        i >= prompt && i < length - 2 ? 1 : 0,
      );
      const logprobs = new Float32Array(length).map((_, i) =>
        lossMask[i] ? -Math.log(vocab) + (random() - 0.5) : 0,
      );
      const reward = (member + g) % 3 === 0 ? 1 : random();
      return {
        task,
        index: g,
        groupId: task,
        member,
        tokens,
        lossMask,
        logprobs,
        versions: new Int32Array(length),
        policyIds: new Int8Array(length),
        reward,
        environmentReward: reward,
        status: "completed",
        endCause: "verdict",
        masked: false,
        turns: [],
        minVersion: 0,
        maxVersion: 0,
        metrics: {},
        weight: 1,
      };
    });
    return { groupId: task, task, index: g, trajectories, minVersion: 0, maxVersion: 0 };
  });
}

function maxAbsDifference(a: ExportedWeights, b: ExportedWeights): number {
  let max = 0;
  a.tensors.forEach((t, i) => {
    assert.equal(b.tensors[i].name, t.name);
    for (let j = 0; j < t.data.length; j++)
      max = Math.max(max, Math.abs(t.data[j] - b.tensors[i].data[j]));
  });
  return max;
}

function withModel(run: (directory: string) => Promise<void>) {
  return async () => {
    const directory = mkdtempSync(join(tmpdir(), "agentrl-gradient-thread-"));
    try {
      await Policy.create(presetConfig("test"), { seed: 5 }).save(directory);
      await run(directory);
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  };
}

// KL and entropy terms on, two PPO epochs, small micro-batches (many to share out) and a clip that binds.
const OPTIONS: GrpoOptions = {
  ...DEFAULT_GRPO,
  klCoefficient: 0.05,
  entropyCoefficient: 0.01,
  ppoEpochs: 2,
  microBatchTokens: 96,
};

test(
  "grpoUpdate with a gradient thread equals the one-thread update, and both threads take micro-batches",
  withModel(async (directory) => {
    const one = await Policy.load(directory, { trainable: true });
    const two = await Policy.load(directory, { trainable: true });
    const reference = await Policy.load(directory, { trainable: false });
    const optimizers = [one, two].map((p) =>
      p.createOptimizer({ learningRate: 1e-3, maxGradNorm: 0.05 }),
    );
    const thread = await GradientThread.start(directory, { reference: true });
    const claimed: number[] = [];
    const peer: GradientPeer = {
      epoch: async (work) => {
        const part = await thread.epoch(work);
        claimed.push(part.microBatches);
        return part;
      },
    };
    try {
      const batch = prepareBatch(makeGroups(one.config.vocabSize), OPTIONS);
      for (let step = 0; step < 2; step++) {
        const alone = await grpoUpdate(one, optimizers[0], batch, OPTIONS, reference.model);
        const shared = await grpoUpdate(two, optimizers[1], batch, OPTIONS, reference.model, [
          peer,
        ]);
        for (const key of [
          "loss",
          "policyLoss",
          "clipFraction",
          "kl",
          "entropy",
          "gradNorm",
        ] as const) {
          assert.ok(
            Math.abs(alone[key] - shared[key]) <= 1e-5 * Math.max(1, Math.abs(alone[key])),
            `step ${step} ${key}: ${alone[key]} vs ${shared[key]}`,
          );
        }
        assert.ok(alone.gradNorm > 0.05, "the clip binds (it is applied to the summed gradient)");
        assert.equal(shared.trainedTokens, alone.trainedTokens);
        assert.equal(
          shared.peerMicroBatches,
          claimed.slice(-OPTIONS.ppoEpochs).reduce((a, b) => a + b, 0),
        );
        assert.equal(alone.peerMicroBatches, 0);
      }
      const difference = maxAbsDifference(one.exportWeights(), two.exportWeights());
      assert.ok(difference <= 1e-5, `max |w1 − w2| = ${difference}`);
      assert.ok(
        difference < maxAbsDifference(one.exportWeights(), reference.exportWeights()) / 100,
        "the weights moved far more than they differ",
      );
      const total = claimed.reduce((a, b) => a + b, 0);
      assert.ok(
        total > 0,
        `the gradient thread computed micro-batches (${claimed.join(", ")} per epoch)`,
      );
    } finally {
      await thread.close();
      for (const p of [one, two, reference]) p.dispose();
      for (const o of optimizers) o.dispose();
    }
  }),
);

test(
  "a learner with gradientThreads 2 makes the same updates as with 1, and no thread leaks tensors",
  withModel(async (directory) => {
    const settings: LearnerSettings = {
      grpo: OPTIONS,
      schedule: { learningRate: 1e-3 },
      optimizer: { maxGradNorm: 0.05 },
    };
    const single = await Learner.load(directory, { ...settings, gradientThreads: 1 });
    const parallel = await Learner.load(directory, { ...settings, gradientThreads: 2 });
    try {
      assert.equal(single.gradientThread, undefined);
      assert.ok(parallel.gradientThread);
      const groups = makeGroups(single.policy.config.vocabSize);
      const tensors: number[] = [];
      const workerTensors: number[] = [];
      for (let step = 0; step < 3; step++) {
        const a = await single.update(groups);
        const b = await parallel.update(groups);
        assert.equal(b.weights!.version, a.weights!.version);
        assert.ok(maxAbsDifference(a.weights!, b.weights!) <= 1e-5, `step ${step}`);
        tensors.push(tf.memory().numTensors);
        workerTensors.push(await parallel.gradientThread.numTensors());
      }
      assert.deepEqual(
        new Set(tensors).size,
        1,
        `tensors in this thread after each step: ${tensors}`,
      );
      assert.deepEqual(
        new Set(workerTensors).size,
        1,
        `tensors in the gradient thread after each step: ${workerTensors}`,
      );
    } finally {
      await single.dispose();
      await parallel.dispose();
    }
  }),
);

/** Supervised rows of different lengths; the loss mask holds prompt weights 1 and assistant weights 3 (as `promptLossWeight` writes them). */
function makeSupervisedRows(vocab: number, count: number, seed: number): SupervisedRow[] {
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  return Array.from({ length: count }, () => {
    const length = 10 + Math.floor(random() * 40);
    const prompt = 3 + Math.floor(random() * 8);
    return {
      task: "sft",
      tokens: Int32Array.from({ length }, () => Math.floor(random() * vocab)),
      lossMask: Uint8Array.from({ length }, (_, i) => (i < prompt ? 0 : random() < 0.3 ? 1 : 3)),
    };
  });
}

test(
  "supervised steps with the gradient thread make the same update as one thread, and both threads take micro-batches",
  withModel(async (directory) => {
    // a clip that binds (it applies to the summed gradient) and micro-batches small enough to share out
    const settings: LearnerSettings = {
      grpo: { klCoefficient: 0, microBatchTokens: 64 },
      schedule: { learningRate: 3e-3 },
      optimizer: { maxGradNorm: 0.5 },
    };
    const single = await Learner.load(directory, { ...settings, gradientThreads: 1 });
    const parallel = await Learner.load(directory, { ...settings, gradientThreads: 2 });
    const start = single.policy.exportWeights();
    try {
      let peerMicroBatches = 0;
      const tensors: number[] = [];
      for (let step = 0; step < 3; step++) {
        const rows = makeSupervisedRows(single.policy.config.vocabSize, 8, 11 + step);
        const a = await single.supervised(rows);
        const b = await parallel.supervised(rows);
        assert.ok(
          Math.abs(a.loss - b.loss) <= 1e-5 * Math.max(1, a.loss),
          `step ${step} loss ${a.loss} vs ${b.loss}`,
        );
        assert.ok(
          Math.abs(a.gradNorm - b.gradNorm) <= 1e-5 * Math.max(1, a.gradNorm),
          `step ${step} gradNorm ${a.gradNorm} vs ${b.gradNorm}`,
        );
        assert.ok(a.gradNorm > 0.5, `the clip binds (gradNorm ${a.gradNorm})`);
        assert.equal(b.tokens, a.tokens);
        assert.equal(a.peerMicroBatches, 0);
        peerMicroBatches += b.peerMicroBatches;
        tensors.push(tf.memory().numTensors);
      }
      const one = single.policy.exportWeights();
      const two = parallel.policy.exportWeights();
      assert.equal(two.version, one.version);
      const difference = maxAbsDifference(one, two);
      assert.ok(difference <= 1e-5, `max |w1 − w2| = ${difference}`);
      assert.ok(
        difference < maxAbsDifference(one, start) / 100,
        "the weights moved far more than they differ",
      );
      assert.ok(peerMicroBatches > 0, "the gradient thread computed micro-batches");
      assert.equal(new Set(tensors).size, 1, `tensors in this thread after each step: ${tensors}`);
    } finally {
      await single.dispose();
      await parallel.dispose();
    }
  }),
);

test(
  "Learner rejects a gradient thread count other than 1 or 2",
  withModel(async (directory) => {
    await assert.rejects(
      Learner.load(directory, { gradientThreads: 3 as 2 }),
      /gradientThreads must be 1 or 2/,
    );
  }),
);

test("shareOf: thread k of n takes the plan indices k, k + n, … once each", () => {
  const take = (index: number, threads: number, count: number) => {
    const next = shareOf({ index, threads }, count);
    const out: number[] = [];
    for (let i = next(); i !== undefined; i = next()) out.push(i);
    return out;
  };
  assert.deepEqual(take(0, 2, 5), [0, 2, 4]);
  assert.deepEqual(take(1, 2, 5), [1, 3]);
  assert.deepEqual(take(0, 1, 3), [0, 1, 2]);
  assert.deepEqual(take(2, 3, 2), []);
});

test(
  "supervised steps on two threads give the same bits on every run (fixed shares, fixed summation order)",
  withModel(async (directory) => {
    const settings: LearnerSettings = {
      grpo: { klCoefficient: 0, microBatchTokens: 64 },
      schedule: { learningRate: 3e-3 },
      optimizer: { maxGradNorm: 0.5 },
    };
    const first = await Learner.load(directory, { ...settings, gradientThreads: 2 });
    const second = await Learner.load(directory, { ...settings, gradientThreads: 2 });
    try {
      for (let step = 0; step < 3; step++) {
        const rows = makeSupervisedRows(first.policy.config.vocabSize, 8, 31 + step);
        const a = await first.supervised(rows);
        const b = await second.supervised(rows);
        assert.ok(
          a.peerMicroBatches > 0 && b.peerMicroBatches === a.peerMicroBatches,
          `the gradient thread took the same share (${a.peerMicroBatches}, ${b.peerMicroBatches})`,
        );
        assert.equal(b.loss, a.loss, `step ${step} loss`);
      }
      assert.equal(
        maxAbsDifference(first.policy.exportWeights(), second.policy.exportWeights()),
        0,
      );
    } finally {
      await first.dispose();
      await second.dispose();
    }
  }),
);
