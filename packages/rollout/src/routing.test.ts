import { test } from "node:test";
import assert from "node:assert/strict";
import {
  Controller,
  HttpEnvironmentClient,
  InProcessEnvironmentClient,
  TaskWorker,
  createTaskFamily,
  isDockerAvailable,
  serveWorker,
  type CurriculumTaskFamily,
  type EnvironmentClient,
  type Expert,
  type InteractResult,
  type Message,
} from "@agentrl/envs";
import { hasAgentBenchData, imagesUpToDate } from "@agentrl/envs/internal";
import { RoutingEnvironmentClient, RoutingError } from "./routing.js";

/** Plays one episode with `expert` through `client`; every answer, in order. */
async function playThrough(
  client: EnvironmentClient,
  name: string,
  index: number,
  expert: Expert,
): Promise<{ opening: Message[]; answers: InteractResult[] }> {
  const { sessionId, messages, tools } = await client.startSample(name, index);
  const history: Message[] = [...messages];
  const answers: InteractResult[] = [];
  for (let turn = 0; turn < 40; turn++) {
    const action = await expert.act(history, tools);
    history.push(action);
    const answer = await client.interact(sessionId, action);
    answers.push(answer);
    history.push(...answer.messages);
    if (answer.finish) break;
  }
  if (!answers.at(-1)?.finish) await client.cancel(sessionId);
  return { opening: messages, answers };
}

/** A controller on a free port with `family` on a worker behind HTTP (as `env serve` + `env worker`). */
async function remoteTask(family: CurriculumTaskFamily) {
  const controller = new Controller({ port: 0 });
  const url = await controller.listen();
  const worker = new TaskWorker(family, { concurrency: 4 });
  const served = await serveWorker(worker, {
    controllerUrl: url,
    token: controller.token,
    heartbeatIntervalMs: 2_000,
  });
  await served.heartbeat();
  const client = new HttpEnvironmentClient({ url, token: controller.token });
  return {
    controller,
    served,
    client,
    close: async () => {
      await client.close();
      await served.close().catch(() => undefined);
      await controller.close();
    },
  };
}

test("RoutingEnvironmentClient: KG in-process and ALFWorld through a controller and an HTTP worker play turn by turn as in-process", async () => {
  const kg = await createTaskFamily("kg", { seed: 3 });
  const alfworld = await createTaskFamily("alfworld", { seed: 3 });
  const reference = new InProcessEnvironmentClient([kg, alfworld]);
  const remote = await remoteTask(await createTaskFamily("alfworld", { seed: 3 }));
  const routed = new RoutingEnvironmentClient([
    {
      tasks: ["kg"],
      client: new InProcessEnvironmentClient([await createTaskFamily("kg", { seed: 3 })]),
      label: "in-process",
    },
    { tasks: ["alfworld"], client: remote.client, label: "controller" },
  ]);
  try {
    for (const difficulty of alfworld.difficulties) {
      for (const split of ["train", "test"] as const) {
        assert.deepEqual(
          await routed.getIndicesAt("alfworld", split, difficulty),
          alfworld.indicesAt(split, difficulty),
          `alfworld ${split} indices at difficulty ${difficulty} through the controller`,
        );
      }
    }
    await assert.rejects(
      routed.getIndicesAt("kg", "train", 0),
      RoutingError,
      "an in-process route does not select by difficulty",
    );
    assert.deepEqual(await routed.getIndices("alfworld", "test"), alfworld.indices("test"));
    let remoteTurns = 0;
    for (const [name, family] of [
      ["kg", kg],
      ["alfworld", alfworld],
    ] as const) {
      const indices = [
        ...family.indicesAt("train", family.difficulties[0]).slice(0, 3),
        ...family.indicesAt("test", family.difficulties.at(-1)!).slice(0, 2),
      ];
      for (const index of indices) {
        const expected = await playThrough(reference, name, index, family.expert(index));
        const actual = await playThrough(routed, name, index, family.expert(index));
        assert.deepEqual(
          actual,
          expected,
          `${name} ${index}: the same opening and answers, turn by turn`,
        );
        assert.equal(actual.answers.at(-1)?.status, "completed");
        if (name === "alfworld") remoteTurns += actual.answers.length;
      }
    }
    assert.ok(remoteTurns >= 5, `${remoteTurns} turns went through the controller`);
    assert.deepEqual(
      Object.keys(remote.controller.listSessions()),
      [],
      "every remote session ended",
    );
    const { sessionId } = await routed.startSample("alfworld", alfworld.indices("train")[0]);
    assert.match(sessionId, /^r1:/);
    assert.equal(Object.keys(remote.controller.listSessions()).length, 1);
    await routed.cancel(sessionId);
    assert.equal(
      Object.keys(remote.controller.listSessions()).length,
      0,
      "cancel reaches the controller",
    );
    await assert.rejects(routed.startSample("webshop", 0), /no environment serves task "webshop"/);
    await assert.rejects(
      routed.interact("ctl-1", { role: "assistant", content: "x" }),
      /not started through this client/,
    );
  } finally {
    await routed.close();
    await reference.close();
    await remote.close();
  }
});

