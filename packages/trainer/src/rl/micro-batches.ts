/**
 * Micro-batches of a GRPO update: how a batch's rows are packed (longest first, a group's
 * shared prompt counted once), how large a micro-batch may be, and the padded tensors of one.
 */
import * as tf from "@tensorflow/tfjs-core";
import type { TrainingRow } from "./grpo.js";

/**
 * Splits rows into micro-batches of at most `maxTokens` padded tokens, longest first so
 * that rows of similar length share a batch (little padding). A row longer than the budget
 * gets a micro-batch of its own. With `prefix` > 0 the rows share their first `prefix` tokens,
 * which a micro-batch runs once (`toTensors`): they count once against the budget.
 */
export function planMicroBatches<Row extends { tokens: ArrayLike<number> }>(
  rows: readonly Row[],
  maxTokens: number,
  prefix = 0,
): Row[][] {
  const sorted = [...rows].sort((a, b) => b.tokens.length - a.tokens.length);
  const batches: Row[][] = [];
  let current: Row[] = [];
  let width = 0;
  for (const row of sorted) {
    const own = row.tokens.length - prefix;
    const newWidth = Math.max(width, own);
    if (current.length > 0 && prefix + newWidth * (current.length + 1) > maxTokens) {
      batches.push(current);
      current = [];
    }
    width = current.length === 0 ? own : newWidth;
    current.push(row);
  }
  if (current.length) batches.push(current);
  return batches;
}

/**
 * Splits rows into micro-batches of at most `maxTokens` processed tokens (a row longer than
 * that alone) with the fewest processed tokens in all: the rows sorted longest first, cut
 * where the padding a cut saves exceeds what it costs (the `prefix` shared by the rows runs
 * again in each piece). Exact dynamic programming over the cut points (O(rows²)); a micro-batch
 * of sorted rows is padded to its first row, so contiguous pieces are optimal.
 */
export function planLeastPadding<Row extends { tokens: ArrayLike<number> }>(
  rows: readonly Row[],
  maxTokens: number,
  prefix = 0,
): Row[][] {
  const sorted = [...rows].sort((a, b) => b.tokens.length - a.tokens.length);
  // fewest[j]: the fewest tokens processing sorted[0 … j−1] costs; start[j]: its last piece's first row
  const fewest = [0];
  const start = [0];
  for (let end = 1; end <= sorted.length; end++) {
    fewest.push(Infinity);
    start.push(0);
    for (let first = end - 1; first >= 0; first--) {
      const cost = prefix + (end - first) * (sorted[first].tokens.length - prefix);
      if (end - first > 1 && cost > maxTokens) break; // wider pieces only cost more
      if (fewest[first] + cost < fewest[end]) {
        fewest[end] = fewest[first] + cost;
        start[end] = first;
      }
    }
  }
  const batches: Row[][] = [];
  for (let end = sorted.length; end > 0; end = start[end])
    batches.unshift(sorted.slice(start[end], end));
  return batches;
}

/** A prompt shorter than this is run with each row rather than shared (its own pass costs more than it saves). */
export const MIN_SHARED_PROMPT = 32;

/** Index of a row's first trained token (its length when it has none). */
function firstTrained(row: Pick<TrainingRow, "lossMask">): number {
  for (let i = 1; i < row.lossMask.length; i++) if (row.lossMask[i]) return i;
  return row.lossMask.length;
}

/**
 * How many leading tokens all `rows` share before any of them is trained on, leaving each
 * row the token before its first trained one (whose position scores it) and at least 2
 * tokens: the prefix `toTensors` runs once for the micro-batch. 0 for a single row or when
 * under {@link MIN_SHARED_PROMPT}.
 */
export function sharedPrefixLength(rows: readonly TrainingRow[]): number {
  if (rows.length < 2) return 0;
  let length = Math.min(
    ...rows.map((row) => Math.min(firstTrained(row) - 1, row.tokens.length - 2)),
  );
  const first = rows[0].tokens;
  for (const row of rows.slice(1)) {
    let i = 0;
    while (i < length && row.tokens[i] === first[i]) i++;
    length = i;
  }
  return length >= MIN_SHARED_PROMPT ? length : 0;
}

