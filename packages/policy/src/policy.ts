/**
 * `Policy`: a model plus its tokenizer and generation config, loaded from and saved to a
 * Hugging Face directory, with an integer `version` that every weight update bumps.
 *
 *   dir/config.json, generation_config.json, model.safetensors (or shards + index),
 *   tokenizer.json, tokenizer_config.json
 *
 * A LoRA folder (PEFT's adapter files on a frozen base shared by every policy on it) loads
 * and saves through lora-folder.ts.
 */
import * as tf from "@tensorflow/tfjs-core";
import { readFile, writeFile, mkdir, access } from "node:fs/promises";
import { join } from "node:path";
import { type ModelConfig, parseHfConfig, toHfConfig } from "./config.js";
import { Transformer, type NamedWeight, type LoraOptions, WeightsError } from "./model.js";
import {
  SafetensorsReader,
  writeSafetensorsDirectory,
  type SafetensorsDtype,
} from "./safetensors.js";
import { checkModelFits, type MemoryUse } from "./memory.js";
import { generate, type GenerateOptions, type GenerationResult } from "./generate.js";
import {
  AdamW,
  trainStep,
  type AdamWOptions,
  type TrainStepOptions,
  type TrainStepResult,
} from "./train.js";
import { initBackend } from "./backend.js";
import { Tokenizer, TokenizerFileError } from "./tokenizer/index.js";
import {
  isLoraFolder,
  loadAdapters,
  loadLoraFolder,
  releaseSharedBases,
  saveAdapters,
} from "./lora-folder.js";

export { ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE } from "./lora-folder.js";

/** The tokenizer a policy carries (see ./tokenizer). */
export type PolicyTokenizer = Tokenizer;

/** HF generation_config.json fields we use (others are kept as they are). */
export interface PolicyGenerationConfig {
  temperature?: number;
  top_p?: number;
  top_k?: number;
  max_new_tokens?: number;
  do_sample?: boolean;
  bos_token_id?: number;
  eos_token_id?: number | number[];
  pad_token_id?: number;
  [key: string]: unknown;
}

/** Weights as flat buffers, to move between worker threads or to disk. HF names and layout. */
export interface ExportedWeights {
  version: number;
  /** Every weight (HF layout); empty when only LoRA adapters changed (`lora`). */
  tensors: NamedWeight[];
  /** With LoRA: the adapters only (the frozen base is the same on both sides), and how they were attached. */
  lora?: { options: LoraOptions; adapters: NamedWeight[] };
}

/** A cheap in-process copy of the weights (shares storage until the live weights change). */
export class PolicySnapshot {
  private disposed = false;
  constructor(
    readonly version: number,
    /** @internal raw variable values (internal layout); with `lora`, the frozen base (shared storage) */ readonly values: Map<
      string,
      tf.Tensor
    >,
    /** @internal LoRA adapters' values and options, when the policy has adapters */ readonly lora?: {
      options: LoraOptions;
      adapters: Map<string, tf.Tensor>;
    },
  ) {}
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const t of this.values.values()) t.dispose();
    for (const t of this.lora?.adapters.values() ?? []) t.dispose();
  }
  get isDisposed(): boolean {
    return this.disposed;
  }
}

export interface LoadOptions {
  /** Variables take part in gradients; default true. */
  trainable?: boolean;
  /** Load the tokenizer too (needs tokenizer.json); default true when the file exists. */
  tokenizer?: boolean;
  /**
   * What the model must fit the backend's memory for, checked before any weight is read
   * (ModelTooLargeError otherwise): "inference" (default), "lora" or "full" training.
   */
  memoryUse?: MemoryUse;
}

export interface SaveOptions {
  /** Stored dtype; default "F32" (save → load is bit-exact). */
  dtype?: SafetensorsDtype;
  /** Shard size limit in bytes; default one file. */
  maxShardBytes?: number;
}

export class Policy {
  readonly model: Transformer;
  readonly config: ModelConfig;
  tokenizer: PolicyTokenizer | undefined;
  generationConfig: PolicyGenerationConfig;
  /** Bumped by every weight update (trainStep, importWeights, restore). */
  version = 0;

  constructor(
    model: Transformer,
    options: {
      tokenizer?: PolicyTokenizer;
      generationConfig?: PolicyGenerationConfig;
      version?: number;
    } = {},
  ) {
    this.model = model;
    this.config = model.config;
    this.tokenizer = options.tokenizer;
    // a config vocabulary padded past the tokenizer's: the padded ids are never sampled
    if (options.tokenizer && options.tokenizer.vocabSize < model.config.vocabSize)
      model.limitVocabulary(options.tokenizer.vocabSize);
    this.generationConfig = options.generationConfig ?? {};
    this.version = options.version ?? 0;
  }

