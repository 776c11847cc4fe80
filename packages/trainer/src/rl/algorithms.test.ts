import { describe, test } from "node:test";
import assert from "node:assert/strict";
import * as tf from "@tensorflow/tfjs-core";

import { setBackend } from "@agentrl/policy";
import {
  AlgorithmError,
  grpoAdvantage,
  grpoMeanOnlyAdvantage,
  shuffledGrpoAdvantage,
  getAdvantageEstimator,
  normalizeAdvantagesByTask,
  ppoClipTokenLoss,
  klK3,
  reduceLoss,
  policyObjective,
  DEFAULT_POLICY_OBJECTIVE,
  DEFAULT_POLICY_LOSS,
  getPolicyLoss,
  importanceRatioKept,
  mismatchStatistics,
  type PolicyLossOptions,
} from "./algorithms.js";

await setBackend("cpu", { log: null });

function close(actual: number[], expected: number[], tolerance = 1e-5): void {
  assert.equal(actual.length, expected.length);
  actual.forEach((a, i) =>
    assert.ok(Math.abs(a - expected[i]) <= tolerance, `index ${i}: ${a} vs ${expected[i]}`),
  );
}

describe("GRPO advantages (hand-computed)", () => {
  const table: { name: string; rewards: number[]; grpo: number[]; meanOnly: number[] }[] = [
    {
      name: "two wins two losses",
      rewards: [1, 0, 0, 1],
      grpo: [0.866025, -0.866025, -0.866025, 0.866025],
      meanOnly: [0.5, -0.5, -0.5, 0.5],
    },
    {
      name: "with the incomplete penalty",
      rewards: [1, -0.2, 0],
      grpo: [1.140646, -0.72587, -0.414783],
      meanOnly: [0.733333, -0.466667, -0.266667],
    },
    { name: "all rewards equal", rewards: [1, 1, 1], grpo: [0, 0, 0], meanOnly: [0, 0, 0] },
    { name: "a group of one", rewards: [1], grpo: [0], meanOnly: [0] },
  ];
  for (const row of table) {
    test(row.name, () => {
      close(grpoAdvantage(row.rewards), row.grpo);
      close(grpoMeanOnlyAdvantage(row.rewards), row.meanOnly);
    });
  }
  test("registry", () => {
    assert.equal(getAdvantageEstimator("grpo"), grpoAdvantage);
    assert.throws(() => getAdvantageEstimator("nope"), /unknown advantage estimator "nope"/);
    assert.throws(() => getAdvantageEstimator("nope"), AlgorithmError);
  });
  test("grpo_shuffled permutes GRPO's advantages within the group, seeded", () => {
    const rewards = [1, 0, 0, 0, 0, 0, 0, 0];
    const sorted = (values: number[]) => [...values].sort((a, b) => a - b);
    const shuffled = shuffledGrpoAdvantage(7);
    const winnerAt = new Set<number>();
    const draws: number[][] = [];
    for (let call = 0; call < 40; call++) {
      const advantages = shuffled(rewards);
      close(sorted(advantages), sorted(grpoAdvantage(rewards)));
      winnerAt.add(advantages.indexOf(Math.max(...advantages)));
      draws.push(advantages);
    }
    // The success's advantage lands on other episodes: the signal is gone, its size kept.
    assert.ok(winnerAt.size >= 6, `the positive advantage visited ${winnerAt.size} of 8 places`);
    const again = shuffledGrpoAdvantage(7);
    for (const draw of draws) assert.deepEqual(again(rewards), draw);
    assert.notDeepEqual(shuffledGrpoAdvantage(8)(rewards), draws[0]);
    close(shuffledGrpoAdvantage(1)([1, 1, 1]), [0, 0, 0]);
    assert.ok(getAdvantageEstimator("grpo_shuffled")([1, 0]).some((a) => a !== 0));
  });
});

