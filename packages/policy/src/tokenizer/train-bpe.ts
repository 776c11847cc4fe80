/**
 * Training a byte-level BPE tokenizer (GPT-2 / Qwen2 style) from a text corpus.
 *
 * 1. Pre-tokenize: split every text with Qwen2's regex (words with their leading space or
 *    punctuation, each digit alone, runs of punctuation, runs of whitespace), the same
 *    `Split` pre-tokenizer the resulting `tokenizer.json` runs at encode time.
 * 2. Map each piece's UTF-8 bytes to GPT-2's printable byte alphabet (256 symbols, so every
 *    text is representable: no unknown token), and count each distinct piece ("word").
 * 3. Repeatedly merge the most frequent adjacent pair of symbols into a new symbol. Pair
 *    counts are kept up to date incrementally: a merge only revisits the words that contain
 *    the pair, and a max-heap with lazy deletion finds the next best pair.
 *
 * The result is a `tokenizer.json` in the exact Hugging Face schema (loads in
 * `@huggingface/tokenizers` and Python `tokenizers`) and a Qwen2.5-like `tokenizer_config.json`.
 */
import { AgentRLError } from "@agentrl/spec";
import { HuggingFaceSplitPreTokenizerClass } from "./huggingface.js";
import { QWEN25_CHAT_TEMPLATE } from "./chat-template.js";
import type { AddedTokenJson } from "./files.js";

/**
 * Qwen2's pre-tokenizer regex (Oniguruma syntax, as in its `tokenizer.json`). `\p{N}` alone
 * keeps every digit a separate piece, so numbers are tokenized digit by digit.
 */
export const QWEN2_PRETOKENIZER_PATTERN =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/** A special or added token of the trained tokenizer. */
export interface SpecialTokenSpec {
  content: string;
  /** Special tokens are dropped by `decode(..., { skipSpecialTokens: true })`. */
  special: boolean;
}

/**
 * Qwen2.5's specials: end of text, the ChatML turn markers, and its tool tags, which are
 * added but not special (they survive `skipSpecialTokens`, so tool calls can be parsed).
 */
export const DEFAULT_SPECIAL_TOKENS: readonly SpecialTokenSpec[] = [
  { content: "<|endoftext|>", special: true },
  { content: "<|im_start|>", special: true },
  { content: "<|im_end|>", special: true },
  { content: "<tool_call>", special: false },
  { content: "</tool_call>", special: false },
  { content: "<tool_response>", special: false },
  { content: "</tool_response>", special: false },
  { content: "<tools>", special: false },
  { content: "</tools>", special: false },
];

/** Options of {@link trainByteLevelBpe}. */
export interface TrainByteLevelBpeOptions {
  /**
   * Total number of ids: 256 byte tokens + learnt merges + special tokens. The result is
   * smaller only if the corpus runs out of pairs seen at least `minFrequency` times.
   */
  vocabSize: number;
  /**
   * Added tokens, after the BPE vocabulary in this order. Strings are special tokens.
   * Default {@link DEFAULT_SPECIAL_TOKENS} (Qwen2.5's).
   */
  specialTokens?: readonly (string | SpecialTokenSpec)[];
  /** Stop merging when the best pair occurs fewer times than this. Default 2. */
  minFrequency?: number;
  /**
   * Longest token a merge may create, in byte-level characters (= UTF-8 bytes), so long
   * runs in the corpus (`=====`, base64) do not become huge single tokens. Default 32.
   */
  maxTokenLength?: number;
  /** Chat template written into `tokenizer_config.json`. Default Qwen2.5's. */
  chatTemplate?: string;
  /**
   * After the learnt merges, add synthetic ones (a token followed by a byte, lowest priority)
   * until the tokenizer has exactly this many ids, special tokens included: a tokenizer of a
   * real model's size for tests and benchmarks (`agentrl model init --shape`). Default: none.
   */
  fillToVocabSize?: number;
}

/** What {@link trainByteLevelBpe} returns: the two Hugging Face files as objects. */
export interface TrainedTokenizerFiles {
  tokenizerJson: Record<string, unknown> & { added_tokens: AddedTokenJson[] };
  tokenizerConfig: Record<string, unknown>;
}

/** Invalid training options. */
export class BpeTrainingError extends AgentRLError {}

/**
 * GPT-2's reversible map from bytes to printable characters: printable Latin-1 bytes map
 * to themselves, the others (control characters, space, ...) to U+0100 upward, so space
 * (0x20) becomes `Ġ` and newline (0x0A) becomes `Ċ`. Index = byte value.
 */
