/**
 * Every package's export lists, as a snapshot: the public API of each entry (what its README
 * documents) and the plumbing of its `internal` subpath (for benches and tests).
 * An export added or removed fails here until the snapshot is updated on purpose:
 *   UPDATE_EXPORTS_SNAPSHOT=1 node scripts/test.mjs test/exports
 * (value exports: the names a JavaScript import sees; types are not in the module at run time.)
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const SNAPSHOT = fileURLToPath(new URL("./exports.snapshot.json", import.meta.url));
const PACKAGES = ["spec", "policy", "envs", "rollout", "dashboard", "trainer"];
/** The packages with an `internal` subpath. */
const WITH_INTERNAL = ["policy", "envs", "rollout", "dashboard", "trainer"];
const ENTRIES = PACKAGES.flatMap((name) => [
  `@agentrl/${name}`,
  ...(WITH_INTERNAL.includes(name) ? [`@agentrl/${name}/internal`] : []),
]);

test("every package's entry points export exactly the snapshot's names (public API and internal plumbing apart)", async () => {
  const found: Record<string, string[]> = {};
  for (const entry of ENTRIES) found[entry] = Object.keys(await import(entry)).sort();
  if (process.env.UPDATE_EXPORTS_SNAPSHOT)
    writeFileSync(SNAPSHOT, JSON.stringify(found, null, 2) + "\n");
  const expected = JSON.parse(readFileSync(SNAPSHOT, "utf8")) as Record<string, string[]>;
  for (const entry of ENTRIES) {
    const added = found[entry].filter((name) => !expected[entry]?.includes(name));
    const removed = (expected[entry] ?? []).filter((name) => !found[entry].includes(name));
    assert.deepEqual(
      { added, removed },
      { added: [], removed: [] },
      `${entry}: exports changed; if on purpose, UPDATE_EXPORTS_SNAPSHOT=1 node scripts/test.mjs test/exports`,
    );
  }
  for (const name of WITH_INTERNAL) {
    const overlap = found[`@agentrl/${name}`].filter((exported) =>
      found[`@agentrl/${name}/internal`].includes(exported),
    );
    assert.deepEqual(overlap, [], `@agentrl/${name}: a name is either public or internal`);
  }
  assert.ok(
    found["@agentrl/trainer"].includes("runExperiment") &&
      found["@agentrl/trainer/internal"].includes("crc32c"),
  );
});
