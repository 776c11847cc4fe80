/**
 * OS sessions through one worker over two real Docker engines: the machine's engine and a
 * second `dockerd` (own socket, data root, exec root, pidfile) that
 * scripts/start-second-dockerd.sh starts; agentrl/os is loaded into it from the first engine
 * as `agentrl env build --docker-host` does (`copyImagesToHost`). Sessions land on both;
 * stopping the second engine fails only its sessions (task error), new sessions go to the
 * first; started again, the second engine is used again. Skips (saying why) without root,
 * dockerd, the first engine or the agentrl/os image.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import Docker from "dockerode";
import { createTaskFamilyOnEngines, type MultiEngineTaskFamily } from "./engines.js";
import { copyImagesToHost } from "./engine-images.js";
import { imageHash, IMAGES, imageUnavailable } from "./images.js";
import { createTaskFamily } from "../registry.js";
import { Controller } from "../server/controller.js";
import { HttpEnvironmentClient } from "../server/client.js";
import { TaskWorker, serveWorker } from "../server/worker.js";
import type { OsSample } from "../os/data.js";
import type { AssistantMessage } from "../types.js";

const repository = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");
const script = join(repository, "scripts/start-second-dockerd.sh");
const secondDir = "/tmp/agentrl-dockerd2-test";

function commandExists(name: string): boolean {
  return spawnSync("sh", ["-c", `command -v ${name}`], { stdio: "ignore" }).status === 0;
}

async function skipReason(): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return "not root: cannot start a second dockerd";
  if (!commandExists("dockerd")) return "no dockerd binary (apt-get install docker.io)";
  return (await imageUnavailable("os")) || undefined;
}

const SAMPLES: OsSample[] = [0, 1, 2, 3].map((index) => ({
  index,
  split: "train",
  description: `Print the container's hostname (${index}).`,
  init: [],
  match: { answer: "x", strip: true },
  labels: [],
  image: "default",
  extraFolders: [],
  extraFiles: [],
}));

function bash(command: string): AssistantMessage {
  return {
    role: "assistant",
    content: null,
    tool_calls: [
      {
        id: "c",
        type: "function",
        function: { name: "bash_action", arguments: JSON.stringify({ script: command }) },
      },
    ],
  };
}

/** Short ids of this process's OS containers on an engine. */
async function ourContainers(docker: Docker): Promise<string[]> {
  const list = await docker.listContainers({
    filters: { label: ["agentrl.task=os", `agentrl.pid=${process.pid}`] },
  });
  return list.map((info) => info.Id.slice(0, 12));
}

async function until(condition: () => boolean, what: string, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((done) => setTimeout(done, 50));
  }
}

/** The machine's engine as dockerode's default finds it (DOCKER_HOST when it is a unix socket). */
function firstEngineUrl(): string {
  const host = process.env.DOCKER_HOST;
  return host?.startsWith("unix://") ? host : "unix:///var/run/docker.sock";
}

function startSecond(): { url?: string; error?: string } {
  // No image copy by the script: the test loads agentrl/os itself (what `env build --docker-host` does).
  const run = spawnSync("bash", [script, secondDir], {
    encoding: "utf8",
    timeout: 180_000,
    env: { ...process.env, AGENTRL_SECOND_DOCKERD_IMAGES: "" },
  });
  if (run.status !== 0) return { error: `${run.stderr.trim()} (exit ${run.status})` };
  return { url: run.stdout.trim().split("\n").at(-1) };
}

const reason = await skipReason();

