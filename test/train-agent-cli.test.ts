/**
 * `agentrl train --agent <module>` end to end, as a child process from the TypeScript
 * sources: the `openai`-client agent of examples/agents/brief-openai.ts (its own tasks and
 * reward) trains one GRPO step on the shipped warm start through the recording gateway;
 * the run folder holds metrics.jsonl (step 1, the agent's reward and success) and a
 * checkpoint, and the CLI printed the step. A module that exports no agent function fails
 * with exit code 1 and says so. A module that chooses its KG world and instances
 * (test/fixtures/kg-chosen-agent.ts) plays exactly those (each played index is one of its
 * choice and its question is that world's), and `--difficulty 1` makes a module without a
 * choice play difficulty-1 train instances only. Skipped when models/warmstart is missing.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { createTaskFamily, kg } from "@agentrl/envs";
import { CHOSEN_INDICES, CHOSEN_WORLD } from "./fixtures/kg-chosen-agent.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const MAIN = join(ROOT, "packages", "cli", "src", "main.ts");
const HAVE_MODEL = existsSync(join(ROOT, "models", "warmstart", "model.safetensors"));

function agentrl(
  args: string[],
  environment: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["--conditions=source", "--import", "tsx", MAIN, ...args],
      {
        cwd: ROOT,
        timeout: 240_000,
        maxBuffer: 16 * 1024 * 1024,
        env: { ...process.env, ...environment },
      },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

test(
  "agentrl train --agent: one GRPO step of an openai-client agent module",
  { skip: HAVE_MODEL ? false : "no models/warmstart" },
  async () => {
    const runDirectory = mkdtempSync(join(tmpdir(), "agentrl-train-agent-cli-"));
    const run = await agentrl([
      "train",
      "--agent",
      "examples/agents/brief-openai.ts",
      "--steps",
      "1",
      "--group-size",
      "2",
      "--run-dir",
      runDirectory,
    ]);
    assert.equal(run.code, 0, `exit ${run.code}\n${run.stdout}\n${run.stderr}`);
    assert.match(run.stdout, /step 1: reward\/agent [\d.-]+, success\/agent [\d.]+/);
    const metrics = readFileSync(join(runDirectory, "metrics.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, number>);
    assert.deepEqual(
      metrics.map((m) => m.step),
      [1],
    );
    const [first] = metrics;
    assert.ok(first["reward/agent"] >= 0 && first["reward/agent"] <= 1, `${first["reward/agent"]}`);
    assert.ok(Number.isFinite(first["train/loss"]));
    // 4 groups of 2, each episode one chat completion through the gateway.
    assert.equal(first["rollout/masked_episodes"], 0);
    assert.ok(readdirSync(join(runDirectory, "checkpoints")).length > 0);
  },
);

test("agentrl train --agent: a module without an agent function fails with exit code 1", async () => {
  const folder = mkdtempSync(join(tmpdir(), "agentrl-train-agent-cli-"));
  const module = join(folder, "no-agent.mjs");
  writeFileSync(module, "export const tasks = [{ prompt: 'hi' }];\n");
  const run = await agentrl(["train", "--agent", module, "--steps", "1"]);
  assert.equal(run.code, 1, run.stdout + run.stderr);
  assert.match(run.stdout + run.stderr, /exports no agent function/);
});

/** Runs one GRPO step (2 groups of 2) of the fixture module; the episodes it played. */
async function playChosen(
  flags: string[],
  environment: Record<string, string>,
): Promise<Array<{ index: number; question: string }>> {
  const folder = mkdtempSync(join(tmpdir(), "agentrl-train-agent-cli-"));
  const played = join(folder, "played.jsonl");
  const run = await agentrl(
    [
      "train",
      "--agent",
      "test/fixtures/kg-chosen-agent.ts",
      "--steps",
      "1",
      "--group-size",
      "2",
      "--batch-groups",
      "2",
      "--run-dir",
      join(folder, "run"),
      ...flags,
    ],
    { AGENTRL_TEST_PLAYED: played, ...environment },
  );
  assert.equal(run.code, 0, `exit ${run.code}\n${run.stdout}\n${run.stderr}`);
  return readFileSync(played, "utf8")
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as { index: number; question: string });
}

test(
  "agentrl train --agent: a module's environmentOptions and environmentIndices choose what is played",
  { skip: HAVE_MODEL ? false : "no models/warmstart" },
  async () => {
    const played = await playChosen([], {});
    assert.equal(played.length, 4, JSON.stringify(played));
    const world = await createTaskFamily("kg", { seed: CHOSEN_WORLD });
    const otherWorld = await createTaskFamily("kg", { seed: 0 });
    for (const { index, question } of played) {
      assert.ok(CHOSEN_INDICES.includes(index), `played ${index}, not one of ${CHOSEN_INDICES}`);
      // The question is world 3's (the module's environmentOptions), not the default world's.
      const [expected] = (await world.startSession(index)).start.messages.filter(
        (message) => message.role === "user",
      );
      const [defaultWorld] = (await otherWorld.startSession(index)).start.messages.filter(
        (message) => message.role === "user",
      );
      assert.equal(question, expected.content);
      assert.notEqual(question, defaultWorld.content);
    }
  },
);

test(
  "agentrl train --agent --difficulty 1: a module without environmentIndices plays difficulty-1 train instances",
  { skip: HAVE_MODEL ? false : "no models/warmstart" },
  async () => {
    const played = await playChosen(["--difficulty", "1"], { AGENTRL_TEST_NO_INDICES: "1" });
    assert.equal(played.length, 4, JSON.stringify(played));
    for (const { index } of played) {
      const { difficulty, split } = kg.decodeIndex(index);
      assert.equal(difficulty, 1, `played ${index}`);
      assert.equal(split, "train", `played ${index}`);
    }
  },
);
