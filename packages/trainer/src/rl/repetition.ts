/**
 * Rows of pure repetition for the warm start: a span of tokens, a separator, the same span
 * again, with the loss on the repeat. Every trained token of such a row can only be predicted
 * by copying from earlier in the row, which is the skill (an induction head) that KG, WebShop
 * and DB need for entity names, product codes and table names, and that expert rows teach
 * slowly: a KG row trains ~40 assistant tokens, of which ~5 are a copy (docs/warmstart.md).
 *
 * The spans are cut from the step's own expert rows, so their tokens are the tasks' tokens
 * (names, codes, titles), and shuffled, so that no memorised text predicts the repeat.
 */
import type { Rng } from "@agentrl/policy";
import type { SupervisedRow } from "./sft.js";

export interface RepetitionOptions {
  /** Tokens in the span (and in its repeat); shorter source rows give shorter spans. */
  spanTokens: number;
  /** Token ids between the span and its repeat (e.g. the tokenizer's encoding of "\n"). */
  separator: readonly number[];
  /** Loss weight of a repeated token (the expert rows' assistant weight, so both count alike). */
  weight: number;
  /** The draws: which row, where the span starts, the shuffle. */
  random: Rng;
}

/**
 * `count` repetition rows from spans of `source` rows (any tokens, prompt or reply). Each row
 * is [span, separator, span], its `lossMask` `weight` on the second span and 0 elsewhere.
 * Shapes: a row of a span of S tokens and a separator of P tokens has 2S + P tokens.
 */
export function repetitionRows(
  source: readonly SupervisedRow[],
  count: number,
  options: RepetitionOptions,
): SupervisedRow[] {
  if (count <= 0 || source.length === 0) return [];
  const { random, separator } = options;
  const weight = Math.max(1, Math.min(255, Math.round(options.weight)));
  const rows: SupervisedRow[] = [];
  for (let k = 0; k < count; k++) {
    const from = source[random.nextInt(source.length)].tokens;
    const length = Math.min(options.spanTokens, from.length);
    const start = random.nextInt(from.length - length + 1);
    const span = Array.from(from.subarray(start, start + length));
    for (let i = span.length - 1; i > 0; i--) {
      const j = random.nextInt(i + 1);
      [span[i], span[j]] = [span[j], span[i]];
    }
    const tokens = Int32Array.from([...span, ...separator, ...span]);
    const lossMask = new Uint8Array(tokens.length);
    lossMask.fill(weight, span.length + separator.length);
    rows.push({ task: "repetition", tokens, lossMask });
  }
  return rows;
}
