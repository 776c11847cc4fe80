/**
 * Exact resume under SIGKILL: a tiny seeded sync run (fixtures/say-run.ts: 6 steps, a
 * checkpoint every 2, two tasks whose sampling depends on the scheduler's history) is killed with
 * SIGKILL at 3 random moments and resumed each time; it ends with the same final weights
 * (SHA-256 over every tensor) as an uninterrupted run, and its metrics.jsonl holds each step
 * exactly once. Each run is its own process, so the kill lands wherever it lands (mid-step,
 * mid-checkpoint, mid-metrics line).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { readSafetensorsDirectory, setBackend } from "@agentrl/policy";
import { latestCheckpoint } from "./checkpoint.js";
import { makeSayModel } from "./fixtures/say-run.js";
import { jsonLines, killAtRandomMoments, startRunProcess } from "./fixtures/kill-resume.js";

await setBackend("cpu", { log: null });

const RUN_SCRIPT = fileURLToPath(new URL("./fixtures/say-run.ts", import.meta.url));
/** Even: the run checkpoints every 2 steps and at its end. */
const STEPS = 6;

const startRun = (model: string, run: string, resume: boolean) =>
  startRunProcess(RUN_SCRIPT, model, run, STEPS, resume);

/** Steps logged in metrics.jsonl (complete lines). */
const loggedSteps = (run: string) =>
  jsonLines<{ step: number }>(run, "metrics.jsonl").map((line) => line.step);

/** SHA-256 over the final checkpoint's tensors, in name order. */
async function finalWeightsHash(run: string): Promise<string> {
  const latest = await latestCheckpoint(join(run, "checkpoints"));
  assert.equal(latest?.step, STEPS);
  const weights = await readSafetensorsDirectory(join(latest!.folder, "policy"));
  const hash = createHash("sha256");
  for (const name of [...weights.keys()].sort()) {
    const data = weights.get(name)!.data;
    hash.update(name);
    hash.update(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
  }
  return hash.digest("hex");
}

test(
  "a sync run SIGKILLed at 3 random moments and resumed ends with the weights of an uninterrupted one",
  { timeout: 600_000 },
  async () => {
    const model = await makeSayModel();
    const straight = mkdtempSync(join(tmpdir(), "agentrl-resume-straight-"));
    const uninterrupted = await startRun(model, straight, false).exited;
    assert.equal(uninterrupted.code, 0, uninterrupted.errors);
    // The scheduler's per-task history goes into every checkpoint (sync mode makes a scheduler per step).
    const saved = JSON.parse(
      readFileSync(
        join((await latestCheckpoint(join(straight, "checkpoints")))!.folder, "run.json"),
        "utf8",
      ),
    ) as { informativeHistory?: Record<string, boolean[]> };
    assert.deepEqual(Object.keys(saved.informativeHistory ?? {}).sort(), ["say", "say-again"]);
    assert.equal(
      Object.values(saved.informativeHistory!).flat().length,
      STEPS * 2,
      "one entry per group trained",
    );

    const killed = mkdtempSync(join(tmpdir(), "agentrl-resume-killed-"));
    // Killed once the run has logged at least 1, 3, 4 steps, plus a random delay (0-1.5 s).
    const attempts = await killAtRandomMoments({
      run: killed,
      killAfterSteps: [1, 3, 4],
      start: (resume) => startRun(model, killed, resume),
    });
    attempts.forEach(({ exit }, attempt) =>
      assert.equal(
        exit.signal,
        "SIGKILL",
        `run ${attempt + 1} was killed, not finished (${exit.errors})`,
      ),
    );
    const moments = attempts.map((attempt) => attempt.moment);
    const last = await startRun(model, killed, true).exited;
    assert.equal(last.code, 0, last.errors);

    assert.equal(
      await finalWeightsHash(killed),
      await finalWeightsHash(straight),
      `killed ${moments.join(", ")}`,
    );
    assert.deepEqual(
      loggedSteps(killed),
      Array.from({ length: STEPS }, (_, position) => position + 1),
      "each step logged once",
    );
  },
);
