/**
 * The Docker runtime on a real engine: limits and labels, command time limit and output
 * bound, warm pool reuse, and removal of a crashed run's containers at the next start.
 * Skips (with the reason) when no engine answers or the `agentrl/os` image is missing.
 */
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import Docker from "dockerode";
import { hostname } from "node:os";
import {
  ContainerError,
  DockerRuntime,
  SandboxEndedError,
  type DeathCause,
  HOST_LABEL,
  ownerIsDead,
  PID_LABEL,
  PID_START_LABEL,
  processStartTime,
  RUN_LABEL,
} from "./runtime.js";
import { WarmPool } from "./pool.js";
import { Slots } from "./slots.js";
import { IMAGES, imageUnavailable } from "./images.js";

const docker = new Docker();
const skip = await imageUnavailable("os", docker);

describe("Slots", () => {
  test("at most capacity holders, the rest wait in order", async () => {
    const slots = new Slots(2);
    const first = await slots.acquire();
    const second = await slots.acquire();
    let thirdGot = false;
    const third = slots.acquire().then((release) => {
      thirdGot = true;
      return release;
    });
    await new Promise((resolve) => setTimeout(resolve, 10));
    assert.equal(thirdGot, false);
    assert.equal(slots.inUse, 2);
    first();
    first(); // idempotent
    const releaseThird = await third;
    assert.equal(thirdGot, true);
    assert.equal(slots.inUse, 2);
    second();
    releaseThird();
    assert.equal(slots.inUse, 0);
  });
});

describe("the reaper's owner check", () => {
  test("a live owner, another host's, or an unlabelled one is kept; a dead or reused pid is not", async () => {
    const here = hostname();
    const start = processStartTime(process.pid);
    assert.ok(start && /^\d+$/.test(start), `start time of this process: ${start}`);
    assert.equal(
      ownerIsDead({
        [HOST_LABEL]: here,
        [PID_LABEL]: String(process.pid),
        [PID_START_LABEL]: start!,
      }),
      false,
    );
    assert.equal(
      ownerIsDead({
        [HOST_LABEL]: here,
        [PID_LABEL]: String(process.pid),
        [PID_START_LABEL]: String(Number(start) + 1),
      }),
      true,
      "the pid was reused",
    );
    const child = spawn(process.execPath, ["-e", ""]);
    await new Promise((resolve) => child.once("exit", resolve));
    assert.equal(
      ownerIsDead({ [HOST_LABEL]: here, [PID_LABEL]: String(child.pid) }),
      true,
      "an exited process",
    );
    assert.equal(
      ownerIsDead({ [HOST_LABEL]: `${here}-elsewhere`, [PID_LABEL]: String(child.pid) }),
      false,
      "another host's owner is never judged here",
    );
    assert.equal(ownerIsDead({ [HOST_LABEL]: here }), false, "no owner pid: kept");
  });
});

describe("DockerRuntime on a wedged engine", () => {
  test("a container the engine does not start in time fails with ContainerError and is removed once it appears", async () => {
    const removed: string[] = [];
    let releaseStart: () => void = () => {};
    const wedged = {
      createContainer: async () => ({
        id: "late-1",
        start: () =>
          new Promise<void>((resolve) => {
            releaseStart = resolve;
          }),
      }),
      getContainer: (id: string) => ({
        remove: async () => {
          removed.push(id);
        },
      }),
      listContainers: async () => [],
    } as unknown as Docker;
    const runtime = new DockerRuntime({ docker: wedged, startSeconds: 0.05 });
    const began = Date.now();
    await assert.rejects(
      runtime.start({ image: "agentrl/os:latest" }),
      (error: Error) =>
        error instanceof ContainerError && /not started after 0.05 s/.test(error.message),
    );
    assert.ok(Date.now() - began < 2000, "start gave up at its deadline");
    assert.deepEqual(removed, []);
    releaseStart();
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual(removed, ["late-1"], "the late container is removed");
    assert.deepEqual(runtime.containers, []);
    await runtime.close();
  });
});

