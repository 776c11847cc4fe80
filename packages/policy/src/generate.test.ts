import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { sampleToken } from "./generate.js";
import { Rng } from "./rng.js";

const logits = Float32Array.from([2, 1, 0.5, 0, -1, -3]);
const softmax = (values: number[]) => {
  const max = Math.max(...values);
  const exps = values.map((v) => Math.exp(v - max));
  const total = exps.reduce((a, b) => a + b, 0);
  return exps.map((e) => e / total);
};
function frequencies(options: Parameters<typeof sampleToken>[1], draws = 20000): number[] {
  const rng = new Rng(7);
  const counts = new Array(logits.length).fill(0);
  for (let i = 0; i < draws; i++) counts[sampleToken(logits, options, rng).token]++;
  return counts.map((c) => c / draws);
}

describe("sampleToken", () => {
  test("greedy picks the argmax and records log softmax(logits)", () => {
    const { token, logProb } = sampleToken(logits, { temperature: 0 }, new Rng(1));
    assert.equal(token, 0);
    assert.ok(Math.abs(logProb - Math.log(softmax([...logits])[0])) < 1e-9);
  });

  test("temperature sampling follows softmax(logits / T)", () => {
    const expected = softmax([...logits].map((x) => x / 0.7));
    frequencies({ temperature: 0.7 }).forEach((f, i) =>
      assert.ok(Math.abs(f - expected[i]) < 0.015, `token ${i}: ${f} vs ${expected[i]}`),
    );
  });

  test("top-k and top-p truncate but the recorded log-prob is the untruncated one", () => {
    const topK = frequencies({ temperature: 1, topK: 2 });
    assert.equal(
      topK.slice(2).reduce((a, b) => a + b, 0),
      0,
    );
    const p = softmax([...logits]);
    assert.ok(Math.abs(topK[0] - p[0] / (p[0] + p[1])) < 0.015);
    // top-p 0.8: the smallest prefix reaching 0.8 mass is tokens {0, 1, 2} (0.52 + 0.19 + 0.12 = 0.83)
    const topP = frequencies({ temperature: 1, topP: 0.8 });
    assert.equal(
      topP.slice(3).reduce((a, b) => a + b, 0),
      0,
    );
    assert.ok(topP[2] > 0.05);
    const { token, logProb } = sampleToken(logits, { temperature: 1, topK: 1 }, new Rng(3));
    assert.equal(token, 0);
    assert.ok(Math.abs(logProb - Math.log(p[0])) < 1e-9);
  });
});

describe("Rng", () => {
  test("is seeded, and its state can be saved and restored", () => {
    const a = new Rng(42);
    const b = new Rng(42);
    assert.deepEqual([a.next(), a.next()], [b.next(), b.next()]);
    assert.notEqual(new Rng(1).next(), new Rng(2).next());
    const state = a.getState();
    const continued = [a.next(), a.nextInt(100), a.next()];
    const restored = Rng.fromState(state);
    assert.deepEqual([restored.next(), restored.nextInt(100), restored.next()], continued);
    const values = Array.from({ length: 10000 }, () => a.next());
    assert.ok(values.every((v) => v >= 0 && v < 1));
    const mean = values.reduce((s, v) => s + v, 0) / values.length;
    assert.ok(Math.abs(mean - 0.5) < 0.02, `mean ${mean}`);
  });
});
