/**
 * Replays the experts (each sample's own solution) and the wrong experts of the OS and DB
 * tasks through real sessions and prints the success rates, until `agentrl env check` exists.
 *
 *   npx tsx --conditions=source scripts/check-os-db.ts os train [limit] [concurrency]
 *   npx tsx --conditions=source scripts/check-os-db.ts db train,test 0 4 1
 * Arguments: task, splits, limit (0 = all), concurrency, and every how many samples the
 * wrong expert is also played (1 = all). Progress is printed every 50 episodes.
 */
import {
  createTaskFamily,
  playEpisode,
  type EpisodeRecord,
  type Expert,
  type Split,
  type TaskFamily,
} from "@agentrl/envs";

/** Plays episodes `concurrency` at a time; a session that cannot start counts as a failure with its reason. */
async function playAll(
  family: TaskFamily,
  indices: number[],
  agent: (index: number) => Expert,
  concurrency: number,
): Promise<EpisodeRecord[]> {
  const results: EpisodeRecord[] = [];
  let next = 0;
  async function worker(): Promise<void> {
    while (next < indices.length) {
      const index = indices[next++];
      try {
        results.push(await playEpisode(family, index, agent(index)));
        if (results.length % 50 === 0) {
          const solved = results.filter((episode) => episode.reward === 1).length;
          console.log(
            `  … ${results.length}/${indices.length} played, ${solved} scored 1 (${new Date().toISOString().slice(11, 19)})`,
          );
        }
      } catch (error) {
        results.push({
          index,
          reward: 0,
          status: "task error",
          turns: 0,
          messages: [{ role: "user", content: (error as Error).message }],
          tools: [],
          metrics: {},
        });
      }
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker));
  return results.sort((a, b) => a.index - b.index);
}

const [
  task = "os",
  splitList = "train",
  limitText = "0",
  concurrencyText = "4",
  wrongEveryText = "1",
] = process.argv.slice(2);
const family = await createTaskFamily(task);
try {
  for (const split of splitList.split(",") as Split[]) {
    let indices = family.indices(split);
    const limit = Number(limitText);
    if (limit > 0) indices = indices.slice(0, limit);
    const concurrency = Number(concurrencyText);
    const started = Date.now();
    const right = await playAll(family, indices, (index) => family.expert(index), concurrency);
    const seconds = (Date.now() - started) / 1000;
    const wrongIndices = indices.filter((_, position) => position % Number(wrongEveryText) === 0);
    const wrong = await playAll(
      family,
      wrongIndices,
      (index) => family.wrongExpert!(index),
      concurrency,
    );
    const solved = right.filter((episode) => episode.reward === 1);
    const wrongSolved = wrong.filter((episode) => episode.reward !== 0);
    console.log(
      `${task} ${split}: expert ${solved.length}/${indices.length} = ${((100 * solved.length) / indices.length).toFixed(1)}% in ${seconds.toFixed(0)} s; wrong answers scoring > 0: ${wrongSolved.length} of ${wrongIndices.length}`,
    );
    for (const episode of right.filter((e) => e.reward !== 1)) {
      const last = episode.messages
        .slice(-3)
        .map(
          (m) =>
            `${m.role}: ${typeof m.content === "string" ? m.content.slice(0, 160) : JSON.stringify((m as { tool_calls?: unknown }).tool_calls).slice(0, 160)}`,
        )
        .join(" | ");
      console.log(
        `  failed ${episode.index} status=${episode.status}: ${last.replace(/\n/g, "\\n")}`,
      );
    }
    for (const episode of wrongSolved) console.log(`  wrong answer scored on ${episode.index}`);
  }
} finally {
  await family.close?.();
}
