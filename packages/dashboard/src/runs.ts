/**
 * Reading run folders: which folders are runs, their config, status, step and ETA, their
 * metrics lines, trajectory records and evaluation tables. Everything is read from the files
 * the trainer writes (metrics.jsonl, config.yaml, trajectories.jsonl, results.json), so the
 * dashboard works on live runs, finished runs and runs copied from elsewhere alike.
 */
import { existsSync, readdirSync, statSync } from "node:fs";
import { open, readFile } from "node:fs/promises";
import { basename, join, relative, sep } from "node:path";
import { parse as parseYaml } from "yaml";

export const METRICS_FILE = "metrics.jsonl";
export const TRAJECTORY_FILES = ["trajectories.1.jsonl", "trajectories.jsonl"];
/** A run whose metrics did not change for this long is no longer `running`. */
export const LIVE_WINDOW_MS = 120_000;

export type MetricsLine = { step: number; time?: string; version?: number } & Record<
  string,
  number | string | undefined
>;

export interface RunSummary {
  /** Path relative to the runs folder ("." when the folder itself is the run). */
  name: string;
  status: "running" | "finished" | "stopped" | "empty";
  step: number;
  totalSteps?: number;
  /** Seconds left at the recent pace, while running. */
  etaSeconds?: number;
  lastUpdate?: string;
  tasks: string[];
  hasTrajectories: boolean;
  hasResults: boolean;
}

function isRun(folder: string): boolean {
  return [METRICS_FILE, "config.yaml", ...TRAJECTORY_FILES].some((file) =>
    existsSync(join(folder, file)),
  );
}

/** Run folders under `root`: `root` itself if it is one, else its sub-folders up to two levels deep. */
export function findRuns(root: string): string[] {
  if (isRun(root)) return [root];
  const out: string[] = [];
  const visit = (folder: string, depth: number) => {
    let names: string[];
    try {
      names = readdirSync(folder).sort();
    } catch {
      return;
    }
    for (const name of names) {
      if (name.startsWith(".") || name === "node_modules" || name === "checkpoints") continue;
      const path = join(folder, name);
      try {
        if (!statSync(path).isDirectory()) continue;
      } catch {
        continue;
      }
      if (isRun(path)) out.push(path);
      else if (depth < 2) visit(path, depth + 1);
    }
  };
  visit(root, 1);
  return out;
}

/** Resolves a run name from the page to its folder, refusing anything outside `root`. */
export function runFolder(root: string, name: string): string | undefined {
  return findRuns(root).find((folder) => runName(root, folder) === name);
}

export function runName(root: string, folder: string): string {
  return relative(root, folder).split(sep).join("/") || ".";
}

/** Parses JSON lines, skipping a torn last line (the writer may be mid-append). */
export function parseJsonLines<T>(text: string): T[] {
  const out: T[] = [];
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    try {
      out.push(JSON.parse(line) as T);
    } catch {
      // a line being written
    }
  }
  return out;
}

export async function readMetrics(folder: string): Promise<MetricsLine[]> {
  const file = join(folder, METRICS_FILE);
  return existsSync(file) ? parseJsonLines<MetricsLine>(await readFile(file, "utf8")) : [];
}

export async function readConfig(
  folder: string,
): Promise<{ text: string; parsed: Record<string, unknown> } | undefined> {
  const file = join(folder, "config.yaml");
  if (!existsSync(file)) return undefined;
  const text = await readFile(file, "utf8");
  try {
    return { text, parsed: (parseYaml(text) ?? {}) as Record<string, unknown> };
  } catch {
    return { text, parsed: {} };
  }
}