describe("DockerRuntime's process cleanup", () => {
  test("many runtimes share one exit listener (no MaxListenersExceededWarning with many task worlds)", async () => {
    const idle = { listContainers: async () => [] } as unknown as Docker;
    const first = new DockerRuntime({ docker: idle, reapSeconds: 0 });
    const before = {
      exit: process.listenerCount("exit"),
      sigterm: process.listenerCount("SIGTERM"),
    };
    const more = Array.from(
      { length: 16 },
      () => new DockerRuntime({ docker: idle, reapSeconds: 0 }),
    );
    assert.equal(process.listenerCount("exit"), before.exit, "no exit listener per runtime");
    assert.equal(
      process.listenerCount("SIGTERM"),
      before.sigterm,
      "no signal listener per runtime",
    );
    await Promise.all([first, ...more].map((runtime) => runtime.close()));
    assert.equal(process.listenerCount("exit"), before.exit);
  });
});

describe("DockerRuntime", { skip }, () => {
  let runtime: DockerRuntime;
  before(async () => {
    runtime = await DockerRuntime.connect();
  });
  after(async () => {
    await runtime.close();
  });

  test("a container has limits, labels, no capabilities and no network", async () => {
    const id = await runtime.start({
      image: IMAGES.os.tag,
      memoryBytes: 256 * 1024 ** 2,
      cpus: 0.5,
      pidsLimit: 64,
    });
    const info = await docker.getContainer(id).inspect();
    assert.equal(info.HostConfig.Memory, 256 * 1024 ** 2);
    assert.equal(info.HostConfig.NanoCpus, 5e8);
    assert.equal(info.HostConfig.PidsLimit, 64);
    assert.equal(info.HostConfig.NetworkMode, "none");
    assert.deepEqual(info.HostConfig.CapDrop, ["ALL"]);
    assert.ok(info.HostConfig.SecurityOpt?.includes("no-new-privileges"));
    assert.equal(info.Config.Labels.agentrl, "1");
    assert.equal(info.Config.Labels[RUN_LABEL], runtime.runId);
    const interfaces = await runtime.exec(id, ["cat", "/proc/net/dev"]);
    assert.doesNotMatch(interfaces.output, /eth0/);
    await runtime.remove(id);
    assert.equal(await runtime.isRunning(id), false);
  });

  for (const harness of [false, true])
    test(`exec returns exit code and interleaved output, and stops at the time limit (${harness ? "through the command harness" : "docker exec"})`, async () => {
      const id = await runtime.start({ image: IMAGES.os.tag, harness });
      const result = await runtime.exec(id, ["bash", "-c", "echo out; echo err >&2; exit 3"]);
      assert.equal(result.exitCode, 3);
      assert.match(result.output, /out/);
      assert.match(result.output, /err/);
      const started = Date.now();
      const slow = await runtime.exec(id, ["bash", "-c", "echo before; sleep 20"], {
        timeoutSeconds: 1,
      });
      assert.equal(slow.timedOut, true);
      assert.ok(Date.now() - started < 8000, "the time limit stops the command");
      assert.match(slow.output, /before/);
      const backgroundStarted = Date.now();
      const background = await runtime.exec(id, ["bash", "-c", "sleep 30 & echo started"], {
        timeoutSeconds: 10,
      });
      assert.equal(background.exitCode, 0);
      assert.equal(background.timedOut, false);
      assert.match(background.output, /started/);
      assert.ok(
        Date.now() - backgroundStarted < 4000,
        "a program left running in the background does not hold the call open",
      );
      const survivors = await runtime.exec(id, [
        "bash",
        "-c",
        "ps -e -o args= | grep -c '^sleep 30'",
      ]);
      assert.equal(survivors.output.trim(), "1", "and it keeps running");
      const jobs = await runtime.exec(id, ["bash", "-c", "sleep 50 & sleep 60"], {
        timeoutSeconds: 1,
      });
      assert.equal(jobs.timedOut, true);
      const killed = await runtime.exec(id, [
        "bash",
        "-c",
        "ps -e -o args= | grep -c '^sleep [56]0' || true",
      ]);
      assert.equal(
        killed.output.trim(),
        "0",
        "a timed-out command is killed with its background jobs",
      );
      const big = await runtime.exec(id, ["bash", "-c", "yes | head -c 100000"], {
        maxOutputChars: 1000,
      });
      assert.equal(big.output.length, 1000);
      assert.equal(big.truncated, true);
      await runtime.remove(id);
    });

  for (const harness of [false, true])
    test(`a container killed from outside is reported by onDeath as external and exec fails with ContainerError (${harness ? "harness" : "docker exec"})`, async () => {
      const id = await runtime.start({ image: IMAGES.os.tag, harness });
      const died = new Promise<DeathCause>((resolve) => void runtime.onDeath(id, resolve));
      await new Promise((resolve) => setTimeout(resolve, 200));
      await docker.getContainer(id).kill();
      assert.equal((await died).cause, "external");
      await assert.rejects(
        runtime.exec(id, ["true"]),
        (error: Error) => error instanceof ContainerError && !(error instanceof SandboxEndedError),
      );
      await runtime.remove(id);
    });

  test("a container whose own command kills every process ended on its own: SandboxEndedError, onDeath says `own`", async () => {
    const id = await runtime.start({ image: IMAGES.os.tag, harness: true });
    const died = new Promise<DeathCause>((resolve) => void runtime.onDeath(id, resolve));
    await assert.rejects(
      runtime.shell(id, "kill -9 -1"),
      (error: Error) => error instanceof SandboxEndedError,
    );
    assert.equal((await died).cause, "own");
    await runtime.remove(id);
  });

  test("the harness's shell keeps state between calls and reports exact exit codes", async () => {
    const id = await runtime.start({ image: IMAGES.os.tag, harness: true });
    await runtime.shellStart(id, "/tmp");
    assert.equal((await runtime.shell(id, "cd /etc; X=4; false")).exitCode, 1);
    const next = await runtime.shell(id, "pwd; echo $X; exit 5");
    assert.deepEqual([next.output, next.exitCode], ["/etc\n4\n", 5]);
    const fresh = await runtime.shell(id, 'pwd; echo "[$X]"');
    assert.equal(
      fresh.output,
      "/etc\n[]\n",
      "after `exit` a new login shell starts in the same folder",
    );
    await runtime.remove(id);
  });

  test("the warm pool hands out started containers and reuses them a bounded number of times", async () => {
    const pool = new WarmPool(runtime, { image: IMAGES.os.tag }, { size: 1, maxUses: 2 });
    await pool.fill();
    assert.equal(pool.idleCount, 1);
    const first = await pool.acquire();
    assert.equal(first.warm, true);
    await pool.release(first.containerId);
    const second = await pool.acquire();
    assert.equal(second.containerId, first.containerId, "reused once");
    assert.equal(second.uses, 1);
    await pool.release(second.containerId);
    assert.equal(await runtime.isRunning(first.containerId), false, "removed after maxUses");
    await pool.close();
  });

  test("containers of a crashed run are removed at the next start, live runs are kept", async () => {
    // A child process starts a container and is killed with SIGKILL: no cleanup runs.
    const runtimeUrl = new URL("./runtime.ts", import.meta.url).href;
    const code = `import { DockerRuntime } from ${JSON.stringify(runtimeUrl)};
      const runtime = new DockerRuntime({ runId: "crashed-test" });
      const id = await runtime.start({ image: ${JSON.stringify(IMAGES.os.tag)} });
      console.log(id);
      setInterval(() => {}, 1000);`;
    const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], {
      stdio: ["ignore", "pipe", "inherit"],
      cwd: fileURLToPath(new URL(".", import.meta.url)),
    });
    const leftover = await new Promise<string>((resolve, reject) => {
      child.stdout.on("data", (chunk: Buffer) => resolve(chunk.toString().trim()));
      child.on("exit", (exitCode) => reject(new Error(`child exited with ${exitCode}`)));
    });
    const mine = await runtime.start({ image: IMAGES.os.tag });
    const other = new DockerRuntime();
    // While the child lives, its container is not a leftover.
    assert.equal((await other.removeLeftovers()) >= 0, true);
    assert.equal(await runtime.isRunning(leftover), true);
    child.kill("SIGKILL");
    await new Promise((resolve) => child.once("exit", resolve));
    const labels = (await docker.getContainer(leftover).inspect()).Config.Labels;
    assert.equal(labels[PID_LABEL], String(child.pid));
    const removed = await other.removeLeftovers();
    assert.ok(removed >= 1);
    assert.equal(await runtime.isRunning(leftover), false);
    assert.equal(await runtime.isRunning(mine), true, "a live run's container stays");
    await other.close();
    await runtime.remove(mine);
  });
});
