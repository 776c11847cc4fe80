/**
 * `agentrl bench [policy|rollout|pipeline|envs ...]`: runs the project's benchmarks (the
 * `bench/` folder of a source checkout, the same as `npm run bench`), prints their figures
 * and writes them to `docs/benchmarks.md`.
 */
import { AgentRLError } from "@agentrl/spec";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Command } from "commander";

/** The benchmarks `bench/run.ts` knows. */
export const BENCHMARK_NAMES = ["policy", "rollout", "pipeline", "envs"] as const;

export class BenchmarksNotFoundError extends AgentRLError {}
/** `agentrl bench NAME` with a name no benchmark has. */
export class UnknownBenchmarkError extends AgentRLError {}

/** The source checkout holding `bench/run.ts`, searched upwards from `start`; undefined when there is none. */
export function findBenchmarkRoot(
  start: string = dirname(fileURLToPath(import.meta.url)),
): string | undefined {
  for (let directory = start; ; directory = dirname(directory)) {
    if (existsSync(join(directory, "bench", "run.ts")) && existsSync(join(directory, "packages")))
      return directory;
    if (dirname(directory) === directory) return undefined;
  }
}

/**
 * Runs the named benchmarks (all when none) in a child process from the checkout at `root`
 * (default: the one this file is in; null: none); resolves with the child's exit code.
 */
export async function runBenchmarks(
  names: readonly string[],
  root: string | null = findBenchmarkRoot() ?? null,
): Promise<number> {
  const unknown = names.filter((name) => !(BENCHMARK_NAMES as readonly string[]).includes(name));
  if (unknown.length)
    throw new UnknownBenchmarkError(
      `unknown benchmark ${unknown.map((name) => `"${name}"`).join(", ")}; known: ${BENCHMARK_NAMES.join(", ")}`,
    );
  if (!root) {
    throw new BenchmarksNotFoundError(
      "the benchmarks ship with the source repository (bench/run.ts), not with the npm package: run `agentrl bench` from a clone of the agentrl repository",
    );
  }
  const child = spawn(
    process.execPath,
    ["--conditions=source", "--import", "tsx", join(root, "bench", "run.ts"), ...names],
    { cwd: root, stdio: "inherit" },
  );
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("exit", (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

export function registerBenchCommand(program: Command): void {
  program
    .command("bench")
    .description(
      `run the project's benchmarks (${BENCHMARK_NAMES.join(", ")}; all when none is named), print their figures and write them to docs/benchmarks.md`,
    )
    .argument("[names...]", `benchmarks to run: ${BENCHMARK_NAMES.join(", ")}`)
    .addHelpText(
      "after",
      [
        "",
        "Run from a clone of the repository (the benchmarks are not in the npm package). Measure on a quiet machine:",
        "the async pipeline needs both cores.",
        "",
        "Examples:",
        "  agentrl bench                       # all of them (~15 min on 2 cores)",
        "  agentrl bench policy                # matmul GFLOP/s, prefill, decode at batch 1 and 32, training",
        "  AGENTRL_BENCH_BATCHES=2x4 agentrl bench pipeline",
      ].join("\n"),
    )
    .action(async (names: string[]) => {
      const code = await runBenchmarks(names);
      if (code !== 0) process.exitCode = code;
    });
}
