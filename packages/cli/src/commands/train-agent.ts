/**
 * `agentrl train --agent <module>`: trains an unmodified agent function with `trainAgent`
 * (@agentrl/trainer; see docs/harness.md). The module exports:
 *
 *   export default async function agent(task, { baseURL, apiKey, model, session }) { … return reward; }
 *   export const tasks = [ … ];                 // or { name: [ … ], … }; or [] with environmentTasks
 *   export const environmentTasks = ["kg"];     // optional: tasks whose reward the project's environment gives
 *
 * (`agent` may also be a named export). TypeScript modules load through tsx (`npm run agentrl`).
 */
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { InProcessEnvironmentClient, openFamilies } from "@agentrl/envs";
import { AgentRLError } from "@agentrl/spec";
import { trainAgent, type AgentTasks } from "@agentrl/trainer";
import type { AgentFunction } from "@agentrl/rollout";

export class AgentModuleError extends AgentRLError {}

export interface AgentTrainingOptions {
  /** The agent module (see the file's comment). */
  module: string;
  /** Starting weights. Default `models/warmstart`. */
  model?: string;
  runDirectory?: string;
  steps?: number;
  groupSize?: number;
  batchGroups?: number;
  learningRate?: number;
  temperature?: number;
  print?: (line: string) => void;
  signal?: AbortSignal;
}

/** Loads the module and trains its agent; resolves with the last step. */
export async function runAgentTraining(options: AgentTrainingOptions) {
  const loaded = (await import(pathToFileURL(resolve(options.module)).href)) as {
    default?: unknown;
    agent?: unknown;
    tasks?: unknown;
    environmentTasks?: unknown;
  };
  const agent = (typeof loaded.agent === "function" ? loaded.agent : loaded.default) as
    AgentFunction<unknown> | undefined;
  if (typeof agent !== "function")
    throw new AgentModuleError(
      `${options.module} exports no agent function (export default, or export const agent)`,
    );
  const environmentTasks = Array.isArray(loaded.environmentTasks)
    ? (loaded.environmentTasks as string[])
    : [];
  const tasks = (loaded.tasks ?? (environmentTasks.length > 0 ? {} : undefined)) as
    AgentTasks<unknown> | undefined;
  if (!tasks)
    throw new AgentModuleError(`${options.module} exports no tasks (export const tasks = [...])`);
  const { families, failures } = await openFamilies(environmentTasks);
  if (failures.length > 0) {
    await Promise.all(families.map((family) => family.close?.()));
    throw failures[0].error;
  }
  const print = options.print ?? ((line: string) => console.log(line));
  try {
    return await trainAgent({
      model: options.model ?? "models/warmstart",
      tasks,
      agent,
      runDirectory: options.runDirectory ?? "runs/agent",
      ...(options.steps !== undefined ? { steps: options.steps } : {}),
      ...(options.groupSize !== undefined ? { groupSize: options.groupSize } : {}),
      ...(options.batchGroups !== undefined ? { batchGroups: options.batchGroups } : {}),
      ...(options.learningRate !== undefined ? { learningRate: options.learningRate } : {}),
      ...(options.temperature !== undefined ? { temperature: options.temperature } : {}),
      ...(families.length > 0
        ? {
            environment: {
              client: new InProcessEnvironmentClient(families),
              tasks: environmentTasks,
            },
          }
        : {}),
      onStep: (record) => {
        const rewards = Object.entries(record.metrics).filter(
          ([key]) => key.startsWith("reward/") || key.startsWith("success/"),
        );
        print(
          `step ${record.step}: ${rewards.map(([key, value]) => `${key} ${Number(value).toFixed(3)}`).join(", ")}`,
        );
      },
      ...(options.signal ? { signal: options.signal } : {}),
      log: (line) => print(line),
    });
  } finally {
    await Promise.all(families.map((family) => family.close?.()));
  }
}