  /** A freshly initialised policy (random weights). */
  static create(
    config: ModelConfig,
    options: { tokenizer?: PolicyTokenizer; seed?: number; trainable?: boolean } = {},
  ): Policy {
    const model = new Transformer(config, undefined, {
      seed: options.seed ?? 0,
      trainable: options.trainable ?? true,
    });
    const generationConfig: PolicyGenerationConfig = {};
    if (config.bosTokenId !== undefined) generationConfig.bos_token_id = config.bosTokenId;
    if (config.eosTokenId !== undefined) generationConfig.eos_token_id = config.eosTokenId;
    if (config.padTokenId !== undefined) generationConfig.pad_token_id = config.padTokenId;
    return new Policy(model, { tokenizer: options.tokenizer, generationConfig });
  }

  /** Loads a Hugging Face model directory (initialises the tfjs backend first). */
  static async load(directory: string, options: LoadOptions = {}): Promise<Policy> {
    const backend = await initBackend();
    // a LoRA folder (PEFT's adapter_config.json): its base, shared, with the adapters (lora-folder.ts)
    if (await isLoraFolder(directory)) return loadLoraFolder(directory, options, Policy);
    const config = parseHfConfig(
      JSON.parse(await readFile(join(directory, "config.json"), "utf8")),
    );
    // trainable: true asks for every weight to train (AdamW moments and gradients too)
    checkModelFits(
      config,
      backend,
      options.memoryUse ?? (options.trainable === true ? "full" : "inference"),
      directory,
    );
    const generationConfig = (await exists(join(directory, "generation_config.json")))
      ? (JSON.parse(
          await readFile(join(directory, "generation_config.json"), "utf8"),
        ) as PolicyGenerationConfig)
      : {};
    let tokenizer: PolicyTokenizer | undefined;
    if (options.tokenizer !== false && (await exists(join(directory, "tokenizer.json")))) {
      tokenizer = await loadTokenizer(directory);
    } else if (options.tokenizer === true) {
      throw new TokenizerFileError(`no tokenizer.json in ${directory}`);
    }
    // one tensor widened at a time: the backend never holds a second copy of the model
    const reader = await SafetensorsReader.open(directory);
    const source = {
      names: () => reader.names(),
      shape: (name: string) => reader.shape(name),
      load: (name: string) => {
        const weight = reader.read(name);
        return tf.tensor(weight.data, weight.shape, "float32");
      },
    };
    const model = new Transformer(config, source, { trainable: options.trainable ?? true });
    return new Policy(model, { tokenizer, generationConfig });
  }

  /** Frees the base models LoRA folders loaded (shared by their policies: dispose those first). */
  static async releaseSharedBases(): Promise<void> {
    await releaseSharedBases();
  }

  /** The base model's folder, when this policy was loaded from a LoRA folder. */
  baseDirectory: string | undefined;

  /**
   * Writes config.json, generation_config.json, safetensors and (if present) the tokenizer.
   * With LoRA: the weights merged (W + scale·A·B) in HF layout, and the adapters alone in
   * `adapter/` (PEFT's layout, naming the base folder when known).
   */
  async save(directory: string, options: SaveOptions = {}): Promise<void> {
    if (this.model.loraEnabled) await this.saveAdapters(join(directory, "adapter"));
    await mkdir(directory, { recursive: true });
    await writeFile(
      join(directory, "config.json"),
      JSON.stringify(toHfConfig(this.config), null, 2) + "\n",
    );
    await writeFile(
      join(directory, "generation_config.json"),
      JSON.stringify(this.generationConfig, null, 2) + "\n",
    );
    await writeSafetensorsDirectory(directory, this.model.exportHfWeights(), {
      dtype: options.dtype,
      maxShardBytes: options.maxShardBytes,
      metadata: { format: "pt", agentrl_version: String(this.version) },
    });
    this.tokenizer?.save(directory);
  }

  /** Token ids that end a turn: the tokenizer's stop tokens, else eos from the configs. */
  get stopTokenIds(): number[] {
    if (this.tokenizer && this.tokenizer.stopTokenIds.length > 0)
      return this.tokenizer.stopTokenIds;
    const eos = this.generationConfig.eos_token_id ?? this.config.eosTokenId;
    return eos === undefined ? [] : Array.isArray(eos) ? eos : [eos];
  }

  /** Marks a weight update; returns the new version. */
  bumpVersion(): number {
    this.version += 1;
    return this.version;
  }

  /** Batched generation from token ids (stop tokens default to `stopTokenIds`). */
  generate(prompts: number[][], options: GenerateOptions = {}): GenerationResult[] {
    const decode = this.tokenizer ? (ids: number[]) => this.tokenizer!.decode(ids) : undefined;
    return generate(this.model, prompts, {
      stopTokenIds: this.stopTokenIds,
      ...(decode ? { decode } : {}),
      ...options,
    });
  }

  /** An AdamW optimizer over this policy's trainable variables. */
  createOptimizer(options: AdamWOptions = {}): AdamW {
    return new AdamW(this.model.trainableVariableMap(), options);
  }

  /** One optimizer step (see `trainStep`); bumps `version`. */
  trainStep<MicroBatch>(
    optimizer: AdamW,
    microBatches: MicroBatch[],
    lossFn: (microBatch: MicroBatch) => tf.Scalar,
    options: TrainStepOptions = {},
  ): TrainStepResult {
    const result = trainStep(this.model, optimizer, microBatches, lossFn, options);
    this.bumpVersion();
    return result;
  }

