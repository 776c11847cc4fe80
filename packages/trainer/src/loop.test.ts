import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readSafetensorsDirectory, setBackend } from "@agentrl/policy";
import { runTraining } from "./loop.js";
import { makeSayModel, sayRunOptions } from "./fixtures/say-run.js";
import { latestCheckpoint } from "./checkpoint.js";
import type { TrajectoryGroup } from "@agentrl/rollout";

await setBackend("cpu", { log: null });
process.env.AGENTRL_BACKEND = "cpu"; // the learner thread and every Policy.load use the cpu backend too

const options = sayRunOptions;
const makeModel = makeSayModel;

async function finalWeights(runDirectory: string): Promise<Map<string, Float32Array>> {
  const latest = await latestCheckpoint(join(runDirectory, "checkpoints"));
  const weights = await readSafetensorsDirectory(join(latest!.folder, "policy"));
  return new Map([...weights].map(([name, w]) => [name, w.data]));
}

test("sync mode: resuming from a checkpoint gives exactly the weights of an uninterrupted run", async () => {
  const model = await makeModel();
  const straight = mkdtempSync(join(tmpdir(), "agentrl-run-a-"));
  await runTraining(options(model, straight, {}));
  const resumed = mkdtempSync(join(tmpdir(), "agentrl-run-b-"));
  await runTraining(options(model, resumed, { steps: 2 }));
  const last = await runTraining(options(model, resumed, { resume: true }));
  assert.equal(last?.step, 4);
  const a = await finalWeights(straight);
  const b = await finalWeights(resumed);
  assert.equal(a.size, b.size);
  let changed = false;
  const initial = await readSafetensorsDirectory(model);
  for (const [name, values] of a) {
    assert.deepEqual(b.get(name), values, `${name} differs`);
    if (!changed && initial.get(name)!.data.some((v, i) => v !== values[i])) changed = true;
  }
  assert.ok(changed, "training changed the weights");
  const lines = readFileSync(join(resumed, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
  assert.deepEqual(lines.map((l) => l.step), [1, 2, 3, 4]);
});

test("async mode: the learner runs in a worker thread and versions advance", async () => {
  const model = await makeModel();
  const run = mkdtempSync(join(tmpdir(), "agentrl-run-async-"));
  const records: number[] = [];
  const staleTurnsByStep = new Map<number, number>();
  const onBatch = ({ step, groups }: { step: number; groups: readonly TrajectoryGroup[] }) =>
    staleTurnsByStep.set(step, groups.flatMap((g) => g.trajectories).flatMap((t) => t.turns).filter((turn) => turn.policy === "stale").length);
  const last = await runTraining(options(model, run, { mode: "async", steps: 3, onStep: (r) => records.push(r.version), onBatch }));
  assert.equal(last?.step, 3);
  assert.deepEqual(records, [1, 2, 3]);
  const metrics = readFileSync(join(run, "metrics.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
  for (const m of metrics) {
    assert.ok(Number.isFinite(m["train/loss"]) && Number.isFinite(m["train/gradNorm"]));
    assert.ok(m["time/train"] > 0);
    assert.ok("reward/say" in m && "success/say" in m);
    // the step's own batch, not a running total of the scheduler
    assert.equal(m["rollout/stale_turns"], staleTurnsByStep.get(m.step), `stale turns of step ${m.step}`);
  }
  assert.ok(existsSync(join(run, "checkpoints", "step-000003", "policy", "model.safetensors")));
});
