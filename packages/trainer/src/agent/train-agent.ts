/**
 * Train the agent you already wrote: `trainAgent` runs GRPO on an unmodified agent function
 * (written with the `openai` client, the AI SDK, or anything that speaks OpenAI's chat API).
 * Every episode the agent gets the recording gateway's base URL and an API key of its own;
 * what the policy samples through it becomes the episode's exact trajectory (see
 * @agentrl/rollout's gateway/). The rest is the built-in training loop (`runTraining`):
 * GRPO groups, task advantage normalisation, staleness, masking of infrastructure faults,
 * checkpoints, metrics.jsonl and the dashboard's files.
 *
 *   await trainAgent({
 *     model: "models/warmstart",
 *     tasks: [{ question: "…", answer: "…" }, …],
 *     agent: async (task, { baseURL, apiKey, model }) => {
 *       const { text } = await generateText({ model: createOpenAICompatible({ name: "policy", baseURL, apiKey })(model), … });
 *       return text.includes(task.answer) ? 1 : 0;
 *     },
 *     runDirectory: "runs/my-agent",
 *   });
 *
 * A reward may also come from one of the project's environments: name the tasks in
 * `environment.tasks` and give its client; the agent then gets `session` (opening messages,
 * tools, `interact`) and may return nothing to take the environment's verdict.
 */
import { AgentRLError } from "@agentrl/spec";
import type { EnvironmentClient } from "@agentrl/envs";
import {
  AgentEpisodes,
  type AgentFunction,
  type EpisodeOptions,
  type TaskMixEntry,
} from "@agentrl/rollout";
import { runTraining, type StepRecord, type TrainingRunOptions } from "../rl/loop.js";
import type { LearnerSettings } from "../rl/learner.js";

/** The user's tasks: one list (the task name `agent`), or named lists (one task of the mix each; `{}` with environment tasks only). */
export type AgentTasks<Task> = readonly Task[] | Record<string, readonly Task[]>;

export interface TrainAgentOptions<Task> {
  /** Starting weights: a model folder (e.g. the shipped warm start, `models/warmstart`). */
  model: string;
  tasks: AgentTasks<Task>;
  agent: AgentFunction<Task>;
  /** Where checkpoints, metrics.jsonl and the dashboard's files go. */
  runDirectory: string;
  /** Episodes per task (GRPO's n). Default 4. */
  groupSize?: number;
  /** Optimizer steps. Default 20. */
  steps?: number;
  /** Groups per step. Default 4. */
  batchGroups?: number;
  /** `sync` (default: each step samples with the newest weights) or `async`. */
  mode?: "sync" | "async";
  /** Episodes at once. Default groupSize × batchGroups. */
  maxConcurrentEpisodes?: number;
  /** Sampling temperature of the rollout (every request samples at it, whatever it asks). Default 1. */
  temperature?: number;
  /** Learning rate (constant). Default 1e-4. */
  learningRate?: number;
  /** More learner settings (GRPO options, …), merged over the defaults. */
  learner?: Partial<LearnerSettings>;
  /** Episode limits: `maxTokens` (sequence), `maxNewTokensPerTurn`, `episodeTimeoutMs`, `incompletePenalty`, `infrastructureRetries`, `infrastructureFaults`. */
  episode?: EpisodeOptions;
  /**
   * Tasks whose reward the project's environment gives (the agent gets a session and the task
   * `{ name, index }`): their names, the client that serves them, and optionally the instance
   * indices to draw (default: the client's train split).
   */
  environment?: {
    client: EnvironmentClient;
    tasks: readonly string[];
    indices?: Record<string, number[]>;
  };
  /** Largest staleness (policy versions) of a group, async mode. Default 1. */
  maxStaleness?: number;
  seed?: number;
  /** Resume from the run directory's newest checkpoint. Default false. */
  resume?: boolean;
  /** Checkpoint every this many steps. Default 10 (and at the end). */
  checkpointEvery?: number;
  onStep?: (record: StepRecord) => void;
  signal?: AbortSignal;
  log?: (line: string) => void;
}