describe("task advantage normalization", () => {
  test("hand-computed, token-weighted", () => {
    const out = normalizeAdvantagesByTask([
      { task: "a", advantage: 1, generatedTokens: 1 },
      { task: "a", advantage: -1, generatedTokens: 3 },
      { task: "b", advantage: 0.7, generatedTokens: 5 },
    ]);
    close(out, [1.732051, -0.57735, 0]);
  });
  test("zero mean and unit std per task over generated tokens", () => {
    const episodes = Array.from({ length: 40 }, (_, i) => ({
      task: ["os", "db", "kg"][i % 3],
      advantage: Math.sin(i * 1.7) * (1 + (i % 3)) + (i % 3),
      generatedTokens: 1 + ((i * 7) % 11),
    }));
    const out = normalizeAdvantagesByTask(episodes);
    for (const task of ["os", "db", "kg"]) {
      const tokens: number[] = [];
      episodes.forEach((e, i) => {
        if (e.task === task) for (let k = 0; k < e.generatedTokens; k++) tokens.push(out[i]);
      });
      const m = tokens.reduce((a, b) => a + b, 0) / tokens.length;
      const s = Math.sqrt(tokens.reduce((a, b) => a + (b - m) ** 2, 0) / tokens.length);
      assert.ok(Math.abs(m) < 1e-9, `${task} mean ${m}`);
      assert.ok(Math.abs(s - 1) < 1e-5, `${task} std ${s}`);
    }
  });
});

describe("PPO-clip with dual clip (hand-computed)", () => {
  // advantage, ratio, expected loss, clip active
  const rows: [number, number, number, number][] = [
    [1, 1.5, -1.2, 1], // upper clip binds
    [1, 0.5, -0.5, 0], // ratio below 1 − ε with A > 0: unclipped term is larger
    [-1, 0.5, 0.8, 1], // lower clip binds for A < 0
    [-1, 5, 3, 1], // dual clip: bounded at −c·A = 3
    [-2, 1, 2, 0], // ratio 1: plain −A
    [0.5, 1.1, -0.55, 0], // inside the trust region
  ];
  test("per-token loss and clip indicator", () => {
    const advantages = tf.tensor2d([rows.map((r) => r[0])]);
    const oldLogProbs = tf.zeros([1, rows.length]) as tf.Tensor2D;
    const logProbs = tf.tensor2d([rows.map((r) => Math.log(r[1]))]);
    const mask = tf.onesLike(advantages) as tf.Tensor2D;
    const { loss, clipped } = ppoClipTokenLoss({ logProbs, oldLogProbs, advantages, mask });
    close(
      Array.from(loss.dataSync()),
      rows.map((r) => r[2]),
    );
    close(
      Array.from(clipped.dataSync()),
      rows.map((r) => r[3]),
    );
    tf.dispose([advantages, oldLogProbs, logProbs, mask, loss, clipped]);
  });
});

describe("KL k3 and reductions", () => {
  test("k3 values and clamp", () => {
    const logProbs = tf.tensor2d([[0, 0, 0, -30]]);
    const ref = tf.tensor2d([[0.5, -1, 0, -10]]);
    close(Array.from(klK3(logProbs, ref).dataSync()), [0.148721, 0.367879, 0, 10]);
  });
  test("token-mean and sequence-mean", () => {
    const loss = tf.tensor2d([
      [1, 2, 3],
      [4, 0, 0],
    ]);
    const mask = tf.tensor2d([
      [1, 1, 1],
      [1, 0, 0],
    ]);
    close(
      [reduceLoss(loss, mask, "token-mean", { tokenCount: 4, sequenceCount: 2 }).dataSync()[0]],
      [10 / 4],
    );
    close(
      [reduceLoss(loss, mask, "sequence-mean", { tokenCount: 4, sequenceCount: 2 }).dataSync()[0]],
      [(2 + 4) / 2],
    );
  });
  test("objective gradient pushes positive-advantage tokens up and negative ones down", () => {
    const old = tf.tensor2d([[-1, -1, -1]]);
    const advantages = tf.tensor2d([[1, -1, 0.5]]);
    const mask = tf.tensor2d([[1, 1, 0]]);
    const grad = tf.grad(
      (logProbs: tf.Tensor) =>
        policyObjective(
          { logProbs: logProbs as tf.Tensor2D, oldLogProbs: old, advantages, mask },
          { ...DEFAULT_POLICY_OBJECTIVE, klCoefficient: 0 },
          { tokenCount: 2, sequenceCount: 1 },
        ).loss,
    )(tf.tensor2d([[-1, -1, -1]]));
    const g = Array.from(grad.dataSync());
    assert.ok(g[0] < 0, "descending the loss raises the log-prob of a positive-advantage token");
    assert.ok(g[1] > 0, "and lowers it for a negative-advantage token");
    assert.equal(Math.abs(g[2]), 0, "masked tokens get no gradient");
  });
  test("no tensors leak", () => {
    const before = tf.memory().numTensors;
    const x = tf.tensor2d([[0.1, -0.2]]);
    const a = tf.tensor2d([[1, -1]]);
    const m = tf.tensor2d([[1, 1]]);
    for (let i = 0; i < 20; i++) {
      const out = policyObjective(
        { logProbs: x, oldLogProbs: x, advantages: a, mask: m, referenceLogProbs: x },
        DEFAULT_POLICY_OBJECTIVE,
        { tokenCount: 2, sequenceCount: 1 },
      );
      tf.dispose(out);
    }
    tf.dispose([x, a, m]);
    assert.equal(tf.memory().numTensors, before);
  });
});

