/**
 * The fault soak, short (`npm run bench -- faults` runs 1,000 sessions): 30 OS sessions
 * through the real controller, 40 % of them hit by a fault (container kill, kill during a
 * command, rm, pause, slow turn, abandoned — each at least twice). No session may hang, every
 * faulted one must end as expected (task error; abandoned ones cancelled), every clean one
 * must complete with reward 1, and no container may be left. Skips with the reason when no
 * engine answers or the `agentrl/os` image is missing.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import Docker from "dockerode";
import { IMAGES, isDockerAvailable } from "@agentrl/envs";
import { imageHash } from "@agentrl/envs/internal";
import { FAULTS, soak } from "../bench/faults.js";

const docker = new Docker();
const engine = await isDockerAvailable(docker);
const image = engine ? await imageHash(docker, IMAGES.os.tag) : undefined;
const skip = !engine
  ? "no Docker engine answers (bash scripts/start-dockerd.sh)"
  : image === undefined
    ? "image agentrl/os missing (agentrl env build)"
    : false;

test(
  "30 OS sessions with 40 % faults: none hung, none leaked, every status as expected",
  { skip, timeout: 300_000 },
  async () => {
    const report = await soak({
      sessions: 30,
      faultRate: 0.4,
      concurrency: 4,
      seed: 5,
      interactionSeconds: 30,
      idleSeconds: 4,
    });
    for (const fault of FAULTS)
      assert.ok(
        report.faulted[fault] >= 1,
        `${fault} was drawn: ${JSON.stringify(report.faulted)}`,
      );
    const faulted = Object.values(report.faulted).reduce((a, b) => a + b, 0);
    assert.equal(report.hung, 0);
    assert.deepEqual(report.wrongStatus, []);
    // A start the controller ends at its time limit (a loaded machine) leaves no session: not a wrong status.
    assert.ok(report.completed >= 1);
    assert.ok(
      report.completed + report.startTimeouts >= report.sessions - faulted,
      "every clean session that started completed with reward 1",
    );
    assert.equal(report.leakedContainers, 0);
  },
);
