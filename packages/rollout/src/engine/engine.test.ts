import { test, describe, before } from "node:test";
import assert from "node:assert/strict";
import * as tf from "@tensorflow/tfjs-core";
import { tokenLogProbs, type Policy } from "@agentrl/policy";
import {
  ContextLimitError,
  InferenceEngine,
  createPolicyEngine,
  type GenerationResult,
} from "./index.js";
import { ScriptedModel, ScriptedSequence, testPolicy } from "../testing/fixtures.js";

/** Log-probs the training side gives each of `generated` after `prompt` ([generated.length]). */
function scoredLogprobs(
  policy: Policy,
  prompt: number[],
  generated: number[],
  temperature: number,
): number[] {
  const ids = [...prompt, ...generated];
  const scored = tf.tidy(
    () =>
      tokenLogProbs(policy.model, tf.tensor2d([ids], [1, ids.length], "int32"), { temperature })
        .logProbs,
  );
  const data = Array.from(scored.dataSync());
  scored.dispose();
  return data.slice(prompt.length - 1);
}

function prompts(count: number, vocab: number, seed = 5): number[][] {
  let x = seed;
  const next = () => (x = (x * 1103515245 + 12345) % 2147483648);
  return Array.from({ length: count }, () =>
    Array.from({ length: 3 + (next() % 20) }, () => next() % 400),
  );
}

