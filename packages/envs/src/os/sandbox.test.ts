/**
 * The OS sandbox under attack, on a real Docker engine (no AgentBench data needed): a disk
 * filler (foreground and background), a fork bomb, a memory bomb, a network attempt, the
 * ulimits, and a background process that must not outlive its session; and the writable
 * budget of the writable root (all writable paths together, on disk), on an engine that caps
 * writable layers (`quota-engine.ts`: the first engine with a quota data root, else the second
 * engine `scripts/start-second-dockerd.sh --quota` starts, as scripts/setup.sh does). Skips
 * with the reason when no engine answers, the `agentrl/os` image is missing, or (the budget
 * case) no engine caps writable layers.
 */
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, statfsSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import Docker from "dockerode";
import { findQuotaEngine, quotaRuntime } from "../docker/quota-engine.js";
import { IMAGES, imageUnavailable } from "../docker/images.js";
import type { AssistantMessage, Message } from "../types.js";
import { createTaskFamily, type OsSample, type OsSession, type OsTaskFamily } from "./index.js";

const docker = new Docker();
const skip = await imageUnavailable("os", docker);

/** The engine of the writable-budget case: one that caps writable layers (see quota-engine.ts). */
const quota = skip ? { missing: skip } : await findQuotaEngine();

const MIB = 1024 ** 2;
const DISK = 64 * MIB;

function probeSample(index: number, extra: Partial<OsSample> = {}): OsSample {
  return {
    index,
    split: "train",
    description: "sandbox probe",
    image: "default",
    init: [],
    labels: [],
    match: { answer: "done", strip: true },
    extraFolders: [],
    extraFiles: [],
    ...extra,
  };
}

function call(script: string): AssistantMessage {
  return {
    role: "assistant",
    content: null,
    tool_calls: [
      {
        id: "c",
        type: "function",
        function: { name: "bash_action", arguments: JSON.stringify({ script }) },
      },
    ],
  };
}

function text(message: Message): string {
  return message.content ?? "";
}

/** Bytes of the host's memory held by tmpfs and shared memory (/proc/meminfo Shmem). */
function hostShmemBytes(): number {
  return Number(/^Shmem:\s+(\d+) kB/m.exec(readFileSync("/proc/meminfo", "utf8"))?.[1] ?? 0) * 1024;
}

/** Free bytes on the file system that holds the engine's containers. */
async function engineFreeBytes(engineDocker: Docker = docker): Promise<number> {
  const root = ((await engineDocker.info()) as { DockerRootDir: string }).DockerRootDir;
  const stats = statfsSync(root);
  return stats.bavail * stats.bsize;
}

