/**
 * End to end: `agentrl train` on a LoRA folder (what examples/hf-model.yaml does with a 0.5B
 * model, here on the test preset): the run trains the adapters only, saves them in PEFT's
 * layout beside the merged weights at each checkpoint, evaluates the final model, and the
 * saved adapters load back onto the base with the values the run trained.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Policy } from "@agentrl/policy";
import { initLora, initModel } from "../packages/cli/src/commands/model.ts";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const MAIN = join(ROOT, "packages", "cli", "src", "main.ts");

function agentrl(args: string[]): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["--conditions=source", "--import", "tsx", MAIN, ...args],
      { cwd: ROOT, timeout: 300_000, maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) =>
        resolve({
          code: error ? (typeof error.code === "number" ? error.code : 1) : 0,
          output: stderr + stdout,
        }),
    );
  });
}

/** Sum of squares of the adapters' B matrices (a fresh LoRA folder has B = 0). */
function loraBSquares(policy: Policy): number {
  let sum = 0;
  for (const weight of policy.model.adapterWeights())
    if (weight.name.includes("lora_B")) for (const value of weight.data) sum += value * value;
  return sum;
}

test("agentrl train on a LoRA folder trains the adapters, saves them in PEFT layout per checkpoint, evaluates the final model, and they load back", async () => {
  const folder = mkdtempSync(join(tmpdir(), "agentrl-train-lora-"));
  try {
    const base = join(folder, "base");
    const lora = join(folder, "lora");
    await initModel({ preset: "test", out: base, vocabSize: 2048, seed: 3 });
    await initLora({ base, out: lora, rank: 2, targets: ["q_proj", "v_proj"] });
    const runDirectory = join(folder, "run");
    const configFile = join(folder, "lora.yaml");
    // An entropy bonus gives a gradient even when every reward of the random model is equal.
    writeFileSync(
      configFile,
      `model:
  directory: ${lora}
tasks:
  - name: alfworld
warmStart:
  enabled: false
rl:
  mode: sync
  steps: 2
  batchGroups: 2
  groupSize: 2
  learningRate: 0.01
  klCoefficient: 0
  skipUniformGroups: false
  entropyCoefficient: 0.01
crossPolicy:
  staleProbability: 0
rollout:
  concurrency: 4
  maxTurns: 2
  maxNewTokensPerTurn: 8
evaluation:
  every: 0
  finalLimit: 2
  concurrency: 2
  beforeWarmStart: false
  sampled: false
checkpoint:
  every: 1
`,
    );
    const run = await agentrl(["train", "--config", configFile, "--run-dir", runDirectory]);
    assert.equal(run.code, 0, run.output);

    const checkpoint = join(runDirectory, "checkpoints", "step-000002", "policy");
    for (const file of ["adapter/adapter_config.json", "adapter/adapter_model.safetensors"])
      assert.ok(existsSync(join(checkpoint, file)), `${file} in the last checkpoint`);
    assert.ok(existsSync(join(checkpoint, "model.safetensors")), "the merged weights beside them");
    const adapterConfig = JSON.parse(
      readFileSync(join(checkpoint, "adapter", "adapter_config.json"), "utf8"),
    ) as { peft_type: string; r: number; target_modules: string[] };
    assert.equal(adapterConfig.peft_type, "LORA");
    assert.equal(adapterConfig.r, 2);
    assert.deepEqual([...adapterConfig.target_modules].sort(), ["q_proj", "v_proj"]);
    const results = JSON.parse(readFileSync(join(runDirectory, "results.json"), "utf8")) as {
      steps: number;
      final?: Record<string, unknown>;
    };
    assert.equal(results.steps, 2);
    assert.ok(results.final?.alfworld, "the final model was evaluated");

    const trained = await Policy.load(lora, { trainable: false });
    try {
      assert.equal(loraBSquares(trained), 0, "a fresh LoRA folder starts with B = 0");
      await trained.loadAdapters(join(checkpoint, "adapter"));
      assert.ok(loraBSquares(trained) > 0, "the run moved the adapters");
    } finally {
      trained.dispose();
      await Policy.releaseSharedBases();
    }
  } finally {
    await rm(folder, { recursive: true, force: true });
  }
});
