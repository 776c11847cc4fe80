/** Phase 2: the task families of a run, in-process or behind controllers, with the configured indices. */
import {
  createTaskFamily,
  type CurriculumTaskFamily,
  type EnvironmentClient,
  HttpEnvironmentClient,
  InProcessEnvironmentClient,
  isDockerAvailable,
  type Split,
  tokenFromEnvironment,
} from "@agentrl/envs";
import { type EnvironmentRoute, RoutingEnvironmentClient } from "@agentrl/rollout";
import type { FamilyFactory, Printer } from "./options.js";
import { ConfigError, taskDifficulties, type TrainConfig } from "../config.js";
import { DOCKER_FAMILIES } from "../warmstart/index.js";

// ── 2. environments ─────────────────────────────────────────────────────────

export interface OpenedTasks {
  client: EnvironmentClient;
  /** The configured tasks that run (os/db dropped without Docker). */
  tasks: TrainConfig["tasks"];
  /** Train and test indices per task (at the configured difficulties). */
  indices: Map<string, Record<Split, number[]>>;
  close(): Promise<void>;
}

/**
 * A client whose `getIndices` answers with the configured indices (the difficulty
 * selection), so that the scheduler and `evaluate` see only those.
 */
class SelectedIndicesClient implements EnvironmentClient {
  constructor(
    private readonly inner: EnvironmentClient,
    private readonly indices: Map<string, Record<Split, number[]>>,
  ) {}
  startSample(name: string, index: number) {
    return this.inner.startSample(name, index);
  }
  interact(sessionId: string, message: Parameters<EnvironmentClient["interact"]>[1]) {
    return this.inner.interact(sessionId, message);
  }
  cancel(sessionId: string) {
    return this.inner.cancel(sessionId);
  }
  async getIndices(name: string, split: Split = "test"): Promise<number[]> {
    return this.indices.get(name)?.[split] ?? this.inner.getIndices(name, split);
  }
  async close() {
    await this.inner.close?.();
  }
}

/** The controller that plays `task`'s episodes (`tasks[].controller`, else `environments.controller`), or undefined for in-process. */
export function controllerOf(
  config: TrainConfig,
  task: TrainConfig["tasks"][number],
): string | undefined {
  return task.controller ?? config.environments.controller;
}

/** Waits until `attempt` succeeds or `seconds` pass (a controller starting, its workers registering); rethrows the last failure. */
async function waitFor<T>(seconds: number, attempt: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (Date.now() >= deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  }
}

/**
 * Opens the configured tasks: in-process families (os and db left out, in ONE printed line,
 * when no Docker engine answers) and tasks behind controllers (`tasks[].controller`,
 * `environments.controller`), whose instances at the configured difficulties the controller
 * lists. One client routes each task's episodes to its place.
 */
export async function openTasks(
  config: TrainConfig,
  print: Printer,
  createFamily: FamilyFactory = createTaskFamily,
): Promise<OpenedTasks> {
  const wantsDocker = config.tasks.some(
    (task) => DOCKER_FAMILIES.has(task.name) && !controllerOf(config, task),
  );
  const docker = wantsDocker ? await isDockerAvailable() : false;
  const families: CurriculumTaskFamily[] = [];
  const controllers = new Map<string, { client: HttpEnvironmentClient; tasks: string[] }>();
  const tasks: TrainConfig["tasks"] = [];
  const skipped: string[] = [];
  const indices = new Map<string, Record<Split, number[]>>();
  const closeAll = async () => {
    await Promise.all(families.map((f) => f.close?.()));
    await Promise.all([...controllers.values()].map(({ client }) => client.close()));
  };
  for (const task of config.tasks) {
    const url = controllerOf(config, task);
    if (url) {
      const entry = controllers.get(url) ?? {
        client: new HttpEnvironmentClient({
          url,
          token: tokenFromEnvironment(config.environments.tokenFile),
        }),
        tasks: [],
      };
      controllers.set(url, entry);
      const at = async (split: Split) =>
        (
          await Promise.all(
            taskDifficulties(task).map((difficulty) =>
              entry.client.getIndices(task.name, split, difficulty),
            ),
          )
        ).flat();
      try {
        const test = await waitFor(config.environments.waitSeconds, () => at("test"));
        indices.set(task.name, { train: task.indices ?? (await at("train")), test });
      } catch (error) {
        await closeAll();
        throw new ConfigError(
          `task "${task.name}" on the controller ${url}: ${(error as Error).message} (waited ${config.environments.waitSeconds} s: is \`agentrl env serve\` running there with a worker of ${task.name}, and the token right?)`,
        );
      }
      print(
        `${task.name}: through the controller ${url} (${indices.get(task.name)!.train.length} train / ${indices.get(task.name)!.test.length} test instances)`,
      );
      entry.tasks.push(task.name);
      tasks.push(task);
      continue;
    }
    if (DOCKER_FAMILIES.has(task.name) && !docker) {
      skipped.push(task.name);
      continue;
    }
    let family: CurriculumTaskFamily;
    try {
      family = await createFamily(task.name, {
        ...task.familyOptions,
        seed: config.run.worldSeed,
      });
    } catch (error) {
      await closeAll();
      throw new ConfigError(`task "${task.name}" failed to start: ${(error as Error).message}`);
    }
    const unknown = taskDifficulties(task).filter(
      (difficulty) => !family.difficulties.includes(difficulty),
    );
    if (unknown.length > 0) {
      await family.close?.();
      await closeAll();
      throw new ConfigError(
        `task "${task.name}" has no difficulty ${unknown.join(", ")} (its difficulties: ${family.difficulties.join(", ")})`,
      );
    }
    const at = (split: Split) =>
      taskDifficulties(task).flatMap((difficulty) => family.indicesAt(split, difficulty));
    indices.set(task.name, { train: task.indices ?? at("train"), test: at("test") });
    families.push(family);
    tasks.push(task);
  }
  if (skipped.length)
    print(
      `${skipped.join(" and ")} left out: no Docker engine reachable (start one with scripts/start-dockerd.sh); training on ${tasks.map((t) => t.name).join(", ") || "nothing"}`,
    );
  if (tasks.length === 0)
    throw new ConfigError(
      "no task can run (every configured task needs Docker, and no Docker engine is reachable)",
    );
  const concurrency = Math.max(config.rollout.concurrency, config.evaluation.concurrency);
  const routes: EnvironmentRoute[] = [];
  if (families.length)
    routes.push({
      tasks: families.map((family) => family.name),
      client: new InProcessEnvironmentClient(families, { concurrency }),
      label: "in-process",
    });
  for (const [url, { client, tasks: names }] of controllers)
    routes.push({ tasks: names, client, label: url });
  const routed = new RoutingEnvironmentClient(routes);
  return {
    client: new SelectedIndicesClient(routed, indices),
    tasks,
    indices,
    close: async () => {
      await routed.close();
      await Promise.all(families.map((family) => family.close?.()));
    },
  };
}
