/**
 * The OS task family on a real Docker engine and the real AgentBench data: a full session,
 * the experts on a sample of training tasks, a container killed mid-session, and 50
 * sessions at once leaving no container behind. Skips with the reason when the engine, the
 * image or the data (../shared/data/agentbench) is missing.
 */
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import Docker from "dockerode";
import { playEpisode } from "../play.js";
import { hasAgentBenchData } from "../docker/agentbench.js";
import { RUN_LABEL } from "../docker/runtime.js";
import { imageUnavailable } from "../docker/images.js";
import type { AssistantMessage, InteractResult, Message } from "../types.js";
import {
  createTaskFamily,
  isHeldOut,
  loadOsSamples,
  osDifficulty,
  type OsSession,
  type OsTaskFamily,
} from "./index.js";
import { UNSOLVABLE_OS_SAMPLES } from "./data.js";

const docker = new Docker();
const data = hasAgentBenchData("os_interaction");
const dockerSkip = !data
  ? "no AgentBench data in ../shared/data/agentbench (see docs/tasks.md)"
  : await imageUnavailable("os", docker);

function call(name: string, args: Record<string, unknown>): AssistantMessage {
  return {
    role: "assistant",
    content: null,
    tool_calls: [
      { id: `c_${name}`, type: "function", function: { name, arguments: JSON.stringify(args) } },
    ],
  };
}

/** The text of a reply message; fails the test when the message has none. */
function text(message: Message): string {
  assert.ok(
    message.content !== null,
    `expected a message with text, got ${JSON.stringify(message)}`,
  );
  return message.content;
}

describe(
  "OS data",
  { skip: data ? false : "no AgentBench data in ../shared/data/agentbench" },
  () => {
    test("splits, scripts and difficulty levels load from the AgentBench files", () => {
      const original = loadOsSamples(undefined, false);
      assert.equal(original.filter((sample) => sample.split === "train").length, 1000);
      assert.equal(original.filter((sample) => sample.split === "test").length, 26);
      const samples = loadOsSamples();
      const train = samples.filter((sample) => sample.split === "train");
      const testSplit = samples.filter((sample) => sample.split === "test");
      assert.equal(train.length, 600, "two in five training.json samples are held out");
      assert.equal(testSplit.length, 26 + 400);
      assert.ok(
        train.every((sample) => !isHeldOut(sample.index)) &&
          testSplit.every((sample) => sample.index >= 1000 || isHeldOut(sample.index)),
      );
      assert.deepEqual(
        testSplit.slice(0, 26).map((sample) => sample.index),
        Array.from({ length: 26 }, (_, j) => 1000 + j),
        "dev.json comes first in the test split",
      );
      const atZero = testSplit.filter((sample) => osDifficulty(sample) === 0).length;
      assert.ok(atZero >= 200, `at least 200 test samples at difficulty 0, got ${atZero}`);
      assert.ok(samples.every((sample) => sample.match || sample.check));
      const levels = new Set(samples.map(osDifficulty));
      assert.deepEqual([...levels].sort(), [0, 1, 2]);
      const devCheck = testSplit.find((sample) => sample.check && !sample.check.includes(null));
      assert.match(devCheck!.check![0]!.code, /calc/, "check scripts are read from scripts/dev");
    });

    test("a missing data folder is a clear error that says where the data comes from", () => {
      assert.throws(() => loadOsSamples("/nonexistent/agentbench"), /THUDM\/AgentBench/);
    });
  },
);

