/**
 * The policy's tokenizer: a Hugging Face `tokenizer.json` run by `@huggingface/tokenizers`,
 * plus the chat template of `tokenizer_config.json` rendered by `@huggingface/jinja`.
 *
 *   const tokenizer = Tokenizer.fromDirectory("checkpoints/tiny");
 *   const prompt = tokenizer.applyChatTemplate(messages, { tools, addGenerationPrompt: true });
 *   const ids = tokenizer.encode(prompt);                  // number[]
 *   const decoder = tokenizer.createStreamDecoder();       // while sampling:
 *   const text = decoder.push(nextId);                     //   complete UTF-8 text only
 */
import { AgentRLError } from "@agentrl/spec";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { HuggingFaceTokenizerClass, type HuggingFaceTokenizer } from "./huggingface.js";
import { renderChatTemplate, type ChatMessage, type ChatToolSpec } from "./chat-template.js";
import {
  GenerationConfigSchema,
  TokenizerConfigSchema,
  TokenizerFileError,
  TokenizerJsonSchema,
  configTokenContent,
  parseTokenizerFile,
  type GenerationConfig,
  type TokenizerConfig,
  type TokenizerJson,
} from "./files.js";
import { StreamDecoder } from "./stream-decoder.js";

/** Misuse of a tokenizer: unknown ids, a missing chat template or eos token. */
export class TokenizerError extends AgentRLError {}

/** Options of {@link Tokenizer.encode}. */
export interface EncodeOptions {
  /**
   * Let the post-processor add its special tokens (e.g. Llama's BOS). Default `false`:
   * the texts we encode are mostly rendered chat templates, which already hold them.
   */
  addSpecialTokens?: boolean;
}

/** Options of {@link Tokenizer.decode} and {@link Tokenizer.createStreamDecoder}. */
export interface DecodeOptions {
  /** Drop tokens marked `special` (`<|im_end|>`, not `<tool_call>`). Default `false`. */
  skipSpecialTokens?: boolean;
}

/** Options of {@link Tokenizer.applyChatTemplate}. */
export interface ApplyChatTemplateOptions {
  /** Tools offered to the model, OpenAI format. Default: none. */
  tools?: readonly ChatToolSpec[];
  /** End with the opening of an assistant turn. Default `false`. */
  addGenerationPrompt?: boolean;
  /**
   * Which of several named templates to use. Default: `tool_use` if tools are given and
   * such a template exists, else `default` (as `transformers` chooses).
   */
  templateName?: string;
}

/** Options of the {@link Tokenizer} constructor. */
export interface TokenizerOptions {
  /** `generation_config.json`; its `eos_token_id` (number or list) adds stop tokens. Default: none. */
  generationConfig?: unknown;
}

/** End-of-turn / end-of-text markers of common model families, stop tokens when present. */
const KNOWN_STOP_TOKENS = [
  "<|im_end|>",
  "<|endoftext|>",
  "<|eot_id|>",
  "<|end_of_text|>",
  "<|eom_id|>",
  "</s>",
  "<end_of_turn>",
];

export class Tokenizer {
  /** `tokenizer.json` as given (saved back unchanged). */
  readonly tokenizerJson: TokenizerJson;
  /** `tokenizer_config.json` as given (saved back unchanged). */
  readonly tokenizerConfig: TokenizerConfig;
  /** Number of ids: the largest id (vocabulary or added token) + 1. */
  readonly vocabSize: number;
  /** Id of `eos_token` (Qwen2.5 instruct: `<|im_end|>`). */
  readonly eosTokenId: number;
  /** Id of `pad_token`, or the eos id when the config has none. */
  readonly padTokenId: number;
  /** Ids that end a generated turn: eos, known end markers in the vocabulary, `generation_config` eos ids. Sorted. */
  readonly stopTokenIds: number[];

  private readonly inner: HuggingFaceTokenizer;
  private readonly cleanUpTokenizationSpaces: boolean;

