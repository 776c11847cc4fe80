/**
 * Where the AgentBench task data (OS and DB) lives. The project keeps no copy of it: it comes
 * from the public THUDM/AgentBench repository (Apache-2.0) and is expected in
 * `../shared/data/agentbench` beside the repository, or wherever `--data DIR` points.
 */
import { AgentRLError } from "@agentrl/spec";
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export class TaskDataError extends AgentRLError {}

const WHERE_FROM =
  "The OS and DB task data come from the public THUDM/AgentBench repository (data/os_interaction, data/dbbench); " +
  "put them in ../shared/data/agentbench beside the repository or pass --data DIR.";

/** Candidate default folders: relative to the working directory and to the repository root. */
function defaultCandidates(): string[] {
  const candidates = [
    resolve(process.cwd(), "../shared/data/agentbench"),
    resolve(process.cwd(), "shared/data/agentbench"),
  ];
  let folder = dirname(fileURLToPath(import.meta.url));
  for (let depth = 0; depth < 6; depth += 1) {
    if (existsSync(join(folder, "packages")) && existsSync(join(folder, "package.json"))) {
      candidates.push(resolve(folder, "../shared/data/agentbench"));
      break;
    }
    folder = dirname(folder);
  }
  return candidates;
}

/**
 * The AgentBench data folder that holds `sub` (e.g. `os_interaction`): `dataDir` when given,
 * else the first default that exists. Throws `TaskDataError` saying where the data comes from.
 */
export function resolveAgentBenchDir(sub: string, dataDir?: string): string {
  const candidates = dataDir ? [resolve(dataDir)] : defaultCandidates();
  for (const candidate of candidates) {
    if (existsSync(join(candidate, sub))) return join(candidate, sub);
    if (dataDir && existsSync(candidate) && candidate.endsWith(sub)) return candidate;
  }
  throw new TaskDataError(`no AgentBench ${sub} data in ${candidates.join(" or ")}. ${WHERE_FROM}`);
}

/** Whether the default AgentBench data folder (with `sub`) exists: for tests that skip without it. */
export function hasAgentBenchData(sub: string, dataDir?: string): boolean {
  try {
    resolveAgentBenchDir(sub, dataDir);
    return true;
  } catch {
    return false;
  }
}
