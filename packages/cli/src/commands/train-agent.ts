/**
 * `agentrl train --agent <module>`: trains an unmodified agent function with `trainAgent`
 * (@agentrl/trainer; see docs/harness.md). The module exports:
 *
 *   export default async function agent(task, { baseURL, apiKey, model, session }) { … return reward; }
 *   export const tasks = [ … ];                 // or { name: [ … ], … }; or [] with environmentTasks
 *   export const environmentTasks = ["kg"];     // optional: tasks whose reward the project's environment gives
 *   export const environmentOptions = { kg: { seed: 1000 } };   // optional: each family's options
 *   export const environmentIndices = { kg: [0, 1, 2] };        // optional: the instances to draw,
 *     // or a function of the opened family: { kg: (family) => family.indicesAt("train", 0) }
 *   export const trainOptions = { learningRate: 1e-4, episode: { maxTokens: 1280 } };  // optional
 *
 * (`agent` may also be a named export). Without `environmentIndices`, an environment task
 * draws its family's train split, or with `--difficulty N` the train split at difficulty N.
 * Flags override `trainOptions`. TypeScript modules load through tsx (`npm run agentrl`).
 */
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import {
  InProcessEnvironmentClient,
  createTaskFamily,
  type CurriculumTaskFamily,
  type TaskFamily,
  type TaskFamilyOptions,
} from "@agentrl/envs";
import { AgentRLError } from "@agentrl/spec";
import { trainAgent, type AgentTasks, type TrainAgentOptions } from "@agentrl/trainer";
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
  seed?: number;
  /** Continue from the run folder's newest checkpoint. */
  resume?: boolean;
  /** Environment tasks without `environmentIndices` draw the train split at this difficulty. */
  difficulty?: number;
  print?: (line: string) => void;
  signal?: AbortSignal;
}

/** A module's choice of one environment task's instances: the indices, or a function of its family. */
export type EnvironmentIndices =
  readonly number[] | ((family: TaskFamily) => readonly number[] | Promise<readonly number[]>);

/** What a module's `trainOptions` may set (the CLI sets the rest). */
export type ModuleTrainOptions = Partial<
  Omit<TrainAgentOptions<unknown>, "tasks" | "agent" | "environment" | "signal" | "log" | "onStep">
>;

/** The indices an environment task draws: the module's choice, else the train split at `difficulty`, else undefined (the whole train split). */
async function chooseIndices(
  family: TaskFamily,
  chosen: EnvironmentIndices | undefined,
  difficulty: number | undefined,
): Promise<number[] | undefined> {
  if (chosen !== undefined) {
    const list = [...(typeof chosen === "function" ? await chosen(family) : chosen)];
    if (list.length === 0 || !list.every((index) => Number.isInteger(index) && index >= 0))
      throw new AgentModuleError(
        `environmentIndices.${family.name} must be a non-empty list of instance indices`,
      );
    return list;
  }
  if (difficulty === undefined) return undefined;
  const curriculum = family as Partial<CurriculumTaskFamily>;
  if (typeof curriculum.indicesAt !== "function")
    throw new AgentModuleError(`--difficulty: the task ${family.name} has no difficulties`);
  const list = curriculum.indicesAt("train", difficulty);
  if (list.length === 0)
    throw new AgentModuleError(
      `--difficulty ${difficulty}: the task ${family.name} has no train instances there (difficulties ${curriculum.difficulties?.join(", ")})`,
    );
  return list;
}

/** Loads the module and trains its agent; resolves with the last step. */
export async function runAgentTraining(options: AgentTrainingOptions) {
  const loaded = (await import(pathToFileURL(resolve(options.module)).href)) as {
    default?: unknown;
    agent?: unknown;
    tasks?: unknown;
    environmentTasks?: unknown;
    environmentOptions?: Record<string, TaskFamilyOptions>;
    environmentIndices?: Record<string, EnvironmentIndices>;
    trainOptions?: ModuleTrainOptions;
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
  if (options.difficulty !== undefined && environmentTasks.length === 0)
    throw new AgentModuleError(
      `--difficulty: ${options.module} has no environment tasks (export const environmentTasks)`,
    );
  const families: TaskFamily[] = [];
  const print = options.print ?? ((line: string) => console.log(line));
  try {
    for (const name of environmentTasks)
      families.push(await createTaskFamily(name, loaded.environmentOptions?.[name] ?? {}));
    const indices: Record<string, number[]> = {};
    for (const family of families) {
      const chosen = await chooseIndices(
        family,
        loaded.environmentIndices?.[family.name],
        options.difficulty,
      );
      if (chosen) indices[family.name] = chosen;
    }
    return await trainAgent({
      ...loaded.trainOptions,
      model: options.model ?? loaded.trainOptions?.model ?? "models/warmstart",
      tasks,
      agent,
      runDirectory: options.runDirectory ?? loaded.trainOptions?.runDirectory ?? "runs/agent",
      ...(options.steps !== undefined ? { steps: options.steps } : {}),
      ...(options.groupSize !== undefined ? { groupSize: options.groupSize } : {}),
      ...(options.batchGroups !== undefined ? { batchGroups: options.batchGroups } : {}),
      ...(options.learningRate !== undefined ? { learningRate: options.learningRate } : {}),
      ...(options.temperature !== undefined ? { temperature: options.temperature } : {}),
      ...(options.seed !== undefined ? { seed: options.seed } : {}),
      ...(options.resume ? { resume: true } : {}),
      ...(families.length > 0
        ? {
            environment: {
              client: new InProcessEnvironmentClient(families),
              tasks: environmentTasks,
              indices,
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