  /** Attaches LoRA adapters (only they train; save/export/snapshot give merged weights). Create the optimizer after. */
  enableLora(options: LoraOptions = {}): void {
    this.model.enableLora(options);
  }

  /** Folds the adapters into the weights and removes them (the outputs do not change). */
  mergeLora(): void {
    this.model.mergeLora();
  }

  /**
   * Cheap copy of the current weights (no data copied now). With LoRA: the frozen base
   * (shared, never copied) and the adapters. Dispose when no longer needed.
   */
  snapshot(): PolicySnapshot {
    const options = this.model.loraOptions;
    if (!options) return new PolicySnapshot(this.version, this.model.cloneVariables());
    const adapters = new Map(
      this.model.adapterWeights().map((w) => [w.name, tf.tensor(w.data, w.shape, "float32")]),
    );
    return new PolicySnapshot(this.version, this.model.baseValues(), { options, adapters });
  }

  /** Puts snapshot weights back into this policy (with LoRA: the adapters only); version becomes the snapshot's. */
  restore(snapshot: PolicySnapshot): void {
    if (snapshot.isDisposed) throw new Error("snapshot is disposed");
    if (snapshot.lora) {
      if (!this.model.loraEnabled) this.model.enableLora(snapshot.lora.options);
      this.model.assignAdapters(snapshot.lora.adapters);
    } else {
      this.model.assignVariables(snapshot.values);
    }
    this.version = snapshot.version;
  }

  /**
   * A second policy sharing config, tokenizer and generation config but holding the
   * snapshot's weights (e.g. the stale sampler of cross-policy sampling, the KL reference).
   * Non-trainable. Weights are shared with this policy until either assigns them: with LoRA
   * the frozen base is never assigned, so samplers and the learner hold ONE base and their
   * own adapters. Dispose it separately; the snapshot may be disposed right after.
   */
  fromSnapshot(snapshot: PolicySnapshot): Policy {
    if (snapshot.isDisposed) throw new Error("snapshot is disposed");
    const model = new Transformer(this.config, undefined, {
      trainable: false,
      values: snapshot.values,
    });
    model.limitVocabulary(this.model.vocabularyLimit);
    if (snapshot.lora) {
      model.enableLora(snapshot.lora.options);
      model.assignAdapters(snapshot.lora.adapters);
    }
    return new Policy(model, {
      tokenizer: this.tokenizer,
      generationConfig: this.generationConfig,
      version: snapshot.version,
    });
  }

  /** A non-trainable policy on this one's weights, sharing storage: with LoRA, the frozen base and a copy of the adapters. */
  shareBase(): Policy {
    const snapshot = this.snapshot();
    try {
      return this.fromSnapshot(snapshot);
    } finally {
      snapshot.dispose();
    }
  }

  /** Weights as flat Float32Arrays in HF layout, tagged with the version; with LoRA, the adapters only. */
  exportWeights(): ExportedWeights {
    const options = this.model.loraOptions;
    if (options)
      return {
        version: this.version,
        tensors: [],
        lora: { options, adapters: this.model.adapterWeights() },
      };
    return { version: this.version, tensors: this.model.exportHfWeights() };
  }

  /** Writes the LoRA adapters in PEFT's layout (adapter_config.json, adapter_model.safetensors: A [r, in], B [out, r]). */
  async saveAdapters(directory: string): Promise<void> {
    await saveAdapters(this, directory);
  }

  /**
   * Loads adapters `saveAdapters` wrote onto this policy (attaching LoRA with their config if
   * not attached; without adapter_model.safetensors, new adapters: B = 0); bumps the version.
   */
  async loadAdapters(directory: string): Promise<void> {
    await loadAdapters(this, directory);
  }

  /** Replaces every weight (with `lora`: the adapters only); `version` becomes the exported one. */
  importWeights(weights: ExportedWeights): void {
    if (weights.lora) {
      if (!this.model.loraEnabled) this.model.enableLora(weights.lora.options);
      const values = new Map(
        weights.lora.adapters.map((w) => [w.name, tf.tensor(w.data, w.shape, "float32")]),
      );
      try {
        this.model.assignAdapters(values);
      } finally {
        for (const t of values.values()) t.dispose();
      }
      this.version = weights.version;
      return;
    }
    const tensors = new Map<string, tf.Tensor>();
    for (const w of weights.tensors) {
      if (w.data.length !== w.shape.reduce((a, b) => a * b, 1))
        throw new WeightsError(`${w.name}: ${w.data.length} values for shape [${w.shape}]`);
      tensors.set(w.name, tf.tensor(w.data, w.shape, "float32"));
    }
    try {
      this.model.loadHfTensors(tensors);
    } finally {
      for (const t of tensors.values()) t.dispose();
    }
    this.version = weights.version;
  }

  dispose(): void {
    this.model.dispose();
  }
}

async function loadTokenizer(directory: string): Promise<PolicyTokenizer> {
  return Tokenizer.fromDirectory(directory);
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}
