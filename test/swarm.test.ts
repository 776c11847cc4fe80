/**
 * One run across services, on the orchestrator the Docker engine has built in: deploy/swarm/
 * stack.yml on a single-node swarm of the local engine (host network: the engine runs without
 * a bridge). A short `agentrl train` (KG in the trainer's process, OS through the controller to
 * the OS env worker in its own container, every turn on the two inference replicas, each new
 * version pushed to both); one inference container is killed mid-run and the run completes.
 * Asserts episodes on the worker, turns and pushed versions on both replicas, the final
 * checkpoint and results, and the faults in the metrics; removes the stack and leaves the
 * swarm (when this test made it), and no container of the stack is left.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const repository = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const STACK = "agentrl-test";
const PORTS = { controller: 5020, worker: 5031, inference: [8001, 8002] };

function docker(
  args: string[],
  options: { env?: NodeJS.ProcessEnv; timeout?: number } = {},
): { status: number; stdout: string; stderr: string } {
  const result = spawnSync("docker", args, {
    encoding: "utf8",
    env: options.env ?? process.env,
    timeout: options.timeout ?? 120_000,
  });
  return {
    status: result.status ?? 1,
    stdout: result.stdout ?? "",
    stderr: result.stderr ?? String(result.error ?? ""),
  };
}

function skipReason(): string | undefined {
  if (process.getuid?.() !== 0) return "not root (the stack mounts the Docker socket)";
  if (docker(["info", "--format", "{{.ServerVersion}}"]).status !== 0)
    return "no Docker engine answers (bash scripts/start-dockerd.sh)";
  if (docker(["stack", "--help"]).status !== 0) return "this Docker CLI has no `docker stack`";
  for (const image of ["agentrl/runtime:latest", "agentrl/os:latest"]) {
    if (docker(["image", "inspect", image]).status !== 0)
      return `image ${image} missing (agentrl env build --image os runtime)`;
  }
  if (
    docker([
      "run",
      "--rm",
      "--network",
      "none",
      "--entrypoint",
      "test",
      "agentrl/runtime:latest",
      "-d",
      "/opt/shared/data/agentbench/os_interaction",
    ]).status !== 0
  ) {
    return "agentrl/runtime has no AgentBench OS data (built where ../shared/data/agentbench was missing)";
  }
  const state = docker(["info", "--format", "{{.Swarm.LocalNodeState}}"]).stdout.trim();
  if (state !== "inactive" && state !== "active") return `the engine's swarm is ${state}`;
  if (docker(["stack", "ls", "--format", "{{.Name}}"]).stdout.split("\n").includes(STACK))
    return `a stack ${STACK} is deployed already`;
  return undefined;
}

async function getJson(url: string, token?: string): Promise<Record<string, unknown> | undefined> {
  try {
    const response = await fetch(url, {
      headers: token ? { authorization: `Bearer ${token}` } : {},
      signal: AbortSignal.timeout(3000),
    });
    return response.ok ? ((await response.json()) as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

const reason = skipReason();

test(
  "swarm: trainer, two inference replicas, controller and env workers run one training run; a killed inference container costs only masked episodes",
  { skip: reason, timeout: 900_000 },
  async (t) => {
    const work = mkdtempSync(join(tmpdir(), "agentrl-swarm-"));
    const secrets = join(work, "secrets");
    const runs = join(work, "runs");
    mkdirSync(secrets);
    mkdirSync(runs);
    const token = `t${Math.random().toString(36).slice(2)}${Date.now()}`;
    writeFileSync(join(secrets, "token"), token);
    writeFileSync(join(secrets, "api-key"), `k${Math.random().toString(36).slice(2)}`);
    writeFileSync(join(secrets, "serve-key"), `s${Math.random().toString(36).slice(2)}`);
    // A short run: KG in-process, OS through the controller, turns on both replicas.
    writeFileSync(
      join(work, "run.yaml"),
      [
        "model: { directory: models/warmstart }",
        "warmStart: { checkpoint: models/warmstart }",
        "tasks:",
        "  - { name: kg }",
        `  - { name: os, controller: "http://127.0.0.1:${PORTS.controller}" }`,
        "environments: { tokenFile: /run/secrets/agentrl-token, waitSeconds: 240 }",
        `rollout: { servers: [${PORTS.inference.map((port) => `"http://127.0.0.1:${port}"`).join(", ")}], concurrency: 16 }`,
        "rl: { steps: 6, batchGroups: 2, groupSize: 4 }",
        "evaluation: { every: 0, beforeWarmStart: false, finalLimit: 2, sampled: false, concurrency: 8 }",
        "checkpoint: { every: 2 }",
        "",
      ].join("\n"),
    );
    const env = {
      ...process.env,
      AGENTRL_SECRETS: secrets,
      AGENTRL_RUNS: runs,
      AGENTRL_RUN_CONFIG: join(work, "run.yaml"),
    };
    const initialised =
      docker(["info", "--format", "{{.Swarm.LocalNodeState}}"]).stdout.trim() !== "active";
    if (initialised) {
      const init = docker(["swarm", "init", "--advertise-addr", "127.0.0.1"]);
      assert.equal(init.status, 0, `docker swarm init: ${init.stderr}`);
    }
    const serviceLogs = (name: string) =>
      docker(["service", "logs", "--raw", "--tail", "40", `${STACK}_${name}`], { timeout: 20_000 })
        .stdout +
      docker(["service", "logs", "--raw", "--tail", "40", `${STACK}_${name}`], { timeout: 20_000 })
        .stderr;
    try {
      const deployed = docker(
        ["stack", "deploy", "-c", join(repository, "deploy/swarm/stack.yml"), STACK],
        { env },
      );
      assert.equal(deployed.status, 0, `docker stack deploy: ${deployed.stderr}`);

      const seen = PORTS.inference.map(() => ({ requests: 0, version: -1, answered: false }));
      let workerStarted = 0;
      let killed: { port: number; active: number } | undefined;
      let state = "";
      const began = Date.now();
      while (Date.now() - began < 780_000) {
        for (const [position, port] of PORTS.inference.entries()) {
          const health = await getJson(`http://127.0.0.1:${port}/health`);
          const engine = health?.engine as
            { completedRequests?: number; version?: number; active?: number } | undefined;
          if (!engine) continue;
          seen[position].answered = true;
          seen[position].requests = Math.max(
            seen[position].requests,
            engine.completedRequests ?? 0,
          );
          seen[position].version = Math.max(seen[position].version, engine.version ?? -1);
          // Mid-run (a version pushed to both, turns on both): kill replica 1's container.
          if (!killed && position === 0 && seen.every((s) => s.version >= 1 && s.requests > 0)) {
            const ids = docker([
              "ps",
              "-q",
              "--filter",
              `label=com.docker.swarm.service.name=${STACK}_inference`,
              "--filter",
              `name=${STACK}_inference.1.`,
            ])
              .stdout.trim()
              .split("\n")
              .filter(Boolean);
            assert.equal(ids.length, 1, "one container of inference replica 1");
            assert.equal(docker(["kill", ids[0]]).status, 0, "docker kill");
            killed = { port, active: engine.active ?? 0 };
            t.diagnostic(
              `killed inference replica 1 (:${port}) with ${killed.active} sequences decoding, ${Math.round((Date.now() - began) / 1000)} s in`,
            );
          }
        }
        const status = await getJson(`http://127.0.0.1:${PORTS.worker}/api/worker_status`, token);
        if (typeof status?.started === "number")
          workerStarted = Math.max(workerStarted, status.started);
        state =
          docker([
            "service",
            "ps",
            `${STACK}_trainer`,
            "--format",
            "{{.CurrentState}}|{{.Error}}",
            "--no-trunc",
          ]).stdout.split("\n")[0] ?? "";
        if (/^(Complete|Failed|Rejected|Shutdown)/.test(state)) break;
        await sleep(1000);
      }
      t.diagnostic(
        `trainer: ${state} after ${Math.round((Date.now() - began) / 1000)} s; OS sessions on the worker: ${workerStarted}; replicas: ${JSON.stringify(seen)}`,
      );
      assert.match(
        state,
        /^Complete/,
        `the trainer completed (${state}); its log:\n${serviceLogs("trainer")}`,
      );

      const run = join(runs, "agentrl");
      assert.ok(workerStarted > 0, "OS episodes were played on the env worker (its own container)");
      for (const [position, port] of PORTS.inference.entries()) {
        assert.ok(seen[position].requests > 0, `turns went to the replica on :${port}`);
        assert.ok(
          seen[position].version >= 1,
          `new policy versions were pushed to the replica on :${port} (saw ${seen[position].version})`,
        );
      }
      assert.ok(killed, "an inference container was killed mid-run");
      const checkpoints = readdirSync(join(run, "checkpoints"))
        .filter((name) => name.startsWith("step-"))
        .sort();
      assert.equal(
        checkpoints.at(-1),
        "step-000006",
        `final checkpoint (${checkpoints.join(", ")})`,
      );
      assert.ok(
        existsSync(join(run, "checkpoints", "step-000006", "policy", "config.json")),
        "the final policy is a model folder",
      );
      const results = JSON.parse(readFileSync(join(run, "results.json"), "utf8")) as Record<
        string,
        unknown
      >;
      assert.ok(
        JSON.stringify(results).includes('"os"') && JSON.stringify(results).includes('"kg"'),
        "results for KG and OS",
      );
      const metrics = readFileSync(join(run, "metrics.jsonl"), "utf8")
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as Record<string, number>);
      const sum = (key: string) => metrics.reduce((total, line) => total + (line[key] ?? 0), 0);
      assert.ok(
        metrics.some((line) => (line["success/os"] ?? -1) >= 0),
        "OS episodes trained on",
      );
      t.diagnostic(
        `metrics: infrastructure retries ${sum("rollout/infrastructure_retries")}, faults ${sum("rollout/infrastructure_faults")}, masked ${sum("rollout/masked_episodes")}`,
      );
      // Turns the killed replica held end their episodes as infrastructure faults (retried, then masked).
      // Whether a turn was in flight at the kill is a race (the health read that saw `active`
      // sequences comes ~0.1 s before the kill); the trainer's log says which turns failed there.
      const trainerLog = docker(["service", "logs", "--raw", `${STACK}_trainer`], {
        timeout: 20_000,
      });
      const killedPort = killed.port;
      const cutTurns = `${trainerLog.stdout}\n${trainerLog.stderr}`
        .split("\n")
        .filter(
          (line) =>
            line.includes("is down (") &&
            line.includes(`:${killedPort}/`) &&
            line.includes("/chat/completions"),
        ).length;
      t.diagnostic(
        `turns cut on the killed replica (trainer log): ${cutTurns}; sequences decoding at the last health read: ${killed.active}`,
      );
      if (cutTurns > 0)
        assert.ok(
          sum("rollout/infrastructure_retries") + sum("rollout/infrastructure_faults") >= 1,
          "the killed replica's turns counted as infrastructure faults (retried or masked)",
        );
    } finally {
      docker(["stack", "rm", STACK]);
      const deadline = Date.now() + 90_000;
      let left: string[] = [];
      while (Date.now() < deadline) {
        left = docker(["ps", "-aq", "--filter", `label=com.docker.stack.namespace=${STACK}`])
          .stdout.trim()
          .split("\n")
          .filter(Boolean);
        if (left.length === 0) break;
        await sleep(1000);
      }
      if (initialised) docker(["swarm", "leave", "--force"]);
      rmSync(work, { recursive: true, force: true });
      assert.deepEqual(left, [], "no container of the stack is left");
      if (initialised)
        assert.equal(
          docker(["info", "--format", "{{.Swarm.LocalNodeState}}"]).stdout.trim(),
          "inactive",
          "the swarm was left",
        );
    }
  },
);
