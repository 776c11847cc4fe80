/**
 * Issue 21: every typed error of agentrl extends `@agentrl/spec`'s `AgentRLError`, keeps its
 * class name as `name`, and is an `Error` still.
 *
 * 1. Statically, over the sources of every package (tests left out): each `class XError
 *    extends Y` reaches `AgentRLError` through the classes declared in the sources, so a new
 *    error class that extends `Error` directly fails here.
 * 2. At run time, over the public entry points: each exported class whose prototype is an
 *    Error's is an `AgentRLError`, and an instance is named after its class.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { AgentRLError } from "@agentrl/spec";
import * as policy from "@agentrl/policy";
import * as envs from "@agentrl/envs";
import * as rollout from "@agentrl/rollout";
import * as trainer from "@agentrl/trainer";
import * as dashboard from "@agentrl/dashboard";

const packagesFolder = fileURLToPath(new URL("../packages", import.meta.url));

/** The non-test TypeScript sources under a folder. */
function sources(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name);
    if (entry.isDirectory())
      return entry.name === "node_modules" || entry.name === "dist" ? [] : sources(path);
    return entry.name.endsWith(".ts") &&
      !entry.name.endsWith(".test.ts") &&
      !entry.name.endsWith(".d.ts")
      ? [path]
      : [];
  });
}

test("every error class in the packages' sources extends AgentRLError", () => {
  const parents = new Map<string, { parent: string; file: string }>();
  for (const name of readdirSync(packagesFolder)) {
    for (const file of sources(join(packagesFolder, name, "src"))) {
      for (const match of readFileSync(file, "utf8").matchAll(
        /^(?:export\s+)?class\s+(\w+)\s+extends\s+(\w+)/gm,
      )) {
        parents.set(match[1], { parent: match[2], file: file.slice(packagesFolder.length + 1) });
      }
    }
  }
  const errors = [...parents.keys()].filter(
    (name) => name.endsWith("Error") && name !== "AgentRLError",
  );
  assert.ok(errors.length >= 40, `only ${errors.length} error classes found: the scan is broken`);
  const outside: string[] = [];
  for (const name of errors) {
    const chain = [name];
    let current = name;
    while (current !== "AgentRLError" && parents.has(current) && chain.length < 10)
      chain.push((current = parents.get(current)!.parent));
    if (current !== "AgentRLError")
      outside.push(`${name} (${parents.get(name)!.file}): ${chain.join(" → ")}`);
  }
  assert.deepEqual(outside, [], "error classes that do not extend AgentRLError");
});

test("the exported error classes are AgentRLErrors named after their class", () => {
  const modules: object[] = [
    policy,
    envs,
    envs.kg,
    envs.webshop,
    envs.alfworld,
    rollout,
    trainer,
    dashboard,
  ];
  const checked: string[] = [];
  for (const value of new Set(modules.flatMap((module) => Object.values(module)))) {
    if (typeof value !== "function" || !(value.prototype instanceof Error)) continue;
    const ErrorClass = value as new () => Error;
    const instance = new ErrorClass();
    assert.ok(instance instanceof AgentRLError, `${ErrorClass.name} is not an AgentRLError`);
    assert.equal(instance.name, ErrorClass.name, `the name of a ${ErrorClass.name}`);
    checked.push(ErrorClass.name);
  }
  for (const expected of [
    "TokenizerError",
    "ChatTemplateError",
    "WeightsError",
    "EnvironmentError",
    "EnvironmentApiError",
    "ContainerError",
    "ContextLimitError",
    "ConfigError",
    "WarmStartError",
    "DashboardConfigError",
  ]) {
    assert.ok(
      checked.includes(expected),
      `${expected} is exported and checked (checked: ${checked.join(", ")})`,
    );
  }
});