/** Status, step, ETA of one run. */
export async function summarizeRun(
  root: string,
  folder: string,
  now = Date.now(),
): Promise<RunSummary> {
  const metrics = await readMetrics(folder);
  const config = await readConfig(folder);
  const rl = (config?.parsed.rl ?? {}) as { steps?: number };
  const totalSteps = typeof rl.steps === "number" ? rl.steps : undefined;
  const last = metrics.at(-1);
  const step = last?.step ?? 0;
  const hasResults = existsSync(join(folder, "results.json"));
  const metricsFile = join(folder, METRICS_FILE);
  const modified = existsSync(metricsFile) ? statSync(metricsFile).mtimeMs : undefined;
  let status: RunSummary["status"] = "empty";
  if (hasResults || (totalSteps !== undefined && step >= totalSteps)) status = "finished";
  else if (modified !== undefined && now - modified < LIVE_WINDOW_MS) status = "running";
  else if (metrics.length) status = "stopped";
  let etaSeconds: number | undefined;
  if (status === "running" && totalSteps !== undefined && metrics.length >= 2) {
    const recent = metrics
      .slice(-10)
      .map((line) => Number(line["time/step"]))
      .filter(Number.isFinite);
    const perStep = recent.reduce((a, b) => a + b, 0) / Math.max(1, recent.length);
    etaSeconds = Math.max(0, (totalSteps - step) * perStep);
  }
  const tasks = new Set<string>();
  for (const line of metrics)
    for (const key of Object.keys(line))
      if (key.startsWith("success/")) tasks.add(key.slice("success/".length));
  return {
    name: runName(root, folder),
    status,
    step,
    ...(totalSteps !== undefined ? { totalSteps } : {}),
    ...(etaSeconds !== undefined ? { etaSeconds } : {}),
    ...(last?.time
      ? { lastUpdate: String(last.time) }
      : modified
        ? { lastUpdate: new Date(modified).toISOString() }
        : {}),
    tasks: [...tasks].sort(),
    hasTrajectories: TRAJECTORY_FILES.some((file) => existsSync(join(folder, file))),
    hasResults,
  };
}

/** A step's recorded episodes, as the trainer wrote them (see trainer/src/rl/trajectory-log.ts). */
export interface TrajectoryStep {
  step: number;
  time: string;
  batchGroups: number;
  batchEpisodes: number;
  episodes: Record<string, unknown>[];
}

/** Every recorded step of the run, oldest first (the rotated file, then the current one). */
export async function readTrajectorySteps(folder: string): Promise<TrajectoryStep[]> {
  const steps: TrajectoryStep[] = [];
  for (const file of TRAJECTORY_FILES) {
    const path = join(folder, file);
    if (existsSync(path))
      steps.push(...parseJsonLines<TrajectoryStep>(await readFile(path, "utf8")));
  }
  return steps;
}

/** The run's before/after tables (results.json) and cached evaluations (evaluations/*.json). */
export async function readEvaluations(
  folder: string,
): Promise<{ results?: unknown; cached: Record<string, unknown> }> {
  const results = join(folder, "results.json");
  const cached: Record<string, unknown> = {};
  const directory = join(folder, "evaluations");
  if (existsSync(directory)) {
    for (const name of readdirSync(directory)
      .filter((n) => n.endsWith(".json"))
      .sort()) {
      try {
        cached[basename(name, ".json")] = JSON.parse(await readFile(join(directory, name), "utf8"));
      } catch {
        // a file being written
      }
    }
  }
  return {
    ...(existsSync(results)
      ? { results: JSON.parse(await readFile(results, "utf8")) as unknown }
      : {}),
    cached,
  };
}

/**
 * Follows a growing file: each `poll` returns the complete lines appended since the last
 * one (a torn last line waits for its newline). A file that shrank (rotated, rewritten)
 * is read again from the start.
 */
export class FileFollower {
  private offset = 0;
  private rest = "";

  constructor(readonly path: string) {}

  async poll(): Promise<string[]> {
    if (!existsSync(this.path)) return [];
    const size = statSync(this.path).size;
    if (size < this.offset) {
      this.offset = 0;
      this.rest = "";
    }
    if (size === this.offset) return [];
    const handle = await open(this.path, "r");
    try {
      const buffer = Buffer.alloc(size - this.offset);
      await handle.read(buffer, 0, buffer.length, this.offset);
      this.offset = size;
      const text = this.rest + buffer.toString("utf8");
      const cut = text.lastIndexOf("\n");
      this.rest = text.slice(cut + 1);
      return cut < 0
        ? []
        : text
            .slice(0, cut)
            .split("\n")
            .filter((line) => line.trim());
    } finally {
      await handle.close();
    }
  }
}
