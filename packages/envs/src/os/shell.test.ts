/**
 * The OS shell as AgentBench's: one login shell per container started before init (its
 * ~/.bashrc runs once), the sample's `start` typed into it (its `cd` is the agent's), init
 * exit codes ignored; the broken forms of the read-only root (init writing under /usr and in
 * /, a re-created folder) on a writable root; and who is to blame when a sandbox ends: the
 * agent (its own commands killed every process, exhausted memory) or the infrastructure (the
 * container killed from outside, the engine unreachable). On a real Docker engine; skips
 * with the reason when none answers or `agentrl/os` is missing, and the writable-root cases
 * when no engine caps a writable layer (quota-engine.ts: scripts/setup.sh starts one).
 */
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer, connect, type Server, type Socket } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Docker from "dockerode";
import { playEpisode } from "../play.js";
import { DockerRuntime } from "../docker/runtime.js";
import { findQuotaEngine, quotaRuntime } from "../docker/quota-engine.js";
import { imageUnavailable } from "../docker/images.js";
import type { AssistantMessage, Expert, Message } from "../types.js";
import { createTaskFamily, type OsSample, type OsSession, type OsTaskFamily } from "./index.js";

const docker = new Docker();
const skip = await imageUnavailable("os", docker);

/** The engine of the writable-root cases: one that caps writable layers (see quota-engine.ts). */
const quota = skip ? { missing: skip } : await findQuotaEngine();

function sample(index: number, extra: Partial<OsSample>): OsSample {
  return {
    index,
    split: "train",
    description: "shell probe",
    image: "default",
    init: [],
    labels: [],
    match: { answer: "done", strip: true },
    extraFolders: [],
    extraFiles: [],
    ...extra,
  };
}

