import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Policy, Tokenizer, trainByteLevelBpe } from "@agentrl/policy";
import { createTaskFamily, EnvironmentError } from "@agentrl/envs";
import { hasAgentBenchData } from "@agentrl/envs/internal";
import { agentBenchProblemTexts, gatherTaskText } from "../corpus.js";
import { ExpertStream } from "./rows.js";
import {
  DOCKER_FAMILIES,
  WARM_START_RECIPES,
  checkStagesRunnable,
  collectExpertRows,
  fromStage,
  TrainingWorlds,
  openDifficulties,
  warmStartStages,
  withPromptLoss,
  resolveWarmStartOptions,
  runWarmStart,
  WarmStartError,
  type WarmStartOptions,
  type WarmStartSummary,
} from "./index.js";
import { WARM_START_DEFAULTS } from "../../rl/defaults.js";

test("task text holds the families' rendered prompts, tools, expert calls and observations", async () => {
  const documents = await gatherTaskText({
    tasks: ["kg", "alfworld"],
    episodesPerDifficulty: 2,
    dataDir: "/nonexistent",
  });
  assert.equal(documents.length, 2 * 4 + 2 * 4, "2 episodes × 4 difficulties × 2 families");
  const kg = documents.find((d) => d.includes("get_neighbors"));
  assert.ok(kg, "a KG episode");
  assert.match(kg, /<\|im_start\|>system\n/);
  assert.match(kg, /<tool_call>\n\{"name": "get_neighbors"/);
  assert.match(kg, /<tool_response>/);
  assert.ok(
    documents.some((d) => d.includes("take_action") && d.includes("AVAILABLE ACTIONS")),
    "an ALFWorld episode",
  );
});

test("a family that fails to start is skipped with one line; missing AgentBench data is skipped", async () => {
  const lines: string[] = [];
  const documents = await gatherTaskText({
    tasks: ["nosuchtask"],
    episodesPerDifficulty: 1,
    dataDir: "/nonexistent",
    log: (line) => lines.push(line),
  });
  assert.deepEqual(documents, []);
  assert.ok(
    lines.some((line) => /skipping nosuchtask: unknown task family/.test(line)),
    lines.join("\n"),
  );
  assert.deepEqual(agentBenchProblemTexts("/nonexistent"), []);
});

test(
  "AgentBench OS and DB problem texts are read from the data files when present",
  {
    skip:
      hasAgentBenchData("os_interaction") && hasAgentBenchData("dbbench")
        ? false
        : "no AgentBench data (../shared/data/agentbench)",
  },
  () => {
    const documents = agentBenchProblemTexts(undefined);
    assert.ok(
      documents.some((d) => d.startsWith("Now, I will start a new problem in a new OS.")),
      "OS problems",
    );
    assert.ok(
      documents.some((d) => d.includes("execute_sql")),
      "DB questions with SQL",
    );
  },
);

function smallTokenizer(documents: string[]): Tokenizer {
  const files = trainByteLevelBpe(documents, { vocabSize: 700 });
  return Tokenizer.fromJson(files.tokenizerJson, files.tokenizerConfig);
}

test("collectExpertRows: perTask successful expert episodes per task, loss on assistant tokens only", async () => {
  const tokenizer = smallTokenizer(
    await gatherTaskText({
      tasks: ["alfworld", "kg"],
      episodesPerDifficulty: 3,
      dataDir: "/nonexistent",
    }),
  );
  const lines: string[] = [];
  const rows = await collectExpertRows({
    tasks: ["alfworld", "kg", "nosuchtask"],
    tokenizer,
    perTask: 4,
    difficulties: [0, 1],
    seed: 3,
    log: (line) => lines.push(line),
  });
  assert.equal(rows.length, 8);
  assert.deepEqual(
    rows.map((r) => r.task),
    ["alfworld", "alfworld", "alfworld", "alfworld", "kg", "kg", "kg", "kg"],
  );
  assert.equal(lines.length, 1, "one line for the family that failed");
  for (const row of rows) {
    assert.equal(row.tokens.length, row.lossMask.length);
    const trained = tokenizer.decode(
      Array.from(row.tokens).filter((_, i) => row.lossMask[i] === 1),
    );
    assert.match(
      trained,
      /^<tool_call>\n\{"name": "/,
      "the first trained tokens are the first tool call",
    );
    assert.equal(row.lossMask[0], 0, "the prompt is not trained on");
  }
  const again = await collectExpertRows({
    tasks: ["kg"],
    tokenizer,
    perTask: 2,
    difficulties: [0],
    seed: 3,
    maxSequenceTokens: 100_000,
  });
  const other = await collectExpertRows({
    tasks: ["kg"],
    tokenizer,
    perTask: 2,
    difficulties: [0],
    seed: 4,
  });
  assert.deepEqual(
    again.map((r) => Array.from(r.tokens)),
    (
      await collectExpertRows({ tasks: ["kg"], tokenizer, perTask: 2, difficulties: [0], seed: 3 })
    ).map((r) => Array.from(r.tokens)),
    "same seed, same rows",
  );
  assert.notDeepEqual(
    again.map((r) => Array.from(r.tokens)),
    other.map((r) => Array.from(r.tokens)),
    "another seed, other instances",
  );
});

test("withPromptLoss weights the assistant's tokens round(1/w) and the others 1", () => {
  const row = {
    task: "t",
    tokens: Int32Array.from([5, 6, 7, 8]),
    lossMask: Uint8Array.from([0, 0, 1, 1]),
  };
  assert.deepEqual(Array.from(withPromptLoss(row, 0.05).lossMask), [1, 1, 20, 20]);
  assert.deepEqual(
    Array.from(withPromptLoss(row, 0.001).lossMask),
    [1, 1, 255, 255],
    "capped at 255",
  );
  assert.equal(withPromptLoss(row, 0), row, "0 leaves the row as it is");
  assert.deepEqual(Array.from(row.lossMask), [0, 0, 1, 1], "the input is not changed");
});

test("the progressive curriculum opens difficulties in order", () => {
  assert.deepEqual(openDifficulties([0, 1, 2], "progressive", 0), [0]);
  assert.deepEqual(openDifficulties([0, 1, 2], "progressive", 0.34), [0, 1]);
  assert.deepEqual(openDifficulties([0, 1, 2], "progressive", 0.99), [0, 1, 2]);
  assert.deepEqual(openDifficulties([0, 1, 2], "progressive", 1), [0, 1, 2]);
  assert.deepEqual(openDifficulties([0, 1, 2], "uniform", 0), [0, 1, 2]);
});

test("options: defaults and validation", () => {
  const resolved = resolveWarmStartOptions({ out: "/tmp/x" });
  assert.equal(resolved.steps, WARM_START_DEFAULTS.steps);
  assert.deepEqual(resolved.tasks, ["kg", "webshop", "alfworld"]);
  assert.deepEqual(resolved.evalDifficulties, [0, 1]);
  assert.throws(() => resolveWarmStartOptions({ out: "/tmp/x", steps: 0 }), WarmStartError);
  assert.throws(() => resolveWarmStartOptions({ out: "/tmp/x", tasks: [] }), /no tasks/);
  assert.throws(
    () => resolveWarmStartOptions({ out: "/tmp/x", tasks: ["kg"], taskWeights: { os: 2 } }),
    /not among the tasks/,
  );
  assert.throws(
    () => resolveWarmStartOptions({ out: "/tmp/x", tasks: ["kg"], taskWeights: { kg: 1.5 } }),
    /positive integer/,
  );
  assert.deepEqual(
    resolveWarmStartOptions({ out: "/tmp/x", tasks: ["kg", "os"], taskWeights: { os: 3 } })
      .taskWeights,
    { os: 3 },
  );
  assert.throws(
    () => resolveWarmStartOptions({ out: "/tmp/x", tasks: ["kg"], taskDifficulties: { db: [0] } }),
    /taskDifficulties names db, which is not among the tasks/,
  );
  assert.throws(
    () => resolveWarmStartOptions({ out: "/tmp/x", tasks: ["db"], taskDifficulties: { db: [] } }),
    /non-empty list/,
  );
  assert.throws(
    () =>
      resolveWarmStartOptions({ out: "/tmp/x", tasks: ["db"], taskDifficulties: { db: [0.5] } }),
    /non-empty list/,
  );
  assert.deepEqual(
    resolveWarmStartOptions({
      out: "/tmp/x",
      tasks: ["kg", "db"],
      taskDifficulties: { db: [0, 2] },
    }).taskDifficulties,
    { db: [0, 2] },
  );
  assert.equal(resolved.trainingWorlds, 1);
  assert.equal(resolved.worldSeed, 0);
  assert.throws(
    () => resolveWarmStartOptions({ out: "/tmp/x", trainingWorlds: 0 }),
    /trainingWorlds must be a positive integer, got 0/,
  );
  assert.throws(
    () => resolveWarmStartOptions({ out: "/tmp/x", trainingWorlds: 2.5 }),
    /trainingWorlds must be a positive integer/,
  );
  assert.equal(resolved.repetitionRows, 0);
  assert.throws(
    () => resolveWarmStartOptions({ out: "/tmp/x", repetitionRows: -1 }),
    /repetitionRows must be an integer >= 0, got -1/,
  );
  assert.throws(
    () => resolveWarmStartOptions({ out: "/tmp/x", repetitionTokens: 0 }),
    /repetitionTokens must be a positive integer/,
  );
});

test("TrainingWorlds: world 0 is the open family; world k is the family of seed + k, opened once", async () => {
  const text = async (family: {
    startSession(index: number): Promise<{ start: unknown; cancel(): Promise<void> }>;
  }) => {
    const session = await family.startSession(0);
    await session.cancel();
    return JSON.stringify(session.start);
  };
  const home = await createTaskFamily("webshop", { seed: 5 });
  const worlds = new TrainingWorlds(3, { seed: 5, familyOptions: {} });
  try {
    assert.equal(await worlds.family(home, 0), home);
    const second = await worlds.family(home, 2);
    assert.equal(await worlds.family(home, 2), second, "opened once");
    const seven = await createTaskFamily("webshop", { seed: 7 });
    assert.equal(await text(second), await text(seven), "world 2 of seed 5 is world 7");
    assert.notEqual(await text(second), await text(home), "another catalogue, another instance");
  } finally {
    await worlds.close();
  }
});

test("TrainingWorlds opens a world with the home family's atWorld where it has one (its servers, no new family)", async () => {
  const asked: number[] = [];
  const home = await createTaskFamily("kg", { seed: 3 });
  const world = await createTaskFamily("kg", { seed: 4 });
  const sharing = Object.assign(Object.create(home) as typeof home, {
    atWorld: (seed: number) => (asked.push(seed), world),
  });
  const worlds = new TrainingWorlds(2, { seed: 3, familyOptions: {} });
  try {
    assert.equal(await worlds.family(sharing, 1), world);
    assert.equal(await worlds.family(sharing, 1), world, "opened once");
    assert.deepEqual(asked, [4], "asked for world seed + 1, once");
  } finally {
    await worlds.close();
    await home.close?.();
  }
});

test("warmStartStages merges each stage into the one before; fromStage starts a recipe part-way from a given model", () => {
  const recipe = {
    out: "/tmp/ws",
    steps: 2,
    learningRate: 1e-3,
    tasks: ["kg"],
    then: [{ steps: 3 }, { tasks: ["alfworld"], learningRate: 1e-4 }],
  };
  const stages = warmStartStages(recipe);
  assert.deepEqual(
    stages.map((s) => [s.steps, s.learningRate, s.tasks, s.model]),
    [
      [2, 1e-3, ["kg"], undefined],
      [3, 1e-3, ["kg"], "/tmp/ws"],
      [3, 1e-4, ["alfworld"], "/tmp/ws"],
    ],
  );
  const resumed = fromStage(recipe, 2, "/models/stage-1");
  assert.equal(resumed.model, "/models/stage-1", "stage 2 starts from the given model");
  assert.deepEqual([resumed.steps, resumed.learningRate, resumed.tasks], [3, 1e-3, ["kg"]]);
  assert.deepEqual(
    warmStartStages(resumed)
      .slice(1)
      .map((s) => [s.steps, s.learningRate, s.tasks, s.model]),
    [[3, 1e-4, ["alfworld"], "/tmp/ws"]],
    "the later stages follow unchanged",
  );
  assert.equal(fromStage(recipe, 3, "/m").then, undefined, "the last stage alone");
  assert.throws(() => fromStage(recipe, 4, "/m"), /stage 4 does not exist: the recipe has 3 stage/);
  assert.throws(() => fromStage(recipe, 0, "/m"), WarmStartError);
  assert.throws(() => fromStage(recipe, 2), /stage 2 continues a model/);
  assert.equal(fromStage(recipe, 1).model, undefined, "stage 1 without a model starts fresh");
});

/** A fresh test-preset model, 8 steps of one ALFWorld row at a constant 1e-2. */
const EIGHT_ALFWORLD_STEPS = {
  architecture: { preset: "test", vocabSize: 600, overrides: { maxPositionEmbeddings: 2048 } },
  corpusEpisodesPerDifficulty: 2,
  tasks: ["alfworld"],
  steps: 8,
  batchSize: 1,
  learningRate: 1e-2,
  warmupSteps: 0,
  schedule: "constant",
} satisfies Partial<WarmStartOptions>;

test("runWarmStart: a fresh test-preset model trains a few steps, lowers its loss, is evaluated before and after, and is saved", async () => {
  await inTemporaryFolder("warmstart-test-", async (out) => {
    const lines: string[] = [];
    const summary = await runWarmStart({
      out,
      ...EIGHT_ALFWORLD_STEPS,
      difficulties: [0],
      evalLimit: 2,
      evalMaxTurns: 2,
      evalMaxNewTokens: 8,
      logEvery: 2,
      progress: false,
      log: (line) => lines.push(line),
    });
    assert.equal(summary.steps, 8);
    assert.equal(summary.rows, 8);
    assert.equal(summary.evaluations.length, 2, "start and end");
    assert.deepEqual(
      summary.evaluations.map((e) => e.step),
      [0, 8],
    );
    assert.equal(summary.evaluations[1].results.alfworld["0"].instances, 2);
    const losses = summary.lossCurve.map(([, , loss]) => loss);
    assert.ok(losses.every(Number.isFinite));
    assert.ok(losses.at(-1)! < losses[0], `loss fell: ${losses.join(", ")}`);
    const written = JSON.parse(
      await readFile(join(out, "warmstart.json"), "utf8"),
    ) as WarmStartSummary;
    assert.equal(written.steps, 8);
    assert.ok(
      lines.some((line) => line.startsWith("eval step 8")),
      lines.join("\n"),
    );
    const loaded = await Policy.load(out);
    assert.equal(loaded.config.hiddenSize, 32);
    assert.ok(loaded.tokenizer, "the tokenizer is saved with the model");
    loaded.dispose();
  });
});

/** Runs `body` with a fresh temporary folder, removed afterwards. */
async function inTemporaryFolder(
  prefix: string,
  body: (out: string) => Promise<void>,
): Promise<void> {
  const out = await mkdtemp(join(tmpdir(), prefix));
  try {
    await body(out);
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}

/** A first stage of two steps on ALFWorld with a fresh test-size model (compact template), no evaluations. */
const TWO_STEP_ALFWORLD: Omit<WarmStartOptions, "out"> = {
  architecture: {
    preset: "test",
    vocabSize: 600,
    overrides: { maxPositionEmbeddings: 2048 },
    chatTemplate: "compact",
  },
  corpusEpisodesPerDifficulty: 2,
  tasks: ["alfworld"],
  steps: 2,
  batchSize: 1,
  difficulties: [0],
  evalLimit: 0,
  progress: false,
};

test("taskDifficulties: a family trains and is evaluated on its own levels, the others on `difficulties`", async () => {
  await inTemporaryFolder("warmstart-levels-", async (out) => {
    const lines: string[] = [];
    const summary = await runWarmStart({
      out,
      ...TWO_STEP_ALFWORLD,
      tasks: ["alfworld", "kg"],
      taskDifficulties: { kg: [1, 2] },
      curriculum: "uniform",
      steps: 2,
      batchSize: 2,
      evalLimit: 1,
      evalMaxTurns: 1,
      evalMaxNewTokens: 4,
      log: (line) => lines.push(line),
    });
    assert.deepEqual(Object.keys(summary.evaluations[0].results.alfworld), ["0"]);
    assert.deepEqual(Object.keys(summary.evaluations[0].results.kg).sort(), ["1", "2"]);
    assert.ok(
      lines.some((line) => line.includes("difficulties 0 (kg 1,2)")),
      lines.join("\n"),
    );
  });
});

test("runWarmStart with trainingWorlds: trains on episodes of several worlds and says so", async () => {
  await inTemporaryFolder("warmstart-worlds-", async (out) => {
    const lines: string[] = [];
    const summary = await runWarmStart({
      out,
      ...TWO_STEP_ALFWORLD,
      tasks: ["webshop"],
      trainingWorlds: 4,
      worldSeed: 2,
      steps: 2,
      batchSize: 4,
      evalLimit: 1,
      evalMaxTurns: 1,
      evalMaxNewTokens: 4,
      log: (line) => lines.push(line),
    });
    assert.equal(summary.options.trainingWorlds, 4);
    assert.ok(
      lines.includes(
        "warm start: expert episodes from 4 worlds (world seeds 2-5); evaluation on world 2",
      ),
      lines.join("\n"),
    );
    assert.ok(existsSync(join(out, "model.safetensors")));
  });
});

test("taskTrainingWorlds: a family's own number of worlds (the others keep trainingWorlds), said in the log; names outside the tasks and counts below 1 are errors", async () => {
  const worlds = new TrainingWorlds(1, { seed: 0, familyOptions: {}, taskCounts: { kg: 32 } });
  assert.equal(worlds.countOf("kg"), 32);
  assert.equal(worlds.countOf("webshop"), 1);
  await inTemporaryFolder("warmstart-task-worlds-", async (out) => {
    const lines: string[] = [];
    const summary = await runWarmStart({
      out,
      ...TWO_STEP_ALFWORLD,
      tasks: ["kg", "webshop"],
      taskTrainingWorlds: { kg: 3 },
      steps: 1,
      batchSize: 2,
      evalLimit: 0,
      log: (line) => lines.push(line),
    });
    assert.deepEqual(summary.options.taskTrainingWorlds, { kg: 3 });
    assert.ok(
      lines.includes(
        "warm start: expert episodes from several worlds per task (kg 3, webshop 1; world seeds from 0 on); evaluation on world 0",
      ),
      lines.join("\n"),
    );
  });
  assert.throws(
    () => resolveWarmStartOptions({ out: "x", tasks: ["kg"], taskTrainingWorlds: { webshop: 4 } }),
    /taskTrainingWorlds names webshop, which is not among the tasks/,
  );
  assert.throws(
    () => resolveWarmStartOptions({ out: "x", tasks: ["kg"], taskTrainingWorlds: { kg: 0 } }),
    /taskTrainingWorlds.kg must be a positive integer/,
  );
});

test("runWarmStart with repetitionRows: every step trains its expert rows and that many repetition rows", async () => {
  await inTemporaryFolder("warmstart-repetition-", async (out) => {
    const lines: string[] = [];
    const summary = await runWarmStart({
      out,
      ...TWO_STEP_ALFWORLD,
      repetitionRows: 3,
      repetitionTokens: 16,
      steps: 2,
      batchSize: 2,
      evalLimit: 0,
      log: (line) => lines.push(line),
    });
    assert.equal(summary.rows, 2 * (2 + 3));
    assert.ok(
      lines.includes("warm start: 3 repetition rows a step (spans of 16 tokens)"),
      lines.join("\n"),
    );
  });
});

test("runWarmStart with `then`: later stages continue from the previous stage's model in the same folder", async () => {
  await inTemporaryFolder("warmstart-stages-", async (out) => {
    const lines: string[] = [];
    const summary = await runWarmStart({
      out,
      ...TWO_STEP_ALFWORLD,
      log: (line) => lines.push(line),
      then: [{ steps: 3, learningRate: 1e-3 }, { steps: 1 }],
    });
    const first = JSON.parse(
      await readFile(join(out, "warmstart-stage-1.json"), "utf8"),
    ) as WarmStartSummary;
    assert.equal(first.steps, 2);
    assert.equal(first.options.model, null, "stage 1 starts from a fresh model");
    const second = JSON.parse(
      await readFile(join(out, "warmstart-stage-2.json"), "utf8"),
    ) as WarmStartSummary;
    assert.equal(second.steps, 3);
    assert.equal(second.options.model, out, "stage 2 starts from stage 1's model");
    assert.equal(second.options.learningRate, 1e-3);
    assert.equal(summary.steps, 1);
    assert.equal(summary.options.learningRate, 1e-3, "stage 3 keeps what stage 2 changed");
    assert.ok(
      lines.some((line) => line.includes("stage 3 of 3")),
      lines.join("\n"),
    );
    const loaded = await Policy.load(out);
    assert.match(
      String(loaded.tokenizer!.tokenizerConfig.chat_template),
      /Call a tool with/,
      "the compact template is saved with the model",
    );
    loaded.dispose();
  });
});

test("runWarmStart with `then` stopped before a later stage: the folder keeps the finished stage's model and warmstart.json", async () => {
  await inTemporaryFolder("warmstart-stopped-", async (out) => {
    const controller = new AbortController();
    controller.abort();
    const summary = await runWarmStart({
      out,
      ...TWO_STEP_ALFWORLD,
      log: () => {},
      signal: controller.signal,
      then: [{ steps: 3 }],
    });
    const saved = JSON.parse(
      await readFile(join(out, "warmstart.json"), "utf8"),
    ) as WarmStartSummary;
    assert.equal(saved.options.steps, 2, "the first stage's summary stays as warmstart.json");
    assert.equal(summary.options.steps, 2);
    assert.ok(!existsSync(join(out, "warmstart-stage-1.json")), "no stage was moved aside");
    assert.ok(existsSync(join(out, "model.safetensors")));
  });
});

test("checkStagesRunnable: without Docker, the first stage that trains os or db is named before anything runs", async () => {
  const recipe = WARM_START_RECIPES.default;
  const stages = [recipe, ...[recipe.then ?? []].flat()];
  await assert.doesNotReject(checkStagesRunnable(stages, async () => true));
  await assert.doesNotReject(
    checkStagesRunnable([{ tasks: ["kg", "alfworld"] }, { tasks: ["webshop"] }], async () => false),
  );
  const osStage = stages.findIndex((stage) => stage.tasks?.includes("os"));
  assert.ok(osStage > 0, "the default recipe has an OS stage after the first");
  await assert.rejects(
    checkStagesRunnable(stages, async () => false),
    (error: unknown) =>
      error instanceof WarmStartError &&
      error.message.startsWith(
        `stage ${osStage + 1} of ${stages.length} trains ${stages[osStage].tasks!.filter((task) => DOCKER_FAMILIES.has(task)).join(", ")}, which needs a Docker engine`,
      ),
  );
});

test("ExpertStream plays a drawn sample once: a sample drawn again reuses its row (the same tokens)", async () => {
  const tokenizer = smallTokenizer(
    await gatherTaskText({ tasks: ["kg"], episodesPerDifficulty: 2, dataDir: "/nonexistent" }),
  );
  const kg = await createTaskFamily("kg");
  const two = kg.indicesAt("train", 0).slice(0, 2);
  const played: number[] = [];
  const family = Object.assign(Object.create(kg) as typeof kg, {
    indicesAt: () => two,
    expert: (index: number) => (played.push(index), kg.expert(index)),
  });
  const stream = new ExpertStream([family], tokenizer, {
    difficulties: [0],
    taskDifficulties: {},
    curriculum: "uniform",
    maxSequenceTokens: 100_000,
    promptLossWeight: 0,
    seed: 1,
    taskWeights: {},
  });
  try {
    const rows = [];
    for (let k = 0; k < 8; k++) rows.push(...(await stream.batch(1, k / 8)));
    assert.equal(rows.length, 8);
    assert.deepEqual([...new Set(played)].sort(), [...two].sort(), "both samples drawn");
    assert.equal(played.length, 2, `played ${played.join(", ")}: each once`);
    const distinct = new Set(rows.map((row) => row.tokens.join(" ")));
    assert.equal(distinct.size, 2, "two samples, two rows");
  } finally {
    await kg.close?.();
  }
});

test("ExpertStream: an episode that fails in the environment costs one draw (said in one line), not the stage; failures without end stop it with a WarmStartError", async () => {
  const tokenizer = smallTokenizer(
    await gatherTaskText({ tasks: ["kg"], episodesPerDifficulty: 2, dataDir: "/nonexistent" }),
  );
  const kg = await createTaskFamily("kg");
  const [good, bad] = kg.indicesAt("train", 0);
  const flaky = (broken: (index: number) => boolean) =>
    Object.assign(Object.create(kg) as typeof kg, {
      indicesAt: () => [good, bad],
      startSession: (index: number) =>
        broken(index)
          ? Promise.reject(
              new EnvironmentError(
                `sample ${index} could not start: the container's command stream closed`,
              ),
            )
          : kg.startSession(index),
    });
  const options = {
    difficulties: [0],
    taskDifficulties: {},
    curriculum: "uniform" as const,
    maxSequenceTokens: 100_000,
    promptLossWeight: 0,
    seed: 1,
    taskWeights: {},
  };
  try {
    const lines: string[] = [];
    const stream = new ExpertStream([flaky((index) => index === bad)], tokenizer, {
      ...options,
      log: (line) => lines.push(line),
    });
    const rows = [];
    for (let k = 0; k < 6; k++) rows.push(...(await stream.batch(1, 0)));
    assert.equal(rows.length, 6);
    assert.ok(lines.length > 0, "the failed draws are said");
    assert.match(lines[0], new RegExp(`kg sample ${bad} failed \\(sample ${bad} could not start`));
    const broken = new ExpertStream([flaky(() => true)], tokenizer, { ...options, log: () => {} });
    await assert.rejects(broken.batch(1, 0), (error: Error) => {
      assert.ok(error instanceof WarmStartError);
      assert.match(error.message, /21 expert episodes in a row failed in the environment/);
      return true;
    });
  } finally {
    await kg.close?.();
  }
});

test("runWarmStart stopped by an error mid-training keeps the model as trained in out/interrupted, says so, and rethrows", async () => {
  await inTemporaryFolder("warmstart-interrupted-", async (out) => {
    const lines: string[] = [];
    await assert.rejects(
      runWarmStart({
        out,
        ...EIGHT_ALFWORLD_STEPS,
        evalLimit: 0,
        logEvery: 2,
        progress: false,
        // A failure after 4 steps: the log line of step 4 throws.
        log: (line) => {
          lines.push(line);
          if (line.startsWith("step 4/8")) throw new Error("the disk is gone");
        },
      }),
      /the disk is gone/,
    );
    const kept = JSON.parse(await readFile(join(out, "interrupted", "interrupted.json"), "utf8"));
    assert.deepEqual(kept, { steps: 4, of: 8, error: "the disk is gone" });
    assert.ok(existsSync(join(out, "interrupted", "model.safetensors")));
    assert.ok(existsSync(join(out, "interrupted", "tokenizer.json")));
    assert.ok(!existsSync(join(out, "warmstart.json")), "no finished stage's summary");
    assert.ok(lines.some((line) => /stopped by an error after 4 of 8 steps/.test(line)));
  });
});
