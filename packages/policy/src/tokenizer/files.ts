/**
 * The Hugging Face tokenizer files: `tokenizer.json`, `tokenizer_config.json` and the
 * `eos_token_id` of `generation_config.json`. Validated with zod where we read fields;
 * every other field passes through untouched (so a saved file loads back identically).
 */
import { AgentRLError } from "@agentrl/spec";
import { z } from "zod";

/** One entry of `added_tokens` in `tokenizer.json` (Hugging Face `AddedToken`). */
export const AddedTokenJsonSchema = z.looseObject({
  id: z.number().int().nonnegative(),
  content: z.string().min(1),
  single_word: z.boolean().optional(),
  lstrip: z.boolean().optional(),
  rstrip: z.boolean().optional(),
  normalized: z.boolean().optional(),
  /** Special tokens are dropped by `decode(ids, { skipSpecialTokens: true })`. */
  special: z.boolean().optional(),
});
export type AddedTokenJson = z.infer<typeof AddedTokenJsonSchema>;

/** `tokenizer.json`: the model (BPE, Unigram, WordPiece) and its pipeline. */
export const TokenizerJsonSchema = z.looseObject({
  version: z.string().optional(),
  added_tokens: z.array(AddedTokenJsonSchema).default([]),
  normalizer: z.unknown().optional(),
  pre_tokenizer: z.unknown().optional(),
  post_processor: z.unknown().optional(),
  decoder: z.unknown().optional(),
  model: z.looseObject({ type: z.string().optional(), vocab: z.unknown() }),
});
export type TokenizerJson = z.infer<typeof TokenizerJsonSchema>;

/** A token in `tokenizer_config.json`: a string, or an `AddedToken` dict with `content`. */
const ConfigTokenSchema = z
  .union([z.string(), z.looseObject({ content: z.string() }), z.null()])
  .optional();

/** `tokenizer_config.json`: special tokens and the chat template. */
export const TokenizerConfigSchema = z.looseObject({
  /** One template, or named templates (`default`, `tool_use`, ...). */
  chat_template: z
    .union([z.string(), z.array(z.object({ name: z.string(), template: z.string() }))])
    .nullable()
    .optional(),
  bos_token: ConfigTokenSchema,
  eos_token: ConfigTokenSchema,
  pad_token: ConfigTokenSchema,
  unk_token: ConfigTokenSchema,
  additional_special_tokens: z
    .array(z.union([z.string(), z.looseObject({ content: z.string() })]))
    .optional(),
  clean_up_tokenization_spaces: z.boolean().optional(),
});
export type TokenizerConfig = z.infer<typeof TokenizerConfigSchema>;

/** The part of `generation_config.json` the tokenizer reads. */
export const GenerationConfigSchema = z.looseObject({
  eos_token_id: z
    .union([z.number().int(), z.array(z.number().int())])
    .nullable()
    .optional(),
});
export type GenerationConfig = z.infer<typeof GenerationConfigSchema>;

/** A tokenizer file that is missing, not JSON, or not of the expected shape. */
export class TokenizerFileError extends AgentRLError {}

/** Validates `value` against `schema`, naming `what` in the error. */
export function parseTokenizerFile<Schema extends z.ZodType>(
  schema: Schema,
  value: unknown,
  what: string,
): z.infer<Schema> {
  const result = schema.safeParse(value);
  if (!result.success) {
    throw new TokenizerFileError(`${what} is not valid: ${z.prettifyError(result.error)}`);
  }
  return result.data;
}

/** The text of a token field of `tokenizer_config.json` (`"<|im_end|>"` or `{content: ...}`). */
export function configTokenContent(
  token: z.infer<typeof ConfigTokenSchema> | { content: string },
): string | undefined {
  if (token === undefined || token === null) return undefined;
  return typeof token === "string" ? token : token.content;
}