export const BYTE_TO_UNICODE: readonly string[] = (() => {
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const map: string[] = new Array(256);
  let next = 0;
  for (let b = 0; b < 256; b++) {
    map[b] = printable.includes(b) ? String.fromCharCode(b) : String.fromCharCode(256 + next++);
  }
  return map;
})();

/** Largest vocabulary the pair keys below can address. */
const MAXIMUM_SYMBOLS = 1 << 21;

/** Trains a byte-level BPE tokenizer on `corpus` (one string per document). */
export function trainByteLevelBpe(
  corpus: readonly string[],
  options: TrainByteLevelBpeOptions,
): TrainedTokenizerFiles {
  const specialTokens = (options.specialTokens ?? DEFAULT_SPECIAL_TOKENS).map((token) =>
    typeof token === "string" ? { content: token, special: true } : token,
  );
  const minFrequency = options.minFrequency ?? 2;
  const maxTokenLength = options.maxTokenLength ?? 32;
  const mergeBudget = options.vocabSize - 256 - specialTokens.length;
  if (
    !Number.isInteger(options.vocabSize) ||
    mergeBudget < 0 ||
    options.vocabSize > MAXIMUM_SYMBOLS
  ) {
    throw new BpeTrainingError(
      `vocabSize must be an integer in [${256 + specialTokens.length}, ${MAXIMUM_SYMBOLS}] (256 bytes + ${specialTokens.length} special tokens), got ${options.vocabSize}`,
    );
  }
  if (new Set(specialTokens.map((token) => token.content)).size !== specialTokens.length) {
    throw new BpeTrainingError("specialTokens has duplicates");
  }

  const wordCounts = countWords(
    corpus,
    specialTokens.map((token) => token.content),
  );
  const { symbols, merges } = learnMerges(wordCounts, mergeBudget, minFrequency, maxTokenLength);
  if (options.fillToVocabSize !== undefined)
    fillMerges(symbols, merges, options.fillToVocabSize - specialTokens.length, maxTokenLength);

  const vocab: Record<string, number> = {};
  symbols.forEach((symbol, id) => (vocab[symbol] = id));
  const addedTokens: AddedTokenJson[] = specialTokens.map((token, index) => ({
    id: symbols.length + index,
    content: token.content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: token.special,
  }));
  return {
    tokenizerJson: buildTokenizerJson(vocab, merges, addedTokens),
    tokenizerConfig: buildTokenizerConfig(
      addedTokens,
      options.chatTemplate ?? QWEN25_CHAT_TEMPLATE,
    ),
  };
}

/**
 * Distinct pre-tokenized pieces of the corpus in the byte alphabet, with their counts.
 * Special-token text in the corpus is cut out first (it encodes to its own id).
 */
function countWords(
  corpus: readonly string[],
  specialTexts: readonly string[],
): Map<string, number> {
  const splitter = new HuggingFaceSplitPreTokenizerClass({
    type: "Split",
    pattern: { Regex: QWEN2_PRETOKENIZER_PATTERN },
    behavior: "Isolated",
    invert: false,
  });
  const specialPattern =
    specialTexts.length > 0
      ? new RegExp(
          specialTexts.map((text) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|"),
          "u",
        )
      : null;
  const pieceCounts = new Map<string, number>();
  for (const document of corpus) {
    const sections = specialPattern === null ? [document] : document.split(specialPattern);
    for (const section of sections) {
      if (section.length === 0) continue;
      for (const piece of splitter.pre_tokenize_text(section)) {
        pieceCounts.set(piece, (pieceCounts.get(piece) ?? 0) + 1);
      }
    }
  }
  const encoder = new TextEncoder();
  const wordCounts = new Map<string, number>();
  for (const [piece, count] of pieceCounts) {
    let word = "";
    for (const byte of encoder.encode(piece)) word += BYTE_TO_UNICODE[byte];
    wordCounts.set(word, (wordCounts.get(word) ?? 0) + count);
  }
  return wordCounts;
}

/** A max-heap of (count, pair key); ties go to the smaller key, for determinism. */
class PairHeap {
  private readonly counts: number[] = [];
  private readonly keys: number[] = [];

  get size(): number {
    return this.counts.length;
  }

  push(count: number, key: number): void {
    this.counts.push(count);
    this.keys.push(key);
    let index = this.counts.length - 1;
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (!this.before(index, parent)) break;
      this.swap(index, parent);
      index = parent;
    }
  }

  /** Removes and returns the top entry as `[count, key]`. */
  pop(): [number, number] {
    const top: [number, number] = [this.counts[0], this.keys[0]];
    const lastCount = this.counts.pop()!;
    const lastKey = this.keys.pop()!;
    if (this.counts.length > 0) {
      this.counts[0] = lastCount;
      this.keys[0] = lastKey;
      let index = 0;
      for (;;) {
        const left = 2 * index + 1;
        const right = left + 1;
        let best = index;
        if (left < this.counts.length && this.before(left, best)) best = left;
        if (right < this.counts.length && this.before(right, best)) best = right;
        if (best === index) break;
        this.swap(index, best);
        index = best;
      }
    }
    return top;
  }

  private before(a: number, b: number): boolean {
    return (
      this.counts[a] > this.counts[b] ||
      (this.counts[a] === this.counts[b] && this.keys[a] < this.keys[b])
    );
  }

  private swap(a: number, b: number): void {
    [this.counts[a], this.counts[b]] = [this.counts[b], this.counts[a]];
    [this.keys[a], this.keys[b]] = [this.keys[b], this.keys[a]];
  }
}