describe("OS sandbox probes", { skip }, () => {
  let family: OsTaskFamily;
  before(async () => {
    family = await createTaskFamily({
      samples: [
        probeSample(0),
        probeSample(1, { extraFolders: ["/assignment"], extraFiles: ["/usr/stock.log"] }),
      ],
      diskBytes: DISK,
      openFiles: 8192,
      memoryBytes: 512 * MIB,
      commandSeconds: 30,
    });
  });
  after(async () => {
    await family.close();
  });

  test("a disk filler gets ENOSPC or is stopped, and the host loses no more than the limit", async () => {
    const writableRoot = await family.runtime.writableRoot(IMAGES.os.tag, { bytes: DISK });
    const free = await engineFreeBytes();
    const session = (await family.startSession(0)) as OsSession;
    // A background writer per writable folder, then a foreground one, each asking for 1 GiB.
    const fill =
      "for d in /tmp /root /home /var/tmp; do (head -c 1G /dev/zero > $d/fill 2>/dev/null &); done; head -c 1G /dev/zero > /etc/fill; echo exit=$?";
    const reply = await session.interact(call(fill));
    const output = text(reply.messages[0]);
    assert.match(
      output,
      /No space left on device|File size limit exceeded|exit=1|exit=153/,
      output,
    );
    const sizes = await session.interact(
      call(
        "sleep 2; du -sb /tmp/fill /root/fill /home/fill /var/tmp/fill /etc/fill 2>/dev/null | awk '{s+=$1} END {print s}'",
      ),
    );
    const written = Number(text(sizes.messages[0]).trim());
    assert.ok(
      written <= (writableRoot ? DISK + 16 * MIB : 5 * DISK),
      `the filler wrote ${written} bytes in 5 folders of ${DISK}`,
    );
    if (!writableRoot) {
      const readOnly = await session.interact(call("echo x > /usr/x; mkdir /newfolder; echo done"));
      assert.match(text(readOnly.messages[0]), /Read-only file system/);
    }
    const drop = free - (await engineFreeBytes());
    assert.ok(drop < 5 * DISK + 256 * MIB, `the engine's disk lost ${drop} bytes`);
    await session.cancel();
  });

  test("a sample's own top-level folder and its file in /usr are writable", async () => {
    const session = await family.startSession(1);
    const reply = await session.interact(
      call(
        "mkdir -p /assignment/a && echo ok > /assignment/a/f && echo 1 >> /usr/stock.log && cat /assignment/a/f /usr/stock.log",
      ),
    );
    assert.equal(text(reply.messages[0]).trim(), "ok\n1");
    await session.cancel();
  });

  test("a fork bomb stays within the process limit of its container and dies with its session", async () => {
    const session = (await family.startSession(0)) as OsSession;
    await session.interact(call("bomb() { bomb | bomb & }; bomb; sleep 3"));
    const stats = (await docker.getContainer(session.containerId).stats({ stream: false })) as {
      pids_stats?: { current?: number };
    };
    assert.ok((stats.pids_stats?.current ?? 0) <= 256, `${stats.pids_stats?.current} processes`);
    // The next command runs, or fails to start for want of a process slot; either way the turn ends.
    const after = await session.interact(call("echo alive"));
    assert.ok(after.messages.length > 0);
    await session.cancel();
    await assert.rejects(
      docker.getContainer(session.containerId).inspect(),
      "the bomb went with its container",
    );
    const next = await family.startSession(0);
    assert.equal(text((await next.interact(call("echo fine"))).messages[0]).trim(), "fine");
    await next.cancel();
  });

  test("a memory bomb is killed by the memory limit", async () => {
    const session = await family.startSession(0);
    const reply = await session.interact(
      call("python3 -c 'x = bytearray(1) * (2 * 1024 ** 3); print(len(x))'; echo exit=$?"),
    );
    const output = text(reply.messages[0]);
    assert.doesNotMatch(output, /2147483648/);
    assert.match(output, /exit=(137|1)|MemoryError|Killed/);
    await session.cancel();
  });

  test("no network: only loopback, and the host's loopback services are out of reach", async () => {
    const server: Server = createServer((_, response) => response.end("reached"));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as AddressInfo).port;
    try {
      const session = await family.startSession(0);
      const reply = await session.interact(
        call(
          `tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; echo routes=$(tail -n +2 /proc/net/route | wc -l); curl -s -m 3 http://127.0.0.1:${port}/ || echo unreachable`,
        ),
      );
      const output = text(reply.messages[0]);
      assert.match(output, /^lo$/m);
      assert.doesNotMatch(output, /^eth/m);
      assert.match(output, /routes=0/);
      assert.match(output, /unreachable/);
      assert.doesNotMatch(output, /reached\b(?!.*unreachable)/);
      await session.cancel();
    } finally {
      server.close();
    }
  });

  test("ulimits hold: open files and file size", async () => {
    const session = await family.startSession(0);
    const reply = await session.interact(call("ulimit -n; ulimit -f"));
    assert.deepEqual(text(reply.messages[0]).trim().split("\n"), ["8192", String(DISK / 1024)]);
    await session.cancel();
  });

  test("a background writer does not outlive its session", async () => {
    const session = (await family.startSession(0)) as OsSession;
    await session.interact(
      call("(while true; do echo x >> /tmp/log; sleep 0.1; done) & disown; echo started"),
    );
    await session.cancel();
    await assert.rejects(
      docker.getContainer(session.containerId).inspect(),
      "the container and its processes are gone",
    );
  });

  test("reconcile removes a container no session holds and keeps a live session's", async () => {
    const session = (await family.startSession(0)) as OsSession;
    const orphan = await family.runtime.start({
      image: IMAGES.os.tag,
      labels: { "agentrl.task": "os" },
      namePrefix: "agentrl-os",
    });
    const result = await family.reconcile(0);
    assert.equal(result.removedContainers, 1);
    assert.equal(result.failedSessions, 0);
    assert.equal(await family.runtime.isRunning(orphan), false);
    assert.equal(text((await session.interact(call("echo kept"))).messages[0]).trim(), "kept");
    await session.cancel();
  });
});

describe(
  "OS writable budget: one per container (writable root, as the original)",
  {
    skip: "missing" in quota ? quota.missing : false,
  },
  () => {
    const engine = quota as Exclude<typeof quota, { missing: string }>;
    let family: OsTaskFamily;
    before(async () => {
      family = await createTaskFamily({
        runtime: quotaRuntime(engine),
        samples: [probeSample(0)],
        diskBytes: DISK,
        memoryBytes: 512 * MIB,
        commandSeconds: 30,
      });
    });
    after(async () => {
      await family.close();
      await family.runtime.close();
    });

    test("writers in every writable path at once stop within the limit, on disk, not in RAM", async () => {
      const margin = 16 * MIB;
      const free = await engineFreeBytes(engine.docker);
      const shmem = hostShmemBytes();
      const session = (await family.startSession(0)) as OsSession;
      const paths = [
        "/fill",
        "/usr/fill",
        "/tmp/fill",
        "/root/fill",
        "/home/fill",
        "/var/tmp/fill",
        "/etc/fill",
        "/opt/fill",
      ];
      const fill = `for f in ${paths.join(" ")}; do (head -c 1G /dev/zero > $f 2>/dev/null &); done; sleep 1; wait; sleep 4; sync; du -scb ${paths.join(" ")} 2>/dev/null | tail -1`;
      const reply = text((await session.interact(call(fill))).messages[0]);
      const written = Number(/(\d+)\s+total/.exec(reply)?.[1] ?? NaN);
      assert.ok(
        written <= DISK + margin,
        `the writers wrote ${written} bytes in total; the budget is ${DISK} + ${margin}`,
      );
      assert.ok(
        written >= DISK / 2,
        `the writers wrote ${written} bytes: they should reach the budget`,
      );
      const ram = hostShmemBytes() - shmem;
      assert.ok(
        ram < margin + DISK / 4,
        `the host's tmpfs memory grew by ${ram} bytes: the files must be on disk`,
      );
      const drop = free - (await engineFreeBytes(engine.docker));
      assert.ok(drop < DISK + 2 * margin, `the engine's disk lost ${drop} bytes`);
      assert.match(
        text(
          (await session.interact(call("rm -f /fill /tmp/fill; echo again > /usr/x && cat /usr/x")))
            .messages[0],
        ),
        /again/,
        "freed space is writable again",
      );
      await session.cancel();
    });
  },
);