/**
 * The importance-corrected losses, from hand-computed tables. Each row: ρ = π_trainer/π_sampler
 * (set as logp − logp_sampler = ln ρ), the advantage A, the expected per-token loss and its
 * expected gradient d loss / d logp. At the first epoch the PPO ratio against the proximal
 * policy is 1 in value, so the loss is −w·A and its gradient −w·A, with w the loss's weight.
 */
function lossAndGradient(
  name: string,
  rhos: number[][],
  advantages: number[][],
  mask: number[][],
  options: Partial<PolicyLossOptions> = {},
) {
  const oldLogProbs = tf.zeros([rhos.length, rhos[0].length]) as tf.Tensor2D;
  const a = tf.tensor2d(advantages);
  const m = tf.tensor2d(mask);
  const loss = getPolicyLoss(name);
  const logProbs = tf.tensor2d(rhos.map((row) => row.map(Math.log)));
  const settings = { ...DEFAULT_POLICY_LOSS, ...options };
  const out = loss({ logProbs, oldLogProbs, advantages: a, mask: m }, settings);
  const gradient = tf.grad((x: tf.Tensor) =>
    tf.sum(
      loss({ logProbs: x as tf.Tensor2D, oldLogProbs, advantages: a, mask: m }, settings).loss,
    ),
  )(logProbs);
  const result = {
    loss: Array.from(out.loss.dataSync()),
    clipped: Array.from(out.clipped.dataSync()),
    gradient: Array.from(gradient.dataSync()),
  };
  tf.dispose([oldLogProbs, a, m, logProbs, out.loss, out.clipped, gradient]);
  return result;
}

