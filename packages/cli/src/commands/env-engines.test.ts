/** `env worker` / `env serve` / `env build` over many Docker engines: the flags and the errors (no Docker needed). */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { CurriculumTaskFamily, TaskFamilyOptions } from "@agentrl/envs";
import { buildProgram } from "../main.js";
import { startEnvWorker } from "./env.js";

function subcommand(path: string[]) {
  const program = buildProgram().exitOverride();
  let command = program;
  for (const name of path) command = command.commands.find((sub) => sub.name() === name)!;
  return { program, command };
}

test("--docker-host is repeatable on env worker, env serve and env build", async () => {
  for (const path of [
    ["env", "worker"],
    ["env", "serve"],
    ["env", "build"],
  ]) {
    const { program, command } = subcommand(path);
    let captured: Record<string, unknown> | undefined;
    command.action((options: Record<string, unknown>) => {
      captured = options;
    });
    const required =
      path[1] === "worker"
        ? ["--controller", "http://127.0.0.1:1", "--task", "os"]
        : path[1] === "serve"
          ? ["--tasks", "os"]
          : [];
    await program.parseAsync([
      "node",
      "agentrl",
      ...path,
      ...required,
      "--docker-host",
      "unix:///a.sock",
      "--docker-host",
      "tcp://10.0.0.2:2375?slots=4",
      "--docker-cert-path",
      "/certs",
    ]);
    assert.deepEqual(
      captured?.dockerHost,
      ["unix:///a.sock", "tcp://10.0.0.2:2375?slots=4"],
      path.join(" "),
    );
    assert.equal(captured?.dockerCertPath, "/certs");
  }
});

test("env worker --docker-host: an OS worker whose engines do not answer fails with a clear error; other tasks ignore the hosts", async () => {
  const created: string[] = [];
  const factory = async (
    name: string,
    _options: TaskFamilyOptions,
  ): Promise<CurriculumTaskFamily> => {
    created.push(name);
    return {
      name,
      difficulties: [0],
      indices: () => [0],
      indicesAt: () => [0],
      expert: () => ({ act: () => ({ role: "assistant", content: "x" }) }),
      startSession: async () => {
        throw new Error("unused");
      },
    };
  };
  await assert.rejects(
    startEnvWorker(
      {
        controller: "http://127.0.0.1:1",
        task: "os",
        dockerHost: [
          "unix:///nonexistent/agentrl-engine-1.sock",
          "unix:///nonexistent/agentrl-engine-2.sock",
        ],
      },
      factory,
      () => undefined,
    ),
    /task family "os" failed to start: no Docker engine answers: unix:\/\/\/nonexistent\/agentrl-engine-1.sock, unix:\/\/\/nonexistent\/agentrl-engine-2.sock/,
  );
  assert.deepEqual(created, [], "no family was created on an engine that does not answer");
  await assert.rejects(
    startEnvWorker(
      { controller: "http://127.0.0.1:1", task: "os", dockerHost: ["tcp://10.0.0.5:2376"] },
      factory,
      () => undefined,
    ),
    /TLS port: give the folder with ca.pem, cert.pem and key.pem/,
  );
  const worker = await startEnvWorker(
    {
      controller: "http://127.0.0.1:1",
      task: "kg",
      token: "test-token",
      heartbeat: 60,
      dockerHost: ["unix:///nonexistent/x.sock"],
    },
    factory,
    () => undefined,
  );
  assert.deepEqual(created, ["kg"]);
  await worker.close();
});
