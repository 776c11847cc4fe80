/**
 * Rollout over a fleet of inference servers, end to end: two `agentrl serve` child
 * processes serve a tiny model (the `test` preset with the rollout fixtures' tokenizer);
 * an async training run uses both for its rollout (`rollout.servers`).
 * - after every step, both servers serve the new version (GET /v1/weights);
 * - turns went to both servers, and every generated token's recorded log-prob equals the
 *   trainer's own scoring (tokenLogProbs at the sampling temperature) with the weights of
 *   the version the token records (the initial model, or the checkpoint of that step);
 * - one server is killed (SIGKILL) mid-run while a turn of it is in flight: the episodes it
 *   held end `task error` (an infrastructure fault; here not retried and penalised rather than
 *   masked, to see them) and the run finishes its steps on the other server. The trainer reaches
 *   that server through a relay (`turnRelay`) that holds back the answer of the turn it is killed
 *   during: killed between two turns, it would only be marked down, no episode cut (the flaky
 *   failure 'some episode ended by the killed server (statuses: completed)').
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer, connect, type AddressInfo, type Socket } from "node:net";
import * as tf from "@tensorflow/tfjs-core";
import { InProcessEnvironmentClient } from "@agentrl/envs";
import { Policy, setBackend, tokenLogProbs } from "@agentrl/policy";
import { runEpisode, type Trajectory } from "@agentrl/rollout";
import { runTraining } from "@agentrl/trainer";
import { echoFamily, testPolicy } from "../packages/rollout/src/testing/fixtures.js";
import { startServeProcess } from "./serve-process.js";

await setBackend("cpu", { log: null });
process.env.AGENTRL_BACKEND = "cpu";

const API_KEY = "fleet-test-key";
const TEMPERATURE = 0.8;
const PENALTY = -0.2;
const STEPS = 5;
const KILL_AFTER_STEP = 2;

/**
 * A TCP relay in front of the server at `url` (its `url`: the same routes on another port).
 * After `killDuringNextTurn(kill)`, the next chat-completions request it relays is in flight
 * when `kill` runs: its answer is held back, and `kill` is called once the server's engine has
 * the request (GET /health shows it waiting or active) or, at the latest, 2 s after it was
 * relayed; later connections to the dead server fail as they would without the relay.
 */
