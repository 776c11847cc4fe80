import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChatTokenizer, Trajectory, TrajectoryGroup } from "@agentrl/rollout";
import { TrajectoryLog, recordStep, type TrajectoryStepRecord } from "./trajectory-log.js";

/** One character per token (code point = id). */
const tokenizer: ChatTokenizer = {
  encode: (text) => [...text].map((c) => c.codePointAt(0)!),
  decode: (ids) => String.fromCodePoint(...ids),
  applyChatTemplate: () => "",
};

/** prompt "P:" | generated turn | environment reply, with versions 3 on the generation. */
function trajectory(
  task: string,
  groupId: string,
  member: number,
  reward: number,
  generation: string,
): Trajectory {
  const prompt = "P:";
  const reply = "<obs>";
  const text = prompt + generation + reply;
  const n = text.length;
  const g: [number, number] = [prompt.length, prompt.length + generation.length];
  const mask = new Uint8Array(n);
  const versions = new Int32Array(n).fill(-1);
  const logprobs = new Float32Array(n);
  for (let i = g[0]; i < g[1]; i++) {
    mask[i] = 1;
    versions[i] = 3;
    logprobs[i] = -0.5;
  }
  return {
    task,
    index: 0,
    groupId,
    member,
    tokens: Int32Array.from(tokenizer.encode(text)),
    lossMask: mask,
    logprobs,
    versions,
    policyIds: new Int8Array(n),
    reward,
    environmentReward: reward,
    status: "completed",
    endCause: "verdict",
    masked: false,
    turns: [
      {
        promptLength: 2,
        generated: g,
        environment: [g[1], n],
        policy: "current",
        minVersion: 3,
        maxVersion: 3,
        finishReason: "stop",
        templateFallback: false,
      },
    ],
    minVersion: 3,
    maxVersion: 3,
    metrics: {},
    weight: 1,
  };
}

function group(task: string, id: string, rewards: number[]): TrajectoryGroup {
  const call = '<tool_call>\n{"name": "say", "arguments": {"word": "<b>x</b>"}}\n</tool_call>';
  return {
    groupId: id,
    task,
    index: 0,
    minVersion: 3,
    maxVersion: 3,
    trajectories: rewards.map((r, i) => trajectory(task, id, i, r, i === 0 ? call : "hi")),
  };
}

test("recordStep samples whole groups and records turns, tool calls, per-token versions and both advantages", () => {
  const groups = [group("a", "g1", [1, 0]), group("a", "g2", [0, 0]), group("b", "g3", [1, 0])];
  const record = recordStep(5, groups, tokenizer, { episodesPerStep: 3 });
  assert.equal(record.step, 5);
  assert.equal(record.batchGroups, 3);
  assert.equal(record.batchEpisodes, 6);
  assert.equal(record.episodes.length, 2, "the second group would pass the budget of 3 episodes");
  const [first, second] = record.episodes;
  assert.equal(first.prompt, "P:");
  assert.deepEqual(first.turns[0].toolCalls, [{ name: "say", arguments: { word: "<b>x</b>" } }]);
  assert.equal(first.turns[0].observation, "<obs>");
  assert.equal(second.turns[0].tokens.map(([text]) => text).join(""), "hi");
  assert.deepEqual(second.turns[0].tokens[0], ["h", 3, -0.5]);
  assert.ok(first.advantage > 0 && second.advantage < 0, "the group advantage follows the reward");
  assert.notEqual(
    first.taskAdvantage,
    first.advantage,
    "task normalization over the whole batch changes it",
  );
});

test("TrajectoryLog appends one line per step and rotates past its size bound", () => {
  const run = mkdtempSync(join(tmpdir(), "agentrl-trajlog-"));
  const log = new TrajectoryLog(run, tokenizer, { episodesPerStep: 2, maxFileBytes: 1 });
  log.write(1, [group("a", "g1", [1, 0])]);
  log.write(2, [group("a", "g2", [0, 1])]);
  const current = readFileSync(join(run, "trajectories.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as TrajectoryStepRecord);
  const rotated = readFileSync(join(run, "trajectories.1.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as TrajectoryStepRecord);
  assert.deepEqual(
    current.map((r) => r.step),
    [2],
  );
  assert.deepEqual(
    rotated.map((r) => r.step),
    [1],
  );
  const off = mkdtempSync(join(tmpdir(), "agentrl-trajlog-"));
  new TrajectoryLog(off, tokenizer, { episodesPerStep: 0 }).write(1, [group("a", "g1", [1, 0])]);
  assert.equal(existsSync(join(off, "trajectories.jsonl")), false);
});
