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
 * `sharedPrefixLength`); the other rows as `planMicroBatches` packs them. Costliest first.
 */
export function planSharedMicroBatches(
  rows: readonly TrainingRow[],
  maxTokens: number,
): TrainingRow[][] {
  const clusters = promptClusters(rows);
  const alone = clusters.filter((c) => !c.prefix).flatMap((c) => c.members);
  return [
    ...clusters.flatMap((c) => (c.prefix ? planMicroBatches(c.members, maxTokens, c.prefix) : [])),
    ...planMicroBatches(alone, maxTokens),
  ].sort((a, b) => processedTokens(b) - processedTokens(a));
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
 * `tokensWithSharedPrompts`). Shared prompts want fewer, larger micro-batches (2 a thread):
 * every piece a group is split into runs its prompt again, and pads its rows to its longest
 * (on recorded default-run batches of 4 groups x 8, 2 threads: 9,470 tokens processed a batch
 * at 2 a thread, 12,218 at 4, 11,588 without sharing; 8,086 with neither padding nor splits).
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
