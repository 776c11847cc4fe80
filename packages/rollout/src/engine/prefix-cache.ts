/**
 * The prefix cache: copies of the caches of prompts the engine has prefilled (all but their
 * last token), so that a later prompt starting with one (the other episodes of a group: the
 * same opening prompt) forks it and prefills only the rest. Least recently used first out;
 * the engine empties it on a weight update (the keys/values came from the old weights).
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

  /** The longest entry strictly shorter than `prompt` that starts it, now the most recently used; undefined when none does. */
  longestPrefixOf(prompt: readonly number[]): CachedTokens<Sequence> | undefined {
    let best: CachedTokens<Sequence> | undefined;
    for (const entry of this.entries) {
      if (entry.tokens.length >= prompt.length || (best && best.tokens.length >= entry.tokens.length)) continue;
      if (entry.tokens.every((token, i) => token === prompt[i])) best = entry;
    }
    if (best) this.entries = [...this.entries.filter((other) => other !== best), best];
    return best;
  }

  /** Keeps a copy of `sequence` (holding `tokens`), unless these tokens are cached already; the oldest entries leave beyond capacity. */
  remember(tokens: readonly number[], sequence: Sequence): void {
    if (this.capacity <= 0) return;
    if (this.entries.some((entry) => entry.tokens.length === tokens.length && entry.tokens.every((token, i) => token === tokens[i]))) return;
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