export class TrainAgentError extends AgentRLError {}

/** Task names and their lists. */
function taskLists<Task>(tasks: AgentTasks<Task>): Map<string, readonly Task[]> {
  const lists = Array.isArray(tasks)
    ? new Map([["agent", tasks as readonly Task[]]])
    : new Map(Object.entries(tasks as Record<string, readonly Task[]>));
  for (const [name, list] of lists)
    if (list.length === 0) throw new TrainAgentError(`the task list ${name} is empty`);
  if (lists.size === 0) throw new TrainAgentError("no tasks");
  return lists;
}

/** The environment client of a run without environment tasks: it only knows the task lists' indices. */
function taskListClient(lists: Map<string, readonly unknown[]>): EnvironmentClient {
  const refuse = async (): Promise<never> => {
    throw new TrainAgentError("these tasks have no environment: their reward comes from the agent");
  };
  return {
    startSample: refuse,
    interact: refuse,
    cancel: async () => {},
    getIndices: async (name) => (lists.get(name) ?? []).map((_, index) => index),
  };
}

/** Trains `agent` with GRPO (see the module's comment); resolves with the last step's record. */
export async function trainAgent<Task>(
  options: TrainAgentOptions<Task>,
): Promise<StepRecord | undefined> {
  const lists =
    Array.isArray(options.tasks) || Object.keys(options.tasks).length > 0 || !options.environment
      ? taskLists(options.tasks)
      : new Map<string, readonly Task[]>();
  const groupSize = options.groupSize ?? 4;
  const batchGroups = options.batchGroups ?? 4;
  const steps = options.steps ?? 20;
  const temperature = options.temperature ?? 1;
  const environmentTasks = options.environment?.tasks ?? [];
  const episodes = new AgentEpisodes<Task>({
    agent: options.agent,
    taskOf: (name, index) => {
      if (environmentTasks.includes(name)) return { name, index } as Task;
      const task = lists.get(name)?.[index];
      if (task === undefined) throw new TrainAgentError(`no task ${name}[${index}]`);
      return task;
    },
    environmentTasks,
  });
  const tasks: TaskMixEntry[] = [
    ...[...lists.entries()].map(([name, list]) => ({
      name,
      indices: list.map((_, index) => index),
    })),
    ...environmentTasks.map((name) => ({
      name,
      ...(options.environment?.indices?.[name]
        ? { indices: options.environment.indices[name] }
        : {}),
    })),
  ];
  const learner: LearnerSettings = {
    ...options.learner,
    schedule: {
      learningRate: options.learningRate ?? 1e-4,
      warmupSteps: 0,
      schedule: "constant",
      minLearningRateRatio: 1,
      totalSteps: steps,
      ...options.learner?.schedule,
    },
    grpo: { temperature, ...options.learner?.grpo },
  };
  const run: TrainingRunOptions = {
    modelDirectory: options.model,
    runDirectory: options.runDirectory,
    client: options.environment?.client ?? taskListClient(lists),
    tasks,
    mode: options.mode ?? "sync",
    steps,
    batchGroups,
    groupSize,
    seed: options.seed ?? 0,
    learner,
    rollout: {
      maxConcurrentEpisodes: options.maxConcurrentEpisodes ?? groupSize * batchGroups,
      engine: { temperature },
      episode: { temperature, ...options.episode },
      maxStaleness: options.maxStaleness ?? 1,
      playEpisode: episodes.play,
    },
    crossPolicy: { staleProbability: 0 },
    checkpoint: { every: options.checkpointEvery ?? 10, keep: 2 },
    resume: options.resume ?? false,
    ...(options.onStep ? { onStep: options.onStep } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
    ...(options.log ? { log: options.log } : {}),
  };
  try {
    return await runTraining(run);
  } finally {
    await episodes.close();
  }
}
