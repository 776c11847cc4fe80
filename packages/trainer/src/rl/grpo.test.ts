import { test } from "node:test";
import assert from "node:assert/strict";
import * as tf from "@tensorflow/tfjs-core";
import { Policy, presetConfig, setBackend, tokenLogProbs } from "@agentrl/policy";
import type { Trajectory, TrajectoryGroup } from "@agentrl/rollout";
import {
  checkGrpoOptions,
  claimFrom,
  DEFAULT_GRPO,
  GrpoShard,
  grpoUpdate,
  microBatchBudget,
  planLeastPadding,
  planMakespan,
  planMicroBatches,
  planSharedForThreads,
  planSharedMicroBatches,
  promptClusters,
  prepareBatch,
  processedTokens,
  sharedPrefixLength,
  withoutUntrainedTail,
  type TrainingRow,
  type UpdateMetrics,
} from "./grpo.js";

await setBackend("cpu", { log: null });

function scored(policy: Policy, tokens: Int32Array, temperature: number): Float32Array {
  const out = new Float32Array(tokens.length);
  const logProbs = tf.tidy(
    () =>
      tokenLogProbs(policy.model, tf.tensor2d(tokens, [1, tokens.length], "int32"), { temperature })
        .logProbs,
  );
  out.set(logProbs.dataSync(), 1);
  logProbs.dispose();
  return out;
}

