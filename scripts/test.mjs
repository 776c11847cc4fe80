#!/usr/bin/env node
// Runs every test of the monorepo with node's own test runner, on the TypeScript sources
// (the "source" export condition), so no build is needed first.
//   node scripts/test.mjs                 all tests
//   node scripts/test.mjs policy envs     only tests whose path contains one of the words
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";

const roots = ["packages", "test"];
const skip = new Set(["node_modules", "dist", ".git"]);
function walk(dir, out) {
  let entries;
  try {
    entries = readdirSync(dir);
  } catch {
    return out;
  }
  for (const name of entries) {
    if (skip.has(name)) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path, out);
    else if (name.endsWith(".test.ts")) out.push(path);
  }
  return out;
}
const filters = process.argv.slice(2).filter((a) => !a.startsWith("-"));
const files = roots
  .flatMap((r) => walk(r, []))
  .sort()
  .filter((f) => filters.length === 0 || filters.some((w) => f.includes(w)));
if (files.length === 0) {
  console.error(`no test files match ${filters.join(", ")}`);
  process.exit(1);
}
const result = spawnSync(
  process.execPath,
  [
    "--conditions=source",
    "--import",
    "tsx",
    "--test",
    "--test-concurrency=1",
    ...process.argv.slice(2).filter((a) => a.startsWith("-")),
    ...files,
  ],
  { stdio: "inherit" },
);
process.exit(result.status ?? 1);
