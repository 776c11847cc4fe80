/**
 * Issue 7, packaging: `npm pack` of each package gives a tarball that installs into an empty
 * folder, where the example of that package's README runs.
 *
 * 1. `npm pack --ignore-scripts` of every package (the build must have run: `npm run
 *    build`, as CI's setup.sh does; skipped with a reason otherwise). The tarballs are
 *    checked: package.json, README.md and dist/ present; every `main` / `types` / `exports`
 *    / `bin` target inside; nothing but dist/, bin/ (cli), README.md, package.json and
 *    LICENSE; no tests, no sources; every dist file compiled from a source
 *    file that still exists (a stale build would publish deleted modules); every package
 *    imported by dist/ or bin/ declared in `dependencies`.
 * 2. One `npm install` of all the tarballs into an empty folder (`{"type": "module"}`), so
 *    they resolve each other, never the registry; optional dependencies (tfjs-node) and
 *    install scripts left out. Skipped with a reason when npm can reach neither the registry
 *    nor a cache holding the dependencies.
 * 3. The README examples, run there. Convention: every fenced code block on the line right
 *    after `<!-- example: runnable -->` is a runnable example (each README has at least one).
 *    ```js blocks are plain JavaScript ESM (also valid TypeScript), written to a .mjs file
 *    and run with `node`; ```bash blocks run with `bash -e` with node_modules/.bin on the
 *    PATH. A README's blocks run in order in the same folder; each must exit 0 and print.
 * 4. The ```js examples type-check as strict TypeScript (.mts, the repository's tsc) against
 *    the declarations in the installed tarballs.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync, type SpawnSyncReturns } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { builtinModules } from "node:module";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { fileURLToPath } from "node:url";

const repositoryRoot = fileURLToPath(new URL("..", import.meta.url));
const PACKAGES = ["spec", "policy", "envs", "rollout", "trainer", "dashboard", "cli"] as const;
type PackageName = (typeof PACKAGES)[number];
/** The marker line that makes the next fenced code block of a README a runnable example. */
export const EXAMPLE_MARKER = "<!-- example: runnable -->";
/** Longest time one example may take (they are meant to take seconds). */
const EXAMPLE_TIMEOUT_MS = 120_000;

interface PackageJson {
  name: string;
  version: string;
  main?: string;
  types?: string;
  bin?: Record<string, string>;
  exports?: Record<string, Record<string, string>>;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

interface PackResult {
  filename: string;
  size: number;
  unpackedSize: number;
  files: { path: string }[];
}

/** One runnable example of a README. */
export interface ReadmeExample {
  language: "js" | "bash";
  code: string;
  /** 1-based line of the opening fence in the README. */
  line: number;
}

/**
 * The runnable examples of a README: every fenced block (```js or ```bash) that starts on
 * the line right after {@link EXAMPLE_MARKER}. Throws when a marker is not followed by one.
 */
export function readmeExamples(markdown: string): ReadmeExample[] {
  const lines = markdown.split("\n");
  const examples: ReadmeExample[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].trim() !== EXAMPLE_MARKER) continue;
    const fence = /^```(\w+)\s*$/.exec(lines[i + 1] ?? "");
    if (!fence || !["js", "javascript", "bash", "sh"].includes(fence[1])) {
      throw new Error(
        `line ${i + 1}: ${EXAMPLE_MARKER} must be followed by a \`\`\`js or \`\`\`bash block`,
      );
    }
    const end = lines.findIndex((line, j) => j > i + 1 && line.trim() === "```");
    if (end < 0) throw new Error(`line ${i + 2}: the example's code block is not closed`);
    examples.push({
      language: fence[1] === "js" || fence[1] === "javascript" ? "js" : "bash",
      code: lines.slice(i + 2, end).join("\n") + "\n",
      line: i + 2,
    });
  }
  return examples;
}