test(
  "OS sessions over two Docker engines: spread on both, a stopped engine fails only its sessions, it is used again once back",
  { skip: reason, timeout: 300_000 },
  async (t) => {
    const started = startSecond();
    if (!started.url) {
      t.skip(`the second dockerd did not start: ${started.error}`);
      return;
    }
    const first = new Docker();
    const second = new Docker({ socketPath: started.url.slice("unix://".length) });
    const [copy] = await copyImagesToHost(started.url, [IMAGES.os.tag]);
    assert.equal(
      await imageHash(second, IMAGES.os.tag),
      await imageHash(first, IMAGES.os.tag),
      `${IMAGES.os.tag} is on the second engine (${copy.skipped ? "already there" : `loaded in ${copy.seconds.toFixed(1)} s`})`,
    );
    const family = (await createTaskFamilyOnEngines(
      "os",
      { samples: SAMPLES },
      {
        hosts: [firstEngineUrl(), `${started.url}?slots=2`],
        slotsPerEngine: 2,
        probeIntervalMs: 300,
        failuresBeforeDown: 1,
        initialBackoffMs: 300,
        maxBackoffMs: 1000,
      },
      createTaskFamily,
    )) as MultiEngineTaskFamily;
    const worker = new TaskWorker(family, { concurrency: 5 });
    const token = "engines-test-token";
    const controller = new Controller({ port: 0, token });
    let url: string;
    try {
      url = await controller.listen();
    } catch (error) {
      await family.close();
      throw error;
    }
    const served = await serveWorker(worker, { controllerUrl: url, token, log: () => undefined });
    const client = new HttpEnvironmentClient({ url, token });
    try {
      const sessions = await Promise.all(
        SAMPLES.map((sample) => client.startSample("os", sample.index)),
      );
      const onFirst = await ourContainers(first);
      const onSecond = await ourContainers(second);
      assert.equal(onFirst.length, 2, `two sessions on the first engine: ${onFirst}`);
      assert.equal(onSecond.length, 2, `two sessions on the second engine: ${onSecond}`);

      // Each session's shell runs in a container of one engine: its hostname is the container id.
      const home = new Map<string, "first" | "second">();
      for (const session of sessions) {
        const result = await client.interact(session.sessionId, bash("hostname"));
        assert.equal(result.status, "running");
        const host = JSON.stringify(result.messages).match(/[0-9a-f]{12}/)?.[0] ?? "";
        assert.ok(
          onFirst.includes(host) || onSecond.includes(host),
          `hostname ${host} is a container of one of the engines`,
        );
        home.set(session.sessionId, onFirst.includes(host) ? "first" : "second");
      }

      // Stop the second engine: its sessions end with task error, the first engine's go on.
      assert.equal(
        spawnSync("bash", [script, "--stop", secondDir], { stdio: "ignore", timeout: 60_000 })
          .status,
        0,
      );
      await until(
        () => family.engines.engines[1].state === "down",
        "the second engine to be marked down",
        20_000,
      );
      for (const session of sessions) {
        const result = await client.interact(session.sessionId, bash("echo still-here"));
        if (home.get(session.sessionId) === "second") {
          assert.equal(
            result.status,
            "task error",
            `session on the stopped engine: ${JSON.stringify(result)}`,
          );
          assert.equal(result.finish, true);
        } else {
          assert.equal(
            result.status,
            "running",
            `session on the live engine: ${JSON.stringify(result)}`,
          );
          assert.match(JSON.stringify(result.messages), /still-here/);
        }
      }
      const meanwhile = await client.startSample("os", 0);
      assert.equal(
        (await ourContainers(first)).length,
        3,
        "a new session goes to the engine that is up",
      );
      await client.cancel(meanwhile.sessionId);

      // Start it again: probed back up with a fresh family, and it takes sessions again.
      const again = startSecond();
      assert.ok(again.url, `the second dockerd restarts: ${again.error}`);
      await until(
        () => family.engines.engines[1].state === "up",
        "the second engine to be back up",
        30_000,
      );
      const back = await client.startSample("os", 1);
      assert.equal(
        (await ourContainers(second)).length,
        1,
        "the engine with the most free slots (the second) gets the new session",
      );
      assert.equal((await client.interact(back.sessionId, bash("echo back"))).status, "running");
      for (const session of [...sessions, back])
        await client.cancel(session.sessionId).catch(() => undefined);
    } finally {
      await client.close?.();
      await served.close();
      await controller.close();
      await family.close();
      assert.deepEqual(await ourContainers(first), [], "no container left on the first engine");
      assert.deepEqual(
        await ourContainers(second).catch(() => []),
        [],
        "no container left on the second engine",
      );
      spawnSync("bash", [script, "--stop", secondDir], { stdio: "ignore", timeout: 60_000 });
    }
  },
);
