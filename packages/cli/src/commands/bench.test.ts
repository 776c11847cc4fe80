import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  BenchmarksNotFoundError,
  findBenchmarkRoot,
  runBenchmarks,
  UnknownBenchmarkError,
} from "./bench.js";
import { buildProgram } from "../main.js";

test("bench: finds the checkout's bench/run.ts, refuses unknown names, and says where benchmarks live outside a checkout", async () => {
  const root = findBenchmarkRoot();
  assert.ok(root, "this test runs inside the repository");
  assert.ok(existsSync(join(root, "bench", "run.ts")));
  await assert.rejects(
    runBenchmarks(["policy", "speed"], root),
    (error: Error) =>
      error instanceof UnknownBenchmarkError &&
      /unknown benchmark "speed"; known: policy, rollout, pipeline, envs/.test(error.message),
  );
  const outside = await mkdtemp(join(tmpdir(), "agentrl-bench-"));
  try {
    assert.equal(findBenchmarkRoot(outside), undefined);
    await assert.rejects(runBenchmarks(["policy"], null), BenchmarksNotFoundError);
  } finally {
    await rm(outside, { recursive: true, force: true });
  }
  const help =
    buildProgram()
      .commands.find((command) => command.name() === "bench")
      ?.helpInformation() ?? "";
  assert.match(help, /\[names\.\.\.\]/);
});
