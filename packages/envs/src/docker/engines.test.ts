/**
 * Many Docker engines without Docker: fake engines (a ping that answers or not) and a fake
 * family, so the spreading, the failure of a dead engine's sessions and the recovery are
 * tested on any machine. The real thing (two dockerd) is in engines-docker.test.ts.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Docker from "dockerode";
import { DockerEngineSet, MultiEngineTaskFamily, createTaskFamilyOnEngines } from "./engines.js";
import { DockerHostError, parseDockerHost, type DockerHostSpec } from "./hosts.js";
import { DockerUnavailableError, type DockerRuntime } from "./runtime.js";
import { FunctionCallSession, type ToolReply } from "../session.js";
import type { AssistantMessage, CurriculumTaskFamily, TaskSession } from "../types.js";
import type { TaskFamilyOptions } from "../types.js";

/** A dockerode stand-in whose ping answers while `up` is true, holding the images in `images`. */
function fakeDocker(): Docker & { up: boolean; images: Set<string> } {
  const fake = {
    up: true,
    images: new Set(["agentrl/os:latest"]),
    getImage(tag: string) {
      return {
        async inspect() {
          if (!fake.images.has(tag)) throw new Error(`no such image ${tag}`);
          return { Config: { Labels: {} } };
        },
      };
    },
    async ping() {
      if (!fake.up) throw new Error("connect ECONNREFUSED");
      return "OK";
    },
    async listContainers() {
      return [];
    },
    getContainer() {
      return {
        remove: async () => undefined,
        inspect: async () => ({ State: { Running: false } }),
      };
    },
  };
  return fake as unknown as Docker & { up: boolean; images: Set<string> };
}

/** A session whose `wait` tool blocks until released (an in-flight turn). */
class EchoSession extends FunctionCallSession {
  static gates: Array<() => void> = [];
  constructor() {
    const tool = (name: string) => ({
      type: "function" as const,
      function: {
        name,
        description: name,
        parameters: { type: "object" as const, properties: {} },
      },
    });
    super(
      { messages: [{ role: "user", content: "echo" }], tools: [tool("echo"), tool("wait")] },
      { maxTurns: 100 },
    );
  }
  protected async callTool(name: string): Promise<ToolReply> {
    if (name === "wait") await new Promise<void>((resolve) => EchoSession.gates.push(resolve));
    return { content: "ok" };
  }
}

/** A family factory that records the runtimes it was given. */
function fakeFactory() {
  const runtimes: DockerRuntime[] = [];
  const create = async (
    name: string,
    options: TaskFamilyOptions,
  ): Promise<CurriculumTaskFamily> => {
    runtimes.push(options.runtime as DockerRuntime);
    return {
      name,
      difficulties: [0],
      indices: (split) => (split === "train" ? [0, 1, 2] : [3]),
      indicesAt: (split) => (split === "train" ? [0, 1, 2] : [3]),
      expert: () => ({ act: () => call("echo") }),
      startSession: async (): Promise<TaskSession> => new EchoSession(),
    };
  };
  return { create, runtimes };
}

function call(name: string): AssistantMessage {
  return {
    role: "assistant",
    content: null,
    tool_calls: [{ id: "c", type: "function", function: { name, arguments: "{}" } }],
  };
}

function spec(label: string, slots?: number): DockerHostSpec {
  return { label, options: {}, local: true, slots, cliEnv: {} };
}

const fast = {
  probeIntervalMs: 20,
  probeTimeoutMs: 200,
  failuresBeforeDown: 1,
  initialBackoffMs: 20,
  maxBackoffMs: 40,
};