describe("InferenceEngine (scripted model)", () => {
  // Writes token (last + 1) mod 50, stopping (token 0) after a per-request length encoded in the first prompt token.
  const script = (fed: readonly number[]) =>
    fed.length - 1 >= fed[0] ? 0 : (fed[fed.length - 1] + 1) % 50 || 1;

  test("requests join and leave the shared batch; each gets exactly its own tokens", async () => {
    const model = new ScriptedModel(64, script);
    const engine = new InferenceEngine(model, {
      maxBatchSize: 8,
      temperature: 0,
      stopTokenIds: [0],
    });
    const lengths = [3, 17, 5, 9, 30, 2, 12, 7];
    const results = await Promise.all(
      lengths.map((length) => engine.generate({ promptTokens: [length, 10], maxNewTokens: 100 })),
    );
    results.forEach((result, i) => {
      assert.equal(result.finishReason, "stop");
      assert.equal(result.tokens.length, lengths[i] - 1 + 1, `request ${i}`);
      assert.equal(result.tokens.at(-1), 0);
    });
    // The batch shrank as short requests left: no step waited for the slowest one.
    assert.ok(Math.max(...model.decodeBatchSizes) > 1);
    assert.equal(model.decodeBatchSizes.at(-1), 1);
    assert.ok(model.decodeBatchSizes.length < lengths.reduce((a, b) => a + b, 0) / 2);
  });

  test("back-pressure: never more than maxBatchSize sequences, nor more than maxCacheTokens reserved", async () => {
    const model = new ScriptedModel(64, script);
    const engine = new InferenceEngine(model, {
      maxBatchSize: 3,
      maxCacheTokens: 40,
      temperature: 0,
      stopTokenIds: [0],
    });
    let maxReserved = 0;
    const timer = setInterval(
      () => (maxReserved = Math.max(maxReserved, engine.stats().reservedCacheTokens)),
      0,
    );
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        engine.generate({ promptTokens: [4 + (i % 3), 1], maxNewTokens: 10 }),
      ),
    );
    clearInterval(timer);
    assert.equal(results.length, 10);
    assert.ok(Math.max(...model.decodeBatchSizes) <= 3);
    assert.ok(maxReserved <= 40, `reserved ${maxReserved}`);
  });

  test("a kept cache is reused: the next turn prefills only the new suffix", async () => {
    const model = new ScriptedModel(64, () => 0);
    const engine = new InferenceEngine(model, { temperature: 0, stopTokenIds: [0] });
    const first = await engine.generate({
      promptTokens: [5, 6, 7],
      maxNewTokens: 4,
      cacheKey: "e",
    });
    assert.equal(first.prefilledTokens, 3);
    const second = await engine.generate({
      promptTokens: [5, 6, 7, ...first.tokens, 8, 9],
      maxNewTokens: 4,
      cacheKey: "e",
    });
    assert.equal(second.prefilledTokens, 3); // the last generated token (not yet fed) + the two new ones
    const changed = await engine.generate({
      promptTokens: [1, 2, 3, 4, 5, 6, 7, 8, 9],
      maxNewTokens: 4,
      cacheKey: "e",
    });
    assert.equal(changed.prefilledTokens, 9);
    engine.releaseCache("e");
    assert.equal(engine.stats().keptCaches, 0);
  });

  test("a weight update drops kept caches, unless keepCachesOnUpdate (then the next turn still prefills only its suffix)", async () => {
    for (const keep of [false, true]) {
      const model = new ScriptedModel(64, () => 0);
      const engine = new InferenceEngine(model, {
        temperature: 0,
        stopTokenIds: [0],
        keepCachesOnUpdate: keep,
      });
      const first = await engine.generate({
        promptTokens: [5, 6, 7],
        maxNewTokens: 4,
        cacheKey: "e",
      });
      await engine.updateWeights(1, 1);
      assert.equal(engine.stats().keptCaches, keep ? 1 : 0);
      const second = await engine.generate({
        promptTokens: [5, 6, 7, ...first.tokens, 8, 9],
        maxNewTokens: 4,
        cacheKey: "e",
      });
      assert.equal(second.prefilledTokens, keep ? 3 : 6, `keepCachesOnUpdate ${keep}`);
      assert.deepEqual(second.versions, [1], "the new turn's tokens carry the new version");
    }
  });

  test("prefix cache: the same opening prompt is prefilled once, later ones fork it", async () => {
    const model = new ScriptedModel(64, () => 0);
    const engine = new InferenceEngine(model, {
      temperature: 0,
      stopTokenIds: [0],
      minPrefixTokens: 4,
    });
    const prompt = Array.from({ length: 20 }, (_, i) => i + 1);
    const first = await engine.generate({ promptTokens: prompt, maxNewTokens: 3 });
    assert.equal(first.prefilledTokens, 20);
    const again = await Promise.all([
      engine.generate({ promptTokens: prompt, maxNewTokens: 3 }),
      engine.generate({ promptTokens: [...prompt, 7, 8], maxNewTokens: 3 }),
    ]);
    assert.deepEqual(
      again.map((r) => r.prefilledTokens),
      [1, 3],
    );
    assert.equal(engine.stats().cachedPrefixes, 2, "the opening prompt and the longer one");
    await engine.updateWeights(1, 1);
    assert.equal(
      engine.stats().cachedPrefixes,
      0,
      "prefixes computed with old weights are dropped",
    );
    const short = await engine.generate({ promptTokens: [1, 2, 3], maxNewTokens: 3 });
    assert.equal(short.prefilledTokens, 3);
    assert.equal(
      engine.stats().cachedPrefixes,
      0,
      "prompts shorter than minPrefixTokens are not cached",
    );
  });

  test("prefix cache: a prompt sharing only a beginning with a cached one forks that beginning and prefills the rest", async () => {
    // Each token depends on everything fed before it, so a wrongly forked cache shows in the output.
    const sum = (fed: readonly number[]) => (fed.reduce((a, b) => a + b, 0) % 49) + 1;
    const head = Array.from({ length: 20 }, (_, i) => i + 1);
    const first = [...head, 30, 31];
    const second = [...head, 40, 41, 42];
    const engine = new InferenceEngine(new ScriptedModel(64, sum), {
      temperature: 0,
      stopTokenIds: [0],
      minPrefixTokens: 8,
    });
    assert.equal(
      (await engine.generate({ promptTokens: first, maxNewTokens: 5 })).prefilledTokens,
      22,
    );
    const shared = await engine.generate({ promptTokens: second, maxNewTokens: 5 });
    assert.equal(shared.prefilledTokens, 3, "only the part after the shared 20 tokens");
    assert.equal(engine.stats().reusedCacheTokens, 20);
    const fresh = new InferenceEngine(new ScriptedModel(64, sum), {
      temperature: 0,
      stopTokenIds: [0],
      prefixCacheEntries: 0,
    });
    assert.deepEqual(
      shared.tokens,
      (await fresh.generate({ promptTokens: second, maxNewTokens: 5 })).tokens,
    );
    // Fewer than minPrefixTokens shared: prefilled whole.
    assert.equal(
      (await engine.generate({ promptTokens: [1, 2, 3, 9, 9, 9, 9, 9, 9, 9], maxNewTokens: 2 }))
        .prefilledTokens,
      10,
    );
  });

  test("abort frees the slot and rejects; a prompt that does not fit is a ContextLimitError", async () => {
    const model = new ScriptedModel(64, () => 3);
    const engine = new InferenceEngine(model, {
      temperature: 0,
      stopTokenIds: [0],
      maxSequenceLength: 1_000_000,
    });
    const controller = new AbortController();
    const running = engine.generate({
      promptTokens: [1],
      maxNewTokens: 900_000,
      signal: controller.signal,
    });
    while (engine.stats().generatedTokens < 20)
      await new Promise((resolve) => setImmediate(resolve));
    controller.abort(new Error("turn timed out"));
    await assert.rejects(running, /turn timed out/);
    assert.equal(engine.stats().active, 0);
    const small = new InferenceEngine(model, {
      temperature: 0,
      stopTokenIds: [0],
      maxSequenceLength: 50,
    });
    await assert.rejects(
      small.generate({ promptTokens: new Array(50).fill(1), maxNewTokens: 1 }),
      ContextLimitError,
    );
    const clamped = await small.generate({
      promptTokens: new Array(40).fill(1),
      maxNewTokens: 100,
    });
    assert.equal(clamped.tokens.length, 10);
    assert.equal(clamped.finishReason, "length");
  });
});

