/**
 * No leaks after a crash, end to end: `agentrl env serve --tasks os` holds live sessions (one
 * container each) and is killed with SIGKILL, so none of its own cleanup runs. The next
 * agentrl process that uses Docker (a second `env serve`) reaps them: 0 containers of the
 * dead process remain within 30 s. Containers of live owners (other tests on the same engine)
 * are never touched: the reaper only removes containers whose owner process is dead.
 * Skips with the reason when no engine answers or the `agentrl/os` image is missing.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import Docker from "dockerode";
import { HttpEnvironmentClient, IMAGES, isDockerAvailable } from "@agentrl/envs";
import { imageHash, PID_LABEL } from "@agentrl/envs/internal";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const MAIN = fileURLToPath(new URL("../packages/cli/src/main.ts", import.meta.url));
const FORMS = fileURLToPath(
  new URL("../packages/envs/src/os/fixtures/agentbench-forms", import.meta.url),
);
const TOKEN = "reaper-test-token";

const docker = new Docker();
const engine = await isDockerAvailable(docker);
const image = engine ? await imageHash(docker, IMAGES.os.tag) : undefined;
const skip = !engine
  ? "no Docker engine answers (bash scripts/start-dockerd.sh)"
  : image === undefined
    ? "image agentrl/os missing (agentrl env build)"
    : false;

/** Starts `agentrl env serve --tasks os` on a free port; resolves with the child and its URL. */
function serve(): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(
    process.execPath,
    [
      "--conditions=source",
      "--import",
      "tsx",
      MAIN,
      "env",
      "serve",
      "--tasks",
      "os",
      "--port",
      "0",
      "--token",
      TOKEN,
      "--data",
      FORMS,
    ],
    {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  return new Promise((resolve, reject) => {
    let output = "";
    const timer = setTimeout(() => reject(new Error(`env serve did not start: ${output}`)), 60_000);
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (http:\/\/\S+?)\/api/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve({ child, url: match[1] });
      }
    };
    child.stdout!.on("data", read);
    child.stderr!.on("data", read);
    child.once("exit", (code) => reject(new Error(`env serve exited with ${code}: ${output}`)));
  });
}

async function containersOf(pid: number): Promise<number> {
  return (await docker.listContainers({ all: true, filters: { label: [`${PID_LABEL}=${pid}`] } }))
    .length;
}

test(
  "SIGKILL of env serve with live sessions: 0 of its containers 30 s after the next agentrl process starts",
  { skip, timeout: 180_000 },
  async () => {
    const first = await serve();
    const client = new HttpEnvironmentClient({ url: first.url, token: TOKEN });
    const indices = await client.getIndices("os", "test");
    for (const index of indices.slice(0, 3)) await client.startSample("os", index);
    const pid = first.child.pid!;
    assert.equal(await containersOf(pid), 3, "one container per live session");
    first.child.kill("SIGKILL");
    await new Promise((resolve) => first.child.once("exit", resolve));
    assert.equal(await containersOf(pid), 3, "SIGKILL left them behind");

    const second = await serve();
    try {
      const began = Date.now();
      while ((await containersOf(pid)) > 0 && Date.now() - began < 30_000)
        await new Promise((resolve) => setTimeout(resolve, 500));
      assert.equal(
        await containersOf(pid),
        0,
        "the next agentrl process reaped the dead owner's containers",
      );
    } finally {
      second.child.kill("SIGTERM");
      await new Promise((resolve) => second.child.once("exit", resolve));
    }
    assert.equal(await containersOf(second.child.pid!), 0, "a SIGTERMed env serve removes its own");
  },
);
