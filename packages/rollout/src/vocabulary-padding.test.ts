/**
 * A model whose config vocabulary is padded past its tokenizer's (as Qwen2.5's: 151,936 rows,
 * 151,665 ids) never samples a padded id, at temperature 1 and many samples, on every path
 * that samples: the in-process engine (rollout), `agentrl serve` through HTTP (the same
 * engine behind the chat server) and the engine threads of an engine pool (evaluation).
 * Without the limit the same engine thread does sample padded ids, so the test can fail.
 * (Policy.generate and training's log-probs: packages/policy/src/memory.test.ts.)
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Policy, initBackend, presetConfig } from "@agentrl/policy";
import { ThreadEngine, createPolicyEngine, type GenerationEngine } from "./engine/index.js";
import { engineThreadData } from "./engine/thread.js";
import { startModelServer } from "./serve/index.js";
import { testTokenizer } from "./testing/fixtures.js";

/** 40 requests of 50 tokens at temperature 1 (stop tokens off): every sampled id. */
async function sampledIds(engine: GenerationEngine): Promise<number[]> {
  const results = await Promise.all(
    Array.from({ length: 40 }, (_, i) =>
      engine.generate({
        promptTokens: [5 + i, (i * 7) % 250, 11],
        maxNewTokens: 50,
        temperature: 1,
      }),
    ),
  );
  return results.flatMap((result) => result.tokens);
}

describe("vocabulary padding: padded ids are never sampled", () => {
  const tokenizer = testTokenizer(384);
  const usable = tokenizer.vocabSize;
  let policy: Policy;
  let directory: string;
  before(async () => {
    await initBackend({ log: null });
    // 128 padded rows: with random weights they hold about a quarter of the probability
    policy = Policy.create(presetConfig("test", { vocabSize: usable + 128 }), {
      tokenizer,
      seed: 3,
    });
    directory = mkdtempSync(join(tmpdir(), "agentrl-padded-"));
    await policy.save(directory);
  });
  after(() => {
    policy.dispose();
    rmSync(directory, { recursive: true, force: true });
  });

  test("the in-process engine (rollout): 2,000 tokens at temperature 1, all below the tokenizer's size", async () => {
    assert.equal(policy.model.vocabularyLimit, usable);
    const engine = createPolicyEngine(policy, { temperature: 1, seed: 1, stopTokenIds: [] });
    try {
      const ids = await sampledIds(engine);
      assert.equal(ids.length, 2000);
      const padded = ids.filter((id) => id >= usable);
      assert.deepEqual(padded, [], `sampled padded ids ${padded.slice(0, 10)}`);
    } finally {
      engine.close();
    }
  });

  test("an engine thread (the evaluation's pool): all below the tokenizer's size; without the limit it samples padded ids", async () => {
    const limited = await ThreadEngine.start(policy, { temperature: 1, seed: 2, stopTokenIds: [] });
    try {
      const ids = await sampledIds(limited);
      assert.equal(ids.length, 2000);
      const padded = ids.filter((id) => id >= usable);
      assert.deepEqual(padded, [], `sampled padded ids ${padded.slice(0, 10)}`);
    } finally {
      limited.close();
    }
    // the same thread without the limit: the check above can fail
    const data = engineThreadData(policy, { temperature: 1, seed: 2, stopTokenIds: [] });
    assert.equal(data.usableVocabulary, usable);
    const unlimited = await ThreadEngine.fromData({ ...data, usableVocabulary: undefined });
    try {
      const ids = await sampledIds(unlimited);
      assert.ok(
        ids.filter((id) => id >= usable).length > 100,
        "padded ids hold about a quarter of the mass without the limit",
      );
    } finally {
      unlimited.close();
    }
  });

  test("agentrl serve (HTTP, return_token_ids): 32 completions at temperature 1 answer 200 with no padded id", async () => {
    const running = await startModelServer({
      model: directory,
      port: 0,
      weightsKey: "vocabulary-padding-test-key",
      temperature: 1,
      seed: 4,
      log: null,
    });
    try {
      let sampled = 0;
      for (let round = 0; round < 4; round++) {
        const response = await fetch(`${running.address.baseUrl}/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            model: running.server.modelName,
            messages: [{ role: "user", content: `Say hello ${round} times.` }],
            max_tokens: 40,
            temperature: 1,
            n: 8,
            return_token_ids: true,
          }),
        });
        const body = (await response.json()) as { choices?: { token_ids?: number[] }[] };
        assert.equal(response.status, 200, JSON.stringify(body).slice(0, 300));
        for (const choice of body.choices ?? []) {
          assert.ok(choice.token_ids, "each choice carries its token ids");
          const padded = choice.token_ids.filter((id) => id >= usable);
          assert.deepEqual(padded, [], `sampled padded ids ${padded.slice(0, 10)}`);
          sampled += choice.token_ids.length;
        }
      }
      assert.ok(sampled >= 100, `only ${sampled} tokens sampled`);
    } finally {
      await running.close(1000);
    }
  });
});
