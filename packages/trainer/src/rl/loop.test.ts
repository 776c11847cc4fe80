import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readSafetensorsDirectory, setBackend } from "@agentrl/policy";
import { runTraining } from "./loop.js";
import { makeSayModel, sayFamily, sayRunOptions } from "./fixtures/say-run.js";
import { InProcessEnvironmentClient } from "@agentrl/envs";
import { latestCheckpoint } from "./checkpoint.js";
import { FaultInjectingClient, isMasked, type TrajectoryGroup } from "@agentrl/rollout";
import { DEFAULT_GRPO, prepareBatch } from "./grpo.js";
import type { TrajectoryStepRecord } from "./trajectory-log.js";

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
  const lines = readFileSync(join(resumed, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  assert.deepEqual(
    lines.map((l) => l.step),
    [1, 2, 3, 4],
  );
});

test("async mode: the learner runs in a worker thread and versions advance", async () => {
  const model = await makeModel();
  const run = mkdtempSync(join(tmpdir(), "agentrl-run-async-"));
  const records: number[] = [];
  const staleTurnsByStep = new Map<number, number>();
  const onBatch = ({ step, groups }: { step: number; groups: readonly TrajectoryGroup[] }) =>
    staleTurnsByStep.set(
      step,
      groups
        .flatMap((g) => g.trajectories)
        .flatMap((t) => t.turns)
        .filter((turn) => turn.policy === "stale").length,
    );
  const last = await runTraining(
    options(model, run, {
      mode: "async",
      steps: 3,
      onStep: (r) => records.push(r.version),
      onBatch,
      trajectories: { episodesPerStep: 2 },
    }),
  );
  assert.equal(last?.step, 3);
  assert.deepEqual(records, [1, 2, 3]);
  const metrics = readFileSync(join(run, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  for (const m of metrics) {
    assert.ok(Number.isFinite(m["train/loss"]) && Number.isFinite(m["train/gradNorm"]));
    assert.ok(m["time/train"] > 0);
    assert.ok("reward/say" in m && "success/say" in m);
    // the share of the step's groups with unequal rewards, and of episodes with a reward between 0 and 1
    assert.ok(
      m["informative/say"] >= 0 &&
        m["informative/say"] <= 1 &&
        m["partial/say"] >= 0 &&
        m["partial/say"] <= 1,
    );
    // the step's own batch, not a running total of the scheduler
    assert.equal(
      m["rollout/stale_turns"],
      staleTurnsByStep.get(m.step),
      `stale turns of step ${m.step}`,
    );
  }
  assert.ok(existsSync(join(run, "checkpoints", "step-000003", "policy", "model.safetensors")));
  // The dashboard's record: one line per step, one whole group (2 episodes), per-token versions older than the step.
  const recorded = readFileSync(join(run, "trajectories.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as TrajectoryStepRecord);
  assert.deepEqual(
    recorded.map((r) => [r.step, r.episodes.length, r.batchEpisodes]),
    [
      [1, 2, 4],
      [2, 2, 4],
      [3, 2, 4],
    ],
  );
  for (const record of recorded) {
    for (const episode of record.episodes) {
      assert.ok(episode.turns.length > 0 && episode.prompt.includes("Call say"));
      for (const [, version] of episode.turns.flatMap((turn) => turn.tokens))
        assert.ok(version < record.step, `a token of step ${record.step} from version ${version}`);
    }
  }
});

test("async mode with dynamicSamplingGroups: the step's metrics count every group drawn and the replaced ones", async () => {
  const model = await makeModel();
  const run = mkdtempSync(join(tmpdir(), "agentrl-run-dynamic-"));
  const batches: number[] = [];
  await runTraining(
    options(model, run, {
      mode: "async",
      steps: 2,
      dynamicSamplingGroups: 3,
      onBatch: ({ groups }: { groups: readonly TrajectoryGroup[] }) => batches.push(groups.length),
    }),
  );
  const metrics = readFileSync(join(run, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  assert.equal(metrics.length, 2);
  metrics.forEach((m, i) => {
    const dropped = m["rollout/dynamic_sampling_dropped_groups"];
    assert.ok(
      Number.isInteger(dropped) && dropped >= 0 && dropped <= 3,
      `step ${m.step}: ${dropped} groups replaced (at most 3 more drawn)`,
    );
    assert.ok(Number.isFinite(m["informative/say"]), `step ${m.step}: informative/say is reported`);
    // The metrics count every group drawn (trained + replaced); the trained ones are its informative ones when it has any.
    const informative = Math.round(m["informative/say"] * (batches[i] + dropped));
    if (informative > 0)
      assert.equal(informative, batches[i], `step ${m.step}: trains its informative groups`);
    else
      assert.equal(batches[i], 2, `step ${m.step}: nothing informative, the batch as drawn first`);
  });
});

test("infrastructureFaults penalize: killed episodes get the incomplete penalty, are counted as faults, and nothing is masked", async () => {
  const model = await makeModel();
  const run = mkdtempSync(join(tmpdir(), "agentrl-run-penalize-"));
  const client = new FaultInjectingClient(new InProcessEnvironmentClient([sayFamily]), {
    sessionShare: 0.1,
    seed: 2,
  });
  const batches: TrajectoryGroup[][] = [];
  await runTraining(
    options(model, run, {
      client,
      steps: 2,
      batchGroups: 5,
      groupSize: 2,
      learner: {
        schedule: {
          learningRate: 1e-3,
          warmupSteps: 0,
          schedule: "constant",
          minLearningRateRatio: 0.1,
          totalSteps: 2,
        },
        grpo: { klCoefficient: 0 },
      },
      rollout: {
        maxConcurrentEpisodes: 10,
        engine: { temperature: 1 },
        episode: {
          maxTurns: 2,
          maxNewTokensPerTurn: 12,
          maxTokens: 1024,
          infrastructureRetries: 0,
          infrastructureFaults: "penalize",
          incompletePenalty: -0.2,
        },
        maxStaleness: Infinity,
      },
      onBatch: ({ groups }) => batches.push([...groups]),
    }),
  );
  assert.ok(client.kills >= 1, `${client.kills} of the 20 sessions died`);
  const metrics = readFileSync(join(run, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  batches.forEach((groups, step) => {
    const killed = groups
      .flatMap((g) => g.trajectories)
      .filter((t) => t.endCause === "infrastructure");
    for (const t of killed) assert.equal(t.reward, -0.2);
    assert.equal(metrics[step]["rollout/infrastructure_faults"], killed.length);
    assert.equal(metrics[step]["rollout/masked_episodes"], 0);
    assert.equal(metrics[step]["train/droppedInfrastructureGroups"], 0);
  });
  assert.equal(
    batches
      .flat()
      .flatMap((g) => g.trajectories)
      .filter((t) => t.endCause === "infrastructure").length,
    client.kills,
  );
});

test("10 % of sessions killed: their groups are dropped and counted, the other groups' advantages are unchanged; mismatch metrics and the alarm", async () => {
  const model = await makeModel();
  const run = mkdtempSync(join(tmpdir(), "agentrl-run-faults-"));
  const client = new FaultInjectingClient(new InProcessEnvironmentClient([sayFamily]), {
    sessionShare: 0.1,
    seed: 2,
  });
  const batches: TrajectoryGroup[][] = [];
  const lines: string[] = [];
  const grpo = { klCoefficient: 0, policyLoss: "tis_token", mismatchKlAlarm: 0 };
  await runTraining(
    options(model, run, {
      client,
      steps: 2,
      batchGroups: 5,
      groupSize: 2,
      learner: {
        schedule: {
          learningRate: 1e-3,
          warmupSteps: 0,
          schedule: "constant",
          minLearningRateRatio: 0.1,
          totalSteps: 2,
        },
        grpo,
      },
      rollout: {
        maxConcurrentEpisodes: 10,
        engine: { temperature: 1 },
        episode: {
          maxTurns: 2,
          maxNewTokensPerTurn: 12,
          maxTokens: 1024,
          infrastructureRetries: 0,
        },
        maxStaleness: Infinity,
      },
      onBatch: ({ groups }) => batches.push([...groups]),
      log: (line) => lines.push(line),
    }),
  );
  assert.equal(client.started, 20);
  assert.ok(client.kills >= 1, `${client.kills} of the 20 sessions died`);
  const metrics = readFileSync(join(run, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  let dropped = 0;
  batches.forEach((groups, step) => {
    const faulty = groups.filter(isMasked);
    for (const t of faulty.flatMap((g) => g.trajectories).filter((t) => t.masked)) {
      assert.equal(t.endCause, "infrastructure");
      assert.equal(t.reward, 0, "a masked episode gets no reward (no incomplete penalty)");
    }
    const settings = { ...DEFAULT_GRPO, ...grpo };
    const all = prepareBatch(groups, settings);
    const withoutFaulty = prepareBatch(
      groups.filter((g) => !isMasked(g)),
      settings,
    );
    assert.deepEqual(
      all.rows.map((r) => r.advantage),
      withoutFaulty.rows.map((r) => r.advantage),
      `step ${step + 1}: the other groups' advantages`,
    );
    assert.equal(metrics[step]["train/droppedInfrastructureGroups"], faulty.length);
    assert.equal(
      metrics[step]["rollout/masked_episodes"],
      faulty.flatMap((g) => g.trajectories).filter((t) => t.masked).length,
    );
    assert.equal(
      metrics[step]["rollout/infrastructure_faults"],
      metrics[step]["rollout/masked_episodes"],
      "masked: every fault is a masked episode",
    );
    dropped += faulty.length;
  });
  assert.ok(
    dropped >= 1 && dropped <= client.kills,
    `${dropped} groups dropped for ${client.kills} killed sessions`,
  );
  assert.equal(
    batches
      .flat()
      .flatMap((g) => g.trajectories)
      .filter((t) => t.masked).length,
    client.kills,
    "every killed session is a masked episode",
  );
  for (const m of metrics) {
    assert.ok(m["train/mismatchKl"] >= 0 && Number.isFinite(m["train/mismatchKl"]));
    assert.ok(
      m["train/importanceRatioMin"] <= m["train/importanceRatioMean"] &&
        m["train/importanceRatioMean"] <= m["train/importanceRatioMax"],
    );
    const shares = ["0", "1", "2", "3_or_more"].map((bucket) => m[`staleness_tokens/${bucket}`]);
    assert.ok(Math.abs(shares.reduce((a, b) => a + b, 0) - 1) < 1e-9, `staleness shares ${shares}`);
  }
  const alarms = lines.filter((line) => /ALARM mismatch KL/.test(line));
  assert.equal(
    alarms.length,
    metrics.filter((m) => m["train/mismatchKl"] > 0).length,
    lines.join("\n"),
  );
  const faultLines = lines.filter((line) =>
    /dropped from the loss for infrastructure faults/.test(line),
  );
  assert.equal(
    faultLines.length,
    metrics.filter((m) => m["train/droppedInfrastructureGroups"] > 0).length,
  );
  for (const line of faultLines)
    assert.match(
      line,
      /infrastructure faults: say \d+ episode\(s\), e\.g\. "InjectedFaultError: injected fault: the container of session .* died"$/,
      "the line names the task and the cause",
    );
});