async function turnRelay(url: string) {
  const target = new URL(url);
  let onTurn: (() => void) | undefined;
  const sockets = new Set<Socket>();
  const relay = createServer((client) => {
    const upstream = connect(Number(target.port), target.hostname);
    let holding = false;
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on("error", () => {});
      socket.on("close", () => {
        sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    client.on("data", (chunk: Buffer) => {
      upstream.write(chunk);
      if (onTurn && chunk.toString("latin1").startsWith("POST /v1/chat/completions ")) {
        holding = true;
        const turn = onTurn;
        onTurn = undefined;
        turn();
      }
    });
    upstream.on("data", (chunk: Buffer) => {
      if (!holding) client.write(chunk);
    });
  });
  await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(relay.address() as AddressInfo).port}/v1`,
    killDuringNextTurn(kill: () => void): Promise<void> {
      return new Promise((resolve) => {
        onTurn = () =>
          void (async () => {
            const end = Date.now() + 2_000;
            while (Date.now() < end) {
              const health = (await (await fetch(`${target.origin}/health`)).json()) as {
                engine: { active: number; waiting: number };
              };
              if (health.engine.active + health.engine.waiting > 0) break;
              await new Promise((wait) => setTimeout(wait, 5));
            }
            kill();
            resolve();
          })();
      });
    },
    close() {
      for (const socket of sockets) socket.destroy();
      relay.close();
    },
  };
}

async function servedVersion(url: string): Promise<number> {
  // The weight routes take the weights key both servers share (the key file the first one generated), not the API key.
  const response = await fetch(`${url}/weights`, {
    headers: {
      authorization: `Bearer ${readFileSync(process.env.AGENTRL_SERVE_KEY_FILE!, "utf8").trim()}`,
    },
  });
  assert.equal(response.status, 200);
  return ((await response.json()) as { version: number }).version;
}

test(
  "a training run rolls out on two agentrl serve servers: exact log-probs, versions pushed to both, a killed server's episodes penalised",
  { timeout: 600_000 },
  async () => {
    const root = mkdtempSync(join(tmpdir(), "agentrl-fleet-"));
    const model = join(root, "model");
    const policy = await testPolicy({ seed: 3 });
    await policy.save(model);
    policy.dispose();
    // Both servers start at once with no weights key: one generates it into this file, the other reads it; the trainer finds it there.
    process.env.AGENTRL_SERVE_KEY_FILE = join(root, "serve-key");
    delete process.env.AGENTRL_SERVE_KEY;
    const started = await Promise.allSettled(
      [0, 1].map(() =>
        startServeProcess(model, ["--api-key", API_KEY, "--max-batch", "8", "--quiet"], {
          backend: "cpu",
        }),
      ),
    );
    const servers = started.flatMap((start) => (start.status === "fulfilled" ? [start.value] : []));
    if (servers.length < 2) {
      // One failed to start: the other is stopped, or it would keep this process alive.
      for (const server of servers) server.child.kill("SIGKILL");
      throw started.find((start) => start.status === "rejected")!.reason;
    }
    // The server killed is the first: the client's least-loaded routing breaks ties towards
    // it, so a turn reaches it soon after the kill is armed and the episode it cuts is trained
    // in the next steps (with the second, the kill came late twice in 9 runs: once no turn at
    // all, once the cut group was still buffered when the run ended).
    const relay = await turnRelay(servers[0].url);
    const urls = [relay.url, servers[1].url];
    let killedDuringTurn = false;
    const runLog: string[] = [];
    const trajectories: Trajectory[] = [];
    /** Every episode that ended, trained or not (a group cut late may still be buffered when the run ends). */
    const ended: Trajectory[] = [];
    /** Per step before the kill: the step's version, and each server's version and completed requests right after the push. */
    const checks: Promise<{ version: number; served: number[]; completed: number[] }>[] = [];
    let killedAtVersion = -1;
    try {
      const last = await runTraining({
        modelDirectory: model,
        runDirectory: join(root, "run"),
        client: new InProcessEnvironmentClient([
          echoFamily({ maxTurnsNeeded: 3, reward: () => Math.random(), latency: () => 5 }),
        ]),
        tasks: [{ name: "echo" }],
        mode: "async",
        learnerThread: false,
        steps: STEPS,
        batchGroups: 2,
        groupSize: 2,
        seed: 5,
        learner: {
          schedule: {
            learningRate: 1e-3,
            warmupSteps: 0,
            schedule: "constant",
            minLearningRateRatio: 0.1,
            totalSteps: STEPS,
          },
          grpo: { klCoefficient: 0, temperature: TEMPERATURE, skipUniformGroups: false },
          gradientThreads: 1,
        },
        rollout: {
          maxConcurrentEpisodes: 8,
          engine: { temperature: TEMPERATURE },
          // A dead server is an infrastructure fault: played again and masked by default (loop.test.ts
          // covers that); here without retries and penalised, so the killed server's episodes stay visible.
          episode: {
            maxTurns: 3,
            maxNewTokensPerTurn: 16,
            maxTokens: 1024,
            temperature: TEMPERATURE,
            incompletePenalty: PENALTY,
            infrastructureRetries: 0,
            infrastructureFaults: "penalize",
          },
          maxStaleness: Infinity,
          servers: { urls, apiKey: API_KEY },
          playEpisode: async (...args) => {
            const trajectory = await runEpisode(...args);
            ended.push(trajectory);
            return trajectory;
          },
        },
        crossPolicy: { staleProbability: 0, refreshEvery: 1 },
        checkpoint: { every: 1, keep: 100 },
        resume: false,
        log: (line) => {
          runLog.push(line);
          console.log(`[run] ${line}`);
        },
        onBatch: ({ groups }) => {
          for (const group of groups) trajectories.push(...group.trajectories);
        },
        onStep: (record) => {
          // The push resolved before this call: both servers serve the new version now (checked below).
          if (record.step < KILL_AFTER_STEP)
            checks.push(
              Promise.all(
                urls.map(async (url) => {
                  const health = (await (await fetch(url.replace(/\/v1$/, "/health"))).json()) as {
                    engine: { completedRequests: number };
                  };
                  return {
                    served: await servedVersion(url),
                    completed: health.engine.completedRequests,
                  };
                }),
              ).then((states) => ({
                version: record.version,
                served: states.map((state) => state.served),
                completed: states.map((state) => state.completed),
              })),
            );
          if (record.step === KILL_AFTER_STEP) {
            killedAtVersion = record.version;
            // Once the earlier steps' checks have read both servers (one still in flight would hit
            // the dead server), during its next turn.
            void Promise.allSettled(checks)
              .then(() => relay.killDuringNextTurn(() => servers[0].child.kill("SIGKILL")))
              .then(() => (killedDuringTurn = true));
          }
        },
        evaluation: undefined,
      });
      assert.equal(last?.step, STEPS, "the run finished every step after the kill");
      assert.equal(
        await servedVersion(urls[1]),
        last!.version,
        `the surviving server (${urls[1]}; the killed one behind ${urls[0]}) serves the last version (run log: ${runLog.join(" | ")})`,
      );
      assert.ok(killedAtVersion >= 1, "versions advanced before the kill");
      assert.ok(killedDuringTurn, "the server was killed during one of its turns");

      const seen = await Promise.all(checks);
      assert.equal(seen.length, KILL_AFTER_STEP - 1);
      for (const check of seen) {
        for (const served of check.served)
          assert.ok(
            served >= check.version && served >= 1,
            `a server serves version ${served} after the push of ${check.version}`,
          );
        for (const completed of check.completed)
          assert.ok(completed > 0, "both servers generated turns");
      }
      const generated = trajectories.filter((t) => t.lossMask.some((mask) => mask === 1));
      assert.ok(generated.length > 0);

      // The killed server's episodes ended penalised: among every episode that ended, since the
      // group of one cut in step 5 may still be buffered when the run stops (the flaky failure
      // 'some episode ended by the killed server (statuses: completed)' of CI stop 50, where the
      // log showed the server cut mid-turn: UND_ERR_SOCKET). The trained ones are among them.
      const failed = ended.filter((t) => /InferenceServerError/.test(t.error ?? ""));
      assert.ok(
        failed.length > 0,
        `some episode ended by the killed server (statuses: ${[...new Set(ended.map((t) => t.status))].join(", ")}; errors: ${[...new Set(ended.flatMap((t) => (t.error ? [t.error.slice(0, 120)] : [])))].join(" | ")})`,
      );
      const trainedCut = trajectories.filter((t) => /InferenceServerError/.test(t.error ?? ""));
      for (const t of trainedCut)
        assert.ok(failed.includes(t), "a trained cut episode is one of those that ended");
      console.log(
        `${failed.length} episodes cut by the kill, ${trainedCut.length} of them trained`,
      );
      for (const t of failed) {
        assert.equal(t.status, "task error");
        assert.equal(t.endCause, "infrastructure");
        assert.equal(t.reward, PENALTY);
      }

      // Every generated token's log-prob equals the trainer's scoring with the weights of its version.
      const byVersion = new Map<number, { trajectory: Trajectory; position: number }[]>();
      // A weight update that lands mid-turn (between two decode steps) leaves the rest of that turn
      // sampled from a context whose keys/values the older weights computed: exact per token, but
      // no single version rescores it. Turns of one version are compared.
      let mixedTurns = 0;
      for (const t of generated) {
        const singleVersion = (position: number) =>
          t.turns.some(
            (turn) =>
              position >= turn.generated[0] &&
              position < turn.generated[1] &&
              turn.minVersion === turn.maxVersion,
          );
        mixedTurns += t.turns.filter((turn) => turn.minVersion !== turn.maxVersion).length;
        t.lossMask.forEach((mask, position) => {
          if (mask !== 1 || !singleVersion(position)) return;
          const version = t.versions[position];
          if (!byVersion.has(version)) byVersion.set(version, []);
          byVersion.get(version)!.push({ trajectory: t, position });
        });
      }
      assert.ok(byVersion.size >= 2, `tokens of several versions (${[...byVersion.keys()]})`);
      let compared = 0;
      let worst = 0;
      for (const [version, tokens] of byVersion) {
        const folder =
          version === 0
            ? model
            : join(
                root,
                "run",
                "checkpoints",
                `step-${String(version).padStart(6, "0")}`,
                "policy",
              );
        const scorer = await Policy.load(folder, { trainable: false, tokenizer: false });
        try {
          const scored = new Map<Trajectory, Float32Array>();
          for (const { trajectory, position } of tokens) {
            if (!scored.has(trajectory)) {
              const ids = tf.tensor2d(
                [Array.from(trajectory.tokens)],
                [1, trajectory.tokens.length],
                "int32",
              );
              const logProbs = tf.tidy(
                () => tokenLogProbs(scorer.model, ids, { temperature: TEMPERATURE }).logProbs,
              );
              scored.set(trajectory, logProbs.dataSync() as Float32Array);
              tf.dispose([ids, logProbs]);
            }
            const difference = Math.abs(
              scored.get(trajectory)![position - 1] - trajectory.logprobs[position],
            );
            worst = Math.max(worst, difference);
            compared += 1;
          }
        } finally {
          scorer.dispose();
        }
      }
      console.log(
        `${generated.length} trajectories, ${compared} generated tokens of single-version turns (${mixedTurns} turns saw an update mid-way) over versions ${[...byVersion.keys()].sort()}; max |Δ log-prob| ${worst.toExponential(2)}; ${failed.length} episodes ended by the killed server`,
      );
      assert.ok(worst < 2e-3, `max |recorded − rescored| = ${worst}`);
    } finally {
      for (const server of servers) server.child.kill("SIGKILL");
      relay.close();
      rmSync(root, { recursive: true, force: true });
    }
  },
);
