import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { BufferClosedError, TrajectoryBuffer } from "./buffer.js";
import type { Trajectory, TrajectoryGroup } from "./types.js";

function group(id: string, versions: number[]): TrajectoryGroup {
  const trajectories = versions.map(
    (version, member) =>
      ({
        task: "t",
        index: 0,
        groupId: id,
        member,
        minVersion: version,
        maxVersion: version,
        weight: 1,
      }) as unknown as Trajectory,
  );
  const known = versions.filter((v) => v >= 0);
  return {
    groupId: id,
    task: "t",
    index: 0,
    trajectories,
    minVersion: known.length ? Math.min(...known) : -1,
    maxVersion: known.length ? Math.max(...known) : -1,
  };
}

describe("TrajectoryBuffer", () => {
  test("take resolves only when enough complete groups are there, oldest first", async () => {
    const buffer = new TrajectoryBuffer();
    let resolved: TrajectoryGroup[] | undefined;
    const taking = buffer.take(2).then((groups) => (resolved = groups));
    buffer.put(group("a", [0, 0]));
    await new Promise((r) => setImmediate(r));
    assert.equal(resolved, undefined);
    buffer.put(group("b", [0, 0]));
    buffer.put(group("c", [0, 0]));
    await taking;
    assert.deepEqual(
      (resolved as TrajectoryGroup[] | undefined)?.map((g) => g.groupId),
      ["a", "b"],
    );
    assert.equal(buffer.size, 1);
  });

  test("drops groups staler than maxStaleness and counts them; stale-pool turns (-1) do not count", async () => {
    const buffer = new TrajectoryBuffer({ maxStaleness: 2 });
    buffer.put(group("old", [1, 3]));
    buffer.put(group("ok", [3, 4]));
    buffer.put(group("only-stale-pool", [-1, -1]));
    buffer.setPolicyVersion(5);
    const taken = await buffer.take(2);
    assert.deepEqual(
      taken.map((g) => g.groupId),
      ["ok", "only-stale-pool"],
    );
    const stats = buffer.stats();
    assert.equal(stats.droppedStaleGroups, 1);
    assert.equal(stats.droppedStaleSamples, 2);
    assert.deepEqual(stats.stalenessHistogram, { 0: 2, 1: 1, 2: 1 });
  });

  test("downweights stale samples instead of dropping them", () => {
    const buffer = new TrajectoryBuffer({
      maxStaleness: 1,
      staleAction: "downweight",
      downweightFactor: 0.5,
    });
    buffer.put(group("g", [0, 3]));
    buffer.setPolicyVersion(4);
    const [taken] = buffer.takeAvailable();
    assert.deepEqual(
      taken.trajectories.map((t) => t.weight),
      [0.125, 1],
    );
    assert.equal(buffer.stats().downweightedSamples, 1);
  });

  test("bounded: beyond capacity the oldest group is dropped and counted", () => {
    const buffer = new TrajectoryBuffer({ capacityGroups: 2 });
    for (const id of ["a", "b", "c"]) buffer.put(group(id, [0]));
    assert.deepEqual(
      buffer.takeAvailable().map((g) => g.groupId),
      ["b", "c"],
    );
    assert.equal(buffer.stats().droppedOverflowGroups, 1);
  });

  test("take honours abort and close", async () => {
    const buffer = new TrajectoryBuffer();
    const controller = new AbortController();
    const aborted = buffer.take(1, { signal: controller.signal });
    controller.abort(new Error("enough"));
    await assert.rejects(aborted, /enough/);
    const pending = buffer.take(1);
    buffer.close();
    await assert.rejects(pending, BufferClosedError);
  });
});