function bash(script: string): AssistantMessage {
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

function text(message: Message | undefined): string {
  return message?.content ?? "";
}

/** An agent that runs `scripts` in turn, then answers `answer` ("done" is right for the probes' samples). */
function scripted(scripts: string[], answer = "done"): Expert {
  return {
    act(history: Message[]): AssistantMessage {
      const turn = history.filter((message) => message.role === "assistant").length;
      if (turn < scripts.length) return bash(scripts[turn]);
      return {
        role: "assistant",
        content: null,
        tool_calls: [
          {
            id: "a",
            type: "function",
            function: { name: "answer_action", arguments: JSON.stringify({ answer }) },
          },
        ],
      };
    },
  };
}

const SAMPLES: OsSample[] = [
  // 0: a counting ~/.bashrc written by init: the agent's shell started before init, so it never ran it.
  sample(0, {
    init: [{ language: "bash", code: "echo 'echo x >> /root/counter' >> /root/.bashrc" }],
    match: undefined,
    check: [{ language: "bash", code: "test ! -e /root/counter" }],
  }),
  // 1: `start` with `cd` and a variable: the agent's shell is there.
  sample(1, {
    init: [
      { language: "bash", code: "mkdir -p /root/project && echo here > /root/project/marker" },
    ],
    start: { language: "bash", code: "cd /root/project; export GREETING=hello" },
  }),
  // 2: an init that fails: AgentBench ignores its exit code, the episode goes on.
  sample(2, { init: [{ language: "bash", code: "echo partial > /root/partial; exit 7" }] }),
  // 4: a redirect to a high descriptor in init (AgentBench's containers had Docker's open-files limit).
  sample(4, {
    init: [{ language: "bash", code: "exec 5000>/root/init-high && echo init >&5000" }],
    match: undefined,
    check: [{ language: "bash", code: 'test "$(cat /root/init-high)" = init' }],
  }),
  // 3: writable root: init writes under /usr, straight into /, and re-creates /tmp and /home/user.
  sample(3, {
    init: [
      {
        language: "bash",
        code: "mkdir -p /usr/share/agentrl && touch /usr/share/agentrl/f && chmod 600 /usr/share/agentrl/f && echo top > /topfile && mkdir /newtop && rm -rf /home/user && mkdir -p /home/user && echo kept > /home/user/k && rm -rf /tmp && mkdir -m 1777 /tmp && echo t > /tmp/t",
      },
    ],
    match: undefined,
    check: [
      {
        language: "bash",
        code: 'test -f /usr/share/agentrl/f && test "$(cat /topfile)" = top && test -d /newtop && test "$(cat /home/user/k)" = kept && test -f /tmp/t && test "$PWD" = /',
      },
    ],
  }),
];

describe("OS shell semantics (AgentBench's)", { skip }, () => {
  let family: OsTaskFamily;
  before(async () => {
    family = await createTaskFamily({ samples: SAMPLES, memoryBytes: 512 * 1024 ** 2 });
  });
  after(async () => {
    await family.close();
  });

  test("the login shell starts before init: a ~/.bashrc that init made counting never ran, and commands do not re-source it", async () => {
    const session = (await family.startSession(0)) as OsSession;
    for (let turn = 0; turn < 3; turn += 1) await session.interact(bash("echo turn"));
    assert.equal(
      text(
        (await session.interact(bash("cat /root/counter 2>/dev/null | wc -l"))).messages[0],
      ).trim(),
      "0",
    );
    const reply = await session.interact({
      role: "assistant",
      content: null,
      tool_calls: [
        { id: "f", type: "function", function: { name: "finish_action", arguments: "{}" } },
      ],
    });
    assert.equal(reply.reward, 1);
  });

  test("`start` is typed into the agent's shell: its cd and variables are the agent's; state persists between turns", async () => {
    const session = (await family.startSession(1)) as OsSession;
    assert.equal(
      text((await session.interact(bash("pwd; cat marker; echo $GREETING"))).messages[0]).trim(),
      "/root/project\nhere\nhello",
    );
    await session.interact(bash("cd /etc; COUNT=41; twice() { echo $(( $1 * 2 )); }"));
    assert.equal(
      text((await session.interact(bash("pwd; echo $((COUNT + 1)); twice 21"))).messages[0]).trim(),
      "/etc\n42\n42",
    );
    await session.cancel();
  });

  test("exit codes and the time limit are exact; a timed-out command is killed with its jobs and the next one runs in the same folder", async () => {
    const timed = await createTaskFamily({
      runtime: family.runtime,
      samples: [SAMPLES[2]],
      commandSeconds: 6, // a new login shell on a loaded machine may take seconds
    });
    try {
      const session = (await timed.startSession(2)) as OsSession;
      assert.equal(
        text(
          (await session.interact(bash("cat /root/partial; (exit 3); echo code=$?"))).messages[0],
        ).trim(),
        "partial\ncode=3",
        "init's failure was ignored",
      );
      const slow = text(
        (await session.interact(bash("cd /var; sleep 30 & echo started; sleep 20; echo late")))
          .messages[0],
      );
      assert.match(slow, /started/);
      assert.doesNotMatch(slow, /late/);
      assert.match(slow, /stopped after 6 seconds/);
      assert.equal(
        text((await session.interact(bash("pwd; pgrep -c sleep || true"))).messages[0]).trim(),
        "/var\n0",
      );
      await session.cancel();
    } finally {
      await timed.close();
    }
  });

  test("a redirect to a high descriptor works (the open-files limit is the engine's, as AgentBench's containers had)", async () => {
    const episode = await playEpisode(
      family,
      4,
      scripted(["exec 9000>/root/high && echo agent >&9000 && exec 9000>&- && cat /root/high"]),
    );
    assert.equal(episode.reward, 1, JSON.stringify(episode.messages.slice(-3)));
    assert.equal(text(episode.messages.find((message) => message.role === "tool")).trim(), "agent");
  });
});

describe(
  "OS writable root (as the original): the broken forms of the read-only root",
  {
    skip: "missing" in quota ? quota.missing : false,
  },
  () => {
    const engine = quota as Exclude<typeof quota, { missing: string }>;
    let family: OsTaskFamily;
    before(async () => {
      family = await createTaskFamily({
        runtime: quotaRuntime(engine),
        samples: SAMPLES,
        memoryBytes: 512 * 1024 ** 2,
      });
    });
    after(async () => {
      await family.close();
      await family.runtime.close();
    });

    test("init writes under /usr and in /, re-creates /tmp and a home folder", async () => {
      const episode = await playEpisode(
        family,
        3,
        scripted(["echo agent > /agentfile && cat /agentfile"]),
      );
      assert.equal(episode.reward, 1, JSON.stringify(episode.messages.slice(-3)));
      assert.equal(
        text(episode.messages.find((message) => message.role === "tool")).trim(),
        "agent",
      );
    });
  },
);

describe("OS: who ended the sandbox", { skip }, () => {
  let family: OsTaskFamily;
  before(async () => {
    family = await createTaskFamily({
      samples: [sample(0, {})],
      memoryBytes: 256 * 1024 ** 2,
      commandSeconds: 20,
    });
  });
  after(async () => {
    await family.close();
  });

  test("`kill -9 -1` (the agent's own command ends its container) is the agent's failure: completed, reward 0, not a masked task error", async () => {
    const episode = await playEpisode(family, 0, scripted(["kill -9 -1", "echo after"]));
    assert.equal(episode.status, "completed", JSON.stringify(episode.messages.slice(-2)));
    assert.equal(episode.reward, 0);
    assert.equal(episode.metrics.sandboxEnded, 1);
  });

  test("a fork bomb is the agent's failure, not a task error", async () => {
    const episode = await playEpisode(
      family,
      0,
      scripted(["bomb() { bomb | bomb & }; bomb; sleep 5", "echo alive"], "wrong"),
    );
    assert.notEqual(episode.status, "task error", JSON.stringify(episode.messages.slice(-2)));
    assert.equal(episode.reward, 0);
  });

  test("exhausting memory is the agent's failure, not a task error", async () => {
    const episode = await playEpisode(
      family,
      0,
      scripted(
        ["python3 -c 'x = bytearray(1) * (1024 ** 3); print(len(x))'; echo exit=$?", "echo alive"],
        "wrong",
      ),
    );
    assert.notEqual(episode.status, "task error", JSON.stringify(episode.messages.slice(-2)));
    assert.equal(episode.reward, 0);
  });

  test("a container killed from outside mid-command is an infrastructure fault: task error", async () => {
    const session = (await family.startSession(0)) as OsSession;
    const running = session.interact(bash("sleep 10; echo late"));
    await new Promise((resolve) => setTimeout(resolve, 700));
    await docker.getContainer(session.containerId).kill();
    const reply = await running;
    assert.equal(reply.status, "task error");
  });

  test("the engine unreachable mid-episode is an infrastructure fault: task error", async () => {
    // The runtime talks to the engine through a proxy socket that the test cuts mid-command.
    const folder = mkdtempSync(join(tmpdir(), "agentrl-proxy-"));
    const path = join(folder, "docker.sock");
    const engineSocket = process.env.DOCKER_HOST?.startsWith("unix://")
      ? process.env.DOCKER_HOST.slice("unix://".length)
      : "/var/run/docker.sock";
    const sockets = new Set<Socket>();
    const proxy: Server = createServer({ allowHalfOpen: true }, (client) => {
      const upstream = connect({ path: engineSocket, allowHalfOpen: true });
      sockets.add(client).add(upstream);
      client.pipe(upstream).pipe(client);
      client.on("error", () => upstream.destroy());
      upstream.on("error", () => client.destroy());
    });
    await new Promise<void>((resolve) => proxy.listen(path, resolve));
    const runtime = new DockerRuntime({ docker: new Docker({ socketPath: path }), reapSeconds: 0 });
    const cut = await createTaskFamily({ runtime, samples: [sample(0, {})] });
    try {
      const session = (await cut.startSession(0)) as OsSession;
      assert.equal(text((await session.interact(bash("echo up"))).messages[0]).trim(), "up");
      const running = session.interact(bash("sleep 3; echo late"));
      await new Promise((resolve) => setTimeout(resolve, 500));
      proxy.close();
      for (const socket of sockets) socket.destroy();
      const reply = await running;
      assert.equal(reply.status, "task error", JSON.stringify(reply.messages));
      await docker
        .getContainer(session.containerId)
        .remove({ force: true })
        .catch(() => {});
    } finally {
      proxy.close();
      for (const socket of sockets) socket.destroy();
      await runtime.close().catch(() => {});
      rmSync(folder, { recursive: true, force: true });
    }
  });
});
