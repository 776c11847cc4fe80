/**
 * How the original maps the agent's free text to an admissible command
 * (AgentBench `src/server/tasks/alfworld/utils.py`, `process_action`):
 *
 *   1. take the first line, trimmed and lower-cased;
 *   2. if it is an admissible command, use it;
 *   3. else score every admissible command with NLTK's `sentence_bleu` (the command is the
 *      reference, the text the hypothesis, whitespace tokens, weights 0.25 × 4,
 *      `SmoothingFunction().method4`) and take the FIRST best one if its score is > 0.01;
 *   4. else pass the text through unchanged, which the game answers with "Nothing happens.".
 *
 * `sentenceBleu` below is a line-by-line port of NLTK 3.9's `corpus_bleu` for one sentence
 * (which skips zero precisions in the geometric mean; NLTK before 3.8 raised instead).
 */

/** The BLEU score below which no admissible command is chosen (the original's `limit`). */
export const MATCH_THRESHOLD = 0.01;

/** NLTK's `SmoothingFunction.k` default, used by method4. */
const METHOD4_K = 5;

/** Python's `str.split()`: split on runs of whitespace, no empty tokens. */
export function whitespaceTokens(text: string): string[] {
  return text.split(/\s+/).filter((token) => token.length > 0);
}

function ngramCounts(tokens: string[], order: number): Map<string, number> {
  const counts = new Map<string, number>();
  for (let i = 0; i + order <= tokens.length; i++) {
    const key = tokens.slice(i, i + order).join("\u0000");
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

/** NLTK `modified_precision` as an unreduced fraction (numerator, denominator). */
export function modifiedPrecision(
  reference: string[],
  hypothesis: string[],
  order: number,
): { numerator: number; denominator: number } {
  const counts = ngramCounts(hypothesis, order);
  const referenceCounts = ngramCounts(reference, order);
  let numerator = 0;
  let total = 0;
  for (const [ngram, count] of counts) {
    numerator += Math.min(count, referenceCounts.get(ngram) ?? 0);
    total += count;
  }
  return { numerator, denominator: Math.max(1, total) };
}

/** NLTK `brevity_penalty(closest_ref_len, hyp_len)`. */
export function brevityPenalty(referenceLength: number, hypothesisLength: number): number {
  if (hypothesisLength > referenceLength) return 1;
  if (hypothesisLength === 0) return 0;
  return Math.exp(1 - referenceLength / hypothesisLength);
}

/**
 * NLTK `sentence_bleu([reference], hypothesis, smoothing_function=SmoothingFunction().method4)`
 * on whitespace tokens. A precision that stays zero after smoothing (method4 smooths only
 * hypotheses of two or more tokens) is left out of the geometric mean, as NLTK does.
 */
export function sentenceBleu(referenceText: string, hypothesisText: string): number {
  const reference = whitespaceTokens(referenceText);
  const hypothesis = whitespaceTokens(hypothesisText);
  const weights = [0.25, 0.25, 0.25, 0.25];
  const precisions = weights.map((_, i) => modifiedPrecision(reference, hypothesis, i + 1));
  // One reference, so the closest reference length is its length.
  const penalty = brevityPenalty(reference.length, hypothesis.length);
  if (precisions[0].numerator === 0) return 0;
  // SmoothingFunction().method4
  const smoothed: number[] = [];
  let increment = 1;
  for (const { numerator, denominator } of precisions) {
    if (numerator === 0 && hypothesis.length > 1) {
      const smoothedNumerator = 1 / ((2 ** increment * METHOD4_K) / Math.log(hypothesis.length));
      smoothed.push(smoothedNumerator / denominator);
      increment += 1;
    } else {
      smoothed.push(numerator / denominator);
    }
  }
  let logSum = 0;
  for (let i = 0; i < weights.length; i++) {
    if (smoothed[i] > 0) logSum += weights[i] * Math.log(smoothed[i]);
  }
  return penalty * Math.exp(logSum);
}

/**
 * The original's `process_action(text, admissible)`: the admissible command the text
 * stands for, or the cleaned text itself when none is close enough.
 */
export function matchAction(text: string, admissible: readonly string[]): string {
  const action = text.trim().toLowerCase().split("\n")[0];
  if (admissible.length === 0) return action;
  if (admissible.includes(action)) return action;
  let bestIndex = 0;
  let bestScore = -Infinity;
  admissible.forEach((choice, index) => {
    const score = sentenceBleu(choice, action);
    // numpy's argmax: the first of equal maxima wins.
    if (score > bestScore) {
      bestScore = score;
      bestIndex = index;
    }
  });
  return bestScore > MATCH_THRESHOLD ? admissible[bestIndex] : action;
}
