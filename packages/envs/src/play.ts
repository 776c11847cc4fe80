/**
 * Plays whole episodes with a scripted agent through the session API: what `env check`,
 * `env demo`, the experts' tests and the supervised warm start all use.
 */
import type { Expert, Message, SampleStatus, TaskFamily } from "./types.js";

export interface EpisodeRecord {
  index: number;
  reward: number;
  status: SampleStatus;
  /** Assistant turns taken. */
  turns: number;
  /** The whole conversation, opening messages included. */
  messages: Message[];
  tools: import("./types.js").ToolSpec[];
  metrics: Record<string, number>;
}

/** Runs one episode of `family` on sample `index` with `agent`, to its end. */
export async function playEpisode(
  family: TaskFamily,
  index: number,
  agent: Expert,
  options: { maxTurns?: number } = {},
): Promise<EpisodeRecord> {
  const maxTurns = options.maxTurns ?? 100;
  const session = await family.startSession(index);
  const messages: Message[] = [...session.start.messages];
  const tools = session.start.tools;
  let result = {
    finish: false,
    reward: 0,
    status: "running" as SampleStatus,
    metrics: {} as Record<string, number>,
  };
  let turns = 0;
  try {
    while (!result.finish && turns < maxTurns) {
      const action = await agent.act(messages, tools);
      messages.push(action);
      turns += 1;
      const reply = await session.interact(action);
      messages.push(...reply.messages);
      result = reply;
    }
  } finally {
    if (!result.finish) await session.cancel();
  }
  return {
    index,
    reward: result.reward,
    status: result.status,
    turns,
    messages,
    tools,
    metrics: result.metrics,
  };
}

/** Plays many episodes, at most `concurrency` at a time, in index order of the results. */
export async function playEpisodes(
  family: TaskFamily,
  indices: number[],
  makeAgent: (index: number) => Expert,
  options: { concurrency?: number; maxTurns?: number } = {},
): Promise<EpisodeRecord[]> {
  const concurrency = Math.max(1, options.concurrency ?? 8);
  const results: EpisodeRecord[] = new Array(indices.length);
  let next = 0;
  async function worker(): Promise<void> {
    while (next < indices.length) {
      const position = next++;
      results[position] = await playEpisode(
        family,
        indices[position],
        makeAgent(indices[position]),
        options,
      );
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, indices.length) }, worker));
  return results;
}