async function until(condition: () => boolean, what: string, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

test("parseDockerHost: unix, tcp with and without TLS, ssh, slots, and clear errors", () => {
  const unix = parseDockerHost("unix:///var/run/docker.sock");
  assert.deepEqual(unix.options, { socketPath: "/var/run/docker.sock" });
  assert.equal(unix.local, true);
  assert.equal(parseDockerHost("/tmp/d2/docker.sock?slots=4").slots, 4);
  assert.equal(parseDockerHost("/tmp/d2/docker.sock?slots=4").label, "unix:///tmp/d2/docker.sock");

  const plain = parseDockerHost("tcp://127.0.0.1:2375");
  assert.equal(plain.options.protocol, "http");
  assert.equal(plain.local, false);
  assert.throws(
    () => parseDockerHost("tcp://10.0.0.5:2376", { certPath: undefined }),
    DockerHostError,
  );

  const certs = mkdtempSync(join(tmpdir(), "agentrl-certs-"));
  for (const name of ["ca.pem", "cert.pem", "key.pem"])
    writeFileSync(join(certs, name), `${name}\n`);
  const tls = parseDockerHost("tcp://10.0.0.5:2376", { certPath: certs });
  assert.equal(tls.options.protocol, "https");
  assert.equal(String(tls.options.key), "key.pem\n");
  assert.deepEqual(tls.cliEnv, {
    DOCKER_HOST: "tcp://10.0.0.5:2376",
    DOCKER_TLS_VERIFY: "1",
    DOCKER_CERT_PATH: certs,
  });
  assert.equal(parseDockerHost(`tcp://10.0.0.6:2376?cert-path=${certs}&slots=8`).slots, 8);
  assert.throws(
    () => parseDockerHost("tcp://10.0.0.5:2376", { certPath: join(certs, "missing") }),
    /cannot be read/,
  );

  const ssh = parseDockerHost("ssh://agent@worker-3:2222");
  assert.equal(ssh.options.protocol, "ssh");
  assert.equal(ssh.options.username, "agent");
  assert.equal(ssh.options.port, 2222);
  assert.equal(ssh.cliEnv.DOCKER_HOST, "ssh://agent@worker-3:2222");

  assert.throws(() => parseDockerHost("ftp://x"), /unsupported Docker host scheme/);
  assert.throws(() => parseDockerHost("unix:///s?slots=0"), /slots/);
  assert.throws(() => parseDockerHost(""), DockerHostError);
  assert.throws(() => new DockerEngineSet([spec("a"), spec("a")]), /given twice/);
});

test("sessions spread by free slots; a dead engine fails only its sessions, in-flight turns included; it comes back with a fresh family", async () => {
  const clients = [fakeDocker(), fakeDocker()];
  const factory = fakeFactory();
  const lines: string[] = [];
  const engines = new DockerEngineSet([spec("engine-a", 3), spec("engine-b", 1)], {
    ...fast,
    clients,
    log: (line) => lines.push(line),
  });
  const family = await MultiEngineTaskFamily.create("os", {}, engines, factory.create);
  try {
    assert.equal(factory.runtimes.length, 2, "one family per engine");
    assert.deepEqual(family.indices("train"), [0, 1, 2]);
    const [a, b] = engines.engines;
    const sessions = await Promise.all([0, 1, 2, 0].map((index) => family.startSession(index)));
    const on = (engine: typeof a) =>
      sessions.filter((session) => family.engineOf(session) === engine);
    // Slots 3 and 1: a (3 free), a (2 vs 1), a (1 vs 1: the first wins a tie), then b (0 vs 1).
    assert.equal(on(a).length, 3);
    assert.equal(on(b).length, 1);
    assert.equal(a.active, 3);
    assert.equal(b.active, 1);

    // A turn in flight on engine b when it dies.
    const [onB] = on(b);
    const inFlight = onB.interact(call("wait"));
    await until(() => EchoSession.gates.length === 1, "the turn to start");
    clients[1].up = false;
    await until(() => b.state === "down", "engine b to be marked down"); // (the probes' timers do not hold the process open)
    const failed = await inFlight;
    assert.equal(failed.status, "task error");
    assert.equal(failed.finish, true);
    assert.match(JSON.stringify(failed.messages), /engine-b stopped answering/);
    assert.equal(b.state, "down");
    assert.equal(b.active, 0);
    // Engine a's sessions go on.
    for (const session of on(a))
      assert.equal((await session.interact(call("echo"))).status, "running");
    // New sessions go to the engine that is up.
    const extra = await family.startSession(1);
    assert.equal(family.engineOf(extra), a);

    // Engine b answers again: probed with backoff, a fresh family on a fresh runtime.
    clients[1].up = true;
    await until(() => b.state === "up", "engine b to come back");
    assert.equal(factory.runtimes.length, 3);
    assert.notEqual(factory.runtimes[2], factory.runtimes[1]);
    const again = await family.startSession(2);
    assert.equal(family.engineOf(again), b, "b has the most free slots again");
    assert.ok(
      lines.some((line) => /engine-b is down/.test(line)) &&
        lines.some((line) => /engine-b is back up/.test(line)),
      lines.join("\n"),
    );
    EchoSession.gates.splice(0).forEach((release) => release());
  } finally {
    await family.close();
  }
});

test("no engine answers: a clear error; all engines down later: startSession throws, nothing hangs", async () => {
  const dead = fakeDocker();
  dead.up = false;
  await assert.rejects(
    MultiEngineTaskFamily.create(
      "os",
      {},
      new DockerEngineSet([spec("gone")], { ...fast, clients: [dead] }),
      fakeFactory().create,
    ),
    DockerUnavailableError,
  );

  const client = fakeDocker();
  const family = await MultiEngineTaskFamily.create(
    "os",
    {},
    new DockerEngineSet([spec("only")], { ...fast, clients: [client] }),
    fakeFactory().create,
  );
  try {
    client.up = false;
    await until(() => family.engines.upCount === 0, "the engine to be marked down");
    await assert.rejects(family.startSession(0), /no Docker engine is up: only \(down/);
  } finally {
    await family.close();
  }
});

test("an engine without the task's image is down until the image is there", async () => {
  const clients = [fakeDocker(), fakeDocker()];
  clients[1].images.clear();
  const factory = fakeFactory();
  const family = await MultiEngineTaskFamily.create(
    "os",
    {},
    new DockerEngineSet([spec("has-image"), spec("no-image")], { ...fast, clients }),
    factory.create,
  );
  try {
    const [, bare] = family.engines.engines;
    assert.equal(bare.state, "down");
    assert.match(
      bare.reason ?? "",
      /image agentrl\/os:latest is missing: run agentrl env build --docker-host no-image/,
    );
    assert.equal(factory.runtimes.length, 1);
    clients[1].images.add("agentrl/os:latest");
    await until(() => bare.state === "up", "the engine to come up once it has the image");
    assert.equal(factory.runtimes.length, 2);
  } finally {
    await family.close();
  }
  const without = fakeDocker();
  without.images.clear();
  await assert.rejects(
    MultiEngineTaskFamily.create(
      "os",
      {},
      new DockerEngineSet([spec("bare")], { ...fast, clients: [without] }),
      fakeFactory().create,
    ),
    /cannot run on any Docker engine: bare: image agentrl\/os:latest is missing/,
  );
});

test("createTaskFamilyOnEngines: plain families ignore the hosts; db refuses remote engines", async () => {
  const factory = fakeFactory();
  const kg = await createTaskFamilyOnEngines(
    "kg",
    {},
    { hosts: ["tcp://10.0.0.9:2375"] },
    factory.create,
  );
  assert.equal(kg.name, "kg");
  assert.equal(factory.runtimes[0], undefined, "no runtime for a family without containers");
  await assert.rejects(
    createTaskFamilyOnEngines("db", {}, { hosts: ["tcp://10.0.0.9:2375"] }, factory.create),
    /db needs engines on this machine/,
  );
});
