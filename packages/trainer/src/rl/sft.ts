/**
 * Supervised warm start: next-token loss on expert episodes, in the same trajectory format
 * and with the same masks as RL (loss on the assistant's tokens only).
 *
 * An expert conversation becomes ONE token sequence exactly as the rollout would have built
 * it: the templated prompt, then per assistant turn the template's tokens for that turn
 * through its end-of-turn marker (mask 1), then the environment's reply as the difference of
 * the templated conversation before and after it (mask 0).
 *
 * A supervised step runs on one thread or, with gradient peers (the learner's gradient
 * thread, gradient-thread.ts), on two: thread k of n takes the micro-batches k, k + n, k + 2n,
 * … of the step's plan (longest first) and sums them in that order, each micro-batch's loss is
 * its share of the whole step's loss (divided by the step's token count), and the peers'
 * gradients are added to this thread's before the one clipped AdamW step: the same update as
 * one thread up to float summation order, and bit for bit the same update every time with the
 * same number of threads (a GRPO update, grpo.ts, lets the faster thread take more instead;
 * a supervised recipe is meant to be rebuilt).
 */
import * as tf from "@tensorflow/tfjs-core";
import {
  accumulateGradients,
  addGradient,
  tokenLogProbs,
  type AccumulatedGradients,
  type AdamW,
  type Policy,
  type Transformer,
} from "@agentrl/policy";
import { externalTurnTokens, replyTokens, type ChatTokenizer } from "@agentrl/rollout";
import type { Message, ToolSpec } from "@agentrl/envs";
import { microBatchBudget, planMicroBatches } from "./grpo.js";

export interface SupervisedRow {
  task: string;
  /** [L] token ids. */
  tokens: Int32Array;
  /** [L] 1 on the assistant's tokens (but those of turns marked `untrained`). */
  lossMask: Uint8Array;
}

/**
 * Builds the training sequence of one expert conversation (opening messages included); an
 * assistant turn marked `untrained` (an expert's deliberate mistake) is shown, not trained on.
 */
export function expertSequence(
  tokenizer: ChatTokenizer,
  task: string,
  conversation: readonly Message[],
  tools: readonly ToolSpec[],
  endOfTurnText = "<|im_end|>",
): SupervisedRow {
  const firstAssistant = conversation.findIndex((m) => m.role === "assistant");
  if (firstAssistant < 0) throw new Error("the conversation has no assistant turn");
  const tokens: number[] = tokenizer.encode(
    tokenizer.applyChatTemplate(conversation.slice(0, firstAssistant), {
      tools,
      addGenerationPrompt: true,
    }),
  );
  const mask: number[] = tokens.map(() => 0);
  for (let i = firstAssistant; i < conversation.length; i++) {
    const message = conversation[i];
    if (message.role !== "assistant") continue;
    const turn = externalTurnTokens(
      tokenizer,
      conversation.slice(0, i),
      tools,
      message,
      endOfTurnText,
    );
    tokens.push(...turn);
    mask.push(...turn.map(() => (message.untrained ? 0 : 1)));
    let next = i + 1;
    while (next < conversation.length && conversation[next].role !== "assistant") next++;
    if (next === i + 1) continue;
    if (next >= conversation.length) break; // the episode ended: nothing follows the last reply
    const reply = replyTokens(tokenizer, tokens, conversation.slice(0, next), tools, endOfTurnText);
    tokens.push(...reply.tokens);
    mask.push(...reply.tokens.map(() => 0));
  }
  return { task, tokens: Int32Array.from(tokens), lossMask: Uint8Array.from(mask) };
}

export interface SupervisedStepResult {
  /** Mean negative log-likelihood per assistant token. */
  loss: number;
  gradNorm: number;
  /** The step's loss-weighted token count (assistant tokens, plus prompt tokens at their weight). */
  tokens: number;
  /** Micro-batches computed by gradient peers (another thread). */
  peerMicroBatches: number;
}

/** One supervised step's work for a gradient peer: its share of the micro-batches of `plan`, against the policy's current weights. */
export interface SupervisedWork {
  policy: Policy;
  plan: readonly (readonly SupervisedRow[])[];
  /** The step's loss-weighted token count: every micro-batch's loss is divided by it. */
  total: number;
  /** The peer's share: thread `index` of `threads` (this thread is 0) takes the micro-batches index, index + threads, … */
  share: ThreadShare;
}

/** Thread `index` of `threads` (0-based; the stepping thread is 0). */
export interface ThreadShare {
  index: number;
  threads: number;
}

/** The plan indices of a thread's share, in order: index, index + threads, … below `count`. */
export function shareOf(share: ThreadShare, count: number): () => number | undefined {
  let next = share.index;
  return () => {
    if (next >= count) return undefined;
    const index = next;
    next += share.threads;
    return index;
  };
}

/** Another thread computing supervised gradients beside this one; resolves with the sum of its gradients, as tensors of this thread. */
export interface SupervisedPeer {
  supervised(work: SupervisedWork): Promise<AccumulatedGradients>;
}

/** The loss weight of a row's scored positions 1 … L−1 (position 0 is never predicted). */
function scoredWeight(row: SupervisedRow): number {
  return row.lossMask.reduce((a, b) => a + b, 0) - row.lossMask[0];
}

