import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Policy, QWEN25_CHAT_TEMPLATE, Tokenizer, presetConfig, renderChatTemplate, readSafetensorsDirectory, setBackend, trainByteLevelBpe } from "@agentrl/policy";
import { FunctionCallSession, InProcessEnvironmentClient, type TaskFamily, type ToolSpec, type ToolReply } from "@agentrl/envs";
import { runTraining, type TrainingRunOptions } from "./loop.js";
import { latestCheckpoint } from "./checkpoint.js";
import type { TrajectoryGroup } from "@agentrl/rollout";

await setBackend("cpu", { log: null });
process.env.AGENTRL_BACKEND = "cpu"; // the learner thread and every Policy.load use the cpu backend too

const WORDS = ["apple", "river", "stone", "cloud", "green", "tiger", "maple", "ocean"];
const SAY: ToolSpec = { type: "function", function: { name: "say", description: "Say a word.", parameters: { type: "object", properties: { word: { type: "string" } }, required: ["word"] } } };

class SaySession extends FunctionCallSession {
  constructor(private readonly word: string) {
    super({ messages: [{ role: "user", content: `Call say with the word ${word}.` }], tools: [SAY] }, { maxTurns: 2 });
  }
  /** An untrained model writes text, not tool calls: reward its length so that rewards vary and the update has a signal. */
  protected override async onText(content: string) {
    return { content: "noted", outcome: { reward: (content.length % 4) / 4, status: "completed" as const } };
  }
  protected async callTool(_name: string, args: Record<string, unknown>): Promise<ToolReply> {
    const right = args.word === this.word;
    return { content: right ? "correct" : "wrong", outcome: { reward: right ? 1 : 0, status: "completed" } };
  }
}

const family: TaskFamily = {
  name: "say",
  indices: (split) => (split === "train" ? [0, 1, 2, 3, 4, 5] : [6, 7]),
  startSession: async (index) => new SaySession(WORDS[index]),
};

async function makeModel(): Promise<string> {
  const system = renderChatTemplate(QWEN25_CHAT_TEMPLATE, [{ role: "user", content: "hi" }], { tools: [SAY] });
  const corpus = WORDS.flatMap((w) => [system, `Call say with the word ${w}.`, `<tool_call>\n{"name": "say", "arguments": {"word": "${w}"}}\n</tool_call>`, "correct wrong noted"]);
  const files = trainByteLevelBpe([...corpus, ...corpus], { vocabSize: 400 });
  const tokenizer = Tokenizer.fromJson(files.tokenizerJson, files.tokenizerConfig);
  const policy = Policy.create(presetConfig("test", { vocabSize: tokenizer.vocabSize }), { tokenizer, seed: 7 });
  const directory = mkdtempSync(join(tmpdir(), "agentrl-loop-model-"));
  await policy.save(directory);
  policy.dispose();
  return directory;
}

function options(modelDirectory: string, runDirectory: string, overrides: Partial<TrainingRunOptions>): TrainingRunOptions {
  return {
    modelDirectory, runDirectory,
    client: new InProcessEnvironmentClient([family]),
    tasks: [{ name: "say" }],
    mode: "sync", steps: 4, batchGroups: 2, groupSize: 2, seed: 11,
    learner: { schedule: { learningRate: 1e-3, warmupSteps: 0, schedule: "constant", minLearningRateRatio: 0.1, totalSteps: 4 }, grpo: { klCoefficient: 1e-4 } },
    rollout: { maxConcurrentEpisodes: 4, engine: { temperature: 1 }, episode: { maxTurns: 2, maxNewTokensPerTurn: 12, maxTokens: 1024 }, maxStaleness: Infinity },
    crossPolicy: { staleProbability: 0.25, refreshEvery: 2 },
    checkpoint: { every: 1, keep: 10 },
    resume: false,
    ...overrides,
  };
}

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
    // the share of the step's groups with unequal rewards, and of episodes with a reward between 0 and 1
    assert.ok(m["informative/say"] >= 0 && m["informative/say"] <= 1 && m["partial/say"] >= 0 && m["partial/say"] <= 1);
    // the step's own batch, not a running total of the scheduler
    assert.equal(m["rollout/stale_turns"], staleTurnsByStep.get(m.step), `stale turns of step ${m.step}`);
  }
  assert.ok(existsSync(join(run, "checkpoints", "step-000003", "policy", "model.safetensors")));
});