/** A scripted model whose prefill busy-waits `msPerToken` per prompt token (a model computing on the event loop); each iteration's prefill is one recorded call. */
class SlowPrefillModel extends ScriptedModel {
  /** Prompt tokens of each prefill call (one per engine iteration: batched or alone). */
  calls: number[] = [];
  constructor(
    next: (fed: readonly number[]) => number,
    private readonly msPerToken: number,
  ) {
    super(64, next);
  }
  private busy(tokens: number): void {
    this.calls.push(tokens);
    const end = performance.now() + tokens * this.msPerToken;
    while (performance.now() < end);
  }
  override prefill(sequence: ScriptedSequence, tokenIds: number[]): Float32Array {
    this.busy(tokenIds.length);
    return super.prefill(sequence, tokenIds);
  }
  prefillBatch(sequences: ScriptedSequence[], tokenLists: number[][]): Float32Array[] {
    this.busy(tokenLists.reduce((sum, tokens) => sum + tokens.length, 0));
    return sequences.map((sequence, i) => super.prefill(sequence, tokenLists[i]));
  }
}

describe("InferenceEngine: prefillStepMs bounds how long prefill holds the event loop", () => {
  const script = (fed: readonly number[]) => (fed[fed.length - 1] + 1) % 50;
  const long = Array.from({ length: 4 }, (_, i) =>
    Array.from({ length: 300 }, (_, j) => (i + j) % 50),
  );
  const run = async (model: SlowPrefillModel, prefillStepMs?: number) => {
    const engine = new InferenceEngine(model, {
      temperature: 0,
      stopTokenIds: [],
      prefixCacheEntries: 0,
      ...(prefillStepMs === undefined ? {} : { prefillStepMs }),
    });
    const results = await Promise.all(
      long.map((promptTokens) => engine.generate({ promptTokens, maxNewTokens: 3 })),
    );
    return results.map((result) => result.tokens);
  };

  test("at 1 ms per token: 512-token calls (512 ms) without it; with 40 ms, 64 tokens first, then at most 40, the same tokens", async () => {
    const plain = new SlowPrefillModel(script, 1);
    const expected = await run(plain);
    assert.equal(plain.calls[0], 512, "the token budget alone: one 512-token call");
    const bounded = new SlowPrefillModel(script, 1);
    assert.deepEqual(await run(bounded, 40), expected);
    assert.ok(Math.max(...bounded.calls) <= 64, `calls of ${bounded.calls.join(", ")} tokens`);
    // After the first call, none takes more than the bound: a budget doubles only below half of it.
    assert.ok(
      bounded.calls.slice(1).every((tokens) => tokens <= 40),
      `calls after the first within 40 ms: ${bounded.calls.join(", ")}`,
    );
    assert.equal(
      bounded.calls.reduce((a, b) => a + b, 0),
      4 * 300,
    );
  });

  test("a fast model's budget grows back to maxPrefillTokensPerStep", async () => {
    const fast = new SlowPrefillModel(script, 0);
    await run(fast, 40);
    assert.equal(fast.calls[0], 64);
    assert.equal(Math.max(...fast.calls), 512, `calls of ${fast.calls.join(", ")} tokens`);
  });
});

