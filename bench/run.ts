/**
 * Runs benchmarks and writes their figures to docs/benchmarks.md.
 *   npm run bench                 all of them
 *   npm run bench -- policy envs  only these
 * Each benchmark is a file `bench/<name>.ts` exporting `run(): Promise<BenchResult>`;
 * its section in docs/benchmarks.md is replaced, the others kept.
 */
import { readFileSync, writeFileSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { BenchResult } from "./types.js";

const here = dirname(fileURLToPath(import.meta.url));
/** Benchmark name → the files that make its section, in order. */
const BENCHMARKS: Record<string, string[]> = {
  policy: ["policy"],
  envs: ["envs", "envs-docker"],
  rollout: ["rollout"],
  pipeline: ["pipeline"],
  malformed: ["malformed"],
  faults: ["faults"],
  // rollout tokens/s over 1 and 2 inference servers (scale-servers), the 10,000-session controller (scale-controller), the simulated scale-out model (scale-model)
  scale: ["scale-servers", "scale-controller", "scale-model"],
  sft: ["sft"],
  copy: ["copy"],
  // random folders of Qwen2.5-0.5B's and SmolLM2-135M's exact shapes served: load, peak RSS, prefill/decode tokens/s
  models: ["models"],
};

const requested = process.argv.slice(2).filter((a) => !a.startsWith("-"));
const names = requested.length ? requested : Object.keys(BENCHMARKS);
for (const name of names) {
  if (!BENCHMARKS[name]) {
    console.error(`unknown benchmark "${name}"; known: ${Object.keys(BENCHMARKS).join(", ")}`);
    process.exit(2);
  }
}

const docPath = join(here, "..", "docs", "benchmarks.md");
const header =
  "# Benchmarks\n\nWritten by `npm run bench`; each section is replaced when its benchmark runs again.\nMachine: 2 CPU cores, no GPU (see `shared/design/tfjs-on-this-machine.md`).\n";

function replaceSection(text: string, name: string, body: string): string {
  const start = `<!-- bench:${name} -->`;
  const end = `<!-- /bench:${name} -->`;
  const block = `${start}\n${body.trim()}\n${end}`;
  const i = text.indexOf(start);
  const j = text.indexOf(end);
  if (i >= 0 && j > i) return text.slice(0, i) + block + text.slice(j + end.length);
  return `${text.trimEnd()}\n\n${block}\n`;
}

let failed = false;
for (const name of names) {
  const parts: string[] = [];
  for (const file of BENCHMARKS[name]) {
    const path = join(here, `${file}.ts`);
    if (!existsSync(path)) {
      console.log(`[bench] ${file}: not written yet, skipped`);
      continue;
    }
    console.log(`[bench] ${file} ...`);
    try {
      const module = (await import(path)) as { run: () => Promise<BenchResult> };
      const result = await module.run();
      console.log(result.markdown);
      parts.push(result.markdown);
    } catch (error) {
      failed = true;
      console.error(`[bench] ${file} failed: ${(error as Error).stack ?? error}`);
    }
  }
  if (parts.length) {
    const stamp = `_Measured ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC, node ${process.version}._`;
    // Read the file again right before writing: another benchmark may have written its section meanwhile.
    const doc = existsSync(docPath) ? readFileSync(docPath, "utf8") : header;
    writeFileSync(
      docPath,
      replaceSection(doc, name, `## ${name}\n\n${stamp}\n\n${parts.join("\n\n")}`),
    );
    console.log(`[bench] wrote the ${name} section of ${docPath}`);
  }
}
process.exit(failed ? 1 : 0);
