import { test } from "node:test";
import assert from "node:assert/strict";
import type { TrajectoryGroup } from "@agentrl/rollout";
import { informativeBatch } from "./loop.js";

/** A group of the given rewards (only what the informativeness rule reads). */
const group = (id: string, ...rewards: number[]) =>
  ({ task: id, trajectories: rewards.map((reward) => ({ reward })) }) as unknown as TrajectoryGroup;

/** A buffer that hands out `queue` one group at a time and counts the calls. */
function fakeBuffer(queue: TrajectoryGroup[]) {
  const buffer = {
    taken: 0,
    async take(count: number) {
      assert.equal(count, 1);
      buffer.taken += 1;
      const next = queue.shift();
      assert.ok(next, "asked for more groups than the test queued");
      return [next];
    },
  };
  return buffer;
}

test("dynamic sampling: uniform groups are replaced by informative ones from the buffer, at most `extra` draws", async () => {
  const first = [
    group("a", 1, 0),
    group("all-fail", 0, 0),
    group("b", 0, 1),
    group("all-win", 1, 1),
  ];
  const buffer = fakeBuffer([
    group("uniform", 0, 0),
    group("c", 0.5, 0),
    group("d", 1, 0),
    group("unused", 1, 0),
  ]);
  const { batch, drawn } = await informativeBatch(buffer, first, 4, 8);
  assert.deepEqual(
    batch.map((g) => g.task),
    ["a", "b", "c", "d"],
    "the informative groups, the batch's first, then the buffer's",
  );
  assert.equal(buffer.taken, 3, "stops as soon as the batch is full");
  assert.deepEqual(
    drawn.map((g) => g.task),
    ["a", "all-fail", "b", "all-win", "uniform", "c", "d"],
    "every group drawn, for the metrics",
  );
  assert.equal(first.length, 4, "the first batch is not changed");

  const capped = fakeBuffer([group("u1", 0, 0), group("u2", 1, 1), group("e", 1, 0)]);
  assert.deepEqual(
    (await informativeBatch(capped, [group("x", 0, 0), group("y", 0, 1)], 2, 2)).batch.map(
      (g) => g.task,
    ),
    ["y"],
    "at most `extra` more groups: the batch may stay short",
  );
  assert.equal(capped.taken, 2);

  const none = [group("p", 0, 0), group("q", 1, 1)];
  assert.deepEqual(
    (await informativeBatch(fakeBuffer([group("r", 0, 0)]), none, 2, 1)).batch,
    none,
    "nothing informative: the batch as it was",
  );
  assert.equal(
    await informativeBatch(fakeBuffer([]), first.slice(0, 1).concat(first.slice(2, 3)), 2, 5).then(
      ({ batch }) => batch.length,
    ),
    2,
    "already full: no draw",
  );
});
