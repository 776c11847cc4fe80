/**
 * Cross-policy sampling with an EXTERNAL model inside the training loop, across packages:
 * a tiny model is saved and served by the project's own OpenAI-compatible server
 * (`startModelServer`, on 127.0.0.1 with a random port and an API key), and a short sync
 * `runTraining` whose `crossPolicy.external` points at it trains for two steps. Checked:
 * - external turns happen, and each one was a request answered by the server;
 * - their tokens carry loss mask 0, policy id `external` and version −1, while the current
 *   and stale turns carry loss mask 1;
 * - the learner trained on exactly the current and stale turns' tokens (`train/trainedTokens`
 *   equals their count, so no external token reached the loss);
 * - external turns do not count against staleness (maxStaleness 0 drops no group);
 * - `rollout/external_turns` is each step's own count.
 * Also: probabilities that cannot both hold are refused before anything loads, by the loop
 * (TrainingOptionsError) and by the CLI's configuration (ConfigError).
 */
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  FunctionCallSession,
  InProcessEnvironmentClient,
  type TaskFamily,
  type ToolReply,
  type ToolSpec,
} from "@agentrl/envs";
import {
  Policy,
  QWEN25_CHAT_TEMPLATE,
  Tokenizer,
  presetConfig,
  renderChatTemplate,
  setBackend,
  trainByteLevelBpe,
} from "@agentrl/policy";
import { POLICY_CODES, type TrajectoryGroup } from "@agentrl/rollout";
import { NO_VERSION } from "@agentrl/rollout/internal";
import {
  TrainingOptionsError,
  prepareBatch,
  runTraining,
  type StepRecord,
  type TrainingRunOptions,
} from "@agentrl/trainer";
import { startModelServer, type RunningModelServer } from "@agentrl/rollout";
import { resolveTrainConfig } from "../packages/trainer/src/run/experiment/index.js";
import { ConfigError } from "../packages/trainer/src/run/config.js";

await setBackend("cpu", { log: null });
process.env.AGENTRL_BACKEND = "cpu"; // every Policy.load (the loop's and the server's) uses the cpu backend too

const API_KEY = "external-test-key";
const MODEL_NAME = "external-tiny";
const WORDS = ["apple", "river", "stone", "cloud", "green", "tiger"];
const SAY: ToolSpec = {
  type: "function",
  function: {
    name: "say",
    description: "Say a word.",
    parameters: { type: "object", properties: { word: { type: "string" } }, required: ["word"] },
  },
};

/**
 * Two turns of anything; the reward depends on how many characters both turns wrote, so
 * that the rewards of a group differ. Text turns and tool calls count alike.
 */
class TwoTurnSession extends FunctionCallSession {
  private characters = 0;
  constructor(word: string) {
    super(
      {
        messages: [{ role: "user", content: `Call say with the word ${word}, twice.` }],
        tools: [SAY],
      },
      { maxTurns: 3 },
    );
  }
  private answer(characters: number): {
    content: string;
    outcome?: { reward: number; status: "completed" };
  } {
    this.characters += characters;
    return this.turns >= 2
      ? { content: "noted", outcome: { reward: (this.characters % 5) / 4, status: "completed" } }
      : { content: "noted" };
  }
  protected override async onText(content: string) {
    return this.answer(content.length);
  }
  protected async callTool(_name: string, args: Record<string, unknown>): Promise<ToolReply> {
    return this.answer(JSON.stringify(args).length);
  }
}

const family: TaskFamily = {
  name: "two-turns",
  indices: (split) => (split === "train" ? [0, 1, 2, 3] : [4, 5]),
  startSession: async (index) => new TwoTurnSession(WORDS[index]),
};

/** An untrained `test`-preset model with a small BPE tokenizer that knows the chat template. */
async function makeModel(): Promise<string> {
  const system = renderChatTemplate(QWEN25_CHAT_TEMPLATE, [{ role: "user", content: "hi" }], {
    tools: [SAY],
  });
  const corpus = WORDS.flatMap((w) => [
    system,
    `Call say with the word ${w}, twice.`,
    `<tool_call>\n{"name": "say", "arguments": {"word": "${w}"}}\n</tool_call>`,
    "noted",
  ]);
  const files = trainByteLevelBpe([...corpus, ...corpus], { vocabSize: 400 });
  const tokenizer = Tokenizer.fromJson(files.tokenizerJson, files.tokenizerConfig);
  const policy = Policy.create(presetConfig("test", { vocabSize: tokenizer.vocabSize }), {
    tokenizer,
    seed: 3,
  });
  const directory = mkdtempSync(join(tmpdir(), "agentrl-external-model-"));
  await policy.save(directory);
  policy.dispose();
  return directory;
}

