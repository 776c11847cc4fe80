/** Phase 6: GRPO (`runTraining` of ../../rl/loop.ts) with progress, periodic evaluations and the signal. */
import { join } from "node:path";
import { FaultInjectingClient, type TaskMixEntry } from "@agentrl/rollout";
import { Policy } from "@agentrl/policy";
import type { ExperimentOptions, Printer } from "./options.js";
import type { OpenedTasks } from "./tasks.js";
import type { TrainConfig } from "../config.js";
import { episodeOptions, evaluatePolicy } from "./evaluation.js";
import { grpoOptionsOf } from "../../rl/grpo.js";
import { latestCheckpoint } from "../../rl/checkpoint.js";
import { maxPositions } from "./models.js";
import { optimizerOf, scheduleOf } from "../../rl/learner.js";
import { runTraining, type TrainingRunOptions } from "../../rl/loop.js";
import { writePlots } from "./results.js";
import { formatPerTask } from "../progress.js";

/** The RL phase: `runTraining` with progress, evaluations and the signal. Returns the folder of the final policy. */
export async function reinforcementLearning(
  config: TrainConfig,
  modelDirectory: string,
  opened: OpenedTasks,
  options: ExperimentOptions,
  print: Printer,
): Promise<{ finalModel: string | undefined; steps: number }> {
  const runDirectory = config.run.directory;
  const checkpoints = join(runDirectory, "checkpoints");
  const latest = config.run.resume ? await latestCheckpoint(checkpoints) : undefined;
  if (latest) print(`resuming RL from ${latest.folder} (step ${latest.step})`);
  if (latest && latest.step >= config.rl.steps)
    return { finalModel: join(latest.folder, "policy"), steps: latest.step };
  const external = config.crossPolicy.external;
  if (external)
    print(
      `crossPolicy.external: ${external.model} at ${external.url} takes a turn with p = ${external.probability} (loss mask 0)`,
    );

  const tasks: TaskMixEntry[] = opened.tasks.map((task) => ({
    name: task.name,
    weight: task.weight,
    indices: opened.indices.get(task.name)!.train,
    ...(task.concurrency ? { concurrency: task.concurrency } : {}),
  }));
  const taskNames = opened.tasks.map((task) => task.name);
  const contextLength = Math.min(config.rollout.maxTokens, await maxPositions(modelDirectory));
  const progress = options.createProgress?.("RL", config.rl.steps, "step");
  progress?.update(latest?.step ?? 0, "waiting for the first batch");
  let steps = latest?.step ?? 0;
  try {
    await runTraining({
      modelDirectory,
      runDirectory,
      client:
        config.rollout.injectInfrastructureFaults > 0
          ? new FaultInjectingClient(opened.client, {
              sessionShare: config.rollout.injectInfrastructureFaults,
              seed: config.run.seed,
            })
          : opened.client,
      tasks,
      ...trainingSettings(config),
      rollout: {
        maxConcurrentEpisodes: config.rollout.concurrency,
        engine: { temperature: config.rl.temperature, maxSequenceLength: contextLength },
        episode: {
          ...episodeOptions(config),
          maxTokens: contextLength,
          temperature: config.rl.temperature,
          unreadAnswerReward: config.rollout.unreadAnswerReward,
        },
        maxStaleness: config.rl.maxStaleness === "infinite" ? Infinity : config.rl.maxStaleness,
        uninformativeWeight: config.rollout.uninformativeWeight,
        decodeThreads: config.rollout.decodeThreads,
        ...(config.rollout.servers.length > 0
          ? {
              servers: {
                urls: config.rollout.servers,
                apiKey: config.rollout.serverApiKey ?? process.env.AGENTRL_API_KEY,
              },
            }
          : {}),
      },
      crossPolicy: {
        staleProbability: config.crossPolicy.staleProbability,
        refreshEvery: config.crossPolicy.refreshEvery,
        ...(external
          ? {
              external: {
                baseUrl: external.url,
                model: external.model,
                probability: external.probability,
              },
            }
          : {}),
      },
      checkpoint: config.checkpoint,
      trajectories: { episodesPerStep: config.run.trajectories },
      resume: config.run.resume,
      signal: options.signal,
      onStep: (record) => {
        steps = record.step;
        const success = Object.fromEntries(
          taskNames
            .filter((t) => `success/${t}` in record.metrics)
            .map((t) => [t, record.metrics[`success/${t}`]]),
        );
        progress?.update(
          record.step,
          `reward ${record.metrics.reward.toFixed(2)} | success ${formatPerTask(success)}`,
        );
      },
      ...(config.evaluation.every > 0
        ? {
            evaluation: {
              every: config.evaluation.every,
              run: async (policy: Policy, step: number) => {
                // The last step's policy is the final model: the final tables measure it on more instances.
                if (step >= config.rl.steps) return {};
                const result = await evaluatePolicy(policy, {
                  config,
                  client: opened.client,
                  tasks: taskNames,
                  limit: config.evaluation.limit,
                  phase: "test eval",
                  createProgress: options.createProgress,
                  plain: true,
                  signal: options.signal,
                });
                return Object.fromEntries(
                  Object.values(result).flatMap((r) => [
                    [`eval/success/${r.task}`, r.success],
                    [`eval/reward/${r.task}`, r.meanReward],
                  ]),
                );
              },
            },
          }
        : {}),
    });
  } finally {
    progress?.stop();
    // A LoRA run's frozen base stays loaded for the folders that share it (lora-folder.ts);
    // its policies are disposed now, and the final evaluation loads the merged checkpoint, a
    // model of the same size: keeping both can pass the wasm backend's 4 GiB heap.
    await Policy.releaseSharedBases();
  }
  await writePlots(runDirectory);
  const last = await latestCheckpoint(checkpoints);
  return { finalModel: last ? join(last.folder, "policy") : undefined, steps: last?.step ?? steps };
}

/** The RL loop's settings that follow from the configuration alone (the rest are the run's own objects). */
export function trainingSettings(
  config: TrainConfig,
): Pick<
  TrainingRunOptions,
  "mode" | "steps" | "batchGroups" | "dynamicSamplingGroups" | "groupSize" | "seed" | "learner"
> {
  return {
    mode: config.rl.mode,
    steps: config.rl.steps,
    batchGroups: config.rl.batchGroups,
    dynamicSamplingGroups: config.rl.dynamicSamplingGroups,
    groupSize: config.rl.groupSize,
    seed: config.run.seed,
    learner: {
      grpo: grpoOptionsOf(config.rl),
      schedule: scheduleOf(config.rl),
      optimizer: optimizerOf(config.rl),
      ...(config.rl.gradientThreads === "auto"
        ? {}
        : { gradientThreads: config.rl.gradientThreads }),
    },
  };
}
