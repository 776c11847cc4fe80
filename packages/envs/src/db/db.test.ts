/**
 * The DB task family on a real MariaDB container and the real dbbench data: a full session,
 * the experts on a sample of tasks of both splits, sessions isolated in their own databases
 * (dropped at the end), and the server killed mid-session. Skips with the reason when the
 * engine, the image or the data (../shared/data/agentbench) is missing.
 */
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import Docker from "dockerode";
import { playEpisode } from "../play.js";
import { hasAgentBenchData } from "../docker/agentbench.js";
import { DockerRuntime, RUN_LABEL } from "../docker/runtime.js";
import { imageUnavailable } from "../docker/images.js";
import type { AssistantMessage, Message } from "../types.js";
import {
  createTaskFamily,
  GENERATED_OFFSET,
  loadDbSamples,
  unbuildableReason,
  type DbSession,
  type DbTaskFamily,
} from "./index.js";

const docker = new Docker();
const data = hasAgentBenchData("dbbench");
const dockerSkip = !data
  ? "no AgentBench data in ../shared/data/agentbench (see docs/tasks.md)"
  : await imageUnavailable("db", docker);

function call(name: string, args: Record<string, unknown>): AssistantMessage {
  return {
    role: "assistant",
    content: null,
    tool_calls: [
      { id: `c_${name}`, type: "function", function: { name, arguments: JSON.stringify(args) } },
    ],
  };
}