function run(
  command: string,
  args: string[],
  options: { cwd: string; timeoutMs: number; env?: NodeJS.ProcessEnv },
): SpawnSyncReturns<string> {
  return spawnSync(command, args, {
    cwd: options.cwd,
    encoding: "utf8",
    timeout: options.timeoutMs,
    env: options.env ?? process.env,
    maxBuffer: 64 * 1024 * 1024,
  });
}

/** stdout and stderr of a finished process, without npm's warnings about the user's config. */
function output(result: SpawnSyncReturns<string>): string {
  const text = `${result.stdout ?? ""}\n${result.stderr ?? ""}`;
  return text
    .split("\n")
    .filter((line) => !/^npm warn Unknown (user|env) config/.test(line))
    .join("\n")
    .trim();
}

function readPackageJson(name: PackageName): PackageJson {
  return JSON.parse(
    readFileSync(join(repositoryRoot, "packages", name, "package.json"), "utf8"),
  ) as PackageJson;
}

/** Why the test cannot run here (no build), or undefined. */
function missingBuild(): string | undefined {
  const missing = PACKAGES.filter(
    (name) => !existsSync(join(repositoryRoot, "packages", name, "dist", "index.js")),
  );
  if (!existsSync(join(repositoryRoot, "packages", "cli", "dist", "main.js"))) missing.push("cli");
  return missing.length > 0
    ? `no build of ${[...new Set(missing)].join(", ")}: run \`npm run build\` first`
    : undefined;
}

/** Package names imported (statically or dynamically) by a compiled JavaScript file. */
export function importedPackages(source: string): string[] {
  const names = new Set<string>();
  const patterns = [
    /^\s*(?:import|export)\s[^;]*?\sfrom\s*["']([^"']+)["']/gm, // import x from "a"; export * from "a"
    /^\s*import\s*["']([^"']+)["']/gm, // import "a"
    /\bimport\(\s*["']([^"']+)["']\s*\)/g, // import("a")
  ];
  for (const pattern of patterns) {
    for (const match of source.matchAll(pattern)) {
      const specifier = match[1];
      if (specifier.startsWith(".") || specifier.startsWith("/") || specifier.startsWith("node:"))
        continue;
      const name = specifier.startsWith("@")
        ? specifier.split("/").slice(0, 2).join("/")
        : specifier.split("/")[0];
      if (!builtinModules.includes(name)) names.add(name);
    }
  }
  return [...names];
}

