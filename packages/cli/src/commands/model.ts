/**
 * `agentrl model …`: create a fresh model directory (`init`) and describe one (`info`).
 *
 * The work is in exported functions (`initModel`, `modelInfo`) so tests can call them.
 */
import { AgentRLError } from "@agentrl/spec";
import { type Command } from "commander";
import { numberOption } from "../options.js";
import { copyFile, mkdir, open, readFile, readdir, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import {
  ADAPTER_CONFIG_FILE,
  LORA_TARGETS,
  type LoraTarget,
  MODEL_SHAPES,
  type ModelShapeName,
  toHfConfig,
  writeRandomSafetensors,
  PRESETS,
  PRESET_VOCAB_SIZES,
  Policy,
  Tokenizer,
  initBackend,
  parameterCount,
  parseHfConfig,
  trainByteLevelBpe,
  CHAT_TEMPLATES,
  type ChatTemplateName,
  type ModelConfig,
  type PresetName,
} from "@agentrl/policy";
import { createPolicy, tokenizerCorpus } from "@agentrl/trainer";

/** A clear CLI failure of a model command. */
export class ModelCommandError extends AgentRLError {}

export interface InitModelOptions {
  /** Preset architecture (`test`, `tiny`, `small`). */
  preset: PresetName;
  /** Output directory (created; files in it are overwritten). */
  out: string;
  /** Tokenizer training corpus files (one document per file); default: the built-in agent corpus plus the task families' text (`tokenizerCorpus()`). */
  corpus?: string[];
  /** Tokenizer vocabulary size; default the preset's (test 512, tiny 4096, small 8192). */
  vocabSize?: number;
  /** Seed of the weight initialisation; default 0. */
  seed?: number;
  /** Chat template written with the tokenizer: `qwen2.5` (default) or `compact` (tools as one-line signatures, for tiny models). */
  chatTemplate?: ChatTemplateName;
}

export interface InitModelResult {
  directory: string;
  parameters: number;
  vocabSize: number;
  seconds: number;
}

export interface InitShapeOptions {
  /** A real model's exact shape (MODEL_SHAPES): `qwen2.5-0.5b`, `smollm2-135m`. */
  shape: ModelShapeName;
  /** Output directory (created; files in it are overwritten). */
  out: string;
  /** Seed of the random weights; default 0. */
  seed?: number;
}

/**
 * A random Hugging Face folder of a real model's exact shape: config.json, BF16
 * model.safetensors written one tensor at a time, and a byte-level BPE tokenizer of the
 * model's id count (learnt on the agent corpus up to 8,192 ids, then filled with synthetic
 * merges). For tests and benchmarks of memory and speed; the weights mean nothing.
 */
export async function initShape(options: InitShapeOptions): Promise<InitModelResult> {
  const started = performance.now();
  const shape = MODEL_SHAPES[options.shape];
  if (!shape)
    throw new ModelCommandError(
      `unknown shape "${options.shape}" (${Object.keys(MODEL_SHAPES).join(", ")})`,
    );
  const chatTemplate = CHAT_TEMPLATES["qwen2.5"];
  const files = trainByteLevelBpe(await tokenizerCorpus({ chatTemplate }), {
    vocabSize: Math.min(8192, shape.tokenizerSize),
    chatTemplate,
    fillToVocabSize: shape.tokenizerSize,
  });
  const tokenizer = Tokenizer.fromJson(files.tokenizerJson, files.tokenizerConfig);
  if (tokenizer.vocabSize !== shape.tokenizerSize)
    throw new ModelCommandError(
      `tokenizer has ${tokenizer.vocabSize} ids, the shape needs ${shape.tokenizerSize}`,
    );
  const endOfText = tokenizer.tokenToId("<|endoftext|>");
  const config: ModelConfig = {
    ...shape.config,
    ...(endOfText !== undefined ? { bosTokenId: endOfText } : {}),
    eosTokenId: tokenizer.eosTokenId,
  };
  await mkdir(options.out, { recursive: true });
  await writeFile(
    join(options.out, "config.json"),
    JSON.stringify({ ...toHfConfig(config), torch_dtype: "bfloat16" }, null, 2) + "\n",
  );
  await writeFile(
    join(options.out, "generation_config.json"),
    JSON.stringify({ bos_token_id: config.bosTokenId, eos_token_id: config.eosTokenId }, null, 2) +
      "\n",
  );
  tokenizer.save(options.out);
  await writeRandomSafetensors(options.out, config, { seed: options.seed ?? 0, dtype: "BF16" });
  return {
    directory: options.out,
    parameters: parameterCount(config),
    vocabSize: config.vocabSize,
    seconds: (performance.now() - started) / 1000,
  };
}

export interface InitLoraOptions {
  /** The frozen base model's folder. */
  base: string;
  /** The adapter folder to write (adapter_config.json). */
  out: string;
  rank?: number;
  alpha?: number;
  targets?: LoraTarget[];
  seed?: number;
}

/**
 * A LoRA folder on a base model: PEFT's adapter_config.json naming the base. Loading it
 * (train, serve, eval: any --model / model.directory) attaches new adapters (B = 0: the base's
 * outputs) to the base, which stays frozen and is loaded once per process, shared by the
 * learner and the samplers; only the adapters train.
 */
export async function initLora(options: InitLoraOptions): Promise<string> {
  const base = resolve(options.base);
  const configText = await readFile(join(base, "config.json"), "utf8").catch(() => {
    throw new ModelCommandError(`no config.json in ${base}`);
  });
  parseHfConfig(JSON.parse(configText));
  const targets = options.targets ?? [...LORA_TARGETS];
  const unknown = targets.filter((t) => !LORA_TARGETS.includes(t));
  if (unknown.length > 0)
    throw new ModelCommandError(
      `unknown LoRA targets ${unknown.join(", ")} (${LORA_TARGETS.join(", ")})`,
    );
  const rank = options.rank ?? 8;
  const config = {
    peft_type: "LORA",
    task_type: "CAUSAL_LM",
    base_model_name_or_path: base,
    r: rank,
    lora_alpha: options.alpha ?? 2 * rank,
    target_modules: targets,
    lora_dropout: 0,
    bias: "none",
    agentrl_seed: options.seed ?? 0,
  };
  await mkdir(options.out, { recursive: true });
  await writeFile(join(options.out, ADAPTER_CONFIG_FILE), JSON.stringify(config, null, 2) + "\n");
  // the base's configs and tokenizer too, so the folder reads as a model folder everywhere (as PEFT's often do)
  for (const file of [
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
  ]) {
    await copyFile(join(base, file), join(options.out, file)).catch(
      (error: NodeJS.ErrnoException) => {
        if (error.code !== "ENOENT") throw error;
      },
    );
  }
  return join(options.out, ADAPTER_CONFIG_FILE);
}

/** Trains a byte-level BPE tokenizer, initialises a preset model, saves it and loads it back. */
export async function initModel(options: InitModelOptions): Promise<InitModelResult> {
  const started = performance.now();
  if (!(options.preset in PRESETS))
    throw new ModelCommandError(
      `unknown preset "${options.preset}" (${Object.keys(PRESETS).join(", ")})`,
    );
  if (options.chatTemplate !== undefined && !(options.chatTemplate in CHAT_TEMPLATES)) {
    throw new ModelCommandError(
      `unknown chat template "${options.chatTemplate}" (${Object.keys(CHAT_TEMPLATES).join(", ")})`,
    );
  }
  const chatTemplate = CHAT_TEMPLATES[options.chatTemplate ?? "qwen2.5"];
  const corpus =
    options.corpus && options.corpus.length > 0
      ? await readCorpus(options.corpus)
      : await tokenizerCorpus({ chatTemplate });
  const files = trainByteLevelBpe(corpus, {
    vocabSize: options.vocabSize ?? PRESET_VOCAB_SIZES[options.preset],
    chatTemplate,
  });
  const tokenizer = Tokenizer.fromJson(files.tokenizerJson, files.tokenizerConfig);
  await initBackend();
  const policy = createPolicy(tokenizer, options.preset, {}, options.seed ?? 0);
  await policy.save(options.out);
  policy.dispose();
  // Load it back through the same path everyone else uses.
  const loaded = await Policy.load(options.out);
  const result = {
    directory: options.out,
    parameters: loaded.model.parameterCount,
    vocabSize: loaded.config.vocabSize,
    seconds: (performance.now() - started) / 1000,
  };
  loaded.dispose();
  return result;
}

async function readCorpus(paths: string[]): Promise<string[]> {
  const documents: string[] = [];
  for (const path of paths) {
    try {
      documents.push(await readFile(path, "utf8"));
    } catch (error) {
      throw new ModelCommandError(`cannot read corpus file ${path}: ${(error as Error).message}`);
    }
  }
  return documents;
}

/** Architecture, parameter count and stored dtype of a model directory, as printable lines. */
export async function modelInfo(directory: string): Promise<string[]> {
  const configText = await readFile(`${directory}/config.json`, "utf8").catch(() => {
    throw new ModelCommandError(`no config.json in ${directory}`);
  });
  const raw = JSON.parse(configText) as Record<string, unknown>;
  const config = parseHfConfig(raw);
  const { dtypes, parameters: storedParameters } = await scanSafetensorsHeaders(directory);
  let tokenizerLine = "tokenizer: none (no tokenizer.json)";
  try {
    const tokenizer = Tokenizer.fromDirectory(directory);
    tokenizerLine = `tokenizer: ${tokenizer.vocabSize} tokens, eos ${tokenizer.eosTokenId}, stop ids [${tokenizer.stopTokenIds.join(", ")}]`;
  } catch {
    // keep "none"
  }
  return [
    `directory: ${directory}`,
    `architecture: ${config.architecture}`,
    `layers: ${config.numHiddenLayers}, hidden ${config.hiddenSize}, MLP ${config.intermediateSize}, heads ${config.numAttentionHeads} (kv ${config.numKeyValueHeads}, head dim ${config.headDim})`,
    `vocabulary: ${config.vocabSize}, max positions ${config.maxPositionEmbeddings}, rope theta ${config.ropeTheta}`,
    `q/k/v bias: ${config.attentionBias}, tied embeddings: ${config.tieWordEmbeddings}`,
    `parameters: ${parameterCount(config).toLocaleString("en-US")} (${storedParameters.toLocaleString("en-US")} stored)`,
    `dtype: ${dtypes.join(", ")} (${raw.torch_dtype ?? "torch_dtype not set"})`,
    tokenizerLine,
  ];
}

/** Dtypes and element count from the headers of a directory's safetensors files (data not read). */
async function scanSafetensorsHeaders(
  directory: string,
): Promise<{ dtypes: string[]; parameters: number }> {
  const files = (await readdir(directory)).filter((f) => f.endsWith(".safetensors"));
  if (files.length === 0) throw new ModelCommandError(`no .safetensors files in ${directory}`);
  const dtypes = new Set<string>();
  let parameters = 0;
  for (const file of files) {
    const handle = await open(`${directory}/${file}`, "r");
    try {
      const prefix = Buffer.alloc(8);
      await handle.read(prefix, 0, 8, 0);
      const headerLength = Number(prefix.readBigUInt64LE(0));
      const headerBytes = Buffer.alloc(headerLength);
      await handle.read(headerBytes, 0, headerLength, 8);
      const header = JSON.parse(headerBytes.toString("utf8")) as Record<
        string,
        { dtype?: string; shape?: number[] }
      >;
      for (const [name, entry] of Object.entries(header)) {
        if (name === "__metadata__" || !entry.dtype) continue;
        dtypes.add(entry.dtype);
        parameters += (entry.shape ?? []).reduce((a, b) => a * b, 1);
      }
    } finally {
      await handle.close();
    }
  }
  return { dtypes: [...dtypes], parameters };
}

export function registerModelCommands(program: Command): void {
  const model = program
    .command("model")
    .description("create and inspect policy models (Hugging Face directories)");

  model
    .command("init")
    .description(
      "write a fresh model: a preset architecture with a byte-level BPE tokenizer trained on agent text, or (--shape) random weights of a real model's exact shape",
    )
    .requiredOption("--out <dir>", "output directory")
    .option("--preset <name>", `architecture preset: ${Object.keys(PRESETS).join(", ")}`, "tiny")
    .option(
      "--shape <name>",
      `random BF16 weights and a tokenizer of a real model's exact shape (for memory and speed tests): ${Object.keys(MODEL_SHAPES).join(", ")}`,
    )
    .option(
      "--corpus <file>",
      "tokenizer training text (repeatable; default: built-in agent corpus)",
      (value: string, previous: string[]) => [...previous, value],
      [] as string[],
    )
    .option(
      "--vocab-size <n>",
      "tokenizer vocabulary size (default: the preset's)",
      numberOption("--vocab-size", { integer: true, minimum: 1 }),
    )
    .option(
      "--seed <n>",
      "weight initialisation seed",
      numberOption("--seed", { integer: true, minimum: 0 }),
      0,
    )
    .option(
      "--chat-template <name>",
      `chat template written with the tokenizer: ${Object.keys(CHAT_TEMPLATES).join(", ")} (compact lists tools as one-line signatures: 3x shorter KG prompts)`,
      "qwen2.5",
    )
    .addHelpText(
      "after",
      "\nExamples:\n  agentrl model init --preset tiny --out models/tiny\n  agentrl model init --shape qwen2.5-0.5b --out runs/qwen-shape\n  agentrl model init --preset tiny --chat-template compact --out models/tiny-compact\n  agentrl model init --preset test --out /tmp/m --corpus tasks.txt --corpus more.txt --vocab-size 1024\n",
    )
    .action(
      async (options: {
        out: string;
        preset: string;
        shape?: string;
        corpus: string[];
        vocabSize?: number;
        seed: number;
        chatTemplate: string;
      }) => {
        if (options.shape !== undefined) {
          const result = await initShape({
            shape: options.shape as ModelShapeName,
            out: options.out,
            seed: options.seed,
          });
          console.log(
            `wrote ${result.directory}: ${options.shape} shape, random BF16 weights, ${result.parameters.toLocaleString("en-US")} parameters, vocabulary ${result.vocabSize} (${result.seconds.toFixed(1)} s)`,
          );
          return;
        }
        const result = await initModel({
          preset: options.preset as PresetName,
          out: options.out,
          corpus: options.corpus,
          vocabSize: options.vocabSize,
          seed: options.seed,
          chatTemplate: options.chatTemplate as ChatTemplateName,
        });
        console.log(
          `wrote ${result.directory}: ${options.preset} preset, ${result.parameters.toLocaleString("en-US")} parameters, vocabulary ${result.vocabSize} (${result.seconds.toFixed(1)} s)`,
        );
      },
    );

  model
    .command("lora")
    .description(
      "make a LoRA folder on a base model (adapter_config.json): training it trains only the adapters, the base stays frozen and is shared by the learner and the samplers",
    )
    .requiredOption("--base <dir>", "the base model's folder")
    .requiredOption("--out <dir>", "the adapter folder to write")
    .option(
      "--rank <n>",
      "adapter rank r",
      numberOption("--rank", { integer: true, minimum: 1 }),
      8,
    )
    .option(
      "--alpha <n>",
      "scale α (the update is α/r · A·B); default 2r",
      numberOption("--alpha", { minimum: 0 }),
    )
    .option(
      "--targets <list>",
      `comma-separated projections (default all: ${LORA_TARGETS.join(",")})`,
    )
    .option(
      "--seed <n>",
      "seed of A's random initialisation",
      numberOption("--seed", { integer: true, minimum: 0 }),
      0,
    )
    .addHelpText(
      "after",
      "\nExample:\n  agentrl model lora --base models/Qwen2.5-0.5B-Instruct --out models/qwen-lora\n  agentrl train --config examples/hf-model.yaml --set model.directory=models/qwen-lora\n",
    )
    .action(
      async (options: {
        base: string;
        out: string;
        rank: number;
        alpha?: number;
        targets?: string;
        seed: number;
      }) => {
        const path = await initLora({
          base: options.base,
          out: options.out,
          rank: options.rank,
          alpha: options.alpha,
          seed: options.seed,
          ...(options.targets
            ? { targets: options.targets.split(",").map((t) => t.trim()) as LoraTarget[] }
            : {}),
        });
        console.log(`wrote ${path}: rank ${options.rank} adapters on ${resolve(options.base)}`);
      },
    );

  model
    .command("info")
    .description("print a model directory's architecture, parameter count and dtype")
    .argument("<dir>", "model directory (config.json + safetensors)")
    .addHelpText("after", "\nExample:\n  agentrl model info models/tiny\n")
    .action(async (directory: string) => {
      for (const line of await modelInfo(directory)) console.log(line);
    });
}
