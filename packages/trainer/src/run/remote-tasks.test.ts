import { test } from "node:test";
import assert from "node:assert/strict";
import { Controller, TaskWorker, createTaskFamily, type Message } from "@agentrl/envs";
import { ConfigError, TrainConfigSchema } from "./config.js";
import { openTasks } from "./experiment/index.js";

test("openTasks: a mixed run, KG in-process and ALFWorld through a controller (its instances at the configured difficulties, episodes routed there)", async () => {
  const served = await createTaskFamily("alfworld", { seed: 0 });
  const controller = new Controller({ port: 0 });
  controller.addLocalWorker(new TaskWorker(served, { concurrency: 4 }));
  const url = await controller.listen();
  const config = TrainConfigSchema.parse({
    tasks: [{ name: "kg" }, { name: "alfworld", difficulty: [0, 1], controller: url }],
    environments: { waitSeconds: 5 },
  });
  const lines: string[] = [];
  process.env.AGENTRL_TOKEN = controller.token;
  const opened = await openTasks(config, (line) => lines.push(line));
  try {
    const kg = await createTaskFamily("kg", { seed: 0 });
    assert.deepEqual(
      opened.tasks.map((task) => task.name),
      ["kg", "alfworld"],
    );
    assert.deepEqual(opened.indices.get("alfworld"), {
      train: [0, 1].flatMap((d) => served.indicesAt("train", d)),
      test: [0, 1].flatMap((d) => served.indicesAt("test", d)),
    });
    assert.deepEqual(opened.indices.get("kg"), {
      train: kg.indicesAt("train", 0),
      test: kg.indicesAt("test", 0),
    });
    assert.ok(
      lines.some((line) => line.includes(`alfworld: through the controller ${url}`)),
      lines.join("\n"),
    );
    for (const [name, family] of [
      ["kg", kg],
      ["alfworld", served],
    ] as const) {
      const index = opened.indices.get(name)!.train[0];
      const { sessionId, messages, tools } = await opened.client.startSample(name, index);
      const expert = family.expert(index);
      const history: Message[] = [...messages];
      let finished = false;
      for (let turn = 0; turn < 30 && !finished; turn++) {
        const action = await expert.act(history, tools);
        const answer = await opened.client.interact(sessionId, action);
        history.push(action, ...answer.messages);
        finished = answer.finish;
        if (finished) assert.equal(answer.status, "completed", `${name} ${index}`);
      }
      assert.ok(finished, `${name} ${index} ended`);
      const remoteSessions = Object.keys(controller.listSessions()).length;
      assert.equal(remoteSessions, 0);
    }
  } finally {
    await opened.close();
    delete process.env.AGENTRL_TOKEN;
  }
  // A controller that never serves the task: a ConfigError after the wait, naming the task and the controller.
  const missing = TrainConfigSchema.parse({
    tasks: [{ name: "webshop", controller: url }],
    environments: { waitSeconds: 1 },
  });
  process.env.AGENTRL_TOKEN = controller.token;
  try {
    await assert.rejects(
      openTasks(missing, () => {}),
      (error: Error) =>
        error instanceof ConfigError &&
        /task "webshop" on the controller/.test(error.message) &&
        /unknown task/.test(error.message),
    );
  } finally {
    delete process.env.AGENTRL_TOKEN;
    await controller.close();
  }
});
