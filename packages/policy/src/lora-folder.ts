/**
 * LoRA folders: PEFT's adapter files on a frozen base model.
 *
 *   dir/adapter_config.json       PEFT's config: r, lora_alpha, target_modules, base_model_name_or_path
 *   dir/adapter_model.safetensors the adapters, A [r, in] and B [out, r] (absent: new adapters, B = 0)
 *   dir/tokenizer.json, ...       optional: else the base folder's
 *
 * `loadLoraFolder` (what `Policy.load` does with such a folder) loads the base once per
 * process and shares it with every policy on it; `saveAdapters` / `loadAdapters` write and
 * read the adapters of a policy (`Policy.saveAdapters`, `Policy.loadAdapters`).
 */
import * as tf from "@tensorflow/tfjs-core";
import { access, mkdir, readFile, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { z } from "zod";
import { parseHfConfig } from "./config.js";
import {
  Transformer,
  type LoraOptions,
  type LoraTarget,
  LORA_TARGETS,
  WeightsError,
} from "./model.js";
import { parseSafetensors, serializeSafetensors } from "./safetensors.js";
import { checkModelFits } from "./memory.js";
import { initBackend } from "./backend.js";
import { Tokenizer, TokenizerFileError } from "./tokenizer/index.js";
// Types only: policy.ts imports this file, and passes its Policy class in (no import circle).
import type { Policy, LoadOptions } from "./policy.js";

/** PEFT's file names: adapters saved by `saveAdapters` load with `loadAdapters` (and PEFT). */
export const ADAPTER_CONFIG_FILE = "adapter_config.json";
export const ADAPTER_WEIGHTS_FILE = "adapter_model.safetensors";

/** Whether `directory` is a LoRA folder (has PEFT's adapter_config.json). */
export async function isLoraFolder(directory: string): Promise<boolean> {
  return exists(join(directory, ADAPTER_CONFIG_FILE));
}

/**
 * Loads a LoRA folder (PEFT's adapter_config.json naming `base_model_name_or_path`, and
 * adapter_model.safetensors unless the adapters are new): the base model, loaded once per
 * process and shared (never copied) by every policy on it (the learner, the samplers, the
 * KL reference), frozen, with these adapters attached; only the adapters train. Tokenizer
 * and configs come from the base folder unless the adapter folder has its own.
 */
export async function loadLoraFolder(
  directory: string,
  options: LoadOptions,
  PolicyClass: typeof Policy,
): Promise<Policy> {
  const backend = await initBackend();
  const adapter = parseAdapterConfig(
    JSON.parse(await readFile(join(directory, ADAPTER_CONFIG_FILE), "utf8")),
    directory,
  );
  const baseDirectory = resolve(directory, adapter.base_model_name_or_path);
  const config = parseHfConfig(
    JSON.parse(await readFile(join(baseDirectory, "config.json"), "utf8")),
  );
  checkModelFits(
    config,
    backend,
    options.memoryUse ?? (options.trainable === true ? "lora" : "inference"),
    baseDirectory,
  );
  let base = sharedBases.get(baseDirectory);
  if (!base) {
    base = PolicyClass.load(baseDirectory, { trainable: false, memoryUse: "inference" });
    sharedBases.set(baseDirectory, base);
    base.catch(() => sharedBases.delete(baseDirectory));
  }
  const basePolicy = await base;
  const values = basePolicy.model.baseValues();
  let model: Transformer;
  try {
    model = new Transformer(basePolicy.config, undefined, { trainable: false, values });
  } finally {
    for (const value of values.values()) value.dispose();
  }
  let tokenizer = basePolicy.tokenizer;
  if (options.tokenizer === false) tokenizer = undefined;
  else if (await exists(join(directory, "tokenizer.json")))
    tokenizer = await Tokenizer.fromDirectory(directory);
  else if (options.tokenizer === true && !tokenizer)
    throw new TokenizerFileError(
      `no tokenizer.json in ${directory} nor in its base ${baseDirectory}`,
    );
  const policy = new PolicyClass(model, {
    tokenizer,
    generationConfig: { ...basePolicy.generationConfig },
  });
  policy.baseDirectory = baseDirectory;
  await loadAdapters(policy, directory);
  policy.version = 0;
  return policy;
}

/** Frees the base models LoRA folders loaded (shared by their policies: dispose those first). */
export async function releaseSharedBases(): Promise<void> {
  const bases = [...sharedBases.values()];
  sharedBases.clear();
  for (const base of bases) (await base.catch(() => undefined))?.dispose();
}

/** Writes the LoRA adapters in PEFT's layout (adapter_config.json, adapter_model.safetensors: A [r, in], B [out, r]). */
export async function saveAdapters(policy: Policy, directory: string): Promise<void> {
  const options = policy.model.loraOptions as Required<LoraOptions> | undefined;
  if (!options) throw new WeightsError("saveAdapters: LoRA is not enabled");
  await mkdir(directory, { recursive: true });
  const config = {
    peft_type: "LORA",
    task_type: "CAUSAL_LM",
    r: options.rank,
    lora_alpha: options.alpha,
    target_modules: options.targets,
    lora_dropout: 0,
    bias: "none",
    agentrl_seed: options.seed,
    ...(policy.baseDirectory ? { base_model_name_or_path: policy.baseDirectory } : {}),
  };
  await writeFile(join(directory, ADAPTER_CONFIG_FILE), JSON.stringify(config, null, 2) + "\n");
  const tensors = policy.model.adapterWeights().map((w) => {
    const [rows, columns] = w.shape; // internal [in, r] / [r, out] → PEFT [r, in] / [out, r]
    const data = new Float32Array(w.data.length);
    for (let i = 0; i < rows; i++)
      for (let j = 0; j < columns; j++) data[j * rows + i] = w.data[i * columns + j];
    return { name: `base_model.model.${w.name}`, shape: [columns, rows], data };
  });
  await writeFile(
    join(directory, ADAPTER_WEIGHTS_FILE),
    serializeSafetensors(tensors, {
      metadata: { format: "pt", agentrl_version: String(policy.version) },
    }),
  );
}

/**
 * Loads adapters `saveAdapters` wrote onto `policy` (attaching LoRA with their config if
 * not attached; without adapter_model.safetensors, new adapters: B = 0); bumps the version.
 */
export async function loadAdapters(policy: Policy, directory: string): Promise<void> {
  const config = parseAdapterConfig(
    JSON.parse(await readFile(join(directory, ADAPTER_CONFIG_FILE), "utf8")),
    directory,
    false,
  );
  if (!policy.model.loraEnabled)
    policy.model.enableLora({
      rank: config.r,
      alpha: config.lora_alpha,
      targets: config.target_modules as LoraTarget[],
      seed: config.agentrl_seed,
    });
  const weightsPath = join(directory, ADAPTER_WEIGHTS_FILE);
  if (await exists(weightsPath)) {
    const values = new Map<string, tf.Tensor>();
    try {
      for (const [name, weight] of parseSafetensors(
        new Uint8Array(await readFile(weightsPath)),
        weightsPath,
      )) {
        values.set(
          name.replace(/^base_model\.model\./, ""),
          tf.tidy(() => tf.transpose(tf.tensor(weight.data, weight.shape, "float32"))),
        );
      }
      policy.model.assignAdapters(values);
    } finally {
      for (const t of values.values()) t.dispose();
    }
  }
  policy.bumpVersion();
}

/** Base models of LoRA folders, by absolute folder, loaded once per process (`loadLoraFolder`). */
const sharedBases = new Map<string, Promise<Policy>>();

const AdapterConfigSchema = z
  .object({
    peft_type: z.literal("LORA").optional(),
    base_model_name_or_path: z.string().optional(),
    r: z.number().int().positive(),
    lora_alpha: z.number().positive(),
    target_modules: z
      .array(z.enum(LORA_TARGETS as unknown as [LoraTarget, ...LoraTarget[]]))
      .nonempty(),
    agentrl_seed: z.number().int().nonnegative().default(0),
  })
  .loose();

/** Parses a PEFT adapter_config.json (LoRA on our projections); `needsBase`: base_model_name_or_path required. */
function parseAdapterConfig(
  json: unknown,
  directory: string,
  needsBase = true,
): z.infer<typeof AdapterConfigSchema> & { base_model_name_or_path: string } {
  const parsed = AdapterConfigSchema.safeParse(json);
  if (!parsed.success)
    throw new WeightsError(
      `${join(directory, ADAPTER_CONFIG_FILE)}: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
    );
  if (needsBase && !parsed.data.base_model_name_or_path) {
    throw new WeightsError(
      `${join(directory, ADAPTER_CONFIG_FILE)}: base_model_name_or_path is missing (the folder of the frozen base model, absolute or relative to the adapter folder)`,
    );
  }
  return parsed.data as z.infer<typeof AdapterConfigSchema> & { base_model_name_or_path: string };
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}
