/**
 * trainAgent end to end on the shipped warm start: the AI SDK agent of
 * examples/agents/kg-ai-sdk.ts (generateText with KG's tools and stopWhen, through
 * `@ai-sdk/openai-compatible`), unmodified, plays KG episodes of difficulty 0 (one-hop
 * questions, which the warm start solves about half the time when sampling at temperature 1)
 * through the recording gateway, with the environment's reward, for one sync GRPO step of
 * 4 groups of 4. Checked:
 * - rewards vary within groups, so the step trains: non-zero advantages, trained tokens and
 *   a non-zero gradient norm, a finite loss;
 * - the trainer's scoring of the recorded tokens agrees with the sampler's log-probs (same
 *   weights: mismatch KL ≈ 0, importance ratios at 1), as in the built-in path;
 * - the run's metrics (metrics.jsonl, per-task reward and success) and a checkpoint exist,
 *   and the checkpoint's weights differ from the warm start's.
 * Skipped when models/warmstart is missing.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  InProcessEnvironmentClient,
  createTaskFamily,
  type CurriculumTaskFamily,
} from "@agentrl/envs";
import { initBackend, parseSafetensors } from "@agentrl/policy";
import kgAgent from "../../../../examples/agents/kg-ai-sdk.js";
import { trainAgent } from "./train-agent.js";

const MODEL = fileURLToPath(new URL("../../../../models/warmstart", import.meta.url));
const HAVE_MODEL = existsSync(`${MODEL}/model.safetensors`);

test(
  "trainAgent: a GRPO step of an AI SDK agent on KG through the gateway trains, with the sampler's log-probs",
  { skip: HAVE_MODEL ? false : `no ${MODEL}` },
  async () => {
    await initBackend({ log: null });
    const family = (await createTaskFamily("kg", { seed: 0 })) as CurriculumTaskFamily;
    const client = new InProcessEnvironmentClient([family]);
    const runDirectory = mkdtempSync(join(tmpdir(), "agentrl-train-agent-"));
    let episodes = 0;
    const last = await trainAgent<{ name: string; index: number }>({
      model: MODEL,
      tasks: {},
      environment: {
        client,
        tasks: ["kg"],
        indices: { kg: family.indicesAt("train", 0).slice(0, 64) },
      },
      agent: async (task, context) => {
        episodes += 1;
        await kgAgent(task, context);
      },
      runDirectory,
      groupSize: 4,
      batchGroups: 4,
      steps: 1,
      checkpointEvery: 1,
      learningRate: 1e-4,
      seed: 1,
      episode: { maxTokens: 1280, maxNewTokensPerTurn: 96 },
      log: () => {},
    });
    assert.equal(last?.step, 1);
    assert.ok(episodes >= 16, `${episodes} episodes played`);
    const metrics = readFileSync(join(runDirectory, "metrics.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, number>);
    assert.deepEqual(
      metrics.map((m) => m.step),
      [1],
    );
    const first = metrics[0];
    console.log(
      `step 1: reward/kg ${first["reward/kg"]}, success/kg ${first["success/kg"]}, advantage std ${first["advantage_std/kg"]}, loss ${first["train/loss"]}, grad norm ${first["train/gradNorm"]}, trained tokens ${first["train/trainedTokens"]}, mismatch KL ${first["train/mismatchKl"]}, ratio [${first["train/importanceRatioMin"]}, ${first["train/importanceRatioMax"]}]`,
    );
    assert.ok("reward/kg" in first && "success/kg" in first, Object.keys(first).join(", "));
    // Difficulty 0 at temperature 1: some episodes succeed and some fail.
    assert.ok(
      first["success/kg"] > 0 && first["success/kg"] < 1,
      `success/kg ${first["success/kg"]}`,
    );
    // An optimizer step ran on non-zero advantages with a non-zero gradient.
    assert.equal(first["train/step"], 1);
    assert.ok(first["advantage_std/kg"] > 0, `advantage std ${first["advantage_std/kg"]}`);
    assert.ok(first["train/trainedTokens"] > 0);
    assert.ok(Number.isFinite(first["train/loss"]), `loss ${first["train/loss"]}`);
    assert.ok(first["train/gradNorm"] > 0, `grad norm ${first["train/gradNorm"]}`);
    // The trainer's scoring of the recorded tokens = the sampler's log-probs (the same weights).
    assert.ok(
      Math.abs(first["train/mismatchKl"]) < 1e-4,
      `sampler vs trainer log-probs: mismatch KL ${first["train/mismatchKl"]}`,
    );
    assert.ok(
      Math.abs(first["train/importanceRatioMin"] - 1) < 0.01 &&
        Math.abs(first["train/importanceRatioMax"] - 1) < 0.01,
      `importance ratios [${first["train/importanceRatioMin"]}, ${first["train/importanceRatioMax"]}]`,
    );
    // The step's weights were saved, and they moved.
    const checkpoints = readdirSync(join(runDirectory, "checkpoints"));
    assert.ok(checkpoints.length > 0);
    const saved = parseSafetensors(
      new Uint8Array(
        readFileSync(
          join(
            runDirectory,
            "checkpoints",
            checkpoints.sort().at(-1)!,
            "policy",
            "model.safetensors",
          ),
        ),
      ),
    );
    const start = parseSafetensors(new Uint8Array(readFileSync(`${MODEL}/model.safetensors`)));
    const moved = [...saved.keys()].some((name) => {
      const before = start.get(name)?.data;
      const after = saved.get(name)!.data;
      return before !== undefined && Array.from(after).some((value, i) => value !== before[i]);
    });
    assert.ok(moved, "the checkpoint's weights differ from the warm start's");
  },
);
