import { test } from "node:test";
import assert from "node:assert/strict";
import type { TaskEvaluation } from "@agentrl/trainer";
import { formatEvaluation } from "./eval.js";

const result = (task: string, success: number, infrastructureFaults?: number): TaskEvaluation => ({
  task,
  instances: 200,
  episodes: 200,
  success,
  passAtK: success,
  meanReward: success,
  meanTurns: 3,
  infrastructureFaults,
});

test("formatEvaluation: a faults column and a note only when an episode ended by an infrastructure fault", () => {
  const clean = formatEvaluation({ kg: result("kg", 0.7, 0), os: result("os", 0.2) }, 1);
  assert.doesNotMatch(clean.join("\n"), /fault/);
  assert.match(clean.at(-1)!, /^mean +45\.0%$/);
  const faulted = formatEvaluation({ kg: result("kg", 0.7, 0), os: result("os", 0.05, 46) }, 1);
  assert.match(faulted[0], /turns +faults$/);
  assert.match(faulted[2], /^os .* 5\.0% .* +46$/);
  assert.match(faulted[1], /^kg .* +0$/);
  assert.match(
    faulted.at(-1)!,
    /^faults: episodes ended by an infrastructure fault .* counted as failures .*start-dockerd/,
  );
});

test("formatEvaluation: a family that says where its answers came from (OS) gets a line: read successes and how to measure a guess's floor", () => {
  const lines = formatEvaluation(
    {
      kg: result("kg", 0.7, 0),
      os: {
        ...result("os", 0.25),
        successesFromOutput: 14,
        answerSources: { read: 14, guessed: 34, other: 2 },
      },
    },
    1,
  );
  assert.match(
    lines.at(-1)!,
    /^os: of 50 successes 14 read, 34 guessed, 2 other \(28 % read\): read = .*guessed = in no output .*agentrl env check --task os --constant-answer.*other = graded on the system's state$/,
  );
  assert.equal(lines.filter((line) => line.startsWith("kg:")).length, 0);
});

test("runEvalCommand: starts a family's shared server as it opens, times each task and prints the engines' counts", async () => {
  const { createTaskFamily } = await import("@agentrl/envs");
  const { runEvalCommand } = await import("./eval.js");
  const events: string[] = [];
  const lines: string[] = [];
  const results = await runEvalCommand({
    model: new URL("../../../../models/warmstart", import.meta.url).pathname,
    tasks: ["kg"],
    limit: 2,
    decodeThreads: 0,
    bars: false,
    print: (line) => lines.push(line),
    createFamily: async (name, options) => {
      const family = await createTaskFamily(name, options);
      const startSession = family.startSession.bind(family);
      return Object.assign(family, {
        sharedServer: async () => void events.push("server"),
        startSession: (index: number) => {
          events.push("session");
          return startSession(index);
        },
      });
    },
  });
  assert.deepEqual(events, ["server", "session", "session"]);
  assert.equal(results.kg.episodes, 2);
  assert.ok((results.kg.seconds ?? -1) >= 0, `seconds: ${results.kg.seconds}`);
  const timeline = lines.find((line) => line.startsWith("eval: ready after"));
  assert.ok(timeline, lines.join("\n"));
  assert.match(timeline, /decode [\d.]+ s \(\d+ steps, [1-9]\d* tokens generated/);
});
