/**
 * The whole repository type-checks: `tsc -p tsconfig.typecheck.json` (what `npm run
 * typecheck` runs) over the packages' sources, their tests and examples, test/, bench/ and
 * scripts/, against the .ts sources of the workspaces (export condition `source`). The tests
 * themselves run through tsx, which strips types without checking them, so without this a
 * type error in a test file would never fail CI.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const repositoryRoot = fileURLToPath(new URL("..", import.meta.url));
/** The compiler is slow on a loaded machine; a quiet one takes about 10 s. */
const TIMEOUT_MS = 180_000;

test("tsc -p tsconfig.typecheck.json reports no errors", { timeout: TIMEOUT_MS + 10_000 }, () => {
  const result = spawnSync(
    process.execPath,
    ["node_modules/typescript/bin/tsc", "-p", "tsconfig.typecheck.json", "--pretty", "false"],
    {
      cwd: repositoryRoot,
      encoding: "utf8",
      timeout: TIMEOUT_MS,
      maxBuffer: 64 * 1024 * 1024,
    },
  );
  const output = `${result.stdout ?? ""}${result.stderr ?? ""}`.trim();
  assert.equal(
    result.signal,
    null,
    `tsc was stopped by ${result.signal} (time limit ${TIMEOUT_MS / 1000} s)\n${output}`,
  );
  assert.ifError(result.error);
  assert.equal(
    result.status,
    0,
    `tsc -p tsconfig.typecheck.json exited with ${result.status}:\n${output}`,
  );
});
