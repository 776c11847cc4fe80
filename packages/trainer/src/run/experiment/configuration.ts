/** Phase 1: the configuration of a run (file, overrides, flags). */
import { existsSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { initBackend } from "@agentrl/policy";
import { configToYaml, loadConfig, type TrainConfig } from "../config.js";
import type { Printer } from "./options.js";
import { setAsideEarlierRun } from "./results.js";

// ── 1. configuration ────────────────────────────────────────────────────────

export interface ResolveConfigOptions {
  /** YAML configuration file. Default: none (the embedded default run). */
  config?: string;
  /** `key=value` overrides applied after the file. */
  set?: string[];
  /** Continue from the newest checkpoint of the run folder. Default false. */
  resume?: boolean;
  /** Run folder (overrides `run.directory`). */
  runDirectory?: string;
}

/** The configuration of a run: the file (or, when resuming, the run's own config.yaml), the overrides, then the flags. */
export async function resolveTrainConfig(options: ResolveConfigOptions): Promise<TrainConfig> {
  let file = options.config;
  if (
    !file &&
    options.resume &&
    options.runDirectory &&
    existsSync(join(options.runDirectory, "config.yaml"))
  )
    file = join(options.runDirectory, "config.yaml");
  const config = await loadConfig({ file, set: options.set });
  if (options.runDirectory) config.run.directory = options.runDirectory;
  if (options.resume) config.run.resume = true;
  return config;
}

/**
 * The run folder made ready: the backend chosen, an earlier run's outputs set aside (unless
 * resuming), the resolved configuration written as config.yaml.
 */
export async function prepareRunFolder(config: TrainConfig, print: Printer): Promise<void> {
  const runDirectory = config.run.directory;
  if (config.model.backend !== "auto") process.env.AGENTRL_BACKEND = config.model.backend;
  await initBackend();
  await mkdir(runDirectory, { recursive: true });
  const setAside = config.run.resume ? [] : await setAsideEarlierRun(runDirectory);
  await writeFile(join(runDirectory, "config.yaml"), configToYaml(config));
  print(`run folder: ${resolve(runDirectory)}${config.run.resume ? " (resuming)" : ""}`);
  if (setAside.length > 0)
    print(
      `run folder held an earlier run: moved its ${setAside.join(", ")} to ${join(runDirectory, "previous")} (continue a run with --resume)`,
    );
}