describe("truncated importance sampling and icepop (hand-computed)", () => {
  test("tis_token: w = min(ρ, C) per token, loss −w·A, gradient −w·A", () => {
    // ρ, A, loss, gradient   (C = 2)
    const rows: [number, number, number, number][] = [
      [0.5, 1, -0.5, -0.5], // the sampler over-drew the token: it counts half
      [1.5, -1, 1.5, 1.5],
      [4, 1, -2, -2], // truncated at C = 2
      [1, 2, -2, -2], // on-policy: plain −A
    ];
    const out = lossAndGradient(
      "tis_token",
      [rows.map((r) => r[0])],
      [rows.map((r) => r[1])],
      [rows.map(() => 1)],
    );
    close(
      out.loss,
      rows.map((r) => r[2]),
    );
    close(
      out.gradient,
      rows.map((r) => r[3]),
    );
    close(out.clipped, [0, 0, 0, 0]);
  });

  test("tis_sequence: w = min(Π_t ρ_t over the masked tokens, C) per sequence", () => {
    // sequence 1: ρ = 0.5, 1.5 → w = 0.75; sequence 2: ρ = 2 (masked: 3) → w = min(2, 1.5) = 1.5
    const out = lossAndGradient(
      "tis_sequence",
      [
        [0.5, 1.5],
        [2, 3],
      ],
      [
        [1, 1],
        [-1, -1],
      ],
      [
        [1, 1],
        [1, 0],
      ],
      { importanceCap: 1.5 },
    );
    close(out.loss, [-0.75, -0.75, 1.5, 1.5]);
    close(out.gradient, [-0.75, -0.75, 1.5, 1.5]);
  });

  test("icepop: M(ρ) = ρ inside [low, high], 0 outside (the token is rejected)", () => {
    // ρ, loss, gradient, rejected   (A = 1, bounds [0.5, 2])
    const rows: [number, number, number, number][] = [
      [0.4, 0, 0, 1],
      [0.5, -0.5, -0.5, 0],
      [1.2, -1.2, -1.2, 0],
      [2, -2, -2, 0],
      [2.5, 0, 0, 1],
    ];
    const out = lossAndGradient(
      "icepop",
      [rows.map((r) => r[0])],
      [rows.map(() => 1)],
      [rows.map(() => 1)],
    );
    close(
      out.loss,
      rows.map((r) => r[1]),
    );
    close(
      out.gradient,
      rows.map((r) => r[2]),
    );
    close(
      out.clipped,
      rows.map((r) => r[3]),
    );
  });

  test("the masking rule keeps low ≤ ρ ≤ high, bounds included", () => {
    const ratios = [0, 0.49, 0.5, 1, 3, 3.01, 100];
    const kept = importanceRatioKept(tf.tensor2d([ratios]), {
      importanceRatioLow: 0.5,
      importanceRatioHigh: 3,
    });
    assert.deepEqual(Array.from(kept.dataSync()), [0, 0, 1, 1, 1, 0, 0]);
    kept.dispose();
  });

  test("a later epoch's proximal policy: PPO-clip acts on exp(logp − logp_prox), w on exp(logp_prox − logp_sampler)", () => {
    // logp = ln 1.5, prox = 0, sampler = ln 0.5: ρ = 2 → w = 2; ratio 1.5 clipped at 1.2 (A = 1) → −1.2 · 2
    const logProbs = tf.tensor2d([[Math.log(1.5)]]);
    const proximalLogProbs = tf.tensor2d([[0]]);
    const oldLogProbs = tf.tensor2d([[Math.log(0.5)]]);
    const advantages = tf.tensor2d([[1]]);
    const mask = tf.tensor2d([[1]]);
    const out = getPolicyLoss("tis_token")(
      { logProbs, oldLogProbs, proximalLogProbs, advantages, mask },
      DEFAULT_POLICY_LOSS,
    );
    close(Array.from(out.loss.dataSync()), [-2.4]);
    close(Array.from(out.clipped.dataSync()), [1]);
    tf.dispose([logProbs, proximalLogProbs, oldLogProbs, advantages, mask, out.loss, out.clipped]);
  });

  test("the objective takes the loss by name and names the registered ones when it does not know it", () => {
    const x = tf.tensor2d([[Math.log(4), 0]]);
    const zero = tf.zeros([1, 2]) as tf.Tensor2D;
    const a = tf.tensor2d([[1, 1]]);
    const m = tf.tensor2d([[1, 1]]);
    const options = { ...DEFAULT_POLICY_OBJECTIVE, klCoefficient: 0 };
    const counts = { tokenCount: 2, sequenceCount: 1 };
    // ppo_clip: ratio 4 clipped at 1.2 → (−1.2 − 1)/2; tis_token: w = 2 → (−2 − 1)/2
    close(
      [
        policyObjective(
          { logProbs: x, oldLogProbs: zero, advantages: a, mask: m },
          options,
          counts,
        ).loss.dataSync()[0],
      ],
      [-1.1],
    );
    close(
      [
        policyObjective(
          { logProbs: x, oldLogProbs: zero, advantages: a, mask: m },
          { ...options, policyLoss: "tis_token" },
          counts,
        ).loss.dataSync()[0],
      ],
      [-1.5],
    );
    assert.throws(
      () =>
        policyObjective(
          { logProbs: x, oldLogProbs: zero, advantages: a, mask: m },
          { ...options, policyLoss: "nope" },
          counts,
        ),
      /unknown policy loss "nope"; known: ppo_clip, tis_token, tis_sequence, icepop/,
    );
    tf.dispose([x, zero, a, m]);
  });

  test("mismatch statistics: k3 KL, ratio mean/min/max and shares out of bounds over the masked tokens", () => {
    // ρ = 2, 0.5, 1 and a masked 10: k3 = ρ − 1 − ln ρ = 0.306853, 0.193147, 0
    const logProbs = tf.tensor2d([[Math.log(2), Math.log(0.5), 0, Math.log(10)]]);
    const sampler = tf.zeros([1, 4]) as tf.Tensor2D;
    const mask = tf.tensor2d([[1, 1, 1, 0]]);
    const out = mismatchStatistics(logProbs, sampler, mask, {
      importanceRatioLow: 0.6,
      importanceRatioHigh: 1.5,
    });
    close(
      [out.kl, out.ratioMean, out.ratioMin, out.ratioMax, out.shareBelow, out.shareAbove].map(
        (t) => t.dataSync()[0],
      ),
      [0.5 / 3, 3.5 / 3, 0.5, 2, 1 / 3, 1 / 3],
    );
    tf.dispose([logProbs, sampler, mask, ...Object.values(out)]);
  });
});
