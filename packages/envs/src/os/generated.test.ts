/**
 * The generated OS tasks (generate.ts) on a real Docker engine: the expert reads its answer
 * (the example's output, which is the expected answer), a wrong answer and a constant fail.
 * Skips with the reason when the engine or the image is missing.
 */
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import Docker from "dockerode";
import { playEpisodes } from "../play.js";
import { imageUnavailable } from "../docker/images.js";
import type { AssistantMessage, Expert } from "../types.js";
import { createTaskFamily, generateOsSamples, type OsTaskFamily } from "./index.js";

const docker = new Docker();
const dockerSkip = await imageUnavailable("os", docker);

/** Runs nothing and answers `answer` at once (a learnt constant). */
const constant = (answer: string): Expert => ({
  act: (): AssistantMessage => ({
    role: "assistant",
    content: null,
    tool_calls: [
      {
        id: "c_0",
        type: "function",
        function: { name: "answer_action", arguments: JSON.stringify({ answer }) },
      },
    ],
  }),
});

describe("generated OS tasks on Docker", { skip: dockerSkip }, () => {
  // Home-folder tasks, then tasks whose folders are where the question states them (absolute,
  // or in the working folder: relative paths resolve against the container's working folder).
  const samples = [
    ...generateOsSamples(33, 11),
    ...generateOsSamples(48, 11, "train", "stated").slice(33),
  ];
  let family: OsTaskFamily;
  before(async () => {
    family = await createTaskFamily({ samples, warmPool: 2 });
  });
  after(async () => {
    await family.close();
  });

  test("the expert answers what the example printed (the expected answer) and scores 1, read; a wrong answer and the constant 3 score 0, guessed", async () => {
    const indices = samples.map((sample) => sample.index);
    const experts = await playEpisodes(family, indices, (index) => family.expert(index), {
      concurrency: 4,
    });
    experts.forEach((episode, k) => {
      const detail = `${samples[k].labels[1]}: ${JSON.stringify(episode.messages.slice(-3))}`;
      assert.equal(episode.reward, 1, detail);
      assert.equal(episode.metrics.answerGraded, 1, detail);
      assert.equal(episode.metrics.answerFromOutput, 1, detail);
      const answer = JSON.parse(
        (episode.messages.at(-2) as AssistantMessage).tool_calls![0].function.arguments,
      ) as { answer: string };
      assert.equal(answer.answer, samples[k].expectedAnswer, detail);
    });
    const wrong = await playEpisodes(family, indices, (index) => family.wrongExpert(index), {
      concurrency: 4,
    });
    assert.deepEqual(
      wrong.map((episode) => episode.reward),
      indices.map(() => 0),
    );
    const three = await playEpisodes(family, indices, () => constant("3"), { concurrency: 4 });
    const won = three.filter((episode) => episode.reward === 1).length;
    assert.ok(won <= 3, `the constant 3 solved ${won} of ${indices.length}`);
    for (const episode of three) assert.equal(episode.metrics.answerFromOutput, 0);
  });

  test("with generatedRecovery 1 the expert of a working-folder task first runs its mistake (untrained: the folder under ~/, an error), then the example, and answers what it printed", async () => {
    const mistaken = generateOsSamples(60, 12, "train", "stated")
      .filter((sample) => sample.mistake)
      .slice(0, 6);
    assert.equal(mistaken.length, 6, "six working-folder tasks among 60 stated ones");
    const recovering = await createTaskFamily({ samples: mistaken, generatedRecovery: 1 });
    try {
      const episodes = await playEpisodes(
        recovering,
        mistaken.map((sample) => sample.index),
        (index) => recovering.expert(index),
        { concurrency: 2 },
      );
      episodes.forEach((episode, k) => {
        const detail = JSON.stringify(episode.messages.slice(2));
        const turns = episode.messages.filter((m) => m.role === "assistant");
        assert.deepEqual(
          turns.map((turn) => turn.untrained === true),
          [true, false, false],
          detail,
        );
        assert.match(episode.messages[3].content ?? "", /No such file or directory/, detail);
        assert.equal(episode.reward, 1, detail);
        assert.equal(episode.metrics.answerFromOutput, 1, detail);
        assert.ok(mistaken[k].mistake!.code.includes("~/"), detail);
      });
    } finally {
      await recovering.close();
    }
  });
});
