/**
 * Typed access to `@huggingface/tokenizers`. Its bundled `.d.ts` files use extensionless
 * relative imports, which TypeScript's NodeNext resolution does not follow, so every export
 * types as `any`; these interfaces state the part of its API we use.
 */
import * as huggingFaceTokenizers from "@huggingface/tokenizers";

/** The library's `Tokenizer` (a `tokenizer.json` plus `tokenizer_config.json`). */
export interface HuggingFaceTokenizer {
  encode(
    text: string,
    options?: { add_special_tokens?: boolean },
  ): { ids: number[]; tokens: string[] };
  decode(
    ids: number[],
    options?: { skip_special_tokens?: boolean; clean_up_tokenization_spaces?: boolean },
  ): string;
  token_to_id(token: string): number | undefined;
  id_to_token(id: number): string | undefined;
  get_vocab(withAddedTokens?: boolean): Map<string, number>;
  /** The pre-tokenizer of `tokenizer.json`, `null` if it has none. */
  pre_tokenizer: { pre_tokenize_text(text: string, options?: unknown): string[] } | null;
}

/** The library's `Split` pre-tokenizer. */
export interface HuggingFaceSplitPreTokenizer {
  pre_tokenize_text(text: string): string[];
}

const library = huggingFaceTokenizers as unknown as {
  Tokenizer: new (tokenizerJson: object, tokenizerConfig: object) => HuggingFaceTokenizer;
  SplitPreTokenizer: new (config: object) => HuggingFaceSplitPreTokenizer;
};

export const HuggingFaceTokenizerClass = library.Tokenizer;
export const HuggingFaceSplitPreTokenizerClass = library.SplitPreTokenizer;