  /**
   * @param tokenizerJson the parsed `tokenizer.json`
   * @param tokenizerConfig the parsed `tokenizer_config.json` (`{}` if there is none)
   */
  constructor(
    tokenizerJson: unknown,
    tokenizerConfig: unknown = {},
    options: TokenizerOptions = {},
  ) {
    // Validate, but keep the caller's objects (deep copies) so `save` writes them back as given.
    parseTokenizerFile(TokenizerJsonSchema, tokenizerJson, "tokenizer.json");
    const config = parseTokenizerFile(
      TokenizerConfigSchema,
      tokenizerConfig,
      "tokenizer_config.json",
    );
    this.tokenizerJson = structuredClone(tokenizerJson) as TokenizerJson;
    this.tokenizerConfig = structuredClone(tokenizerConfig) as TokenizerConfig;
    const json = this.tokenizerJson as Record<string, unknown>;
    this.inner = new HuggingFaceTokenizerClass(
      {
        normalizer: null,
        pre_tokenizer: null,
        post_processor: null,
        decoder: null,
        added_tokens: [],
        ...json,
      },
      this.tokenizerConfig,
    );
    this.cleanUpTokenizationSpaces = config.clean_up_tokenization_spaces ?? false;

    let largestId = -1;
    for (const id of this.inner.get_vocab(true).values()) largestId = Math.max(largestId, id);
    this.vocabSize = largestId + 1;

    this.eosTokenId = this.requireTokenId(configTokenContent(config.eos_token), "eos_token");
    const padToken = configTokenContent(config.pad_token);
    this.padTokenId =
      padToken === undefined ? this.eosTokenId : this.requireTokenId(padToken, "pad_token");
    this.stopTokenIds = this.collectStopTokenIds(options.generationConfig);
  }

  /** Builds a tokenizer from parsed `tokenizer.json` and `tokenizer_config.json` objects. */
  static fromJson(
    tokenizerJson: unknown,
    tokenizerConfig: unknown = {},
    options: TokenizerOptions = {},
  ): Tokenizer {
    return new Tokenizer(tokenizerJson, tokenizerConfig, options);
  }

  /**
   * Loads `tokenizer.json`, `tokenizer_config.json` (optional) and `generation_config.json`
   * (optional, for extra stop ids) from a Hugging Face model directory. A template in
   * `chat_template.jinja` (newer `transformers` save it there) is used when the config has none.
   */
  static fromDirectory(directory: string): Tokenizer {
    const tokenizerJson = readJsonFile(join(directory, "tokenizer.json"), true);
    const tokenizerConfig = (readJsonFile(join(directory, "tokenizer_config.json"), false) ??
      {}) as Record<string, unknown>;
    const templateFile = join(directory, "chat_template.jinja");
    if (tokenizerConfig.chat_template == null && existsSync(templateFile)) {
      tokenizerConfig.chat_template = readFileSync(templateFile, "utf8");
    }
    const generationConfig = readJsonFile(join(directory, "generation_config.json"), false);
    return new Tokenizer(tokenizerJson, tokenizerConfig, { generationConfig });
  }

  /** Writes `tokenizer.json` and `tokenizer_config.json` into `directory` (created if needed). */
  save(directory: string): void {
    mkdirSync(directory, { recursive: true });
    writeFileSync(
      join(directory, "tokenizer.json"),
      JSON.stringify(this.tokenizerJson, null, 2) + "\n",
    );
    writeFileSync(
      join(directory, "tokenizer_config.json"),
      JSON.stringify(this.tokenizerConfig, null, 2) + "\n",
    );
  }

  /** Token ids of `text`. Added tokens written in the text (`<|im_start|>`) become their single ids. */
  encode(text: string, options: EncodeOptions = {}): number[] {
    if (text.length === 0) return [];
    return this.inner.encode(text, { add_special_tokens: options.addSpecialTokens ?? false }).ids;
  }

  /** Text of `ids`. Throws {@link TokenizerError} on an id outside the vocabulary. */
  decode(ids: readonly number[], options: DecodeOptions = {}): string {
    if (ids.length === 0) return "";
    for (const id of ids) {
      if (!Number.isInteger(id) || this.inner.id_to_token(id) === undefined) {
        throw new TokenizerError(
          `token id ${id} is not in the vocabulary (size ${this.vocabSize})`,
        );
      }
    }
    return this.inner.decode(ids as number[], {
      skip_special_tokens: options.skipSpecialTokens ?? false,
      clean_up_tokenization_spaces: this.cleanUpTokenizationSpaces,
    });
  }

