/**
 * The AI SDK agent of ./kg-ai-sdk.ts, trained where the shipped warm start is weak
 * (docs/harness.md): one-hop KG questions (difficulty 0) on world 1000, a world it never saw,
 * whose topic entity is not a person or a film (cities, countries, organizations, teams,
 * universities, languages). The warm start answers about 39 % of them greedily and 22 % when
 * sampling at temperature 1 (people and films: 85 % and 55 %), so GRPO groups have both
 * outcomes.
 *
 *   npm run agentrl -- train --agent examples/agents/kg-weak-topics.ts --steps 40 --seed 1 --run-dir runs/kg-weak
 *
 * What this module shows: a module chooses its environment's options (`environmentOptions`)
 * and the instances it trains on (`environmentIndices`), and states its run's defaults
 * (`trainOptions`, overridden by the CLI's flags).
 */
import { kg, type TaskFamily } from "@agentrl/envs";

export { default } from "./kg-ai-sdk.js";

/** The types of topic entity the warm start already answers well about. */
export const STRONG_TOPICS = ["people.person", "film.film"];

export const tasks = {};
export const environmentTasks = ["kg"];
export const environmentOptions = { kg: { seed: 1000 } };
export const environmentIndices = {
  kg: (family: TaskFamily) =>
    kg.indicesByTopicType(family as kg.KgTaskFamily, "train", 0, { exclude: STRONG_TOPICS }),
};
export const trainOptions = {
  groupSize: 8,
  batchGroups: 6,
  maxConcurrentEpisodes: 16,
  learningRate: 1e-4,
  checkpointEvery: 10,
  episode: { maxTokens: 1280, maxNewTokensPerTurn: 96 },
};
