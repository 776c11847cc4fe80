import { test } from "node:test";
import assert from "node:assert/strict";
import {
  InProcessEnvironmentClient,
  isDockerAvailable,
  type CurriculumTaskFamily,
  type EnvironmentClient,
} from "@agentrl/envs";
import { initBackend, setBackend } from "@agentrl/policy";
import { FaultInjectingClient } from "@agentrl/rollout";
import { makeSayModel, sayFamily } from "../../rl/fixtures/say-run.js";
import type { TaskEvaluation } from "../evaluate.js";
import { existsSync } from "node:fs";
import { defaultConfig, validateConfig } from "../config.js";
import { DOCKER_FAMILIES } from "../warmstart/index.js";
import { DEFAULT_GRPO } from "../../rl/grpo.js";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  SHIPPED_WARM_START,
  evaluateCached,
  evaluationKey,
  openTasks,
  setAsideEarlierRun,
  successTable,
  trainingSettings,
} from "./index.js";

/** A family whose index encodes (difficulty, split, k): difficulty × 100 + (test ? 50 : 0) + k. */
function fakeFamily(name: string): CurriculumTaskFamily {
  const indicesAt = (split: "train" | "test", difficulty: number) =>
    [0, 1, 2].map((k) => difficulty * 100 + (split === "test" ? 50 : 0) + k);
  return {
    name,
    difficulties: [0, 1, 2],
    indicesAt,
    indices: (split) => [0, 1, 2].flatMap((d) => indicesAt(split, d)),
    startSession: async () => {
      throw new Error("not used");
    },
    expert: () => ({ act: () => ({ role: "assistant", content: "" }) }),
  };
}

test("openTasks: indices follow the configured difficulties per split; os/db join only with Docker, else ONE line says so", async () => {
  const config = validateConfig(
    {
      tasks: [
        { name: "kg", difficulty: [0, 2] },
        { name: "webshop", indices: [7, 8] },
        { name: "os" },
        { name: "db" },
      ],
    },
    "test",
  );
  const printed: string[] = [];
  const created: string[] = [];
  const opened = await openTasks(
    config,
    (line) => printed.push(line),
    async (name) => (created.push(name), fakeFamily(name)),
  );
  try {
    assert.deepEqual(await opened.client.getIndices("kg", "train"), [0, 1, 2, 200, 201, 202]);
    assert.deepEqual(await opened.client.getIndices("kg", "test"), [50, 51, 52, 250, 251, 252]);
    assert.deepEqual(opened.indices.get("webshop"), { train: [7, 8], test: [50, 51, 52] });
    if (await isDockerAvailable()) {
      assert.deepEqual(created, ["kg", "webshop", "os", "db"]);
      assert.deepEqual(printed, []);
    } else {
      assert.deepEqual(created, ["kg", "webshop"]);
      assert.equal(printed.length, 1);
      assert.match(
        printed[0],
        /^os and db left out: no Docker engine reachable.*training on kg, webshop$/,
      );
    }
  } finally {
    await opened.close();
  }
});

test("openTasks: a difficulty the family does not have is a ConfigError naming the family's difficulties", async () => {
  const config = validateConfig({ tasks: [{ name: "kg", difficulty: [0, 7] }] }, "test");
  await assert.rejects(
    openTasks(
      config,
      () => {},
      async (name) => fakeFamily(name),
    ),
    /task "kg" has no difficulty 7 \(its difficulties: 0, 1, 2\)/,
  );
});

test("openTasks: the worlds come from run.worldSeed, not run.seed (seeds of an ablation train on the same worlds)", async () => {
  const seeds: (number | undefined)[] = [];
  const factory = async (name: string, options?: { seed?: number }) => (
    seeds.push(options?.seed),
    fakeFamily(name)
  );
  for (const run of [{ seed: 3 }, { seed: 3, worldSeed: 2 }]) {
    const opened = await openTasks(
      validateConfig({ tasks: [{ name: "kg" }], run }, "test"),
      () => {},
      factory,
    );
    await opened.close();
  }
  assert.deepEqual(seeds, [0, 2]);
});

test("openTasks: tasks[].familyOptions reach the family (os: generatedSize), the world seed beside them", async () => {
  const given: Record<string, unknown>[] = [];
  const factory = async (name: string, options?: Record<string, unknown>) => (
    given.push({ name, ...options }),
    fakeFamily(name)
  );
  const opened = await openTasks(
    validateConfig(
      {
        tasks: [
          { name: "kg", familyOptions: { generatedSize: 1200, seed: 9 } },
          { name: "webshop" },
        ],
        run: { worldSeed: 4 },
      },
      "test",
    ),
    () => {},
    factory,
  );
  await opened.close();
  assert.deepEqual(given, [
    { name: "kg", generatedSize: 1200, seed: 4 },
    { name: "webshop", seed: 4 },
  ]);
});

