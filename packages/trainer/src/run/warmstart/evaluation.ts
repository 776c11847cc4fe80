/** The warm start's evaluation: greedy success per task and difficulty. */
import type { Policy } from "@agentrl/policy";
import {
  InProcessEnvironmentClient,
  type CurriculumTaskFamily,
  type Split,
  type TaskFamily,
  type TaskSession,
} from "@agentrl/envs";
import { evaluate } from "../evaluate.js";
import type { WarmStartEvaluation } from "./options.js";

/** One difficulty of a family as a family of its own, named `<task>@<difficulty>`. */
class DifficultyView implements TaskFamily {
  readonly name: string;
  constructor(
    private readonly family: CurriculumTaskFamily,
    private readonly difficulty: number,
  ) {
    this.name = `${family.name}@${difficulty}`;
  }
  indices(split: Split): number[] {
    return this.family.indicesAt(split, this.difficulty);
  }
  startSession(index: number): Promise<TaskSession> {
    return this.family.startSession(index);
  }
}

/** Greedy success per task and difficulty on the first `limit` test instances of each. */
export async function evaluateByDifficulty(
  policy: Policy,
  families: CurriculumTaskFamily[],
  options: {
    difficulties: number[];
    taskDifficulties?: Record<string, number[]>;
    limit: number;
    maxTurns: number;
    maxNewTokens: number;
    onProgress?: (done: number, total: number) => void;
  },
): Promise<WarmStartEvaluation["results"]> {
  const views = families.flatMap((family) =>
    (options.taskDifficulties?.[family.name] ?? options.difficulties)
      .filter((d) => family.difficulties.includes(d))
      .map((d) => new DifficultyView(family, d)),
  );
  const client = new InProcessEnvironmentClient(views, { concurrency: 64 });
  try {
    const evaluations = await evaluate({
      client,
      policy,
      tasks: views.map((view) => view.name),
      split: "test",
      limit: options.limit,
      temperature: 0,
      concurrency: 32,
      episode: {
        maxTurns: options.maxTurns,
        maxNewTokensPerTurn: options.maxNewTokens,
        maxTokens: policy.config.maxPositionEmbeddings,
      },
      onProgress: options.onProgress,
    });
    const results: WarmStartEvaluation["results"] = {};
    for (const [name, evaluation] of Object.entries(evaluations)) {
      const [task, difficulty] = name.split("@");
      (results[task] ??= {})[difficulty] = {
        success: evaluation.success,
        meanReward: evaluation.meanReward,
        meanTurns: evaluation.meanTurns,
        instances: evaluation.instances,
      };
    }
    return results;
  } finally {
    await client.close();
  }
}

/** "kg 0: 35% 1: 10% | webshop …" */
export function formatEvaluation(results: WarmStartEvaluation["results"]): string {
  return Object.entries(results)
    .map(
      ([task, byDifficulty]) =>
        `${task} ${Object.entries(byDifficulty)
          .map(([d, r]) => `${d}: ${(100 * r.success).toFixed(0)}%`)
          .join(" ")}`,
    )
    .join(" | ");
}