describe("OS family on Docker", { skip: dockerSkip }, () => {
  let family: OsTaskFamily;
  before(async () => {
    family = await createTaskFamily({ warmPool: 2 });
  });
  after(async () => {
    await family.close();
  });

  test("a full session: tools, a stateful shell, output truncation, answer graded by the check scripts", async () => {
    const index = family.indicesAt("train", 0)[0];
    const session = await family.startSession(index);
    assert.deepEqual(
      session.start.tools.map((tool) => tool.function.name),
      ["bash_action", "finish_action", "answer_action"],
    );
    assert.match(String(session.start.messages[1].content), /My problem is/);
    let reply = await session.interact(
      call("bash_action", { script: "mkdir -p /tmp/work && cd /tmp/work && value=42" }),
    );
    assert.equal(reply.finish, false);
    assert.equal(reply.messages[0].content, "The output of the OS is empty.");
    reply = await session.interact(call("bash_action", { script: 'echo "$PWD $value"' }));
    assert.equal(
      text(reply.messages[0]).trim(),
      "/tmp/work 42",
      "cwd and variables survive between turns",
    );
    reply = await session.interact(call("bash_action", { script: "seq 1 2000" }));
    assert.match(text(reply.messages[0]), /\[truncated because the output is too long\]$/);
    reply = await session.interact(
      call("bash_action", { script: family.sample(index).example!.code }),
    );
    reply = await session.interact(
      call("answer_action", { answer: text(reply.messages[0]).trim() }),
    );
    assert.equal(reply.finish, true);
    assert.equal(reply.status, "completed");
    assert.equal(reply.reward, 1);
    assert.equal(reply.metrics.answerFromOutput, 1, "the answer is what the command printed");
  });

  test("answerFromOutput: 1 for an answer that is a line or a field the agent saw, 0 for a guess, a line cut by the truncation, a value typed into the command (echo) or a finish; answerGraded 1", async () => {
    const index = family.indicesAt("train", 0)[0];
    const cases: [string, string, number][] = [
      ["seq 1 2000", " 5 ", 1],
      ["seq 1 2000", "1999", 0],
      ["seq 1 2000", "4242", 0],
      ["seq 1 2000", "", 0],
      ["printf '  %s /root/app.log\\n' $((6 * 2))", "12", 1],
      ["printf '  %s /root/app.log\\n' $((6 * 2))", "1", 0],
      ["echo 4242", "4242", 0],
    ];
    for (const [script, answer, expected] of cases) {
      const session = await family.startSession(index);
      await session.interact(call("bash_action", { script }));
      const reply = await session.interact(call("answer_action", { answer }));
      assert.equal(reply.finish, true);
      assert.equal(reply.metrics.answerGraded, 1);
      assert.equal(reply.metrics.answerFromOutput, expected, `answer ${JSON.stringify(answer)}`);
    }
    const finished = await family.startSession(index);
    const reply = await finished.interact(call("finish_action", { thought: "done" }));
    assert.equal(reply.metrics.answerFromOutput, 0, "finish_action gives no answer: not read");
  });

  test("the turn limit is 8", async () => {
    const session = await family.startSession(family.indices("train")[1]);
    let reply: InteractResult | undefined;
    for (let turn = 0; turn < 8; turn += 1)
      reply = await session.interact(call("bash_action", { script: "true" }));
    assert.equal(reply!.status, "task limit reached");
    assert.equal(reply!.reward, 0);
  });

  test("experts replay a sample of training tasks (score 1) and wrong answers score 0", async () => {
    const indices = family.indices("train").filter((_, position) => position % 100 === 0);
    for (const index of indices) {
      const right = await playEpisode(family, index, family.expert(index));
      assert.equal(
        right.reward,
        1,
        `expert on sample ${index}: ${JSON.stringify(right.messages.slice(-2))}`,
      );
      const wrong = await playEpisode(family, index, family.wrongExpert(index));
      assert.equal(wrong.reward, 0, `wrong answer on sample ${index}`);
    }
  });

  test("a container killed mid-session ends it with task error and frees its slot", async () => {
    const before = family.activeSessions;
    const session = (await family.startSession(family.indices("train")[2])) as OsSession;
    assert.equal(family.activeSessions, before + 1);
    await docker.getContainer(session.containerId).kill();
    // Up to 30 s: a loaded machine (a test run beside training) takes seconds to see the kill.
    for (let wait = 0; wait < 300 && !session.finished; wait += 1)
      await new Promise((resolve) => setTimeout(resolve, 100));
    const reply = await session.interact(call("bash_action", { script: "echo hi" }));
    assert.equal(reply.status, "task error");
    assert.equal(reply.finish, true);
    for (let wait = 0; wait < 100 && family.activeSessions !== before; wait += 1)
      await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(family.activeSessions, before, "the slot is free once the container is removed");
    assert.equal(await family.runtime.isRunning(session.containerId), false);
  });

  test("an init script that fails does not end the sample (AgentBench ignores init exit codes)", async () => {
    const broken = {
      ...family.sample(0),
      index: 0,
      init: [{ language: "bash" as const, code: "echo partial > /root/partial; exit 7" }],
    };
    const brokenFamily = await createTaskFamily({ runtime: family.runtime, samples: [broken] });
    const session = await brokenFamily.startSession(0);
    const reply = await session.interact(call("bash_action", { script: "cat /root/partial" }));
    assert.equal(reply.finish, false);
    assert.equal(text(reply.messages[0]).trim(), "partial");
    await session.cancel();
    assert.equal(brokenFamily.activeSessions, 0);
    await brokenFamily.close();
  });

  test("dev sample #1008 is unsolvable in AgentBench's own data: its check rejects its own example's output", async () => {
    const sample = family.sample(1008);
    assert.match(sample.description, /disk space is being used by \/home/);
    const session = (await family.startSession(1008)) as OsSession;
    try {
      const example = (
        await family.runtime.exec(session.containerId, ["bash", "-c", sample.example!.code])
      ).output.trim();
      assert.match(example, /^\d\.\d[KMG]$/, "du -h prints one decimal under 10 units");
      const check = sample.check![1]!;
      assert.equal(check.language, "python");
      const judged = await family.runtime.exec(session.containerId, [
        "python3",
        "-c",
        check.code,
        example,
        example,
      ]);
      assert.notEqual(judged.exitCode, 0, "the example's own answer fails its check");
      assert.match(judged.output, /ValueError: invalid literal for int\(\) with base 10: '\d\.\d'/);
      assert.ok(UNSOLVABLE_OS_SAMPLES[1008]);
    } finally {
      await session.cancel();
    }
  });

  test("50 sessions at once finish and leave no container behind", async () => {
    const indices = family.indices("train").slice(100, 150);
    const episodes = await Promise.all(
      indices.map((index) => playEpisode(family, index, family.expert(index))),
    );
    assert.equal(episodes.length, 50);
    assert.ok(episodes.filter((episode) => episode.reward === 1).length >= 48);
    await family.close();
    const left = await docker.listContainers({
      all: true,
      filters: { label: [`${RUN_LABEL}=${family.runtime.runId}`] },
    });
    assert.deepEqual(left, []);
    family = await createTaskFamily({});
  });
});
