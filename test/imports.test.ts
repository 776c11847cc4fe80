/**
 * The layout's two rules, read from the sources: packages depend one way (policy and envs on
 * nothing of ours but spec; rollout on policy and envs; trainer below the CLI; the CLI on top),
 * and no module imports itself back through a circle of relative imports.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** Package → the packages of ours it may import. */
const ALLOWED: Record<string, string[]> = {
  spec: [],
  policy: ["spec"],
  envs: ["spec"],
  rollout: ["spec", "policy", "envs"],
  trainer: ["spec", "policy", "envs", "rollout"],
  dashboard: ["spec", "policy", "envs", "rollout", "trainer"],
  cli: ["spec", "policy", "envs", "rollout", "trainer", "dashboard"],
};

function sources(folder: string, out: string[] = []): string[] {
  for (const name of readdirSync(folder)) {
    const path = join(folder, name);
    if (statSync(path).isDirectory()) {
      if (name !== "node_modules" && name !== "dist") sources(path, out);
    } else if (name.endsWith(".ts") && !name.endsWith(".test.ts") && !name.endsWith(".d.ts"))
      out.push(path);
  }
  return out;
}

/** Module specifiers of a file's static imports and re-exports (type-only ones included: they tie the layers too). */
/** The modules `file` imports; `runTimeOnly` leaves out `import type` / `export type` (erased by tsc). */
function specifiers(file: string, runTimeOnly = false): string[] {
  const text = readFileSync(file, "utf8");
  const found: string[] = [];
  for (const match of text.matchAll(
    /^\s*(?:import|export)\b[^'"`;]*?\bfrom\s*["']([^"']+)["']|^\s*import\s*["']([^"']+)["']/gm,
  )) {
    if (runTimeOnly && /^\s*(?:import|export)\s+type\b/.test(match[0])) continue;
    found.push(match[1] ?? match[2]);
  }
  return found;
}

const packages = readdirSync(join(ROOT, "packages")).filter((name) =>
  existsSync(join(ROOT, "packages", name, "src")),
);

test("packages import one way: each only the packages below it", () => {
  assert.ok(
    packages.includes("policy") && packages.includes("cli"),
    `packages found: ${packages.join(", ")}`,
  );
  const wrong: string[] = [];
  for (const name of packages) {
    assert.ok(
      ALLOWED[name],
      `package ${name} has no place in the layering (add it to ALLOWED with the packages it may use)`,
    );
    for (const file of sources(join(ROOT, "packages", name, "src"))) {
      for (const specifier of specifiers(file)) {
        const used = /^@agentrl\/([^/]+)/.exec(specifier)?.[1];
        if (used && used !== name && !ALLOWED[name].includes(used))
          wrong.push(`${relative(ROOT, file)} imports @agentrl/${used}`);
        if (
          specifier.startsWith(".") &&
          !resolve(dirname(file), specifier).startsWith(join(ROOT, "packages", name))
        )
          wrong.push(`${relative(ROOT, file)} reaches outside its package: ${specifier}`);
      }
    }
  }
  assert.deepEqual(wrong, []);
});

// A circle of run-time imports makes a module's top level run before its dependency's (ESM
// evaluation order); type-only imports are erased by tsc, so they cannot close one.
test("no circle of run-time relative imports inside a package", () => {
  const graph = new Map<string, string[]>();
  for (const name of packages) {
    for (const file of sources(join(ROOT, "packages", name, "src"))) {
      const targets = specifiers(file, true)
        .filter((specifier) => specifier.startsWith("."))
        .map((specifier) => resolve(dirname(file), specifier).replace(/\.js$/, ".ts"))
        .filter((target) => existsSync(target));
      graph.set(file, targets);
    }
  }
  assert.ok(graph.size > 50, `${graph.size} modules read`);
  // Depth-first search; a grey module met again closes a circle.
  const state = new Map<string, "grey" | "black">();
  const circles: string[] = [];
  const stack: string[] = [];
  const visit = (file: string): void => {
    state.set(file, "grey");
    stack.push(file);
    for (const target of graph.get(file) ?? []) {
      if (state.get(target) === "grey")
        circles.push(
          [...stack.slice(stack.indexOf(target)), target].map((f) => relative(ROOT, f)).join(" → "),
        );
      else if (!state.has(target)) visit(target);
    }
    stack.pop();
    state.set(file, "black");
  };
  for (const file of graph.keys()) if (!state.has(file)) visit(file);
  assert.deepEqual(circles, []);
});

test("the trainer's RL core (src/rl/) never imports the product around it (src/run/)", () => {
  const rl = join(ROOT, "packages", "trainer", "src", "rl");
  const run = join(ROOT, "packages", "trainer", "src", "run");
  const files = sources(rl);
  assert.ok(files.length > 10, `${files.length} rl/ modules read`);
  const wrong = files.flatMap((file) =>
    specifiers(file)
      .filter(
        (specifier) =>
          specifier.startsWith(".") && resolve(dirname(file), specifier).startsWith(run + "/"),
      )
      .map((specifier) => `${relative(ROOT, file)} imports ${specifier}`),
  );
  assert.deepEqual(wrong, []);
});