/** The questions of a family's generated tasks (its world's), in order. */
function generatedQuestions(family: DbTaskFamily): string[] {
  return family.samples
    .filter((sample) => sample.index >= GENERATED_OFFSET)
    .map((sample) => sample.description);
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
  "DB data",
  { skip: data ? false : "no AgentBench data in ../shared/data/agentbench" },
  () => {
    test("train.jsonl and dev.jsonl load with disjoint indices", () => {
      const samples = loadDbSamples();
      const train = samples.filter((sample) => sample.split === "train");
      const dev = samples.filter((sample) => sample.split === "test");
      assert.equal(train.length, 150);
      assert.equal(dev.length, 60);
      assert.equal(new Set(samples.map((sample) => sample.index)).size, samples.length);
      assert.ok(
        samples
          .filter((sample) => sample.type === "INSERT" || sample.type === "UPDATE")
          .every((sample) => sample.answerMd5),
      );
      // One dev sample's table has an empty column name, which MySQL refuses: the only unbuildable one.
      assert.deepEqual(
        samples.filter((sample) => unbuildableReason(sample)).map((sample) => sample.index),
        [10005],
      );
      assert.match(
        unbuildableReason(samples.find((sample) => sample.index === 10005)!)!,
        /historic_sites.*\(""/,
      );
    });

    test("the family's seed is its world: another seed, other generated tasks; the dev set the same", async () => {
      const idle = new DockerRuntime({
        docker: { listContainers: async () => [] } as unknown as Docker,
        reapSeconds: 0,
      });
      const [home, again, other] = await Promise.all(
        [0, 0, 1000].map((seed) => createTaskFamily({ runtime: idle, seed, generatedSize: 20 })),
      );
      assert.deepEqual(generatedQuestions(again), generatedQuestions(home));
      assert.notDeepEqual(
        generatedQuestions(other),
        generatedQuestions(home),
        "world 1000 is not world 0",
      );
      assert.deepEqual(other.indices("test"), home.indices("test"));
      await Promise.all([home, again, other].map((family) => family.close()));
      await idle.close();
    });

    test("a missing data folder is a clear error that says where the data comes from", () => {
      assert.throws(() => loadDbSamples("/nonexistent/agentbench"), /THUDM\/AgentBench/);
    });
  },
);

describe("DB family on MariaDB", { skip: dockerSkip }, () => {
  let family: DbTaskFamily;
  before(async () => {
    family = await createTaskFamily({});
  });
  after(async () => {
    await family.close();
  });

  test("a full SELECT session: raw MySQL result, errors, answer graded after normalisation", async () => {
    const sample = family.samples.find(
      (candidate) => candidate.split === "train" && candidate.type === "other",
    )!;
    const session = await family.startSession(sample.index);
    assert.deepEqual(
      session.start.tools.map((tool) => tool.function.name),
      ["execute_sql", "commit_final_answer"],
    );
    assert.match(String(session.start.messages[1].content), /Question: /);
    const table = sample.tables[0].table_name;
    let reply = await session.interact(
      call("execute_sql", { query: `SELECT COUNT(*) FROM \`${table}\`` }),
    );
    assert.equal(reply.messages[0].content, `[(${sample.tables[0].table_info.rows.length},)]`);
    reply = await session.interact(call("execute_sql", { query: "SELEC nonsense" }));
    assert.match(text(reply.messages[0]), /^1064 \(42000\): You have an error in your SQL syntax/);
    reply = await session.interact(
      call("commit_final_answer", { answers: sample.label.map(String) }),
    );
    assert.equal(reply.finish, true);
    assert.equal(reply.reward, 1);
  });

  test("an INSERT session is graded by the table hash", async () => {
    const sample = family.samples.find(
      (candidate) => candidate.split === "train" && candidate.type === "INSERT",
    )!;
    const wrong = await family.startSession(sample.index);
    let reply = await wrong.interact(call("commit_final_answer", { answers: [] }));
    assert.equal(reply.reward, 0, "an unchanged table does not match answer_md5");
    const right = await family.startSession(sample.index);
    reply = await right.interact(call("execute_sql", { query: String(sample.label[0]) }));
    assert.equal(reply.messages[0].content, "[]");
    reply = await right.interact(call("commit_final_answer", { answers: [] }));
    assert.equal(reply.reward, 1);
  });

  test("sessions starting together share one server", async () => {
    const fresh = await createTaskFamily({ runtime: family.runtime });
    const sessions = await Promise.all(
      fresh
        .indices("train")
        .slice(0, 6)
        .map((index) => fresh.startSession(index)),
    );
    const servers = await docker.listContainers({
      filters: { label: [`${RUN_LABEL}=${family.runtime.runId}`, "agentrl.task=db"] },
    });
    assert.equal(servers.length, 2, "the shared family's server and this family's one");
    await Promise.all(sessions.map((session) => session.cancel()));
    await fresh.close();
  });

  test("another world (atWorld) plays its own generated tasks on the same server; closing it leaves the server", async () => {
    const home = await createTaskFamily({ runtime: family.runtime, seed: 0, generatedSize: 20 });
    const world = home.atWorld(1000);
    const alone = await createTaskFamily({
      runtime: family.runtime,
      seed: 1000,
      generatedSize: 20,
    });
    assert.deepEqual(
      generatedQuestions(world),
      generatedQuestions(alone),
      "the world's tasks are those of a family made with its seed",
    );
    assert.notDeepEqual(generatedQuestions(world), generatedQuestions(home));
    assert.deepEqual(world.indices("test"), home.indices("test"));
    const index = world.indices("train").find((candidate) => candidate >= GENERATED_OFFSET)!;
    const [onHome, onWorld] = await Promise.all([
      home.startSession(home.indices("train")[0]),
      world.startSession(index),
    ]);
    const servers = await docker.listContainers({
      filters: { label: [`${RUN_LABEL}=${family.runtime.runId}`, "agentrl.task=db"] },
    });
    assert.equal(servers.length, 2, "the shared family's server and home's, none for the world");
    assert.equal((await world.sharedServer()).containerId, (await home.sharedServer()).containerId);
    const played = await playEpisode(world, index, world.expert(index));
    assert.equal(played.reward, 1, "the world's expert solves its own task");
    await world.close();
    assert.equal(onWorld.finished, true, "closing the world ends its sessions");
    assert.equal(onHome.finished, false, "and not home's");
    const reply = await onHome.interact(call("execute_sql", { query: "SELECT 1" }));
    assert.equal(reply.messages[0].content, "[(1,)]", "home's server still answers");
    await home.close();
    assert.equal(home.activeSessions, 0);
    await alone.close();
  });

  test("each session has its own database, dropped at the end", async () => {
    const [first, second] = (await Promise.all([
      family.startSession(family.indices("train")[0]),
      family.startSession(family.indices("train")[0]),
    ])) as DbSession[];
    assert.notEqual(first.database, second.database);
    const table = first.sample.tables[0].table_name;
    await first.interact(call("execute_sql", { query: `DELETE FROM \`${table}\`` }));
    const reply = await second.interact(
      call("execute_sql", { query: `SELECT COUNT(*) FROM \`${table}\`` }),
    );
    assert.notEqual(
      reply.messages[0].content,
      "[(0,)]",
      "a change in one session is not seen by another",
    );
    await first.cancel();
    const databases = await second.execute("SHOW DATABASES");
    assert.doesNotMatch(
      databases,
      new RegExp(first.database),
      "the cancelled session's database is gone",
    );
    await second.cancel();
  });

  test("a sample whose table MySQL refuses is left out of its split, and started anyway gives a finished session with task error", async () => {
    const base = family.samples[0];
    const broken = {
      ...base,
      tables: [{ table_name: "t", table_info: { columns: [{ name: "" }], rows: [["1"]] } }],
    };
    const brokenFamily = await createTaskFamily({ runtime: family.runtime, samples: [broken] });
    assert.deepEqual(
      brokenFamily.indices(broken.split),
      [],
      "left out of its split: no agent can solve it",
    );
    const session = await brokenFamily.startSession(broken.index);
    const reply = await session.interact(call("commit_final_answer", { answers: [] }));
    assert.equal(reply.status, "task error");
    assert.equal(brokenFamily.activeSessions, 0);
    await brokenFamily.close();
  });

  test("experts replay a sample of train and dev tasks (score 1) and wrong answers score 0", async () => {
    const indices = [
      ...family.indices("train").filter((_, position) => position % 6 === 0),
      ...family.indices("test").filter((_, position) => position % 6 === 1),
    ];
    let solved = 0;
    for (const index of indices) {
      const right = await playEpisode(family, index, family.expert(index));
      if (right.reward === 1) solved += 1;
      const wrong = await playEpisode(family, index, family.wrongExpert(index));
      assert.equal(wrong.reward, 0, `wrong answer on sample ${index}`);
    }
    assert.ok(
      solved >= Math.ceil(indices.length * 0.95),
      `expert solved ${solved}/${indices.length}`,
    );
  });

  test("the server killed mid-session ends the session with task error and frees its slot", async () => {
    const session = await family.startSession(family.indices("train")[3]);
    const server = await family.sharedServer();
    await docker.getContainer(server.containerId).kill();
    // Up to 30 s: a loaded machine (a test run beside training) takes seconds to see the kill.
    for (let wait = 0; wait < 300 && !session.finished; wait += 1)
      await new Promise((resolve) => setTimeout(resolve, 100));
    const reply = await session.interact(call("execute_sql", { query: "SELECT 1" }));
    assert.equal(reply.status, "task error");
    for (let wait = 0; wait < 300 && family.activeSessions !== 0; wait += 1)
      await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(family.activeSessions, 0);
    // Freeing the slot started no server: the session's user and database died with the old one.
    const running = await docker.listContainers({
      filters: { label: [`${RUN_LABEL}=${family.runtime.runId}`] },
    });
    assert.equal(running.length, 0, "no server started to drop a dead server's session");
    // The next session starts a new server.
    const next = await family.startSession(family.indices("train")[3]);
    assert.notEqual((await family.sharedServer()).containerId, server.containerId);
    await next.cancel();
    await family.close();
    const left = await docker.listContainers({
      all: true,
      filters: { label: [`${RUN_LABEL}=${family.runtime.runId}`] },
    });
    assert.deepEqual(left, []);
    family = await createTaskFamily({});
  });
});
