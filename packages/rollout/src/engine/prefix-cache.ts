/**
 * The prefix cache: copies of the caches of prompts the engine has prefilled (all but their
 * last token), so that a later prompt sharing a beginning with one forks the cache of that
 * shared beginning and prefills only the rest: the other episodes of a group share the whole
 * opening prompt, the other instances of a task its system prompt and tool descriptions.
 * Least recently used first out; the engine empties it on a weight update (the keys/values
 * came from the old weights).
 */
import type { EngineSequence } from "./types.js";

/** A cache sequence and the tokens fed into it. */
export interface CachedTokens<Sequence> {
  sequence: Sequence;
  tokens: number[];
}

export class PrefixCache<Sequence extends EngineSequence> {
  /** Least recently used first. */
  private entries: CachedTokens<Sequence>[] = [];

  /** `fork` copies a sequence; `capacity` 0 keeps nothing. */
  constructor(
    readonly capacity: number,
    private readonly fork: (sequence: Sequence) => Sequence,
  ) {}

  get size(): number {
    return this.entries.length;
  }

  /** KV tokens held by the entries. */
  get tokenCount(): number {
    let total = 0;
    for (const entry of this.entries) total += entry.tokens.length;
    return total;
  }

  /**
   * The entry sharing the longest beginning with `prompt` and that beginning's length: at
   * least `minTokens`, at most all but the prompt's last token (whose logits the prompt needs).
   * The entry becomes the most recently used; undefined when none shares `minTokens`.
   */
  longestSharedBeginning(
    prompt: readonly number[],
    minTokens: number,
  ): { entry: CachedTokens<Sequence>; length: number } | undefined {
    let best: { entry: CachedTokens<Sequence>; length: number } | undefined;
    const limit = prompt.length - 1;
    for (const entry of this.entries) {
      const end = Math.min(limit, entry.tokens.length);
      let length = 0;
      while (length < end && entry.tokens[length] === prompt[length]) length += 1;
      if (length >= Math.max(1, minTokens) && (!best || length > best.length))
        best = { entry, length };
    }
    if (best) this.entries = [...this.entries.filter((other) => other !== best!.entry), best.entry];
    return best;
  }

  /** Keeps a copy of `sequence` (holding `tokens`), unless these tokens are cached already; the oldest entries leave beyond capacity. */
  remember(tokens: readonly number[], sequence: Sequence): void {
    if (this.capacity <= 0) return;
    if (
      this.entries.some(
        (entry) =>
          entry.tokens.length === tokens.length &&
          entry.tokens.every((token, i) => token === tokens[i]),
      )
    )
      return;
    this.entries.push({ tokens: [...tokens], sequence: this.fork(sequence) });
    if (this.entries.length > this.capacity) this.dropOldest(this.entries.length - this.capacity);
  }

  /** Frees the `count` least recently used entries. */
  dropOldest(count: number): void {
    for (const entry of this.entries.splice(0, count)) entry.sequence.dispose();
  }

  clear(): void {
    this.dropOldest(this.entries.length);
  }
}
