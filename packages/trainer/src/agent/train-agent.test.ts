/**
 * trainAgent end to end on the shipped warm start: an AI SDK agent (generateText with KG's
 * tools and stopWhen, through `@ai-sdk/openai-compatible`) plays KG episodes through the
 * recording gateway with the environment's reward, for one sync GRPO step. Checked: the
 * step runs (finite loss, a checkpoint), the rewards and successes are recorded per task,
 * and, when the batch has trainable groups, the trainer's scoring of the recorded tokens
 * agrees with the sampler's log-probs (same weights: importance ratios at 1, mismatch KL ≈ 0),
 * as in the built-in path.
 * Skipped when models/warmstart is missing.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { generateText, jsonSchema, stepCountIs, tool, type ToolSet } from "ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import {
  InProcessEnvironmentClient,
  createTaskFamily,
  type CurriculumTaskFamily,
} from "@agentrl/envs";
import { setBackend } from "@agentrl/policy";
import { trainAgent } from "./train-agent.js";

const MODEL = fileURLToPath(new URL("../../../../models/warmstart", import.meta.url));
const HAVE_MODEL = existsSync(`${MODEL}/model.safetensors`);

test(
  "trainAgent: a GRPO step of an AI SDK agent on KG through the gateway",
  { skip: HAVE_MODEL ? false : `no ${MODEL}` },
  async () => {
    await setBackend("cpu", { log: null });
    process.env.AGENTRL_BACKEND = "cpu";
    const family = (await createTaskFamily("kg", { seed: 0 })) as CurriculumTaskFamily;
    const client = new InProcessEnvironmentClient([family]);
    const runDirectory = mkdtempSync(join(tmpdir(), "agentrl-train-agent-"));
    let episodes = 0;
    const last = await trainAgent<{ name: string; index: number }>({
      model: MODEL,
      tasks: {},
      environment: {
        client,
        tasks: ["kg"],
        indices: { kg: family.indicesAt("train", 1).slice(0, 8) },
      },
      agent: async (_task, { baseURL, apiKey, model, session }) => {
        episodes += 1;
        const provider = createOpenAICompatible({ name: "policy", baseURL, apiKey });
        const tools: ToolSet = Object.fromEntries(
          session!.tools.map((spec) => [
            spec.function.name,
            tool({
              description: spec.function.description,
              inputSchema: jsonSchema(spec.function.parameters as Parameters<typeof jsonSchema>[0]),
              execute: async (input, { toolCallId }) => {
                const reply = await session!.interact({
                  role: "assistant",
                  content: null,
                  tool_calls: [
                    {
                      id: toolCallId,
                      type: "function",
                      function: { name: spec.function.name, arguments: JSON.stringify(input) },
                    },
                  ],
                });
                return reply.messages.map((message) => message.content).join("\n");
              },
            }),
          ]),
        );
        const system = session!.messages
          .filter((m) => m.role === "system")
          .map((m) => m.content)
          .join("\n");
        const prompt = session!.messages
          .filter((m) => m.role === "user")
          .map((m) => m.content)
          .join("\n");
        const { text } = await generateText({
          model: provider(model),
          system,
          prompt,
          tools,
          stopWhen: stepCountIs(4),
          maxOutputTokens: 64,
        });
        await session!.interact({ role: "assistant", content: text }).catch(() => undefined);
        // Nothing returned: the environment's verdict is the reward.
      },
      runDirectory,
      groupSize: 4,
      batchGroups: 2,
      steps: 1,
      checkpointEvery: 1,
      learningRate: 1e-5,
      episode: { maxTokens: 1280, maxNewTokensPerTurn: 64 },
      log: () => {},
    });
    assert.equal(last?.step, 1);
    assert.ok(episodes >= 8, `${episodes} episodes played`);
    const metrics = readFileSync(join(runDirectory, "metrics.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, number>);
    assert.deepEqual(
      metrics.map((m) => m.step),
      [1],
    );
    for (const m of metrics) {
      assert.ok(Number.isFinite(m["train/loss"]), `step ${m.step} loss`);
      assert.ok("reward/kg" in m && "success/kg" in m, Object.keys(m).join(", "));
    }
    const first = metrics[0];
    console.log(
      `step 1: reward/kg ${first["reward/kg"]}, success/kg ${first["success/kg"]}, mismatch KL ${first["train/mismatchKl"]}, ratio [${first["train/importanceRatioMin"]}, ${first["train/importanceRatioMax"]}]`,
    );
    assert.ok(existsSync(join(runDirectory, "checkpoints")));
    // Groups whose rewards are all equal carry no gradient: the ratios are measured only when something trained.
    if (first["train/step"] === 0) return;
    assert.ok(
      first["train/mismatchKl"] < 1e-4,
      `sampler vs trainer log-probs at step 1: mismatch KL ${first["train/mismatchKl"]}`,
    );
    assert.ok(
      Math.abs(first["train/importanceRatioMin"] - 1) < 0.01 &&
        Math.abs(first["train/importanceRatioMax"] - 1) < 0.01,
    );
  },
);