/**
 * Summed gradients of the micro-batches of `plan` that `claim` hands out (plan indices;
 * undefined when none is left): masked negative log-likelihood, each micro-batch's sum
 * divided by `total`. Tensors of a micro-batch live only while it runs.
 */
export function supervisedGradients(
  model: Transformer,
  plan: readonly (readonly SupervisedRow[])[],
  total: number,
  claim: () => number | undefined,
): AccumulatedGradients {
  const claimed = function* () {
    for (let index = claim(); index !== undefined; index = claim()) {
      const batch = plan[index];
      const width = Math.max(...batch.map((r) => r.tokens.length));
      const ids = new Int32Array(batch.length * width);
      const mask = new Float32Array(batch.length * (width - 1));
      batch.forEach((row, b) => {
        ids.set(row.tokens, b * width);
        for (let t = 1; t < row.tokens.length; t++) mask[b * (width - 1) + t - 1] = row.lossMask[t];
      });
      const m = {
        inputIds: tf.tensor2d(ids, [batch.length, width], "int32"),
        mask: tf.tensor2d(mask, [batch.length, width - 1]),
      };
      try {
        yield m;
      } finally {
        tf.dispose([m.inputIds, m.mask]);
      }
    }
  };
  return accumulateGradients(model, claimed(), (m) =>
    tf.tidy(
      () =>
        tf.div(
          tf.neg(
            tf.sum(tf.mul(tokenLogProbs(model, m.inputIds, { mask: m.mask }).logProbs, m.mask)),
          ),
          Math.max(1, total),
        ) as tf.Scalar,
    ),
  );
}

/** One optimizer step of masked next-token loss over `rows`, in micro-batches of at most `microBatchTokens`, on this thread. */
export function supervisedStep(
  policy: Policy,
  optimizer: AdamW,
  rows: readonly SupervisedRow[],
  microBatchTokens = 4096,
): SupervisedStepResult {
  const { plan, total } = planSupervisedStep(rows, microBatchTokens, 1);
  return applySupervisedStep(
    policy,
    optimizer,
    [
      supervisedGradients(
        policy.model,
        plan,
        total,
        shareOf({ index: 0, threads: 1 }, plan.length),
      ),
    ],
    total,
  );
}

/**
 * The same step with its micro-batches (smaller, so that every thread claims several) shared
 * out between this thread and `peers` (e.g. the learner's gradient thread) in fixed shares;
 * the same update as `supervisedStep` up to float summation order, and the same bits on every
 * run with the same number of peers.
 */
export async function sharedSupervisedStep(
  policy: Policy,
  optimizer: AdamW,
  rows: readonly SupervisedRow[],
  microBatchTokens = 4096,
  peers: readonly SupervisedPeer[] = [],
): Promise<SupervisedStepResult> {
  const threads = 1 + peers.length;
  const { plan, total } = planSupervisedStep(rows, microBatchTokens, threads);
  const helping = Promise.allSettled(
    peers.map((peer, k) =>
      peer.supervised({ policy, plan, total, share: { index: k + 1, threads } }),
    ),
  );
  let own: PromiseSettledResult<AccumulatedGradients>;
  try {
    own = {
      status: "fulfilled",
      value: supervisedGradients(
        policy.model,
        plan,
        total,
        shareOf({ index: 0, threads }, plan.length),
      ),
    };
  } catch (reason) {
    own = { status: "rejected", reason };
  }
  // Every thread has finished its share before anything is thrown or applied.
  const settled = [own, ...(await helping)];
  const parts = settled.flatMap((result) => (result.status === "fulfilled" ? [result.value] : []));
  const failure = settled.find(
    (result): result is PromiseRejectedResult => result.status === "rejected",
  );
  if (failure) {
    for (const part of parts) for (const gradient of part.gradients.values()) gradient.dispose();
    throw failure.reason;
  }
  return applySupervisedStep(policy, optimizer, parts, total);
}

function planSupervisedStep(
  rows: readonly SupervisedRow[],
  microBatchTokens: number,
  threads: number,
): { plan: SupervisedRow[][]; total: number } {
  if (rows.length === 0) throw new RangeError("a supervised step needs at least one row");
  return {
    plan: planMicroBatches(rows, microBatchBudget(rows, microBatchTokens, threads)),
    total: rows.reduce((n, r) => n + scoredWeight(r), 0),
  };
}

/** Sums the threads' gradients (this thread's first) and takes the one clipped AdamW step. */
function applySupervisedStep(
  policy: Policy,
  optimizer: AdamW,
  parts: readonly AccumulatedGradients[],
  total: number,
): SupervisedStepResult {
  const gradients = new Map<string, tf.Tensor>();
  for (const part of parts)
    for (const [name, gradient] of part.gradients) addGradient(gradients, name, gradient);
  try {
    const { gradNorm } = optimizer.applyGradients(gradients);
    policy.bumpVersion();
    return {
      loss: parts.reduce((n, part) => n + part.loss, 0),
      gradNorm,
      tokens: total,
      peerMicroBatches: parts.slice(1).reduce((n, part) => n + part.microBatches, 0),
    };
  } finally {
    for (const gradient of gradients.values()) gradient.dispose();
  }
}
