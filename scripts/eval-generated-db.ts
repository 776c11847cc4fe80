/**
 * Greedy DB success on project-generated tasks of a world no model was trained on (the train
 * split's generated instances of `--world`, default 1000; the DB family's seed is its world), per difficulty, with the share of
 * first calls that name the question's table. AgentBench's dev set (`agentrl eval --tasks db`)
 * says how a model does on real tables; this says whether it learnt DB on the generator's
 * (docs/warmstart.md, "DB: names right by recall, not by copy"). Needs Docker.
 *   node --conditions=source --import tsx scripts/eval-generated-db.ts MODEL [--limit 20] [--world 1000] [--transcripts FILE]
 */
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { Policy } from "../packages/policy/src/index.ts";
import {
  createTaskFamily,
  InProcessEnvironmentClient,
  type CurriculumTaskFamily,
  type Split,
  type TaskFamily,
} from "../packages/envs/src/index.ts";
import { GENERATED_OFFSET } from "../packages/envs/src/db/generate.ts";
import { evaluate } from "../packages/trainer/src/index.ts";

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    limit: { type: "string", default: "20" },
    world: { type: "string", default: "1000" },
    transcripts: { type: "string" },
  },
});
if (positionals.length !== 1)
  throw new Error(
    "usage: eval-generated-db.ts MODEL [--limit 20] [--world 1000] [--transcripts FILE]",
  );
const policy = await Policy.load(positionals[0], { trainable: false });
const family = (await createTaskFamily("db", {
  seed: Number(values.world),
})) as CurriculumTaskFamily;
const views: TaskFamily[] = family.difficulties.map((difficulty) => ({
  name: `db-generated@${difficulty}`,
  indices: (split: Split) =>
    split === "test"
      ? family.indicesAt("train", difficulty).filter((index) => index >= GENERATED_OFFSET)
      : [],
  startSession: (index: number) => family.startSession(index),
}));
const client = new InProcessEnvironmentClient(views, { concurrency: 32 });
const episodes: {
  task: string;
  index: number;
  reward: number;
  namesTable: boolean;
  text: string;
}[] = [];
try {
  const results = await evaluate({
    client,
    policy,
    tasks: views.map((view) => view.name),
    split: "test",
    limit: Number(values.limit),
    temperature: 0,
    concurrency: 32,
    episode: {
      maxTurns: 6,
      maxNewTokensPerTurn: 128,
      maxTokens: policy.config.maxPositionEmbeddings,
    },
    onEpisode: (trajectory) => {
      const text = policy.tokenizer!.decode(Array.from(trajectory.tokens));
      const table = /The name of this table is (.*?), and the headers/.exec(text)?.[1] ?? "";
      const answerAt = text.indexOf("<|im_start|>assistant");
      const firstCall = text.slice(answerAt, answerAt + 400);
      episodes.push({
        task: trajectory.task,
        index: trajectory.index,
        reward: trajectory.environmentReward,
        namesTable: table !== "" && firstCall.includes(table),
        text,
      });
    },
  });
  for (const [task, result] of Object.entries(results)) {
    const own = episodes.filter((episode) => episode.task === task);
    console.log(
      `${task}: success ${(100 * result.success).toFixed(1)} % of ${result.instances}; table named in the first call ${own.filter((episode) => episode.namesTable).length} of ${own.length}`,
    );
  }
  if (values.transcripts)
    writeFileSync(
      values.transcripts,
      episodes.map((episode) => JSON.stringify(episode)).join("\n") + "\n",
    );
} finally {
  await client.close();
  await family.close?.();
  policy.dispose();
}