test("RoutingEnvironmentClient: a worker that dies mid-episode ends it with task error; an unreachable controller rejects", async () => {
  const family = await createTaskFamily("kg", { seed: 0 });
  const remote = await remoteTask(family);
  const routed = new RoutingEnvironmentClient([
    { tasks: ["kg"], client: remote.client, label: "controller" },
  ]);
  try {
    const index = family.indices("train")[0];
    const { sessionId, messages, tools } = await routed.startSample("kg", index);
    await remote.served.close();
    const action = await family.expert(index).act(messages, tools);
    const answer = await routed.interact(sessionId, action);
    assert.equal(answer.status, "task error", JSON.stringify(answer));
    assert.equal(answer.finish, true);
    await remote.controller.close();
    await assert.rejects(routed.startSample("kg", index), (error: Error) =>
      /ECONNREFUSED|connect|socket|closed/i.test(error.message),
    );
  } finally {
    await routed.close();
    await remote.close();
  }
});

async function osSkipReason(): Promise<string | undefined> {
  if (!hasAgentBenchData("os_interaction"))
    return "no AgentBench OS data (../shared/data/agentbench)";
  if (!(await isDockerAvailable()))
    return "no Docker engine answers on the local socket (bash scripts/start-dockerd.sh)";
  if (!(await imagesUpToDate(undefined, ["os"])))
    return "the OS image is missing or out of date (agentrl env build --image os)";
  return undefined;
}

test(
  "RoutingEnvironmentClient: OS through a controller and a worker answers turn by turn as in-process",
  { skip: await osSkipReason(), timeout: 240_000 },
  async () => {
    const local = await createTaskFamily("os", { seed: 0 });
    const reference = new InProcessEnvironmentClient([local]);
    const remote = await remoteTask(await createTaskFamily("os", { seed: 0 }));
    const routed = new RoutingEnvironmentClient([
      { tasks: ["os"], client: remote.client, label: "controller" },
    ]);
    try {
      for (const difficulty of local.difficulties) {
        assert.deepEqual(
          await routed.getIndicesAt("os", "train", difficulty),
          local.indicesAt("train", difficulty),
          `os train indices at difficulty ${difficulty}`,
        );
      }
      const indices = local.difficulties
        .map((difficulty) => local.indicesAt("train", difficulty)[0])
        .filter((index) => index !== undefined);
      for (const index of indices) {
        const expected = await playThrough(reference, "os", index, local.expert(index));
        const actual = await playThrough(routed, "os", index, local.expert(index));
        assert.deepEqual(
          actual,
          expected,
          `os ${index}: the same opening and answers, turn by turn`,
        );
      }
    } finally {
      await routed.close();
      await reference.close();
      await local.close?.();
      await remote.close();
    }
  },
);
