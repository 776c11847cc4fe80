/**
 * Incremental detokenization for streaming and stop strings.
 *
 * A byte-level BPE token can end in the middle of a UTF-8 character (an emoji is 4 bytes,
 * often 2-3 tokens), and decoders like Metaspace decide about a leading space from the
 * context. So text is produced the way Hugging Face's TGI / vLLM do it: decode a short
 * window of recent ids twice, with and without the newest ones, and emit the difference
 * only when it does not end in U+FFFD (an incomplete character).
 */

/** Decodes ids to text; the tokenizer's `decode`. */
export type DecodeFunction = (ids: readonly number[]) => string;

/** The replacement character TextDecoder writes for incomplete or invalid UTF-8. */
const REPLACEMENT_CHARACTER = "\uFFFD";

/**
 * Ids held back at most while they decode to an incomplete character. A UTF-8 character
 * has at most 4 bytes, so its bytes span at most 4 tokens; a tail still incomplete after
 * that is invalid UTF-8 (the model made it up) and is emitted as U+FFFD.
 */
const MAXIMUM_PENDING_TOKENS = 4;

export class StreamDecoder {
  private readonly ids: number[] = [];
  /** Start of the window decoded for context (ids before it were emitted long ago). */
  private prefixOffset = 0;
  /** Ids before this one have been emitted as text. */
  private readOffset = 0;
  /** All text emitted so far. */
  private emitted = "";

  constructor(private readonly decode: DecodeFunction) {}

  /** Adds one generated token id; returns the newly completed text (often `""`). */
  push(id: number): string {
    this.ids.push(id);
    const prefixText = this.decode(this.ids.slice(this.prefixOffset, this.readOffset));
    const fullText = this.decode(this.ids.slice(this.prefixOffset));
    const pendingTokens = this.ids.length - this.readOffset;
    if (fullText.endsWith(REPLACEMENT_CHARACTER) && pendingTokens < MAXIMUM_PENDING_TOKENS)
      return "";
    // A decoder that rewrites earlier text (e.g. clean-up of spaces before punctuation):
    // decode everything and emit what extends the text emitted so far.
    const newText = fullText.startsWith(prefixText)
      ? fullText.slice(prefixText.length)
      : this.extensionOfEmitted(this.decode(this.ids));
    if (newText.length === 0) {
      // Nothing to show (e.g. a skipped special token): not pending either, but keep the
      // context window where it is, so the next token is decoded with the text before it.
      this.readOffset = this.ids.length;
      return "";
    }
    this.prefixOffset = this.readOffset;
    this.readOffset = this.ids.length;
    this.emitted += newText;
    return newText;
  }

  /** Emits whatever is still held back (an incomplete character becomes U+FFFD). */
  flush(): string {
    if (this.readOffset === this.ids.length) return "";
    const prefixText = this.decode(this.ids.slice(this.prefixOffset, this.readOffset));
    const fullText = this.decode(this.ids.slice(this.prefixOffset));
    this.prefixOffset = this.readOffset;
    this.readOffset = this.ids.length;
    const newText = fullText.startsWith(prefixText)
      ? fullText.slice(prefixText.length)
      : this.extensionOfEmitted(this.decode(this.ids));
    this.emitted += newText;
    return newText;
  }

  /** Every id pushed so far. */
  get tokenIds(): readonly number[] {
    return this.ids;
  }

  /** All text returned so far by `push` and `flush`. */
  get text(): string {
    return this.emitted;
  }

  private extensionOfEmitted(whole: string): string {
    return whole.startsWith(this.emitted) ? whole.slice(this.emitted.length) : "";
  }
}