const pairKey = (left: number, right: number): number => left * MAXIMUM_SYMBOLS + right;

/**
 * Learns up to `mergeBudget` merges. Returns the symbols (id = index: the 256 bytes in
 * GPT-2's order, then one per merge that made a new string) and the merges in rank order.
 */
function learnMerges(
  wordCounts: Map<string, number>,
  mergeBudget: number,
  minFrequency: number,
  maxTokenLength: number,
): { symbols: string[]; merges: [string, string][] } {
  // The 256 byte symbols, ordered by their character (GPT-2 / Qwen2 order: "!" is id 0).
  const symbols = [...BYTE_TO_UNICODE].sort((a, b) => a.charCodeAt(0) - b.charCodeAt(0));
  const symbolIds = new Map<string, number>(symbols.map((symbol, id) => [symbol, id]));

  const words: number[][] = [];
  const frequencies: number[] = [];
  for (const [word, count] of wordCounts) {
    words.push(Array.from(word, (character) => symbolIds.get(character)!));
    frequencies.push(count);
  }

  const pairCounts = new Map<number, number>();
  const pairWords = new Map<number, Set<number>>();
  words.forEach((word, wordIndex) => {
    for (let i = 0; i + 1 < word.length; i++) {
      const key = pairKey(word[i], word[i + 1]);
      pairCounts.set(key, (pairCounts.get(key) ?? 0) + frequencies[wordIndex]);
      let holders = pairWords.get(key);
      if (holders === undefined) pairWords.set(key, (holders = new Set()));
      holders.add(wordIndex);
    }
  });
  const heap = new PairHeap();
  for (const [key, count] of pairCounts) heap.push(count, key);

  const merges: [string, string][] = [];
  /** Pairs merged already: a pair can re-appear when a later merge re-creates a symbol's string. */
  const mergedPairs = new Set<number>();
  let newSymbols = 0;
  while (newSymbols < mergeBudget && heap.size > 0) {
    const [count, key] = heap.pop();
    if (pairCounts.get(key) !== count) continue; // stale entry: a fresher one is in the heap
    if (count < minFrequency) break;
    const left = Math.floor(key / MAXIMUM_SYMBOLS);
    const right = key % MAXIMUM_SYMBOLS;
    const merged = symbols[left] + symbols[right];
    if (merged.length > maxTokenLength) {
      pairCounts.delete(key); // never merged; later count changes of this pair are ignored too
      continue;
    }
    let mergedId = symbolIds.get(merged);
    if (mergedId === undefined) {
      mergedId = symbols.length;
      symbols.push(merged);
      symbolIds.set(merged, mergedId);
      newSymbols++;
    }
    if (!mergedPairs.has(key)) merges.push([symbols[left], symbols[right]]); // no duplicate merge rules
    mergedPairs.add(key);

    const changes = new Map<number, number>();
    for (const wordIndex of pairWords.get(key) ?? []) {
      mergeInWord(
        words,
        wordIndex,
        frequencies[wordIndex],
        left,
        right,
        mergedId,
        changes,
        pairWords,
      );
    }
    pairWords.delete(key);
    for (const [changedKey, delta] of changes) {
      if (delta === 0) continue;
      const updated = (pairCounts.get(changedKey) ?? 0) + delta;
      if (updated > 0) {
        pairCounts.set(changedKey, updated);
        heap.push(updated, changedKey);
      } else {
        pairCounts.delete(changedKey);
      }
    }
  }
  return { symbols, merges };
}

/**
 * Replaces every `left right` in word `wordIndex` by `mergedId` (left to right, so `a a a`
 * becomes `aa a`), recording the pair-count changes (× the word's frequency) in `changes`
 * and registering the word under its new pairs.
 */