function options(
  modelDirectory: string,
  runDirectory: string,
  external: NonNullable<TrainingRunOptions["crossPolicy"]["external"]>,
  overrides: Partial<TrainingRunOptions> = {},
): TrainingRunOptions {
  return {
    modelDirectory,
    runDirectory,
    client: new InProcessEnvironmentClient([family]),
    tasks: [{ name: "two-turns" }],
    mode: "sync",
    steps: 2,
    batchGroups: 2,
    groupSize: 3,
    seed: 5,
    learner: {
      schedule: {
        learningRate: 1e-3,
        warmupSteps: 0,
        schedule: "constant",
        minLearningRateRatio: 0.1,
        totalSteps: 2,
      },
      // Every group is trained on (no uniform-group filter), so the rows are exactly the batch's trajectories.
      grpo: { klCoefficient: 0, skipUniformGroups: false, temperature: 1 },
    },
    // maxStaleness 0: a group survives only if external (and stale) turns do not count against staleness.
    rollout: {
      maxConcurrentEpisodes: 6,
      engine: { temperature: 1 },
      episode: { maxTurns: 3, maxNewTokensPerTurn: 12, maxTokens: 1024 },
      maxStaleness: 0,
    },
    // The stale copy is refreshed every 2 steps: at step 2 its turns are one version behind.
    crossPolicy: { staleProbability: 0.2, refreshEvery: 2, external },
    checkpoint: { every: 2, keep: 1 },
    resume: false,
    log: () => {},
    ...overrides,
  };
}

/** Per batch: external turns, their tokens, and the tokens of the current and stale turns. */
function countTurns(groups: readonly TrajectoryGroup[]) {
  const counts = {
    externalTurns: 0,
    externalTokens: 0,
    policyTurns: 0,
    policyTokens: 0,
    mixedTrajectories: 0,
  };
  for (const trajectory of groups.flatMap((group) => group.trajectories)) {
    let external = 0;
    let generated = 0;
    for (const turn of trajectory.turns) {
      const [from, to] = turn.generated;
      assert.ok(to > from, "every turn has tokens");
      if (turn.policy === "external") {
        external += 1;
        counts.externalTokens += to - from;
      } else {
        counts.policyTurns += 1;
        generated += to - from;
      }
    }
    counts.externalTurns += external;
    counts.policyTokens += generated;
    if (external > 0 && generated > 0) counts.mixedTrajectories += 1;
  }
  return counts;
}