/**
 * The rows grouped by the prompt they share (a GRPO group's episodes), with the length of
 * the prefix they can run once (`sharedPrefixLength`, 0 for rows that share nothing).
 */
export function promptClusters(
  rows: readonly TrainingRow[],
): { prefix: number; members: TrainingRow[] }[] {
  const byPrompt = new Map<string, TrainingRow[]>();
  for (const row of rows) {
    const prompt = row.tokens.subarray(0, Math.max(0, firstTrained(row) - 1)).join(",");
    (byPrompt.get(prompt) ?? byPrompt.set(prompt, []).get(prompt)!).push(row);
  }
  return [...byPrompt.values()].map((members) => ({
    prefix: sharedPrefixLength(members),
    members,
  }));
}

/** Tokens the model runs for `rows` when each cluster's shared prompt runs once (no padding). */
export function tokensWithSharedPrompts(rows: readonly TrainingRow[]): number {
  return promptClusters(rows).reduce(
    (n, { prefix, members }) =>
      n + prefix + members.reduce((m, row) => m + row.tokens.length - prefix, 0),
    0,
  );
}

/**
 * Micro-batches for a GRPO update: the rows that share a prompt (a group's episodes) go
 * together, at most `maxTokens` a micro-batch counting the prompt once (`toTensors` with
 * `sharedPrefixLength`), cut with the least padding (`planLeastPadding`); the other rows
 * likewise without a prefix. Costliest first.
 */
export function planSharedMicroBatches(
  rows: readonly TrainingRow[],
  maxTokens: number,
): TrainingRow[][] {
  const clusters = promptClusters(rows);
  const alone = clusters.filter((c) => !c.prefix).flatMap((c) => c.members);
  return [
    ...clusters.flatMap((c) => (c.prefix ? planLeastPadding(c.members, maxTokens, c.prefix) : [])),
    ...planLeastPadding(alone, maxTokens),
  ].sort((a, b) => processedTokens(b) - processedTokens(a));
}

/**
 * Processed tokens of the busiest of `threads` threads when they claim the plan's
 * micro-batches in order, each the next one when it is free (as `claimFrom` hands them out),
 * all threads equally fast.
 */
export function planMakespan(plan: readonly (readonly TrainingRow[])[], threads: number): number {
  const busy = new Array<number>(Math.max(1, threads)).fill(0);
  for (const micro of plan) {
    const free = busy.indexOf(Math.min(...busy));
    busy[free] += processedTokens(micro);
  }
  return Math.max(...busy);
}

/**
 * The shared-prompt plan (`planSharedMicroBatches`) whose busiest thread processes the
 * fewest tokens (`planMakespan`; then the fewest tokens in all): micro-batch budgets from
 * `microBatchTokens` down to an eighth of a thread's share are tried. Larger micro-batches
 * pad less and run each prompt fewer times; smaller ones spread over the threads more
 * evenly. One thread: the plan with the fewest tokens under `microBatchTokens`.
 */
export function planSharedForThreads(
  rows: readonly TrainingRow[],
  microBatchTokens: number,
  threads: number,
): TrainingRow[][] {
  const share = tokensWithSharedPrompts(rows) / Math.max(1, threads);
  const budgets = new Set([microBatchTokens]);
  if (threads > 1)
    for (let step = 0; step <= 28; step++)
      budgets.add(Math.min(microBatchTokens, Math.max(2, Math.ceil(share / (1 + step / 4)))));
  let best: { plan: TrainingRow[][]; makespan: number; tokens: number } | undefined;
  for (const budget of budgets) {
    const plan = planSharedMicroBatches(rows, budget);
    const makespan = planMakespan(plan, threads);
    const tokens = plan.reduce((n, micro) => n + processedTokens(micro), 0);
    if (!best || makespan < best.makespan || (makespan === best.makespan && tokens < best.tokens))
      best = { plan, makespan, tokens };
  }
  return best!.plan;
}

/** Tokens a micro-batch runs through the model: its shared prefix once, the rest padded. */
export function processedTokens(rows: readonly TrainingRow[]): number {
  const prefix = sharedPrefixLength(rows);
  return prefix + rows.length * (Math.max(...rows.map((r) => r.tokens.length)) - prefix);
}

/**
 * The row up to its last trained token: in a causal model the tokens after it (typically the
 * environment's closing reply) neither carry loss nor feed any position that does, so the
 * learner skips them. Views, not copies.
 */
