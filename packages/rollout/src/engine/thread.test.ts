import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { MODEL_SHAPES, presetConfig, type ExportedWeights, type Policy } from "@agentrl/policy";
import {
  ContextLimitError,
  EnginePool,
  affordableDecodeThreads,
  ThreadEngine,
  createPolicyEngine,
  createPolicyEnginePool,
  type GenerationEngine,
  type GenerationResult,
} from "./index.js";
import { testPolicy } from "../testing/fixtures.js";

const PROMPTS = [
  [5, 9, 13, 2],
  [7, 7, 7, 7, 7, 7, 1],
  [300, 4, 22],
  [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
];

/** Same tokens, log-probs within float noise (random test weights often repeat one token, so log-probs tell weights apart). */
function assertSameDecoding(got: GenerationResult[], expected: GenerationResult[]): void {
  assert.deepEqual(
    got.map((r) => r.tokens),
    expected.map((r) => r.tokens),
  );
  got.forEach((r, i) =>
    r.logprobs.forEach((logprob, j) =>
      assert.ok(
        Math.abs(logprob - expected[i].logprobs[j]) < 1e-4,
        `request ${i} token ${j}: ${logprob} vs ${expected[i].logprobs[j]}`,
      ),
    ),
  );
}

function largestLogprobGap(a: GenerationResult[], b: GenerationResult[]): number {
  return Math.max(
    ...a.flatMap((r, i) => r.logprobs.map((logprob, j) => Math.abs(logprob - b[i].logprobs[j]))),
  );
}

async function greedy(engine: GenerationEngine, prompts: number[][]) {
  return Promise.all(
    prompts.map((promptTokens) => engine.generate({ promptTokens, maxNewTokens: 6 })),
  );
}

describe("ThreadEngine and EnginePool (test policy)", () => {
  let policy: Policy;
  let other: Policy;
  before(async () => {
    policy = await testPolicy({ seed: 3 });
    other = await testPolicy({ seed: 99 });
  });
  after(() => {
    policy.dispose();
    other.dispose();
  });

  test("a thread engine decodes what the in-process engine decodes, and follows weight updates (snapshot and exported)", async () => {
    const local = createPolicyEngine(policy, { temperature: 0, stopTokenIds: [] });
    const thread = await ThreadEngine.start(policy, { temperature: 0, stopTokenIds: [] });
    try {
      const expected = await greedy(local, PROMPTS);
      const got = await greedy(thread, PROMPTS);
      assertSameDecoding(got, expected);
      assert.equal(thread.stats().completedRequests, PROMPTS.length);

      // New weights (another policy's), as a snapshot: the thread now decodes what that policy decodes.
      const reference = await greedy(
        createPolicyEngine(other, { temperature: 0, stopTokenIds: [] }),
        PROMPTS,
      );
      assert.ok(
        largestLogprobGap(reference, expected) > 1e-2,
        "the two test policies decode alike",
      );
      const snapshot = other.snapshot();
      await thread.updateWeights(snapshot, 7);
      snapshot.dispose();
      assert.equal(thread.version, 7);
      const afterSnapshot = await greedy(thread, PROMPTS);
      assertSameDecoding(afterSnapshot, reference);
      assert.deepEqual(
        afterSnapshot[0].versions,
        afterSnapshot[0].tokens.map(() => 7),
      );

      // Back to the first policy's weights, exported (HF layout).
      await thread.updateWeights(policy.exportWeights(), 8);
      assertSameDecoding(await greedy(thread, PROMPTS), expected);
      local.close();
    } finally {
      thread.close();
    }
  });

  test("a thread engine keeps the engine's errors and honours aborts", async () => {
    const thread = await ThreadEngine.start(policy, {
      temperature: 0,
      stopTokenIds: [],
      maxSequenceLength: 16,
    });
    try {
      await assert.rejects(
        thread.generate({ promptTokens: Array.from({ length: 20 }, () => 1), maxNewTokens: 2 }),
        ContextLimitError,
      );
      const controller = new AbortController();
      const pending = thread.generate({
        promptTokens: [1, 2, 3],
        maxNewTokens: 10,
        signal: controller.signal,
      });
      controller.abort(new Error("stop"));
      await assert.rejects(pending, /stop/);
      // still serving after the abort
      assert.equal(
        (await thread.generate({ promptTokens: [1, 2, 3], maxNewTokens: 3 })).tokens.length,
        3,
      );
    } finally {
      thread.close();
    }
    await assert.rejects(thread.generate({ promptTokens: [1], maxNewTokens: 1 }), /closed/);
  });

  test("the pool spreads requests over its engines, keeps an episode on one engine, and decodes as one engine does", async () => {
    const engine = await createPolicyEnginePool(policy, { temperature: 0, stopTokenIds: [] }, 1);
    assert.ok(engine instanceof EnginePool);
    try {
      const expected = await greedy(
        createPolicyEngine(policy, { temperature: 0, stopTokenIds: [] }),
        PROMPTS,
      );
      const many = [...PROMPTS, ...PROMPTS];
      const got = await greedy(engine, many);
      assertSameDecoding(got, [...expected, ...expected]);
      const [local, thread] = (engine as EnginePool).engines.map(
        (member) => member.stats().completedRequests,
      );
      assert.ok(local > 0 && thread > 0, `requests per engine: ${local}, ${thread}`);
      assert.equal(engine.stats().completedRequests, many.length);

      // Two turns of one episode: the second reuses the first's kept cache (same engine).
      const first = await engine.generate({
        promptTokens: PROMPTS[3],
        maxNewTokens: 4,
        cacheKey: "episode",
      });
      const second = await engine.generate({
        promptTokens: [...PROMPTS[3], ...first.tokens, 9, 9],
        maxNewTokens: 4,
        cacheKey: "episode",
      });
      assert.equal(second.prefilledTokens, 3); // the last generated token (sampled, never fed) and the two new ones
      engine.releaseCache("episode");

      const snapshot = other.snapshot();
      await engine.updateWeights(snapshot, 3);
      snapshot.dispose();
      assert.equal(engine.version, 3);
      const reference = await greedy(
        createPolicyEngine(other, { temperature: 0, stopTokenIds: [] }),
        PROMPTS,
      );
      assertSameDecoding(await greedy(engine, many), [...reference, ...reference]);
    } finally {
      engine.close();
    }
  });

  test("LoRA: a thread decodes with the adapters (base sent once at start) and follows adapter-only updates", async () => {
    const lora = await testPolicy({ seed: 3 });
    lora.enableLora({ rank: 4, seed: 1 });
    /** The adapters with B set from `seed` (B starts at zero: adapters that change nothing). */
    const adapters = (seed: number, version: number): ExportedWeights => {
      const exported = lora.exportWeights();
      let state = seed;
      const next = () =>
        ((state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32 - 0.5) * 0.5;
      return {
        version,
        tensors: [],
        lora: {
          options: exported.lora!.options,
          adapters: exported.lora!.adapters.map((w) => ({
            ...w,
            data: Float32Array.from(w.data, (value) =>
              w.name.includes("lora_B") ? next() : value,
            ),
          })),
        },
      };
    };
    lora.importWeights(adapters(11, 1));
    const base = createPolicyEngine(policy, { temperature: 0, stopTokenIds: [] });
    const local = createPolicyEngine(lora, { temperature: 0, stopTokenIds: [] });
    const thread = await ThreadEngine.start(lora, { temperature: 0, stopTokenIds: [] });
    try {
      const expected = await greedy(local, PROMPTS);
      assert.ok(
        largestLogprobGap(expected, await greedy(base, PROMPTS)) > 1e-2,
        "the adapters change nothing",
      );
      assertSameDecoding(await greedy(thread, PROMPTS), expected);

      // An update of the adapters alone (what a LoRA learner exports): no base weights sent.
      const update = adapters(29, 2);
      assert.equal(update.tensors.length, 0);
      lora.importWeights(update);
      await thread.updateWeights(update, 2);
      const after = await greedy(local, PROMPTS);
      assert.ok(largestLogprobGap(after, expected) > 1e-2, "the update changes nothing");
      const fromThread = await greedy(thread, PROMPTS);
      assertSameDecoding(fromThread, after);
      assert.deepEqual(
        fromThread[0].versions,
        fromThread[0].tokens.map(() => 2),
      );
    } finally {
      thread.close();
      local.close();
      base.close();
      lora.dispose();
    }
  });
});

test("decode threads a model may have: copies of its weights within a quarter of the memory", () => {
  const gib = 1024 ** 3;
  // the test model: every requested thread
  assert.equal(affordableDecodeThreads(presetConfig("test", { vocabSize: 512 }), 3, 24 * gib), 3);
  // Qwen2.5-0.5B, 494M parameters (1.84 GiB a copy): 2 threads on 24 GiB (3 copies ≤ 6 GiB), none on 12 GiB
  const qwen = MODEL_SHAPES["qwen2.5-0.5b"].config;
  assert.equal(affordableDecodeThreads(qwen, 3, 24 * gib), 2);
  assert.equal(affordableDecodeThreads(qwen, 1, 12 * gib), 0);
});