  /** A decoder that turns generated ids, one at a time, into complete UTF-8 text. */
  createStreamDecoder(options: DecodeOptions = {}): StreamDecoder {
    return new StreamDecoder((ids) => this.decode(ids, options));
  }

  /** Id of a token string (in the model's own alphabet, e.g. `Ġthe`), or `undefined`. */
  tokenToId(token: string): number | undefined {
    return this.inner.token_to_id(token);
  }

  /** Token string of an id, or `undefined`. */
  idToToken(id: number): string | undefined {
    return this.inner.id_to_token(id);
  }

  /** Whether the config has a chat template. */
  get hasChatTemplate(): boolean {
    const template = this.tokenizerConfig.chat_template;
    return typeof template === "string" || (Array.isArray(template) && template.length > 0);
  }

  /**
   * Renders a conversation with the config's `chat_template` (see `renderChatTemplate` for
   * how tool-call arguments are handled and when the result is prefix-stable).
   */
  applyChatTemplate(
    messages: readonly ChatMessage[],
    options: ApplyChatTemplateOptions = {},
  ): string {
    const config = this.tokenizerConfig;
    return renderChatTemplate(this.chatTemplateSource(options), messages, {
      tools: options.tools,
      addGenerationPrompt: options.addGenerationPrompt,
      variables: {
        bos_token: configTokenContent(config.bos_token) ?? "",
        eos_token: configTokenContent(config.eos_token) ?? "",
        pad_token: configTokenContent(config.pad_token) ?? "",
        unk_token: configTokenContent(config.unk_token) ?? "",
        additional_special_tokens: (config.additional_special_tokens ?? []).map((token) =>
          configTokenContent(token),
        ),
      },
    });
  }

  private chatTemplateSource(options: ApplyChatTemplateOptions): string {
    const template = this.tokenizerConfig.chat_template;
    if (typeof template === "string") return template;
    if (!Array.isArray(template) || template.length === 0) {
      throw new TokenizerError("tokenizer_config.json has no chat_template");
    }
    const hasTools = options.tools !== undefined && options.tools.length > 0;
    const wanted =
      options.templateName ??
      (hasTools && template.some((entry) => entry.name === "tool_use") ? "tool_use" : "default");
    const found = template.find((entry) => entry.name === wanted);
    if (found === undefined) {
      const names = template.map((entry) => entry.name).join(", ");
      throw new TokenizerError(`no chat template named "${wanted}" (have: ${names})`);
    }
    return found.template;
  }

  private requireTokenId(token: string | undefined, field: string): number {
    if (token === undefined) throw new TokenizerError(`tokenizer_config.json has no ${field}`);
    const id = this.inner.token_to_id(token);
    if (id === undefined) throw new TokenizerError(`${field} "${token}" is not in the vocabulary`);
    return id;
  }

  private collectStopTokenIds(generationConfigInput: unknown): number[] {
    const stop = new Set<number>([this.eosTokenId]);
    for (const token of KNOWN_STOP_TOKENS) {
      const id = this.inner.token_to_id(token);
      if (id !== undefined && this.isAddedToken(token)) stop.add(id);
    }
    if (generationConfigInput !== undefined && generationConfigInput !== null) {
      const generationConfig: GenerationConfig = parseTokenizerFile(
        GenerationConfigSchema,
        generationConfigInput,
        "generation_config.json",
      );
      const eos = generationConfig.eos_token_id;
      for (const id of eos === undefined || eos === null ? [] : Array.isArray(eos) ? eos : [eos]) {
        if (id >= 0 && id < this.vocabSize) stop.add(id);
      }
    }
    return [...stop].sort((a, b) => a - b);
  }

  private isAddedToken(token: string): boolean {
    return (this.tokenizerJson.added_tokens ?? []).some((added) => added.content === token);
  }
}

/** Parses a JSON file; `undefined` if it is optional and absent. */
function readJsonFile(path: string, required: true): unknown;
function readJsonFile(path: string, required: false): unknown | undefined;
function readJsonFile(path: string, required: boolean): unknown | undefined {
  if (!existsSync(path)) {
    if (required) throw new TokenizerFileError(`${path} does not exist`);
    return undefined;
  }
  try {
    return JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    throw new TokenizerFileError(`${path} is not valid JSON: ${(error as Error).message}`);
  }
}