describe("InferenceEngine (test-preset policy)", () => {
  let policy: Policy;
  before(async () => {
    policy = await testPolicy({ seed: 3 });
  });

  test("continuous batching gives exactly the tokens of running each request alone (greedy)", async () => {
    const distinct = prompts(9, policy.config.vocabSize);
    const requests = [...distinct, distinct[0], distinct[1], [...distinct[2], 5, 6, 7]]; // repeats: served by forked prefixes
    const maxNew = requests.map((_, i) => 4 + ((i * 7) % 13));
    const alone = [];
    for (const [i, prompt] of requests.entries()) {
      const engine = createPolicyEngine(policy, {
        temperature: 0,
        maxBatchSize: 1,
        stopTokenIds: [],
      });
      alone.push((await engine.generate({ promptTokens: prompt, maxNewTokens: maxNew[i] })).tokens);
    }
    const engine = createPolicyEngine(policy, {
      temperature: 0,
      maxBatchSize: 5,
      maxPrefillsPerStep: 2,
      maxPrefillTokensPerStep: 7,
      stopTokenIds: [],
    });
    const batched = await Promise.all(
      requests.map((prompt, i) =>
        engine.generate({ promptTokens: prompt, maxNewTokens: maxNew[i] }),
      ),
    );
    assert.deepEqual(
      batched.map((r) => r.tokens),
      alone,
    );
    assert.ok(engine.stats().meanBatchSize > 2, `mean batch ${engine.stats().meanBatchSize}`);
    assert.ok(
      engine.stats().reusedCacheTokens > 0,
      "some prompts were forked from the prefix cache",
    );
  });

  test("prompts sharing a beginning: the forked beginning gives the tokens and log-probs of a full prefill", async () => {
    const [head] = prompts(1, policy.config.vocabSize, 17);
    const beginning = [...head, ...head, 3, 1, 4, 1, 5, 9, 2, 6].slice(0, 24);
    const requests = [
      [...beginning, 5, 6],
      [...beginning, 7, 8, 9],
      [...beginning, 11],
      [...beginning.slice(0, 20), 12, 13],
    ];
    const fresh = createPolicyEngine(policy, {
      temperature: 0,
      stopTokenIds: [],
      prefixCacheEntries: 0,
    });
    const alone: GenerationResult[] = [];
    for (const prompt of requests)
      alone.push(await fresh.generate({ promptTokens: prompt, maxNewTokens: 6 }));
    const engine = createPolicyEngine(policy, { temperature: 0, stopTokenIds: [] });
    const shared: GenerationResult[] = [];
    for (const prompt of requests)
      shared.push(await engine.generate({ promptTokens: prompt, maxNewTokens: 6 }));
    assert.deepEqual(
      shared.map((r) => r.tokens),
      alone.map((r) => r.tokens),
    );
    shared.forEach((r, i) =>
      r.logprobs.forEach((logprob, j) =>
        assert.ok(Math.abs(logprob - alone[i].logprobs[j]) < 1e-4, `request ${i} token ${j}`),
      ),
    );
    assert.deepEqual(
      shared.map((r) => r.prefilledTokens),
      [26, 3, 1, 2],
    );
  });

  test("the recorded log-prob equals the training-side score within 1e-4 (temperature 0.8)", async () => {
    const engine = createPolicyEngine(policy, { temperature: 0.8, seed: 11, stopTokenIds: [] });
    const requests = prompts(6, policy.config.vocabSize, 9);
    const results = await Promise.all(
      requests.map((prompt) => engine.generate({ promptTokens: prompt, maxNewTokens: 12 })),
    );
    let worst = 0;
    results.forEach((result, i) => {
      const scored = scoredLogprobs(policy, requests[i], result.tokens, 0.8);
      result.logprobs.forEach(
        (logprob, t) => (worst = Math.max(worst, Math.abs(logprob - scored[t]))),
      );
    });
    assert.ok(worst < 1e-4, `largest difference ${worst}`);
  });

  test("a weight update during a request's chunked prefill: it prefills again on the new weights, so its log-probs are the new policy's", async () => {
    const other = await testPolicy({ seed: 99 });
    const sampler = policy.fromSnapshot(policy.snapshot());
    const engine = createPolicyEngine(sampler, {
      temperature: 0.8,
      seed: 4,
      maxPrefillTokensPerStep: 8,
      stopTokenIds: [],
    });
    const prompt = Array.from({ length: 40 }, (_, i) => (i * 13 + 7) % policy.config.vocabSize);
    const generation = engine.generate({ promptTokens: prompt, maxNewTokens: 6 });
    while (engine.stats().prefilledTokens < 8) await new Promise((r) => setImmediate(r));
    const update = other.snapshot();
    await engine.updateWeights(update, 1);
    update.dispose();
    assert.equal(engine.stats().generatedTokens, 0, "the update landed before the first token");
    const result = await generation;
    assert.deepEqual(result.versions, new Array(6).fill(1));
    const scored = scoredLogprobs(other, prompt, result.tokens, 0.8);
    const worst = Math.max(...result.logprobs.map((logprob, t) => Math.abs(logprob - scored[t])));
    assert.ok(worst < 1e-4, `largest difference from the new policy's scores: ${worst}`);
    sampler.dispose();
    other.dispose();
  });

  for (const mode of ["drain", "continue"] as const) {
    test(`a weight update mid-generation corrupts nothing (${mode})`, async () => {
      const other = await testPolicy({ seed: 99 });
      const sampler = policy.fromSnapshot(policy.snapshot());
      const engine = createPolicyEngine(sampler, {
        temperature: 0,
        updateMode: mode,
        stopTokenIds: [],
      });
      const requests = prompts(6, policy.config.vocabSize, 21);
      const inFlight = requests.map((prompt) =>
        engine.generate({ promptTokens: prompt, maxNewTokens: 24 }),
      );
      // Update once every request is decoding (each has sampled a token), i.e. mid-generation.
      while (engine.stats().generatedTokens < 12) await new Promise((r) => setImmediate(r));
      const update = other.snapshot();
      const updated = engine.updateWeights(update, 1);
      const after = engine.generate({ promptTokens: requests[0], maxNewTokens: 10 });
      const results = await Promise.all(inFlight);
      await updated;
      const late = await after;
      update.dispose();
      const oldAlone = (prompt: number[], n: number) =>
        policy.generate([prompt], { temperature: 0, maxNewTokens: n, stopTokenIds: [] })[0].tokens;
      const newAlone = (prompt: number[], n: number) =>
        other.generate([prompt], { temperature: 0, maxNewTokens: n, stopTokenIds: [] })[0].tokens;
      for (const [i, result] of results.entries()) {
        assert.equal(result.tokens.length, 24);
        assert.deepEqual([...result.versions].sort(), result.versions, "versions never go back");
        const oldCount = result.versions.filter((v) => v === 0).length;
        // Tokens made before the swap are exactly the old policy's.
        assert.deepEqual(result.tokens.slice(0, oldCount), oldAlone(requests[i], oldCount));
        if (mode === "drain") {
          // In-flight requests finish on the old weights; requests still queued at the swap run wholly on the new ones.
          assert.ok(
            oldCount === 24 || oldCount === 0,
            `drain mixed versions: ${oldCount} old tokens`,
          );
          if (oldCount === 0) assert.deepEqual(result.tokens, newAlone(requests[i], 24));
        }
      }
      if (mode === "drain")
        assert.ok(
          results.some((r) => r.versions[23] === 0),
          "drain: some request finished on the old weights",
        );
      if (mode === "continue")
        assert.ok(
          results.some((r) => r.versions.includes(1)),
          "continue: some tokens on the new weights",
        );
      // A request that arrived with the update runs wholly on the new weights.
      assert.deepEqual(late.versions, new Array(10).fill(1));
      assert.deepEqual(late.tokens, newAlone(requests[0], 10));
      assert.equal(engine.version, 1);
      sampler.dispose();
      other.dispose();
    });
  }
});