function trajectory(
  policy: Policy,
  task: string,
  groupId: string,
  tokens: number[],
  generatedFrom: number,
  reward: number,
): Trajectory {
  const ids = Int32Array.from(tokens);
  const lossMask = new Uint8Array(ids.length).map((_, i) => (i >= generatedFrom ? 1 : 0));
  const logprobs = scored(policy, ids, DEFAULT_GRPO.temperature).map((v, i) =>
    lossMask[i] ? v : 0,
  );
  return {
    task,
    index: 0,
    groupId,
    member: 0,
    tokens: ids,
    lossMask,
    logprobs,
    versions: new Int32Array(ids.length).fill(0),
    policyIds: new Int8Array(ids.length),
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
}

function meanMasked(values: Float32Array, mask: Uint8Array): number {
  let sum = 0,
    n = 0;
  for (let i = 0; i < values.length; i++)
    if (mask[i]) {
      sum += values[i];
      n++;
    }
  return sum / n;
}

test("planMicroBatches respects the token budget and keeps every row", () => {
  const rows = [5, 9, 3, 12, 7, 7].map((n) => ({ tokens: new Int32Array(n) }));
  const plan = planMicroBatches(rows, 20);
  assert.equal(plan.flat().length, rows.length);
  for (const batch of plan) {
    const width = Math.max(...batch.map((r) => r.tokens.length));
    assert.ok(
      batch.length === 1 || width * batch.length <= 20,
      `batch of ${batch.length} × ${width}`,
    );
  }
});

test("a GRPO step raises the log-probs of positive-advantage tokens and lowers the negative ones", async () => {
  const policy = Policy.create(presetConfig("test"), { seed: 3 });
  const optimizer = policy.createOptimizer({ learningRate: 3e-3, weightDecay: 0 });
  const good = [1, 5, 9, 14, 20, 33, 41, 7, 2];
  const bad = [1, 5, 9, 14, 60, 61, 62, 63, 2];
  const groups: TrajectoryGroup[] = ["a", "b"].map((task) => {
    const trajectories = [
      trajectory(policy, task, task, good, 4, 1),
      trajectory(policy, task, task, bad, 4, 0),
    ];
    return { groupId: task, task, index: 0, trajectories, minVersion: 0, maxVersion: 0 };
  });
  const batch = prepareBatch(groups, DEFAULT_GRPO);
  assert.equal(batch.tokenCount, 4 * 5);
  assert.ok(batch.rows[0].advantage > 0 && batch.rows[1].advantage < 0);
  const before = {
    good: meanMasked(
      scored(policy, Int32Array.from(good), 0.8),
      groups[0].trajectories[0].lossMask,
    ),
    bad: meanMasked(scored(policy, Int32Array.from(bad), 0.8), groups[0].trajectories[1].lossMask),
  };
  const tensorsBefore = tf.memory().numTensors;
  let metrics: UpdateMetrics | undefined;
  const entropies: number[] = [];
  for (let step = 0; step < 5; step++) {
    metrics = await grpoUpdate(policy, optimizer, batch, {
      ...DEFAULT_GRPO,
      klCoefficient: 0,
      microBatchTokens: 18,
    });
    entropies.push(metrics.entropy);
  }
  assert.equal(tf.memory().numTensors, tensorsBefore, "no tensor leaks across updates");
  const after = {
    good: meanMasked(
      scored(policy, Int32Array.from(good), 0.8),
      groups[0].trajectories[0].lossMask,
    ),
    bad: meanMasked(scored(policy, Int32Array.from(bad), 0.8), groups[0].trajectories[1].lossMask),
  };
  assert.ok(after.good > before.good, `positive: ${before.good} → ${after.good}`);
  assert.ok(after.bad < before.bad, `negative: ${before.bad} → ${after.bad}`);
  assert.equal(policy.version, 5);
  assert.ok(metrics!.microBatches >= 2, "the small budget splits the batch");
  assert.ok(Number.isFinite(metrics!.gradNorm) && metrics!.gradNorm > 0);
  // train/entropy is measured on every update, with no entropy bonus (the default coefficient 0):
  // positive, at most ln(vocabulary), and moving as the policy moves.
  assert.equal(DEFAULT_GRPO.entropyCoefficient, 0);
  const vocabulary = presetConfig("test").vocabSize;
  for (const entropy of entropies)
    assert.ok(
      entropy > 0 && entropy <= Math.log(vocabulary) + 1e-6,
      `entropy ${entropy} in (0, ln ${vocabulary}]`,
    );
  assert.ok(
    new Set(entropies).size > 1 && Math.abs(entropies[4] - entropies[0]) > 1e-4,
    `entropy changes over the updates: ${entropies.map((e) => e.toFixed(5)).join(", ")}`,
  );
});

test("prepareBatch drops groups whose rewards are all equal (no GRPO signal) unless told to keep them", () => {
  const policy = Policy.create(presetConfig("test"), { seed: 4 });
  const tokens = [1, 5, 9, 14, 20, 33, 2];
  const group = (id: string, rewards: number[]): TrajectoryGroup => ({
    groupId: id,
    task: "t",
    index: 0,
    minVersion: 0,
    maxVersion: 0,
    trajectories: rewards.map((reward) => trajectory(policy, "t", id, tokens, 3, reward)),
  });
  const groups = [
    group("mixed", [1, 0, 0]),
    group("all-failed", [-0.2, -0.2, -0.2]),
    group("all-solved", [1, 1, 1]),
  ];
  const skipped = prepareBatch(groups, DEFAULT_GRPO);
  assert.equal(skipped.rows.length, 3, "only the mixed group's episodes");
  assert.equal(skipped.tokenCount, 3 * 4);
  const kept = prepareBatch(groups, { ...DEFAULT_GRPO, skipUniformGroups: false });
  assert.equal(kept.rows.length, 9);
  // With task normalization the uniform groups' zero advantages are shifted, not kept at 0.
  assert.ok(kept.rows.slice(3).every((row) => Number.isFinite(row.advantage)));
  assert.equal(
    prepareBatch([groups[1]], DEFAULT_GRPO).rows.length,
    0,
    "a batch of uniform groups trains nothing",
  );
});

test("negativeAdvantageScale shrinks only the negative advantages, after normalization", () => {
  const policy = Policy.create(presetConfig("test"), { seed: 4 });
  const tokens = [1, 5, 9, 14, 20, 33, 2];
  const groups: TrajectoryGroup[] = [
    {
      groupId: "g",
      task: "t",
      index: 0,
      minVersion: 0,
      maxVersion: 0,
      trajectories: [1, 0, 0, 1, 0].map((reward) =>
        trajectory(policy, "t", "g", tokens, 3, reward),
      ),
    },
  ];
  const plain = prepareBatch(groups, DEFAULT_GRPO).rows.map((row) => row.advantage);
  const leaning = prepareBatch(groups, { ...DEFAULT_GRPO, negativeAdvantageScale: 0.25 }).rows.map(
    (row) => row.advantage,
  );
  assert.ok(plain.some((a) => a < 0) && plain.some((a) => a > 0));
  plain.forEach((advantage, i) =>
    assert.ok(
      Math.abs(leaning[i] - (advantage < 0 ? 0.25 * advantage : advantage)) < 1e-12,
      `row ${i}: ${advantage} → ${leaning[i]}`,
    ),
  );
  const positiveOnly = prepareBatch(groups, {
    ...DEFAULT_GRPO,
    negativeAdvantageScale: 0,
  }).rows.map((row) => row.advantage);
  assert.ok(positiveOnly.every((a) => a >= 0) && positiveOnly.some((a) => a > 0));
});

test("withoutUntrainedTail drops the tokens after the last trained one, which change nothing the loss sees", async () => {
  const reference = Policy.create(presetConfig("test"), { seed: 5 });
  // a generated turn (positions 4-6), then an untrained closing observation (7-9)
  const tokens = [1, 5, 9, 14, 20, 33, 41, 7, 2, 3];
  const trained = (reward: number, generated: number[]) => {
    const t = trajectory(
      reference,
      "a",
      "g",
      [...tokens.slice(0, 4), ...generated, ...tokens.slice(7)],
      4,
      reward,
    );
    t.lossMask.fill(0, 7);
    t.logprobs.fill(0, 7);
    return t;
  };
  const group: TrajectoryGroup = {
    groupId: "g",
    task: "a",
    index: 0,
    trajectories: [trained(1, [20, 33, 41]), trained(0, [60, 61, 62])],
    minVersion: 0,
    maxVersion: 0,
  };
  const batch = prepareBatch([group], DEFAULT_GRPO);
  const cut = withoutUntrainedTail(batch.rows[0]);
  assert.equal(cut.tokens.length, 7);
  assert.deepEqual([...cut.lossMask], [0, 0, 0, 0, 1, 1, 1]);
  assert.equal(withoutUntrainedTail(cut), cut, "nothing left to cut");
  // lossless: causal attention, so the trained positions score the same without the tail
  const full = scored(reference, batch.rows[0].tokens, 0.8);
  const short = scored(reference, cut.tokens, 0.8);
  for (let t = 4; t < 7; t++)
    assert.ok(Math.abs(full[t] - short[t]) < 1e-5, `position ${t}: ${full[t]} vs ${short[t]}`);
  const metrics = await grpoUpdate(
    reference,
    reference.createOptimizer({ learningRate: 1e-3, weightDecay: 0 }),
    batch,
    { ...DEFAULT_GRPO, klCoefficient: 0 },
  );
  assert.equal(metrics.processedTokens, 2 * 7, "the learner ran the cut rows");
  assert.equal(metrics.trainedTokens, 2 * 3);
  reference.dispose();
});

test("a group holding a masked episode (infrastructure fault) is dropped and counted; the other groups' advantages are unchanged", () => {
  const policy = Policy.create(presetConfig("test"), { seed: 4 });
  const tokens = [1, 5, 9, 14, 20, 33, 2];
  const group = (id: string, rewards: number[], maskedMember?: number): TrajectoryGroup => ({
    groupId: id,
    task: "t",
    index: 0,
    minVersion: 0,
    maxVersion: 0,
    trajectories: rewards.map((reward, member) => {
      const t = trajectory(policy, "t", id, tokens, 3, reward);
      if (member === maskedMember)
        Object.assign(t, {
          status: "task error",
          endCause: "infrastructure",
          masked: true,
          reward: 0,
          environmentReward: 0,
        });
      return t;
    }),
  });
  const clean = [group("a", [1, 0]), group("c", [1, 1, 0])];
  const faulty = group("b", [1, 0, 0], 2);
  const plain = { ...DEFAULT_GRPO, taskAdvantageNormalization: false };
  const batch = prepareBatch([clean[0], faulty, clean[1]], plain);
  assert.equal(batch.droppedInfrastructureGroups, 1);
  // (R − mean)/(std + 1e-6), std unbiased: [1, 0] → ±1/√2; [1, 1, 0] → 1/√3, 1/√3, −2/√3
  const expected = [
    Math.SQRT1_2,
    -Math.SQRT1_2,
    1 / Math.sqrt(3),
    1 / Math.sqrt(3),
    -2 / Math.sqrt(3),
  ];
  batch.rows.forEach((row, i) =>
    assert.ok(
      Math.abs(row.advantage - expected[i]) < 1e-5,
      `row ${i}: ${row.advantage} vs ${expected[i]}`,
    ),
  );
  // With task normalization too: exactly the batch without the faulty group.
  const normalized = prepareBatch([clean[0], faulty, clean[1]], DEFAULT_GRPO);
  assert.deepEqual(
    normalized.rows.map((row) => row.advantage),
    prepareBatch(clean, DEFAULT_GRPO).rows.map((row) => row.advantage),
  );
  assert.equal(prepareBatch(clean, DEFAULT_GRPO).droppedInfrastructureGroups, 0);
});

test("grpoUpdate reports the sampler/trainer mismatch: k3 KL and the ratio distribution, from hand values", async () => {
  const policy = Policy.create(presetConfig("test"), { seed: 6 });
  const groups: TrajectoryGroup[] = [
    {
      groupId: "g",
      task: "t",
      index: 0,
      minVersion: 0,
      maxVersion: 0,
      trajectories: [1, 0].map((reward) =>
        trajectory(policy, "t", "g", [1, 5, 9, 14, 20, 33, 2], 3, reward),
      ),
    },
  ];
  const options = { ...DEFAULT_GRPO, klCoefficient: 0, policyLoss: "tis_token" };
  const exact = await grpoUpdate(
    policy,
    policy.createOptimizer({ learningRate: 0, weightDecay: 0 }),
    prepareBatch(groups, options),
    options,
  );
  assert.ok(
    Math.abs(exact.mismatchKl) < 1e-6 && Math.abs(exact.importanceRatioMean - 1) < 1e-5,
    `same weights: KL ${exact.mismatchKl}, mean ratio ${exact.importanceRatioMean}`,
  );
  // The sampler saw every trained token 4 times likelier than the trainer does: ρ = 1/4, k3 = 1/4 − 1 + ln 4.
  for (const t of groups[0].trajectories)
    t.logprobs.forEach((v, i) => (t.logprobs[i] = t.lossMask[i] ? v + Math.log(4) : 0));
  const shifted = await grpoUpdate(
    policy,
    policy.createOptimizer({ learningRate: 0, weightDecay: 0 }),
    prepareBatch(groups, options),
    options,
  );
  assert.ok(
    Math.abs(shifted.mismatchKl - (0.25 - 1 + Math.log(4))) < 1e-4,
    `KL ${shifted.mismatchKl}`,
  );
  for (const key of ["importanceRatioMean", "importanceRatioMin", "importanceRatioMax"] as const)
    assert.ok(Math.abs(shifted[key] - 0.25) < 1e-4, `${key} ${shifted[key]}`);
  assert.ok(
    Math.abs(shifted.importanceRatioShareBelow - 1) < 1e-9 &&
      shifted.importanceRatioShareAbove === 0,
  );
  policy.dispose();
});

test("checkGrpoOptions refuses an unknown loss and an importance-corrected loss over several PPO epochs", () => {
  assert.throws(
    () => checkGrpoOptions({ ...DEFAULT_GRPO, policyLoss: "tis" }),
    /unknown policy loss "tis"/,
  );
  assert.throws(
    () => checkGrpoOptions({ ...DEFAULT_GRPO, policyLoss: "icepop", ppoEpochs: 2 }),
    /needs ppoEpochs 1/,
  );
  assert.throws(
    () => checkGrpoOptions({ ...DEFAULT_GRPO, importanceRatioLow: 1.5 }),
    /0 ≤ low ≤ 1 ≤ high/,
  );
  checkGrpoOptions({ ...DEFAULT_GRPO, policyLoss: "ppo_clip", ppoEpochs: 3 });
});

test("a group's shared prompt runs once per micro-batch: the same update, fewer tokens through the model", async () => {
  const seed = 11;
  const make = () => Policy.create(presetConfig("test"), { seed });
  const sampler = make();
  let next = 3;
  const tokens = (count: number) =>
    Array.from({ length: count }, () => (next = (next * 7 + 5) % 500));
  const groupOf = (id: string, prompt: number[], rewards: number[]): TrajectoryGroup => ({
    groupId: id,
    task: "t",
    index: 0,
    trajectories: rewards.map((reward, member) => {
      // a turn, an untrained observation, a second turn: lengths differ per member
      const first = tokens(4 + member * 3);
      const observation = tokens(6);
      const second = tokens(2 + member);
      const t = trajectory(
        sampler,
        "t",
        id,
        [...prompt, ...first, ...observation, ...second],
        prompt.length,
        reward,
      );
      const from = prompt.length + first.length;
      t.lossMask.fill(0, from, from + observation.length);
      t.logprobs.fill(0, from, from + observation.length);
      return { ...t, member };
    }),
    minVersion: 0,
    maxVersion: 0,
  });
  // two prompts long enough to share (40 and 70 tokens), one too short (10)
  const groups = [
    groupOf("a", tokens(40), [1, 0, 0.5]),
    groupOf("b", tokens(70), [0, 1, 1, 0]),
    groupOf("c", tokens(10), [1, 0]),
  ];
  const options = { ...DEFAULT_GRPO, klCoefficient: 0.05 };
  const batch = prepareBatch(groups, options);
  const rows = batch.rows.map(withoutUntrainedTail);

  const plan = planSharedMicroBatches(rows, 120);
  assert.deepEqual(
    plan
      .flat()
      .map((row) => rows.indexOf(row))
      .sort((x, y) => x - y),
    rows.map((_, i) => i),
    "every row exactly once",
  );
  for (const micro of plan) {
    const prefix = sharedPrefixLength(micro);
    if (micro.length > 1 && micro[0].tokens.length > 60)
      assert.ok(prefix >= 39, "a group's rows share their prompt");
    if (prefix === 0)
      assert.ok(
        micro.every((row) => row.tokens.length < 10 + 30),
        "only group c goes unshared",
      );
    if (micro.length > 1)
      assert.ok(processedTokens(micro) <= 120, "the budget counts the prompt once");
  }

  const run = async (sharePrompts: boolean) => {
    const policy = make();
    const reference = make();
    const metrics = await grpoUpdate(
      policy,
      policy.createOptimizer({ learningRate: 1e-2, weightDecay: 0 }),
      batch,
      { ...options, sharePrompts, microBatchTokens: 4096 },
      reference.model,
    );
    const weights = policy.exportWeights().tensors;
    policy.dispose();
    reference.dispose();
    return { metrics, weights };
  };
  const whole = await run(false);
  const shared = await run(true);
  const unsharedTokens = rows.reduce((n, row) => n + row.tokens.length, 0);
  assert.ok(
    shared.metrics.processedTokens < unsharedTokens - 100,
    `shared ${shared.metrics.processedTokens} vs ${unsharedTokens} tokens`,
  );
  for (const key of ["loss", "kl", "entropy", "gradNorm", "mismatchKl"] as const)
    assert.ok(
      Math.abs(shared.metrics[key] - whole.metrics[key]) <
        1e-4 * Math.max(1, Math.abs(whole.metrics[key])),
      `${key}: ${shared.metrics[key]} vs ${whole.metrics[key]}`,
    );
  const initial = make();
  const before = initial.exportWeights().tensors;
  initial.dispose();
  let moved = 0;
  whole.weights.forEach((weight, i) => {
    const other = shared.weights[i];
    assert.equal(other.name, weight.name);
    for (let j = 0; j < weight.data.length; j++) {
      assert.ok(Math.abs(weight.data[j] - other.data[j]) < 1e-5, `${weight.name}[${j}]`);
      if (Math.abs(weight.data[j] - before[i].data[j]) > 1e-4) moved++;
    }
  });
  assert.ok(moved > 1000, `the update moved ${moved} weights`);
  sampler.dispose();
});

test("microBatchBudget: the whole budget on one thread; with peers, about perThread micro-batches a thread, capped", () => {
  const rows = [{ tokens: new Int32Array(3000) }, { tokens: new Int32Array(5000) }];
  assert.equal(microBatchBudget(rows, 4096, 1), 4096);
  assert.equal(microBatchBudget(rows, 4096, 2), 1000, "8,000 tokens / (4 x 2 threads)");
  assert.equal(microBatchBudget(rows, 4096, 2, 6000, 2), 1500, "shared-prompt cost / (2 x 2)");
  assert.equal(microBatchBudget(rows, 1200, 2, 6000, 2), 1200, "never above microBatchTokens");
  assert.equal(microBatchBudget([{ tokens: new Int32Array(1) }], 4096, 2), 2, "at least 2 tokens");
});

/** A small deterministic generator (0 ≤ value < 1) for the random batches below. */
function seeded(seed: number): () => number {
  let state = seed;
  return () => (state = (state * 1103515245 + 12345) % 2147483648) / 2147483648;
}

test("planLeastPadding: the fewest processed tokens under the budget (checked against every cut), never more than planMicroBatches", () => {
  const random = seeded(7);
  let least = 0;
  let greedy = 0;
  for (let trial = 0; trial < 200; trial++) {
    const prefix = trial % 2 ? 0 : 5 + Math.floor(random() * 40);
    const rows = Array.from({ length: 1 + Math.floor(random() * 9) }, () => ({
      tokens: new Int32Array(prefix + 2 + Math.floor(random() * 60)),
    }));
    const budget = prefix + 20 + Math.floor(random() * 300);
    const cost = (plan: { tokens: Int32Array }[][]) =>
      plan.reduce(
        (n, micro) =>
          n + prefix + micro.length * (Math.max(...micro.map((r) => r.tokens.length)) - prefix),
        0,
      );
    const plan = planLeastPadding(rows, budget, prefix);
    assert.equal(plan.flat().length, rows.length, "every row once");
    assert.deepEqual(new Set(plan.flat()), new Set(rows));
    for (const micro of plan)
      if (micro.length > 1)
        assert.ok(cost([micro]) <= budget, `a micro-batch of ${cost([micro])} > ${budget}`);
    // every way to cut the rows sorted longest first into pieces within the budget
    const sorted = [...rows].sort((a, b) => b.tokens.length - a.tokens.length);
    let best = Infinity;
    for (let cuts = 0; cuts < 1 << (sorted.length - 1); cuts++) {
      const pieces: { tokens: Int32Array }[][] = [[sorted[0]]];
      for (let i = 1; i < sorted.length; i++)
        if (cuts & (1 << (i - 1))) pieces.push([sorted[i]]);
        else pieces[pieces.length - 1].push(sorted[i]);
      if (pieces.every((piece) => piece.length === 1 || cost([piece]) <= budget))
        best = Math.min(best, cost(pieces));
    }
    assert.equal(cost(plan), best, `trial ${trial}`);
    const packed = cost(planMicroBatches(rows, budget, prefix));
    assert.ok(cost(plan) <= packed, `${cost(plan)} > greedy ${packed}`);
    least += cost(plan);
    greedy += packed;
  }
  assert.ok(least < greedy, `least padding ${least} vs greedy packing ${greedy} tokens`);
});

test("planSharedForThreads: the same loss and gradients as one plain padded micro-batch, fewer tokens than it and than the greedy plan", () => {
  const random = seeded(11);
  const token = () => 1 + Math.floor(random() * 500);
  const rows: TrainingRow[] = [];
  for (const [group, promptLength, size] of [
    ["a", 36, 4],
    ["b", 40, 4],
    ["c", 8, 2], // too short a prompt to share
  ] as const) {
    const prompt = Array.from({ length: promptLength }, token);
    for (let member = 0; member < size; member++) {
      // completions of very different lengths, one untrained observation inside
      const first = Array.from({ length: 2 + Math.floor(random() * 12) }, token);
      const observation = Array.from({ length: 4 }, token);
      const second = Array.from(
        { length: 1 + Math.floor(random() * (member % 2 ? 4 : 30)) },
        token,
      );
      const tokens = Int32Array.from([...prompt, ...first, ...observation, ...second]);
      const lossMask = new Uint8Array(tokens.length).map((_, i) =>
        i >= promptLength &&
        !(i >= promptLength + first.length && i < promptLength + first.length + 4)
          ? 1
          : 0,
      );
      const oldLogProbs = new Float32Array(tokens.length).map((_, i) =>
        lossMask[i] ? -5 - random() : 0,
      );
      rows.push({
        task: group,
        tokens,
        lossMask,
        oldLogProbs,
        advantage: random() - 0.5,
        reward: 0,
      });
    }
  }
  const policy = Policy.create(presetConfig("test"), { seed: 5 });
  const reference = Policy.create(presetConfig("test"), { seed: 6 });
  const options = { ...DEFAULT_GRPO, klCoefficient: 0.05 };
  const counts = {
    tokenCount: rows.reduce((n, row) => n + row.lossMask.reduce((a, b) => a + b, 0), 0),
    sequenceCount: rows.length,
  };
  const gradientsOf = (plan: TrainingRow[][], sharePrompts: boolean) => {
    const shard = new GrpoShard(
      policy.model,
      reference.model,
      plan,
      { ...options, sharePrompts },
      counts,
    );
    const out = shard.gradients(claimFrom(new Int32Array(1), plan.length));
    shard.dispose();
    const values = new Map([...out.gradients].map(([name, g]) => [name, g.dataSync().slice()]));
    tf.dispose([...out.gradients.values()]);
    return { loss: out.loss, values, diagnostics: out.diagnostics };
  };
  const width = Math.max(...rows.map((row) => row.tokens.length));
  const plain = gradientsOf([rows], false);
  for (const threads of [1, 2]) {
    const plan = planSharedForThreads(rows, 4096, threads);
    assert.deepEqual(new Set(plan.flat()), new Set(rows), "every row once");
    assert.equal(plan.flat().length, rows.length);
    const tokens = plan.reduce((n, micro) => n + processedTokens(micro), 0);
    assert.ok(tokens < rows.length * width, `${tokens} vs ${rows.length * width} padded`);
    // the plan before: greedy packing under the 2-a-thread budget
    const shared = rows.reduce((n, row) => n + row.tokens.length, 0);
    const clusters = promptClusters(rows);
    const budget = microBatchBudget(rows, 4096, threads, shared, 2);
    const greedy = [
      ...clusters.flatMap((c) => (c.prefix ? planMicroBatches(c.members, budget, c.prefix) : [])),
      ...planMicroBatches(
        clusters.filter((c) => !c.prefix).flatMap((c) => c.members),
        budget,
      ),
    ];
    assert.ok(
      planMakespan(plan, threads) <= planMakespan(greedy, threads),
      `busiest thread ${planMakespan(plan, threads)} vs ${planMakespan(greedy, threads)}`,
    );
    const cut = gradientsOf(plan, true);
    assert.ok(plan.length > 1, "the test cuts the batch");
    assert.ok(Math.abs(cut.loss - plain.loss) < 1e-5 * Math.max(1, Math.abs(plain.loss)));
    for (const key of ["kl", "entropy", "mismatchKl"] as const)
      assert.ok(
        Math.abs(cut.diagnostics[key] - plain.diagnostics[key]) <
          1e-4 * Math.max(1, Math.abs(plain.diagnostics[key])),
        `${key}: ${cut.diagnostics[key]} vs ${plain.diagnostics[key]}`,
      );
    assert.equal(cut.values.size, plain.values.size);
    let nonzero = 0;
    for (const [name, expected] of plain.values) {
      const got = cut.values.get(name)!;
      const scale = Math.max(...expected.map(Math.abs));
      for (let i = 0; i < expected.length; i++) {
        assert.ok(Math.abs(got[i] - expected[i]) <= 1e-4 * scale + 1e-7, `${name}[${i}]`);
        if (expected[i] !== 0) nonzero++;
      }
    }
    assert.ok(nonzero > 1000, `${nonzero} gradient entries differ from 0`);
  }
  policy.dispose();
  reference.dispose();
});
