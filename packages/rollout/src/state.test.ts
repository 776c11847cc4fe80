/**
 * The rollout state of an async checkpoint: complete groups round-trip bit for bit; the
 * scheduler reports its groups in flight and plays replayed instances first, once each.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { Policy } from "@agentrl/policy";
import { TrajectoryBuffer } from "./buffer.js";
import { createPolicyEngine } from "./engine/index.js";
import { PolicyPool } from "./pool.js";
import { RolloutScheduler } from "./scheduler.js";
import { RolloutStateError, decodeRolloutState, encodeRolloutState } from "./state.js";
import { FaultyClient, echoFamily, testPolicy, testTokenizer } from "./testing/fixtures.js";
import type { TrajectoryGroup } from "./types.js";

async function playGroups(
  policy: Policy,
  options: {
    maxGroups: number;
    replay?: { task: string; index: number }[];
    groupIdPrefix?: string;
    latencyMs?: number;
  },
) {
  const client = new FaultyClient([
    echoFamily({ maxTurnsNeeded: 2, latency: () => options.latencyMs ?? 1 }),
  ]);
  const engine = createPolicyEngine(policy, { temperature: 0.9, maxBatchSize: 8, seed: 5 });
  const buffer = new TrajectoryBuffer({ capacityGroups: 8 });
  const scheduler = new RolloutScheduler({
    client,
    tokenizer: testTokenizer(),
    pool: new PolicyPool({ current: engine }),
    buffer,
    tasks: [{ name: "echo" }],
    groupSize: 2,
    maxConcurrentEpisodes: 4,
    maxGroups: options.maxGroups,
    seed: 9,
    episode: { maxNewTokensPerTurn: 6, maxTurns: 3 },
    replay: options.replay,
    groupIdPrefix: options.groupIdPrefix,
  });
  return { client, engine, buffer, scheduler };
}

test("complete groups round-trip through encodeRolloutState / decodeRolloutState bit for bit", async () => {
  const policy = await testPolicy({ seed: 2 });
  const { client, engine, buffer, scheduler } = await playGroups(policy, { maxGroups: 3 });
  await scheduler.start();
  const groups: TrajectoryGroup[] = buffer.waitingGroups();
  assert.equal(groups.length, 3);
  assert.equal(buffer.size, 3, "waitingGroups does not take them");
  // An environment metric may be NaN or infinite; JSON alone would lose it.
  groups[0].trajectories[0].metrics.oddity = Number.NaN;
  groups[0].trajectories[1].metrics.far = Number.POSITIVE_INFINITY;
  const state = { groups, inFlight: [{ groupId: "echo-4-g7", task: "echo", index: 4 }] };
  const bytes = encodeRolloutState(state);
  const decoded = decodeRolloutState(bytes);
  assert.deepEqual(decoded, state);
  // As read from a file: a Node Buffer, which may be a view into a larger pool.
  const pooled = Buffer.concat([Buffer.alloc(24, 7), Buffer.from(bytes)]).subarray(24);
  assert.deepEqual(decodeRolloutState(pooled), state);
  const [original, copy] = [groups[1].trajectories[1], decoded.groups[1].trajectories[1]];
  assert.ok(
    copy.logprobs instanceof Float32Array &&
      copy.tokens instanceof Int32Array &&
      copy.lossMask instanceof Uint8Array &&
      copy.policyIds instanceof Int8Array,
  );
  assert.deepEqual(
    Buffer.from(copy.logprobs.buffer),
    Buffer.from(
      original.logprobs.buffer.slice(
        original.logprobs.byteOffset,
        original.logprobs.byteOffset + original.logprobs.byteLength,
      ),
    ),
  );
  assert.ok(
    original.lossMask.some((bit) => bit === 1),
    "the groups hold generated tokens",
  );

  assert.throws(
    () => decodeRolloutState(bytes.subarray(0, bytes.byteLength - 8)),
    RolloutStateError,
  );
  assert.throws(
    () => decodeRolloutState(new TextEncoder().encode('{"groups": []}')),
    RolloutStateError,
  );
  engine.close();
  await client.close();
  policy.dispose();
});

test("the scheduler reports its groups in flight, and plays replayed instances first with their own ids", async () => {
  const policy = await testPolicy({ seed: 2 });
  const slow = await playGroups(policy, { maxGroups: 2, latencyMs: 50 });
  const running = slow.scheduler.start();
  await new Promise((resolve) => setTimeout(resolve, 20));
  const inFlight = slow.scheduler.groupsInProgress();
  assert.ok(inFlight.length >= 1, "groups are in flight");
  for (const group of inFlight) assert.equal(group.task, "echo");
  await running;
  assert.deepEqual(slow.scheduler.groupsInProgress(), [], "none once all completed");
  slow.engine.close();
  await slow.client.close();

  const replay = [
    { task: "echo", index: 5 },
    { task: "echo", index: 0 },
  ];
  const resumed = await playGroups(policy, { maxGroups: 3, replay, groupIdPrefix: "s4." });
  await resumed.scheduler.start();
  const ids = resumed.buffer
    .waitingGroups()
    .map((group) => group.groupId)
    .sort();
  assert.equal(ids.length, 3);
  assert.deepEqual(
    ids.filter((id) => id.endsWith("-replay")),
    ["s4.echo-0-g1-replay", "s4.echo-5-g0-replay"],
    "each replayed instance once, first",
  );
  assert.ok(ids.every((id) => id.startsWith("s4.")));
  resumed.engine.close();
  await resumed.client.close();
  assert.throws(
    () =>
      new RolloutScheduler({
        client: resumed.client,
        tokenizer: testTokenizer(),
        pool: new PolicyPool({ current: resumed.engine }),
        buffer: new TrajectoryBuffer(),
        tasks: [{ name: "echo" }],
        replay: [{ task: "other", index: 0 }],
      }),
    /not in the mix/,
  );
  policy.dispose();
});