test("trainingSettings: the RL loop trains with run.seed (greedy evaluation or not) and every rl.* loss, schedule and optimizer setting as configured", () => {
  for (const temperature of [0, 0.8]) {
    const config = validateConfig(
      {
        run: { seed: 7 },
        evaluation: { temperature },
        rl: {
          klCoefficient: 0.2,
          learningRate: 3e-4,
          steps: 40,
          clipHigh: 0.28,
          adamEpsilon: 1e-6,
          gradientThreads: 1,
        },
      },
      "test",
    );
    const settings = trainingSettings(config);
    assert.equal(settings.seed, 7, `evaluation temperature ${temperature}`);
    assert.equal(settings.steps, 40);
    assert.equal(settings.learner?.grpo?.klCoefficient, 0.2);
    assert.equal(settings.learner?.grpo?.clipHigh, 0.28);
    assert.deepEqual(settings.learner?.schedule, {
      learningRate: 3e-4,
      warmupSteps: 0,
      schedule: "cosine",
      minLearningRateRatio: 0.1,
      totalSteps: 40,
    });
    assert.equal(settings.learner?.optimizer?.epsilon, 1e-6);
    assert.equal(settings.learner?.gradientThreads, 1);
  }
  // The library's GRPO defaults are the schema's (one source for the CLI and a script).
  const rl = defaultConfig().rl;
  for (const [key, value] of Object.entries(DEFAULT_GRPO))
    assert.equal(value, rl[key as keyof typeof rl], `DEFAULT_GRPO.${key}`);
});

test("successTable: one column per measured point, percentages and the mean", () => {
  const result = (task: string, success: number): TaskEvaluation => ({
    task,
    instances: 4,
    episodes: 4,
    success,
    passAtK: success,
    meanReward: success,
    meanTurns: 2,
  });
  const table = successTable([
    ["before", { kg: result("kg", 0), webshop: result("webshop", 0.25) }],
    ["skipped", undefined],
    ["after", { kg: result("kg", 0.5), webshop: result("webshop", 0.75) }],
  ]);
  assert.equal(
    table,
    [
      "| task | before | after |",
      "|---|---:|---:|",
      "| kg | 0.0% | 50.0% |",
      "| webshop | 25.0% | 75.0% |",
      "| **mean** | 12.5% | 62.5% |",
    ].join("\n"),
  );
});

test("successTable: a column of several seeds shows mean ± sample sd per task, and of each seed's mean", () => {
  const result = (task: string, success: number): TaskEvaluation => ({
    task,
    instances: 4,
    episodes: 4,
    success,
    passAtK: success,
    meanReward: success,
    meanTurns: 2,
  });
  // kg over seeds 0.2, 0.4, 0.6: mean 40, sd √((0.04+0+0.04)/2) = 0.2 → 20.0.
  // webshop 0.5, 0.5, 0.8: mean 60, sd √((0.01+0.01+0.04)/2) = √0.03 = 0.1732 → 17.3.
  // Seed means 0.35, 0.45, 0.7: mean 50, sd √((0.0225+0.0025+0.04)/2) = √0.0325 = 0.1803 → 18.0.
  const table = successTable([
    ["warm", { kg: result("kg", 0.1), webshop: result("webshop", 0.3) }],
    [
      "three seeds",
      [
        { kg: result("kg", 0.2), webshop: result("webshop", 0.5) },
        { kg: result("kg", 0.4), webshop: result("webshop", 0.5) },
        { kg: result("kg", 0.6), webshop: result("webshop", 0.8) },
      ],
    ],
    ["no runs", []],
  ]);
  assert.equal(
    table,
    [
      "| task | warm | three seeds |",
      "|---|---:|---:|",
      "| kg | 10.0% | 40.0 ± 20.0% |",
      "| webshop | 30.0% | 60.0 ± 17.3% |",
      "| **mean** | 20.0% | 50.0 ± 18.0% |",
    ].join("\n"),
  );
});

