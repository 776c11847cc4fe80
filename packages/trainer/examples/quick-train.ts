/**
 * A complete GRPO run in a few minutes on CPU: a fresh `test`-preset model with its own
 * tokenizer, the KG task family at difficulty 0, two steps of async training (the learner
 * in a worker thread), then an evaluation on the test split.
 *   node --conditions=source --import tsx packages/trainer/examples/quick-train.ts
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Policy, Tokenizer, initBackend, presetConfig, trainByteLevelBpe } from "@agentrl/policy";
import { InProcessEnvironmentClient, createTaskFamily, playEpisodes } from "@agentrl/envs";
import { evaluate, runTraining } from "@agentrl/trainer";

await initBackend();
const kg = await createTaskFamily("kg", { trainSize: 50, testSize: 10 });

// A tokenizer trained on expert episodes of the task, and a fresh model.
const episodes = await playEpisodes(kg, kg.indicesAt("train", 0).slice(0, 30), (index) =>
  kg.expert(index),
);
const corpus = episodes.map((e) => JSON.stringify(e.messages) + JSON.stringify(e.tools));
const files = trainByteLevelBpe(corpus, { vocabSize: 1024 });
const tokenizer = Tokenizer.fromJson(files.tokenizerJson, files.tokenizerConfig);
const model = join(mkdtempSync(join(tmpdir(), "agentrl-example-")), "model");
await Policy.create(
  presetConfig("test", { vocabSize: tokenizer.vocabSize, maxPositionEmbeddings: 4096 }),
  { tokenizer },
).save(model);

const client = new InProcessEnvironmentClient([kg]);
const runDirectory = join(model, "..", "run");
const last = await runTraining({
  modelDirectory: model,
  runDirectory,
  client,
  mode: "async",
  tasks: [{ name: "kg", indices: kg.indicesAt("train", 0) }],
  steps: 2,
  batchGroups: 2,
  groupSize: 4,
  seed: 0,
  learner: { schedule: { learningRate: 1e-4 } },
  rollout: {
    maxConcurrentEpisodes: 8,
    engine: { temperature: 0.8 },
    episode: { maxTurns: 3, maxNewTokensPerTurn: 48, maxTokens: 2048 },
    maxStaleness: 2,
  },
  crossPolicy: { staleProbability: 0.25, refreshEvery: 25 },
  checkpoint: { every: 1, keep: 2 },
  resume: false,
  onStep: ({ step, metrics }) =>
    console.log(
      `step ${step}: reward ${metrics.reward.toFixed(3)}, loss ${metrics["train/loss"].toFixed(4)}, ${metrics["time/step"].toFixed(1)} s`,
    ),
});
console.log(`trained to step ${last?.step}; run folder ${runDirectory}`);

const policy = await Policy.load(join(runDirectory, "checkpoints", "step-000002", "policy"));
const results = await evaluate({
  client,
  policy,
  tasks: ["kg"],
  limit: 4,
  episode: { maxTurns: 3, maxNewTokensPerTurn: 48 },
});
console.log(
  `test success on kg: ${(100 * results.kg.success).toFixed(0)} % of ${results.kg.episodes} episodes`,
);
await client.close();
