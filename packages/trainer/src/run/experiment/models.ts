/** Phase 3: the starting model (given, or a fresh one made once in the run folder). */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { readFile } from "node:fs/promises";
import { PRESET_VOCAB_SIZES } from "@agentrl/policy";
import type { Printer } from "./options.js";
import { ConfigError, type TrainConfig } from "../config.js";
import { isCompleteModelFolder, writeModelFolder } from "../../rl/checkpoint.js";
import { initWarmStartModel } from "../warmstart/index.js";

export function hasModel(directory: string | undefined): directory is string {
  return directory !== undefined && existsSync(join(directory, "config.json"));
}

/** The starting model: `model.directory`, else a fresh `model.preset` model in `<run>/initial-model` (made once). */
export async function startingModel(config: TrainConfig, print: Printer): Promise<string> {
  if (config.model.directory) {
    if (!hasModel(config.model.directory))
      throw new ConfigError(`model.directory: no config.json in ${config.model.directory}`);
    return config.model.directory;
  }
  const directory = join(config.run.directory, "initial-model");
  // The run's own model folders are written atomically and accepted only when complete.
  if (isCompleteModelFolder(directory)) return directory;
  const architecture = {
    preset: config.model.preset,
    overrides: config.model.architecture ?? {},
    vocabSize: config.model.vocabSize ?? PRESET_VOCAB_SIZES[config.model.preset],
    chatTemplate: config.model.chatTemplate,
  };
  await writeModelFolder(directory, (folder) =>
    initWarmStartModel(folder, architecture, {
      seed: config.run.seed,
      worldSeed: config.run.worldSeed,
      log: () => {},
    }),
  );
  const written = JSON.parse(await readFile(join(directory, "config.json"), "utf8")) as {
    hidden_size: number;
    num_hidden_layers: number;
    vocab_size: number;
  };
  print(
    `fresh ${config.model.preset} model (hidden ${written.hidden_size}, ${written.num_hidden_layers} layers, ${written.vocab_size} tokens) → ${directory}`,
  );
  return directory;
}

/** The model's longest sequence (`max_position_embeddings` of config.json). */
export async function maxPositions(directory: string): Promise<number> {
  const raw = JSON.parse(await readFile(join(directory, "config.json"), "utf8")) as {
    max_position_embeddings?: number;
  };
  return raw.max_position_embeddings ?? Number.MAX_SAFE_INTEGER;
}