test("successTable: a family that says where answers came from (OS) gets a line of read successes per column, summed over seeds", () => {
  const result = (task: string, success: number, successesFromOutput?: number): TaskEvaluation => ({
    task,
    instances: 20,
    episodes: 20,
    success,
    passAtK: success,
    meanReward: success,
    meanTurns: 2,
    successesFromOutput,
  });
  const table = successTable([
    ["warm", { kg: result("kg", 0.5), os: result("os", 0.15, 3) }],
    [
      "RL",
      [
        { kg: result("kg", 0.5), os: result("os", 0.25, 1) },
        { kg: result("kg", 0.5), os: result("os", 0.3, 2) },
      ],
    ],
  ]);
  assert.match(
    table,
    /\n\nos: successes that read their answer from a line or field a command printed \(the others guessed it, or were graded on the system's state: other\): warm 3 of 3, RL 3 of 11\.$/,
  );
  assert.doesNotMatch(table, /kg: successes/);
});

test("evaluationKey: per task; the same model files, test instances and settings give the same key; a changed weight file, instance or setting another", async () => {
  const directory = await mkdtemp(join(tmpdir(), "agentrl-evalkey-"));
  try {
    await writeFile(join(directory, "config.json"), "{}");
    await writeFile(join(directory, "model.safetensors"), new Uint8Array([1, 2, 3]));
    await writeFile(join(directory, "notes.txt"), "not part of the model");
    const splits: Record<string, number[]> = {
      kg: [50, 51, 52],
      webshop: [60, 61],
      alfworld: [70],
    };
    const client = { getIndices: async (name: string) => splits[name] ?? [] };
    const config = validateConfig({ tasks: [{ name: "kg" }] }, "test");
    const request = { config, client, tasks: ["kg"], limit: 200 };
    const key = await evaluationKey(directory, request, "kg");
    assert.match(key, /^[0-9a-f]{16}$/);
    assert.equal(await evaluationKey(directory, request, "kg"), key);
    await writeFile(join(directory, "notes.txt"), "changed: still not part of the model");
    assert.equal(
      await evaluationKey(directory, request, "kg"),
      key,
      "files outside the model do not count",
    );
    assert.notEqual(await evaluationKey(directory, { ...request, limit: 100 }, "kg"), key);
    assert.notEqual(
      await evaluationKey(
        directory,
        {
          ...request,
          config: validateConfig(
            { tasks: [{ name: "kg" }], evaluation: { temperature: 0.5 } },
            "test",
          ),
        },
        "kg",
      ),
      key,
    );
    assert.notEqual(
      await evaluationKey(
        directory,
        { ...request, client: { getIndices: async () => [50, 51, 53] } },
        "kg",
      ),
      key,
      "another test instance (a changed split or difficulty)",
    );
    assert.equal(
      await evaluationKey(
        directory,
        { ...request, client: { getIndices: async () => [50, 51, 52, 99] }, limit: 3 },
        "kg",
      ),
      await evaluationKey(directory, { ...request, limit: 3 }, "kg"),
      "only the first `limit` instances count",
    );
    assert.notEqual(await evaluationKey(directory, request, "webshop"), key, "another task");
    assert.equal(
      await evaluationKey(directory, { ...request, tasks: ["kg", "alfworld"] }, "kg"),
      key,
      "greedy: the other tasks evaluated alongside do not count",
    );
    const seeded = (seed: number, temperature: number) => ({
      ...request,
      config: validateConfig(
        { tasks: [{ name: "kg" }], evaluation: { temperature }, run: { seed } },
        "test",
      ),
    });
    assert.equal(
      await evaluationKey(directory, seeded(3, 0), "kg"),
      key,
      "greedy: the run's seed does not count",
    );
    assert.notEqual(
      await evaluationKey(directory, seeded(3, 0.5), "kg"),
      await evaluationKey(directory, seeded(0, 0.5), "kg"),
      "sampled: it does",
    );
    const sampled = {
      ...request,
      config: validateConfig({ tasks: [{ name: "kg" }], evaluation: { temperature: 0.5 } }, "test"),
      tasks: ["kg", "webshop"],
    };
    const sampledKey = await evaluationKey(directory, sampled, "kg");
    assert.notEqual(
      await evaluationKey(directory, { ...sampled, tasks: ["kg", "alfworld"] }, "kg"),
      sampledKey,
      "sampled: the tasks evaluated alongside count",
    );
    splits.webshop = [60, 62];
    assert.notEqual(
      await evaluationKey(directory, sampled, "kg"),
      sampledKey,
      "sampled: so do their test instances",
    );
    const world = (worldSeed: number) => ({
      ...request,
      config: validateConfig({ tasks: [{ name: "kg" }], run: { worldSeed } }, "test"),
    });
    // World 0 keying as before worlds had a seed of their own is checked against the shipped memos (the test below).
    assert.notEqual(await evaluationKey(directory, world(1), "kg"), key, "another world");
    assert.notEqual(
      await evaluationKey(directory, world(2), "kg"),
      await evaluationKey(directory, world(1), "kg"),
      "each world its own key",
    );
    await writeFile(join(directory, "model.safetensors"), new Uint8Array([1, 2, 4]));
    assert.notEqual(await evaluationKey(directory, request, "kg"), key);
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
});

test("a new run in a used folder moves the earlier run's outputs to previous/ and keeps its starting model and warm start", async () => {
  const directory = await mkdtemp(join(tmpdir(), "agentrl-run-"));
  try {
    for (const folder of [
      "checkpoints/step-000120",
      "evaluations",
      "initial-model",
      "warmstart/model",
    ])
      await mkdir(join(directory, folder), { recursive: true });
    await writeFile(join(directory, "evaluations", "final-step-120.json"), '{"kg": 1}');
    await writeFile(join(directory, "metrics.jsonl"), "{}\n");
    await writeFile(join(directory, "initial-model", "config.json"), "{}");
    assert.deepEqual(await setAsideEarlierRun(directory), [
      "checkpoints",
      "evaluations",
      "metrics.jsonl",
    ]);
    assert.deepEqual((await readdir(directory)).sort(), ["initial-model", "previous", "warmstart"]);
    assert.equal(
      await readFile(join(directory, "previous", "evaluations", "final-step-120.json"), "utf8"),
      '{"kg": 1}',
    );
    assert.deepEqual(await readdir(join(directory, "previous", "checkpoints")), ["step-000120"]);
    // Nothing of a run left: nothing moves, and the earlier run stays in previous/.
    assert.deepEqual(await setAsideEarlierRun(directory), []);
    assert.deepEqual((await readdir(join(directory, "previous"))).sort(), [
      "checkpoints",
      "evaluations",
      "metrics.jsonl",
    ]);
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
});

test("the default run's greedy evaluations of the shipped warm start are memoised under the same keys (models/warmstart-os-weighted/evaluations)", async (t) => {
  if (!existsSync(join(SHIPPED_WARM_START, "evaluations")))
    return t.skip(`no ${SHIPPED_WARM_START}/evaluations in ${process.cwd()}`);
  // The memos were measured on wasm; another backend keys (rightly) differently.
  if ((await initBackend()) !== "wasm")
    return t.skip("the memos were measured on the wasm backend");
  const config = defaultConfig();
  // The families without Docker: a greedy key depends on its own task only.
  config.tasks = config.tasks.filter((task) => !DOCKER_FAMILIES.has(task.name));
  const opened = await openTasks(config, () => {});
  try {
    const request = {
      config,
      client: opened.client,
      tasks: opened.tasks.map((task) => task.name),
      limit: config.evaluation.finalLimit,
    };
    for (const task of request.tasks) {
      const key = await evaluationKey(SHIPPED_WARM_START, request, task);
      assert.ok(
        existsSync(join(SHIPPED_WARM_START, "evaluations", `${key}.json`)),
        `${task}: memo ${key} of the default run`,
      );
    }
  } finally {
    await opened.close();
  }
});

test("evaluateCached: a task with infrastructure faults is reported and stored nowhere (neither as the model's memo nor for --resume); a clean one is stored and read back", async () => {
  await setBackend("cpu", { log: null });
  const model = await makeSayModel();
  const run = await mkdtemp(join(tmpdir(), "agentrl-eval-faults-"));
  const config = validateConfig(
    {
      run: { directory: run },
      rollout: { maxTurns: 2, maxNewTokensPerTurn: 8, infrastructureRetries: 1 },
    },
    "test",
  );
  const printed: string[] = [];
  const request = (client: EnvironmentClient) => ({
    config,
    client,
    tasks: ["say"],
    limit: 2,
    phase: "eval final",
    print: (line: string) => printed.push(line),
  });
  const dead = new FaultInjectingClient(new InProcessEnvironmentClient([sayFamily]), {
    sessionShare: 1,
  });
  const faulted = await evaluateCached("final", model, request(dead));
  assert.equal(faulted.say.infrastructureFaults, 2, "both episodes died on every retry");
  assert.equal(faulted.say.success, 0);
  assert.equal(dead.kills, 4, "each episode played twice (one retry)");
  assert.equal(
    existsSync(join(model, "evaluations")) ? (await readdir(join(model, "evaluations"))).length : 0,
    0,
    "no memo of the model",
  );
  assert.equal(
    existsSync(join(run, "evaluations", "final.json")),
    false,
    "nothing for --resume to reuse",
  );
  assert.match(
    printed.join("\n"),
    /eval final: episodes ended by an infrastructure fault .*\(say: 2 of 2 \(e\.g\. "InjectedFaultError: injected fault: the container of session .* died"\)\).*not stored/,
  );
  assert.match(
    successTable([["after RL", faulted]]),
    /\| say \| 0\.0% \(2 faulted\) \|[\s\S]*N episodes ended by an infrastructure fault/,
  );

  printed.length = 0;
  const clean = await evaluateCached(
    "final",
    model,
    request(new InProcessEnvironmentClient([sayFamily])),
  );
  assert.equal(clean.say.infrastructureFaults, 0);
  assert.equal((await readdir(join(model, "evaluations"))).length, 1, "the model's memo");
  assert.ok(existsSync(join(run, "evaluations", "final.json")));
  assert.deepEqual(printed, []);
  assert.doesNotMatch(successTable([["after RL", clean]]), /faulted/);
  await rm(model, { recursive: true, force: true });
  await rm(run, { recursive: true, force: true });
});
