/**
 * Async resume that loses nothing, under SIGKILL: the tiny async `say` run
 * (fixtures/say-async-run.ts: a checkpoint every step, a buffer of 4 groups) is killed at 3
 * random moments and resumed each time. Every group the buffer held at the checkpoint a
 * resume starts from is trained exactly once after it, first; the groups in flight there are
 * played again (counted in the first step's metrics); no step is logged twice; the run ends
 * at its configured step count.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { decodeRolloutState, type RolloutState } from "@agentrl/rollout";
import { latestCheckpoint } from "./checkpoint.js";
import { makeSayModel } from "./fixtures/say-run.js";
import { TRAINED_FILE } from "./fixtures/say-async-run.js";
import {
  jsonLines as lines,
  killAtRandomMoments,
  startRunProcess,
} from "./fixtures/kill-resume.js";
import { ROLLOUT_STATE_FILE } from "./loop.js";

const RUN_SCRIPT = fileURLToPath(new URL("./fixtures/say-async-run.ts", import.meta.url));
const STEPS = 6;

const startRun = (model: string, run: string, resume: boolean) =>
  startRunProcess(RUN_SCRIPT, model, run, STEPS, resume);

test(
  "an async run SIGKILLed at 3 random moments and resumed trains every buffered group of each checkpoint exactly once, first",
  { timeout: 600_000 },
  async () => {
    const model = await makeSayModel();
    const run = mkdtempSync(join(tmpdir(), "agentrl-async-resume-"));
    /** Per kill: the checkpoint the next attempt resumes from, and the rollout state saved in it. */
    const resumes: { step: number; state: RolloutState }[] = [];
    const attempts = await killAtRandomMoments({
      run,
      killAfterSteps: [1, 3, 4],
      start: (resume) => startRun(model, run, resume),
      afterKill: async () => {
        // A kill before the first checkpoint was complete: the next attempt starts afresh.
        const checkpoint = await latestCheckpoint(join(run, "checkpoints"));
        if (checkpoint)
          resumes.push({
            step: checkpoint.step,
            state: decodeRolloutState(readFileSync(join(checkpoint.folder, ROLLOUT_STATE_FILE))),
          });
      },
    });
    attempts.forEach(({ exit }, attempt) =>
      assert.equal(
        exit.signal,
        "SIGKILL",
        `run ${attempt + 1} was killed, not finished (${exit.errors})`,
      ),
    );
    const moments = attempts.map((attempt) => attempt.moment);
    const last = await startRun(model, run, true).exited;
    assert.equal(last.code, 0, last.errors);
    const context = `killed ${moments.join(", ")}; resumed from steps ${resumes.map((resume) => resume.step).join(", ")}`;

    // Each step logged once, and the run ends at its configured step count.
    const metrics = lines<Record<string, number>>(run, "metrics.jsonl");
    assert.deepEqual(
      metrics.map((line) => line.step),
      Array.from({ length: STEPS }, (_, position) => position + 1),
      `each step logged once (${context})`,
    );
    const trained = lines<{ step: number; groups: string[] }>(run, TRAINED_FILE);
    assert.deepEqual(
      trained.map((line) => line.step),
      metrics.map((line) => line.step),
    );
    const allTrained = trained.flatMap((line) => line.groups);
    assert.equal(
      new Set(allTrained).size,
      allTrained.length,
      `no group trained twice (${context})`,
    );

    let restoredInAll = 0;
    for (const resume of resumes) {
      const buffered = resume.state.groups.map((group) => group.groupId);
      restoredInAll += buffered.length;
      // Every buffered group: trained exactly once after the resume, and before any group drawn after it.
      const after = trained
        .filter((line) => line.step > resume.step)
        .flatMap((line) => line.groups);
      for (const id of buffered)
        assert.equal(
          after.filter((other) => other === id).length,
          1,
          `group ${id} of checkpoint ${resume.step} trained once after it (${context})`,
        );
      assert.deepEqual(
        after.slice(0, buffered.length),
        buffered,
        `the restored groups are trained first, in order (${context})`,
      );
      for (const group of resume.state.groups) {
        assert.ok(
          group.trajectories.every(
            (trajectory) =>
              trajectory.tokens.length === trajectory.logprobs.length &&
              trajectory.lossMask.some((bit) => bit === 1),
          ),
          "whole trajectories are saved",
        );
      }
      // The first step after the resume counts what was restored and what is played again.
      const first = metrics.find((line) => line.step === resume.step + 1);
      if (first) {
        assert.equal(first["resume/restored_groups"], buffered.length, context);
        assert.equal(first["resume/resampled_groups"], resume.state.inFlight.length, context);
      }
      // In-flight instances are played again once each (ids of the resumed attempt end in -replay).
      const replayed = allTrained.filter(
        (id) => id.startsWith(`s${resume.step}.`) && id.endsWith("-replay"),
      );
      assert.ok(replayed.length <= resume.state.inFlight.length, context);
    }
    assert.ok(restoredInAll > 0, `some checkpoint held buffered groups (${context})`);
  },
);
