/** A fresh model for the warm start: a byte-level BPE tokenizer trained on the tasks' text, random weights. */
import {
  CHAT_TEMPLATES,
  Policy,
  Tokenizer,
  initBackend,
  presetConfig,
  trainByteLevelBpe,
  type ModelConfig,
  type PresetName,
} from "@agentrl/policy";
import { tokenizerCorpus } from "../corpus.js";
import type { ArchitectureSpec } from "./options.js";

/**
 * A freshly initialised preset model sized to `tokenizer`, with the tokenizer's special ids
 * and the sampling defaults (temperature 0.8) in its generation config.
 */
export function createPolicy(
  tokenizer: Tokenizer,
  preset: PresetName,
  overrides: Partial<ModelConfig>,
  seed: number,
): Policy {
  const config = presetConfig(preset, {
    ...overrides,
    vocabSize: tokenizer.vocabSize,
    eosTokenId: tokenizer.eosTokenId,
    padTokenId: tokenizer.padTokenId,
  });
  const policy = Policy.create(config, { tokenizer, seed });
  policy.generationConfig = {
    eos_token_id:
      tokenizer.stopTokenIds.length === 1 ? tokenizer.stopTokenIds[0] : tokenizer.stopTokenIds,
    pad_token_id: tokenizer.padTokenId,
    do_sample: true,
    temperature: 0.8,
    top_p: 1,
  };
  return policy;
}

/** Writes a fresh model (tokenizer trained on `tokenizerCorpus()`, random weights) into `directory`. */
export async function initWarmStartModel(
  directory: string,
  architecture: ArchitectureSpec,
  options: {
    seed?: number;
    worldSeed?: number;
    corpusEpisodesPerDifficulty?: number;
    log?: (line: string) => void;
  } = {},
): Promise<void> {
  const seed = options.seed ?? 0;
  const chatTemplate = CHAT_TEMPLATES[architecture.chatTemplate ?? "qwen2.5"];
  const corpus = await tokenizerCorpus({
    seed: options.worldSeed ?? 0,
    episodesPerDifficulty: options.corpusEpisodesPerDifficulty,
    chatTemplate,
    log: options.log,
  });
  const files = trainByteLevelBpe(corpus, {
    vocabSize: architecture.vocabSize ?? 4096,
    chatTemplate,
  });
  const tokenizer = Tokenizer.fromJson(files.tokenizerJson, files.tokenizerConfig);
  await initBackend();
  const policy = createPolicy(tokenizer, architecture.preset, architecture.overrides ?? {}, seed);
  await policy.save(directory);
  policy.dispose();
}