export function withoutUntrainedTail(row: TrainingRow): TrainingRow {
  let end = row.lossMask.length;
  while (end > 0 && row.lossMask[end - 1] === 0) end -= 1;
  end = Math.max(end, Math.min(2, row.tokens.length)); // tokenLogProbs needs 2 tokens
  if (end === row.tokens.length) return row;
  return {
    ...row,
    tokens: row.tokens.subarray(0, end),
    lossMask: row.lossMask.subarray(0, end),
    oldLogProbs: row.oldLogProbs.subarray(0, end),
  };
}

/** Micro-batch tensors; the caller disposes them. Shapes: inputIds [B, T], the rest [B, T−1]. */
export interface MicroBatchTensors {
  /** [1, P] tokens every row continues (run once: `tokenLogProbs`' `prefix`), when shared. */
  prefixIds?: tf.Tensor2D;
  inputIds: tf.Tensor2D;
  mask: tf.Tensor2D;
  oldLogProbs: tf.Tensor2D;
  advantages: tf.Tensor2D;
  referenceLogProbs?: tf.Tensor2D;
  sequences: number;
}

/**
 * Right-pads rows into tensors aligned with `tokenLogProbs` (position t scores token t+1).
 * With `prefix` P > 0 (`sharedPrefixLength`), the rows' first P tokens become `prefixIds`
 * and the rest is laid out from token P on.
 */
export function toTensors(
  rows: readonly TrainingRow[],
  padTokenId = 0,
  prefix = 0,
): MicroBatchTensors {
  if (prefix > 0) {
    const shared = tf.tensor2d(rows[0].tokens.subarray(0, prefix), [1, prefix], "int32");
    const own = rows.map((row) => ({
      ...row,
      tokens: row.tokens.subarray(prefix),
      lossMask: row.lossMask.subarray(prefix),
      oldLogProbs: row.oldLogProbs.subarray(prefix),
    }));
    return { ...toTensors(own, padTokenId), prefixIds: shared };
  }
  const width = Math.max(...rows.map((r) => r.tokens.length));
  const B = rows.length;
  const ids = new Int32Array(B * width).fill(padTokenId);
  const mask = new Float32Array(B * (width - 1));
  const old = new Float32Array(B * (width - 1));
  const advantages = new Float32Array(B * (width - 1));
  rows.forEach((row, b) => {
    ids.set(row.tokens, b * width);
    for (let t = 1; t < row.tokens.length; t++) {
      const k = b * (width - 1) + t - 1;
      mask[k] = row.lossMask[t];
      old[k] = row.oldLogProbs[t];
      advantages[k] = row.advantage;
    }
  });
  return {
    inputIds: tf.tensor2d(ids, [B, width], "int32"),
    mask: tf.tensor2d(mask, [B, width - 1]),
    oldLogProbs: tf.tensor2d(old, [B, width - 1]),
    advantages: tf.tensor2d(advantages, [B, width - 1]),
    sequences: B,
  };
}

/**
 * The micro-batch budget: `microBatchTokens`, and with gradient peers small enough that
 * every thread can claim about `perThread` micro-batches (as far as the rows allow; a row is
 * never split), so that the threads finish close together even when one of them runs slower.
 * `tokens`: what the rows cost in all (default their lengths summed; with shared prompts,
 * `tokensWithSharedPrompts`). GRPO with shared prompts plans with `planSharedForThreads`
 * instead: every piece a group is split into runs its prompt again, and pads its rows to its
 * longest (on 25 recorded default-run batches of 4 groups x 8, 2 threads: 12,218 tokens
 * processed a batch at 4 a thread, 9,470 at 2 a thread, 8,957 with `planSharedForThreads`,
 * 11,588 without sharing; 8,086 with neither padding nor splits).
 */
export function microBatchBudget(
  rows: readonly { tokens: ArrayLike<number> }[],
  microBatchTokens: number,
  threads: number,
  tokens = rows.reduce((n, r) => n + r.tokens.length, 0),
  perThread = 4,
): number {
  if (threads <= 1) return microBatchTokens;
  return Math.min(microBatchTokens, Math.max(2, Math.ceil(tokens / (perThread * threads))));
}