function mergeInWord(
  words: number[][],
  wordIndex: number,
  frequency: number,
  left: number,
  right: number,
  mergedId: number,
  changes: Map<number, number>,
  pairWords: Map<number, Set<number>>,
): void {
  const word = words[wordIndex];
  let found = false;
  for (let i = 0; i + 1 < word.length; i++) {
    if (word[i] === left && word[i + 1] === right) {
      found = true;
      break;
    }
  }
  if (!found) return; // the word lost this pair to an earlier merge
  const addChange = (key: number, delta: number) =>
    changes.set(key, (changes.get(key) ?? 0) + delta);
  for (let i = 0; i + 1 < word.length; i++) addChange(pairKey(word[i], word[i + 1]), -frequency);
  const mergedWord: number[] = [];
  for (let i = 0; i < word.length; i++) {
    if (i + 1 < word.length && word[i] === left && word[i + 1] === right) {
      mergedWord.push(mergedId);
      i++;
    } else {
      mergedWord.push(word[i]);
    }
  }
  for (let i = 0; i + 1 < mergedWord.length; i++) {
    const key = pairKey(mergedWord[i], mergedWord[i + 1]);
    addChange(key, frequency);
    let holders = pairWords.get(key);
    if (holders === undefined) pairWords.set(key, (holders = new Set()));
    holders.add(wordIndex);
  }
  words[wordIndex] = mergedWord;
}

/** Appends merges `token + byte` (new tokens only) until there are `target` symbols. */
function fillMerges(
  symbols: string[],
  merges: [string, string][],
  target: number,
  maxTokenLength: number,
): void {
  if (!Number.isInteger(target) || target > MAXIMUM_SYMBOLS)
    throw new BpeTrainingError(`fillToVocabSize must be an integer up to ${MAXIMUM_SYMBOLS}`);
  const known = new Set(symbols);
  for (let first = 0; symbols.length < target && first < symbols.length; first++) {
    const left = symbols[first];
    if (left.length + 1 > maxTokenLength) continue;
    for (let byte = 0; byte < 256 && symbols.length < target; byte++) {
      const right = BYTE_TO_UNICODE[byte];
      const merged = left + right;
      if (known.has(merged)) continue;
      known.add(merged);
      symbols.push(merged);
      merges.push([left, right]);
    }
  }
}

/** `tokenizer.json` in the Hugging Face schema, with Qwen2's pipeline. */
function buildTokenizerJson(
  vocab: Record<string, number>,
  merges: [string, string][],
  addedTokens: AddedTokenJson[],
): TrainedTokenizerFiles["tokenizerJson"] {
  const byteLevel = {
    type: "ByteLevel",
    add_prefix_space: false,
    trim_offsets: false,
    use_regex: false,
  };
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: addedTokens,
    // Qwen2 uses NFC here; we keep text as it is, so every string round-trips exactly.
    normalizer: null,
    pre_tokenizer: {
      type: "Sequence",
      pretokenizers: [
        {
          type: "Split",
          pattern: { Regex: QWEN2_PRETOKENIZER_PATTERN },
          behavior: "Isolated",
          invert: false,
        },
        byteLevel,
      ],
    },
    post_processor: byteLevel,
    decoder: byteLevel,
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: "",
      end_of_word_suffix: "",
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      // "left right" strings (readable by every `tokenizers` version); byte-level symbols never contain a space.
      merges: merges.map(([left, right]) => `${left} ${right}`),
    },
  };
}

/** `tokenizer_config.json` like Qwen2.5-Instruct's: eos `<|im_end|>`, pad `<|endoftext|>`, its chat template. */
function buildTokenizerConfig(
  addedTokens: AddedTokenJson[],
  chatTemplate: string,
): Record<string, unknown> {
  const has = (content: string) => addedTokens.some((token) => token.content === content);
  const addedTokensDecoder: Record<string, unknown> = {};
  for (const token of addedTokens) {
    const { id, ...rest } = token;
    addedTokensDecoder[String(id)] = rest;
  }
  return {
    add_bos_token: false,
    add_prefix_space: false,
    added_tokens_decoder: addedTokensDecoder,
    additional_special_tokens: addedTokens
      .filter((token) => token.special && token.content !== "<|endoftext|>")
      .map((token) => token.content),
    bos_token: null,
    chat_template: chatTemplate,
    clean_up_tokenization_spaces: false,
    eos_token: has("<|im_end|>")
      ? "<|im_end|>"
      : (addedTokens.find((token) => token.special)?.content ?? null),
    errors: "replace",
    model_max_length: 32768,
    pad_token: has("<|endoftext|>") ? "<|endoftext|>" : null,
    split_special_tokens: false,
    tokenizer_class: "Qwen2Tokenizer",
    unk_token: null,
  };
}
