import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse as parseYaml } from "yaml";
import { EPISODE_DEFAULTS, PolicyPool } from "@agentrl/rollout";
import { ppoClipTokenLoss, registerPolicyLoss } from "../rl/algorithms.js";
import { CROSS_POLICY_DEFAULTS, RL_DEFAULTS, WARM_START_DEFAULTS } from "../rl/defaults.js";
import { DEFAULT_GRPO, grpoOptionsOf } from "../rl/grpo.js";
import { resolveWarmStartOptions, WARM_START_RECIPES } from "./warmstart/index.js";
import { SHIPPED_WARM_START } from "./experiment/options.js";
import { DEFAULT_OPTIMIZER, DEFAULT_SCHEDULE } from "../rl/learner.js";
import {
  ConfigError,
  configToYaml,
  defaultConfig,
  formatKey,
  loadConfig,
  parseOverride,
  setPath,
  validateConfig,
} from "./config.js";

function writeConfig(text: string): string {
  const file = join(mkdtempSync(join(tmpdir(), "agentrl-config-")), "run.yaml");
  writeFileSync(file, text);
  return file;
}

describe("configuration", () => {
  test("examples/default.yaml spells out the default run: the same configuration but its run folder, its warm checkpoint the shipped one", async () => {
    const example = await loadConfig({
      file: fileURLToPath(new URL("../../../../examples/default.yaml", import.meta.url)),
    });
    const defaults = defaultConfig();
    assert.equal(example.warmStart.checkpoint, SHIPPED_WARM_START);
    assert.equal(defaults.warmStart.checkpoint, undefined, "found as the shipped warm start");
    assert.equal(defaults.rollout.unreadAnswerReward, 0, "the unread guess unpaid");
    assert.equal(defaults.rl.learningRate, 1e-4, "RL moves the warm start little");
    assert.equal(
      defaults.tasks.find((task) => task.name === "os")?.familyOptions,
      undefined,
      "OS on AgentBench's tasks alone",
    );
    const { checkpoint: _checkpoint, ...exampleWarmStart } = example.warmStart;
    assert.deepEqual(
      {
        ...example,
        warmStart: exampleWarmStart,
        run: { ...example.run, directory: defaults.run.directory },
      },
      defaults,
    );
  });

  test("the defaults are the embedded default run: five families, async GRPO with task normalization and cross-policy sampling", () => {
    const config = defaultConfig();
    assert.deepEqual(
      config.tasks.map((t) => t.name),
      ["alfworld", "db", "kg", "os", "webshop"],
    );
    assert.deepEqual(
      Object.fromEntries(config.tasks.map((t) => [t.name, t.difficulty])),
      { alfworld: 0, db: [0, 1, 2], kg: 0, os: 0, webshop: 0 },
      "DB on all its levels (all 60 test samples)",
    );
    assert.deepEqual(
      Object.fromEntries(config.tasks.map((t) => [t.name, t.weight])),
      { alfworld: 1, db: 1, kg: 1.5, os: 2.5, webshop: 1 },
      "OS and KG get more groups (docs/warmstart.md)",
    );
    assert.equal(config.rl.mode, "async");
    assert.equal(config.rl.taskAdvantageNormalization, true);
    assert.ok(config.crossPolicy.staleProbability > 0);
    assert.equal(config.warmStart.enabled, true);
    assert.equal(config.run.directory, "runs/default");
  });

  test("the library's defaults are the schema's: a script calling runTraining / Learner / PolicyPool gets the algorithm `agentrl train` runs", () => {
    const { rl, crossPolicy } = defaultConfig();
    for (const [key, value] of Object.entries(DEFAULT_GRPO))
      assert.deepEqual(value, rl[key as keyof typeof rl], `DEFAULT_GRPO.${key} = rl.${key}`);
    assert.deepEqual(DEFAULT_SCHEDULE, {
      learningRate: rl.learningRate,
      warmupSteps: rl.warmupSteps,
      schedule: rl.schedule,
      minLearningRateRatio: rl.minLearningRateRatio,
      totalSteps: rl.steps,
    });
    assert.deepEqual(DEFAULT_OPTIMIZER, {
      weightDecay: rl.weightDecay,
      maxGradNorm: rl.maxGradNorm,
      epsilon: rl.adamEpsilon,
    });
    assert.equal(rl.microBatchTokens, 4096);
    assert.equal(rl.learningRate, 1e-4);
    const engine = { updateWeights: async () => {} };
    assert.equal(
      new PolicyPool({
        current: engine as unknown as ConstructorParameters<typeof PolicyPool>[0]["current"],
      }).refreshEvery,
      crossPolicy.refreshEvery,
      "the rollout's stale-copy refresh",
    );
  });

  test("every default is written once (rl/defaults.ts): the schema, the library and the warm start read the same constants", () => {
    const config = defaultConfig();
    assert.deepEqual({ ...config.rl }, { ...RL_DEFAULTS }, "rl.* of the schema = RL_DEFAULTS");
    assert.deepEqual(
      Object.keys(config.rl).sort(),
      Object.keys(RL_DEFAULTS).sort(),
      "every rl.* key has its constant",
    );
    assert.deepEqual(
      {
        staleProbability: config.crossPolicy.staleProbability,
        refreshEvery: config.crossPolicy.refreshEvery,
      },
      { ...CROSS_POLICY_DEFAULTS },
    );
    assert.deepEqual(
      grpoOptionsOf(config.rl),
      DEFAULT_GRPO,
      "the explicit rl → GRPO mapping of the schema's defaults is the library's",
    );
    // The warm start: the schema's section, runWarmStart's own defaults and the constants agree.
    assert.deepEqual(
      {
        steps: config.warmStart.steps,
        learningRate: config.warmStart.learningRate,
        batchEpisodes: config.warmStart.batchEpisodes,
      },
      { ...WARM_START_DEFAULTS },
    );
    const library = resolveWarmStartOptions({ out: "/tmp/x" });
    assert.deepEqual(
      {
        steps: library.steps,
        learningRate: library.learningRate,
        batchEpisodes: library.batchSize,
        scheduleSteps: library.scheduleSteps,
      },
      { ...WARM_START_DEFAULTS, scheduleSteps: WARM_START_DEFAULTS.steps },
    );
    // A recipe records how a checkpoint was made: its length and learning rate are its own, stated, never an unstated default.
    for (const [name, recipe] of Object.entries(WARM_START_RECIPES)) {
      assert.ok(
        recipe.steps !== undefined &&
          recipe.learningRate !== undefined &&
          recipe.batchSize !== undefined,
        `recipe ${name} states steps, learningRate and batchSize`,
      );
      const resolved = resolveWarmStartOptions({ ...recipe, out: "/tmp/x" });
      assert.equal(
        resolved.weightDecay,
        library.weightDecay,
        `recipe ${name}: what it leaves out is the library's default`,
      );
    }
  });

  test("the rollout's defaults: the schema reads the library's (EPISODE_DEFAULTS, PolicyPool), and sets only the default run's episode limits and task mix apart", () => {
    const { rollout, crossPolicy } = defaultConfig();
    for (const key of [
      "incompletePenalty",
      "infrastructureRetries",
      "infrastructureFaults",
    ] as const)
      assert.equal(rollout[key], EPISODE_DEFAULTS[key], `rollout.${key} = EPISODE_DEFAULTS.${key}`);
    const engine = { updateWeights: async () => {} };
    const pool = new PolicyPool({
      current: engine as unknown as ConstructorParameters<typeof PolicyPool>[0]["current"],
    });
    assert.equal(pool.refreshEvery, crossPolicy.refreshEvery, "the stale copy's refresh");
    // The episode limits of the default run are its own (a tiny model on 2 cores: short
    // episodes, short turns), tighter than the library's, which are sized for real models: every
    // one is tighter, none merely restates the library's value.
    const limits = {
      maxTurns: [rollout.maxTurns, EPISODE_DEFAULTS.maxTurns],
      maxTokens: [rollout.maxTokens, EPISODE_DEFAULTS.maxTokens],
      maxNewTokensPerTurn: [rollout.maxNewTokensPerTurn, EPISODE_DEFAULTS.maxNewTokensPerTurn],
      turnTimeout: [rollout.turnTimeoutSeconds * 1000, EPISODE_DEFAULTS.turnTimeoutMs],
      episodeTimeout: [rollout.episodeTimeoutSeconds * 1000, EPISODE_DEFAULTS.episodeTimeoutMs],
    };
    for (const [key, [run, library]] of Object.entries(limits))
      assert.ok(
        run < library,
        `rollout.${key}: the run's ${run} is tighter than the library's ${library}`,
      );
  });

  test("a policy loss registered with the RL core is selectable by name from YAML; an unknown name is refused with the registered ones", async () => {
    registerPolicyLoss("ppo_clip_copy", ppoClipTokenLoss);
    const config = await loadConfig({ set: ["rl.policyLoss=ppo_clip_copy"] });
    assert.equal(grpoOptionsOf(config.rl).policyLoss, "ppo_clip_copy");
    await assert.rejects(
      loadConfig({ set: ["rl.policyLoss=nope"] }),
      /unknown policy loss "nope"; registered: ppo_clip, .*ppo_clip_copy/,
    );
    await assert.rejects(
      loadConfig({ set: ["rl.advantageEstimator=nope"] }),
      /unknown advantage estimator "nope"; registered: grpo, grpo_no_std/,
    );
  });

  test("a YAML file fills in the rest from the defaults; the resolved YAML reads back to the same config", async () => {
    const file = writeConfig(
      "rl:\n  steps: 7\n  mode: sync\ntasks:\n  - name: kg\n    weight: 2\n    difficulty: [0, 1]\n",
    );
    const config = await loadConfig({ file });
    assert.equal(config.rl.steps, 7);
    assert.equal(config.rl.mode, "sync");
    assert.equal(config.rl.groupSize, defaultConfig().rl.groupSize);
    assert.deepEqual(config.tasks, [{ name: "kg", weight: 2, difficulty: [0, 1] }]);
    assert.deepEqual(validateConfig(parseYaml(configToYaml(config)), "round trip"), config);
  });

  test("--set overrides are typed: numbers, booleans, lists, strings, list items", async () => {
    const config = await loadConfig({
      set: [
        "rl.steps=3",
        "rl.taskAdvantageNormalization=false",
        "tasks=[{name: kg}, {name: webshop}]",
        "tasks.1.difficulty=[1,2]",
        "run.directory=runs/x",
        "rl.maxStaleness=infinite",
      ],
    });
    assert.equal(config.rl.steps, 3);
    assert.equal(config.rl.taskAdvantageNormalization, false);
    assert.deepEqual(
      config.tasks.map((t) => t.name),
      ["kg", "webshop"],
    );
    assert.deepEqual(config.tasks[1].difficulty, [1, 2]);
    assert.equal(config.run.directory, "runs/x");
    assert.equal(config.rl.maxStaleness, "infinite");
  });

  test("an unknown key is an error naming the key and the file", async () => {
    const file = writeConfig("rl:\n  stepz: 3\n");
    await assert.rejects(loadConfig({ file }), (error: Error) => {
      assert.ok(error instanceof ConfigError);
      assert.match(error.message, /unknown key "rl\.stepz"/);
      assert.ok(error.message.includes(file), error.message);
      return true;
    });
  });

  test("a wrong type is an error naming the key (inside a list too) and the file", async () => {
    const file = writeConfig("rl:\n  steps: many\ntasks:\n  - name: kg\n    weight: heavy\n");
    await assert.rejects(loadConfig({ file }), (error: Error) => {
      assert.ok(error instanceof ConfigError);
      assert.match(error.message, /rl\.steps: .*expected number/);
      assert.match(error.message, /tasks\[0\]\.weight: .*expected number/);
      assert.ok(error.message.includes(file));
      return true;
    });
  });

  test("an error in a --set value says so", async () => {
    await assert.rejects(
      loadConfig({ set: ["rl.mode=fast"] }),
      /rl\.mode: .*\(from --set rl\.mode=fast\)/,
    );
    assert.throws(() => parseOverride("rl.steps"), ConfigError);
    await assert.rejects(
      loadConfig({ set: ["rl.gradientThreads=3"] }),
      /rl\.gradientThreads: .*\(from --set rl\.gradientThreads=3\)/,
    );
    assert.equal((await loadConfig({ set: ["rl.gradientThreads=1"] })).rl.gradientThreads, 1);
    assert.equal((await loadConfig({})).rl.gradientThreads, "auto");
  });

  test("setPath creates objects and arrays on the way; formatKey prints list positions", () => {
    const target: Record<string, unknown> = {};
    setPath(target, ["a", "b", "0", "c"], 5);
    assert.deepEqual(target, { a: { b: [{ c: 5 }] } });
    assert.equal(formatKey(["tasks", 2, "name"]), "tasks[2].name");
  });
});