/** The files in the package a dist file may have been compiled (or copied) from. */
function sourceCandidates(distPath: string): string[] {
  const base = distPath.replace(/^dist\//, "src/").replace(/(\.d\.ts|\.js)(\.map)?$/, "");
  return [`${base}.ts`, `${base}.js`, `${base}.mts`];
}

/** Newest modification time (ms) of the files under a folder whose name passes `keep`. */
function newestFile(folder: string, keep: (name: string) => boolean): number {
  let newest = 0;
  for (const entry of readdirSync(folder, { withFileTypes: true })) {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestFile(path, keep));
    else if (keep(entry.name)) newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest;
}

/** A hint for failure messages when a package's dist is older than its sources (the tarballs hold dist). */
function staleBuildHint(): string {
  const stale = PACKAGES.filter((name) => {
    const folder = join(repositoryRoot, "packages", name);
    const isSource = (file: string) => file.endsWith(".ts") && !file.endsWith(".test.ts");
    return (
      newestFile(join(folder, "src"), isSource) >
      newestFile(join(folder, "dist"), (file) => file.endsWith(".js"))
    );
  });
  return stale.length > 0
    ? `\n(the build of ${stale.join(", ")} is older than its sources: run \`npm run build\` and try again)`
    : "";
}

const skipReason = missingBuild();

describe(
  "npm pack: tarballs that install and run their README examples",
  { skip: skipReason },
  () => {
    const tarballs = new Map<PackageName, PackResult>();
    let workspace = ""; // a temporary folder: the tarballs, and app/ where they are installed
    let app = "";
    let installSkip: string | undefined;
    let installSeconds = 0;

    before(() => {
      workspace = mkdtempSync(join(tmpdir(), "agentrl-pack-"));
      app = join(workspace, "app");
      for (const name of PACKAGES) {
        const packed = run(
          "npm",
          ["pack", "--ignore-scripts", "--json", "--pack-destination", workspace],
          { cwd: join(repositoryRoot, "packages", name), timeoutMs: 120_000 },
        );
        assert.equal(packed.status, 0, `npm pack of ${name} failed:\n${output(packed)}`);
        const [result] = JSON.parse(
          packed.stdout.slice(packed.stdout.indexOf("[")),
        ) as PackResult[];
        tarballs.set(name, result);
      }
      mkdirSync(app);
      writeFileSync(
        join(app, "package.json"),
        JSON.stringify({ name: "agentrl-pack-test", private: true, type: "module" }, null, 2),
      );
      const began = performance.now();
      const installed = run(
        "npm",
        [
          "install",
          "--prefer-offline",
          "--no-audit",
          "--no-fund",
          "--omit=optional",
          "--ignore-scripts",
          "--fetch-retries=0",
          "--fetch-timeout=30000",
          ...PACKAGES.map((name) => join(workspace, tarballs.get(name)!.filename)),
        ],
        { cwd: app, timeoutMs: 240_000 },
      );
      installSeconds = (performance.now() - began) / 1000;
      if (installed.status !== 0) {
        const text = output(installed);
        if (
          /ENOTFOUND|EAI_AGAIN|ENETUNREACH|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOTCACHED|network/i.test(
            text,
          )
        ) {
          installSkip = `npm install needs the registry or a warm npm cache, and has neither here: ${text.split("\n").find((l) => /error/i.test(l)) ?? text.slice(0, 200)}`;
          return;
        }
        assert.fail(`npm install of the tarballs failed:\n${text}`);
      }
    });

    after(() => {
      if (workspace) rmSync(workspace, { recursive: true, force: true });
    });

    for (const name of PACKAGES) {
      test(`@agentrl/${name}: the tarball holds dist, README and package.json, and nothing else`, () => {
        const packed = tarballs.get(name)!;
        const manifest = readPackageJson(name);
        const files = packed.files.map((file) => file.path);
        const has = new Set(files);
        for (const required of ["package.json", "README.md", "dist/index.js", "dist/index.d.ts"]) {
          assert.ok(has.has(required), `${packed.filename} lacks ${required}`);
        }
        const targets = [
          manifest.main,
          manifest.types,
          ...Object.values(manifest.bin ?? {}),
          ...Object.values(manifest.exports?.["."] ?? {}),
        ]
          .filter((target): target is string => target !== undefined)
          .filter((target) => !target.startsWith("./src/")); // the `source` condition: development only
        for (const target of targets)
          assert.ok(
            has.has(target.replace(/^\.\//, "")),
            `${name}: package.json points at ${target}, which the tarball lacks`,
          );
        if (name === "cli")
          assert.ok(
            has.has("dist/main.js") && has.has("bin/agentrl.js"),
            "the cli tarball needs bin/agentrl.js and dist/main.js",
          );

        const allowed = (path: string) =>
          ["package.json", "README.md", "LICENSE"].includes(path) ||
          path.startsWith("dist/") ||
          (name === "cli" && path.startsWith("bin/")) ||
          (name === "dashboard" && path.startsWith("public/"));
        assert.deepEqual(
          files.filter((path) => !allowed(path)),
          [],
          `${name}: unexpected files in the tarball`,
        );
        assert.deepEqual(
          files.filter(
            (path) =>
              /\.test\.|\/testing\/|\.tsbuildinfo$|\.tgz$/.test(path) ||
              (path.endsWith(".ts") && !path.endsWith(".d.ts")),
          ),
          [],
          `${name}: tests, test fixtures, sources or build info in the tarball`,
        );
        const packageFolder = join(repositoryRoot, "packages", name);
        const stale = files.filter(
          (path) =>
            path.startsWith("dist/") &&
            !sourceCandidates(path).some((source) => existsSync(join(packageFolder, source))),
        );
        assert.deepEqual(
          stale,
          [],
          `${name}: dist files whose source no longer exists (a stale build; rebuild after deleting them)`,
        );
        assert.ok(
          packed.unpackedSize < 5_000_000,
          `${name}: ${packed.unpackedSize} bytes unpacked`,
        );
      });

      test(`@agentrl/${name}: every package that dist/ imports is a declared dependency`, () => {
        const manifest = readPackageJson(name);
        const declared = new Set(
          Object.keys({
            ...manifest.dependencies,
            ...manifest.optionalDependencies,
            ...manifest.peerDependencies,
          }),
        );
        const undeclared: string[] = [];
        for (const file of tarballs
          .get(name)!
          .files.map((f) => f.path)
          .filter((path) => path.endsWith(".js"))) {
          const source = readFileSync(join(repositoryRoot, "packages", name, file), "utf8");
          for (const imported of importedPackages(source)) {
            if (imported !== manifest.name && !declared.has(imported))
              undeclared.push(`${imported} (${file})`);
          }
        }
        assert.deepEqual(
          undeclared,
          [],
          `${name}: imports missing from package.json "dependencies"`,
        );
      });
    }

    test("the tarballs install into an empty folder and resolve each other", (t) => {
      if (installSkip) return t.skip(installSkip);
      t.diagnostic(`npm install: ${installSeconds.toFixed(1)} s`);
      for (const name of PACKAGES) {
        const installed = JSON.parse(
          readFileSync(join(app, "node_modules", "@agentrl", name, "package.json"), "utf8"),
        ) as PackageJson;
        assert.equal(installed.name, `@agentrl/${name}`);
        // One copy of each: a nested @agentrl/* would mean npm went to the registry for it.
        assert.ok(
          !existsSync(join(app, "node_modules", "@agentrl", name, "node_modules", "@agentrl")),
          `${name} has its own copy of an @agentrl package`,
        );
      }
      assert.ok(
        existsSync(join(app, "node_modules", ".bin", "agentrl")),
        "the agentrl binary is linked",
      );
    });

    for (const name of PACKAGES) {
      test(`@agentrl/${name}: the README's examples run from the installed tarball`, (t) => {
        if (installSkip) return t.skip(installSkip);
        const readme = readFileSync(join(repositoryRoot, "packages", name, "README.md"), "utf8");
        const examples = readmeExamples(readme);
        assert.ok(
          examples.length > 0,
          `packages/${name}/README.md has no runnable example (a \`\`\`js or \`\`\`bash block on the line after ${EXAMPLE_MARKER})`,
        );
        // TMPDIR inside the workspace: what the examples put in tmpdir() goes with it.
        const temporary = join(workspace, "tmp");
        mkdirSync(temporary, { recursive: true });
        const env = {
          ...process.env,
          PATH: `${join(app, "node_modules", ".bin")}${delimiter}${process.env.PATH}`,
          NODE_OPTIONS: "",
          TMPDIR: temporary,
        };
        examples.forEach((example, i) => {
          const file = join(
            app,
            `${name}-example-${i + 1}.${example.language === "js" ? "mjs" : "sh"}`,
          );
          writeFileSync(file, example.code);
          const began = performance.now();
          const result =
            example.language === "js"
              ? run(process.execPath, [file], { cwd: app, timeoutMs: EXAMPLE_TIMEOUT_MS, env })
              : run("bash", ["-e", "-o", "pipefail", file], {
                  cwd: app,
                  timeoutMs: EXAMPLE_TIMEOUT_MS,
                  env,
                });
          const where = `packages/${name}/README.md line ${example.line}`;
          assert.equal(result.error, undefined, `${where}: ${result.error?.message}`);
          assert.equal(
            result.status,
            0,
            `${where} exited with ${result.status}:\n${output(result)}${staleBuildHint()}`,
          );
          assert.ok(result.stdout.trim().length > 0, `${where} printed nothing`);
          t.diagnostic(
            `${where}: ${((performance.now() - began) / 1000).toFixed(1)} s, last line: ${result.stdout.trim().split("\n").at(-1)}`,
          );
        });
      });
    }

    test("the README's JavaScript examples are strict TypeScript too, against the tarballs' declarations", (t) => {
      if (installSkip) return t.skip(installSkip);
      const typescript = join(repositoryRoot, "node_modules", "typescript", "bin", "tsc");
      if (!existsSync(typescript)) return t.skip("no typescript in the repository's node_modules");
      const files: string[] = [];
      for (const name of PACKAGES) {
        const examples = readmeExamples(
          readFileSync(join(repositoryRoot, "packages", name, "README.md"), "utf8"),
        );
        examples.forEach((example, i) => {
          if (example.language !== "js") return;
          const file = join(app, `${name}-example-${i + 1}.mts`);
          writeFileSync(file, example.code);
          files.push(file);
        });
      }
      assert.ok(files.length >= PACKAGES.length, `${files.length} JavaScript examples`);
      // skipLibCheck as most projects set it: tfjs-core's own declarations need the DOM library.
      const checked = run(
        process.execPath,
        [
          typescript,
          "--noEmit",
          "--strict",
          "--skipLibCheck",
          "--target",
          "es2022",
          "--lib",
          "es2023",
          "--module",
          "nodenext",
          "--moduleResolution",
          "nodenext",
          "--types",
          "node",
          "--typeRoots",
          join(repositoryRoot, "node_modules", "@types"),
          ...files,
        ],
        { cwd: app, timeoutMs: 120_000 },
      );
      assert.equal(
        checked.status,
        0,
        `tsc found errors in the README examples:\n${output(checked)}${staleBuildHint()}`,
      );
    });
  },
);

describe("readmeExamples", () => {
  test("takes the blocks right after the marker, in order, and rejects a marker without one", () => {
    const markdown = [
      "# x",
      "```js",
      "not me",
      "```",
      EXAMPLE_MARKER,
      "```js",
      "console.log(1);",
      "```",
      "text",
      EXAMPLE_MARKER,
      "```bash",
      "echo 2",
      "```",
    ].join("\n");
    assert.deepEqual(readmeExamples(markdown), [
      { language: "js", code: "console.log(1);\n", line: 6 },
      { language: "bash", code: "echo 2\n", line: 11 },
    ]);
    assert.throws(
      () => readmeExamples(`${EXAMPLE_MARKER}\n\n\`\`\`js\nx\n\`\`\``),
      /must be followed by/,
    );
    assert.throws(
      () => readmeExamples(`${EXAMPLE_MARKER}\n\`\`\`ts\nx\n\`\`\``),
      /must be followed by/,
    );
  });

  test("importedPackages finds static, re-exported and dynamic imports of packages only", () => {
    const source = [
      'import * as tf from "@tensorflow/tfjs-core";',
      'import { z } from "zod";',
      'export * from "./types.js";',
      'export { a } from "@agentrl/policy/extra";',
      'import "./vendor/x.js";',
      'import { readFile } from "node:fs/promises";',
      'import { join } from "path";',
      'const m = await import("mysql2/promise");',
      'const text = "import nothing from here";',
    ].join("\n");
    assert.deepEqual(importedPackages(source).sort(), [
      "@agentrl/policy",
      "@tensorflow/tfjs-core",
      "mysql2",
      "zod",
    ]);
  });
});