describe("runTraining with an external model served over the OpenAI API", () => {
  let modelDirectory: string;
  let running: RunningModelServer;
  let baseUrl: string;

  before(async () => {
    modelDirectory = await makeModel();
    running = await startModelServer({
      model: modelDirectory,
      host: "127.0.0.1",
      port: 0,
      apiKey: API_KEY,
      name: MODEL_NAME,
      maxBatch: 8,
      log: null,
    });
    baseUrl = running.address.baseUrl;
    assert.match(baseUrl, /^http:\/\/127\.0\.0\.1:\d+\/v1$/);
  });
  after(async () => {
    await running?.close();
    rmSync(modelDirectory, { recursive: true, force: true });
  });

  test(
    "sync mode: external turns have loss mask 0 in the trained rows, and the steps complete",
    { timeout: 600_000 },
    async (t) => {
      const runDirectory = mkdtempSync(join(tmpdir(), "agentrl-external-run-"));
      const batches: { step: number; groups: readonly TrajectoryGroup[] }[] = [];
      const records: StepRecord[] = [];
      const requestsBefore = running.engine.stats().completedRequests;
      const last = await runTraining(
        options(
          modelDirectory,
          runDirectory,
          { baseUrl, model: MODEL_NAME, apiKey: API_KEY, probability: 0.5 },
          {
            onBatch: (batch) => batches.push(batch),
            onStep: (record) => records.push(record),
          },
        ),
      );
      assert.equal(last?.step, 2, "both steps completed");
      assert.deepEqual(
        batches.map((batch) => batch.step),
        [1, 2],
      );
      assert.deepEqual(
        records.map((record) => record.step),
        [1, 2],
      );

      let externalTurns = 0;
      let policyTurns = 0;
      let mixed = 0;
      for (const [i, { groups }] of batches.entries()) {
        const metrics = records[i].metrics;
        // maxStaleness 0 dropped nothing: external turns (version −1) and stale turns do not count against it.
        assert.equal(groups.length, 2, `step ${i + 1}: a full batch`);
        assert.equal(metrics["buffer/dropped_stale_groups"], 0);
        assert.equal(metrics.staleness, 0);
        for (const trajectory of groups.flatMap((group) => group.trajectories)) {
          // No episode failed: the server answered every external request (also after the idle time of a training step).
          assert.notEqual(trajectory.status, "task error", trajectory.error);
          for (const turn of trajectory.turns) {
            const [from, to] = turn.generated;
            for (let position = from; position < to; position++) {
              if (turn.policy === "external") {
                assert.equal(trajectory.lossMask[position], 0, `external token at ${position}`);
                assert.equal(trajectory.policyIds[position], POLICY_CODES.external);
                assert.equal(trajectory.versions[position], NO_VERSION);
              } else {
                assert.equal(
                  trajectory.lossMask[position],
                  1,
                  `${turn.policy} token at ${position}`,
                );
                assert.equal(trajectory.policyIds[position], POLICY_CODES[turn.policy]);
              }
            }
          }
        }
        const counts = countTurns(groups);
        const statuses = groups
          .flatMap((group) => group.trajectories)
          .map(
            (trajectory) =>
              `${trajectory.status}${trajectory.error ? ` (${trajectory.error.slice(0, 60)})` : ""}`,
          );
        t.diagnostic(
          `step ${i + 1}: ${counts.externalTurns} external turns (${counts.externalTokens} tokens), ${counts.policyTurns} policy turns (${counts.policyTokens} tokens), ${counts.mixedTrajectories} mixed episodes; ${statuses.join(", ")}`,
        );
        assert.equal(
          metrics["rollout/external_turns"],
          counts.externalTurns,
          "the step's own count of external turns",
        );
        // The rows the learner trains on: every loss-mask token is a current or stale turn's token.
        const rows = prepareBatch(groups, {
          advantageEstimator: "grpo",
          taskAdvantageNormalization: true,
          skipUniformGroups: false,
        }).rows;
        assert.equal(rows.length, groups.length * 3);
        assert.equal(
          rows.reduce((n, row) => n + row.lossMask.reduce((a, b) => a + b, 0), 0),
          counts.policyTokens,
        );
        // …and the learner's own count says the same: no external token reached the loss.
        assert.equal(metrics["train/trainedTokens"], counts.policyTokens);
        externalTurns += counts.externalTurns;
        policyTurns += counts.policyTurns;
        mixed += counts.mixedTrajectories;
      }
      assert.ok(externalTurns >= 2, `${externalTurns} external turns`);
      assert.ok(policyTurns >= 2, `${policyTurns} current or stale turns`);
      assert.ok(mixed >= 1, "at least one trained episode mixes external and policy turns");
      // Every external turn was one chat-completions request the server's engine answered.
      assert.equal(running.engine.stats().completedRequests - requestsBefore, externalTurns);
      const lines = readFileSync(join(runDirectory, "metrics.jsonl"), "utf8")
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line));
      assert.deepEqual(
        lines.map((line) => line["rollout/external_turns"]),
        records.map((record) => record.metrics["rollout/external_turns"]),
      );
      rmSync(runDirectory, { recursive: true, force: true });
    },
  );

  test("stale + external probability above 1 is refused before anything loads", async () => {
    const missing = join(tmpdir(), "agentrl-no-such-model");
    await assert.rejects(
      runTraining(
        options(missing, mkdtempSync(join(tmpdir(), "agentrl-external-bad-")), {
          baseUrl,
          model: MODEL_NAME,
          probability: 0.9,
        }),
      ),
      (error: Error) =>
        error instanceof TrainingOptionsError &&
        /crossPolicy\.external\.probability \(0\.9\).*staleProbability \(0\.2\)/.test(
          error.message,
        ),
    );
    await assert.rejects(
      resolveTrainConfig({
        set: [
          "crossPolicy.staleProbability=0.5",
          `crossPolicy.external.url=${baseUrl}`,
          `crossPolicy.external.model=${MODEL_NAME}`,
          "crossPolicy.external.probability=0.6",
        ],
      }),
      (error: Error) =>
        error instanceof ConfigError &&
        /crossPolicy\.staleProbability \(0\.5\) \+ crossPolicy\.external\.probability \(0\.6\)/.test(
          error.message,
        ),
    );
    const accepted = await resolveTrainConfig({
      set: [
        "crossPolicy.staleProbability=0.5",
        `crossPolicy.external.url=${baseUrl}`,
        `crossPolicy.external.model=${MODEL_NAME}`,
        "crossPolicy.external.probability=0.5",
      ],
    });
    assert.equal(accepted.crossPolicy.external?.probability, 0.5);
  });
});
