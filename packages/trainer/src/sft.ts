/**
 * Supervised warm start: next-token loss on expert episodes, in the same trajectory format
 * and with the same masks as RL (loss on the assistant's tokens only).
 *
 * An expert conversation becomes ONE token sequence exactly as the rollout would have built
 * it: the templated prompt, then per assistant turn the template's tokens for that turn
 * through its end-of-turn marker (mask 1), then the environment's reply as the difference of
 * the templated conversation before and after it (mask 0).
 */
import * as tf from "@tensorflow/tfjs-core";
import { tokenLogProbs, trainStep, type AdamW, type Policy } from "@agentrl/policy";
import { externalTurnTokens, replyTokens, type ChatTokenizer } from "@agentrl/rollout";
import type { Message, ToolSpec } from "@agentrl/envs";
import { planMicroBatches } from "./grpo.js";

export interface SupervisedRow {
  task: string;
  /** [L] token ids. */
  tokens: Int32Array;
  /** [L] 1 on the assistant's tokens. */
  lossMask: Uint8Array;
}

/** Builds the training sequence of one expert conversation (opening messages included). */
export function expertSequence(
  tokenizer: ChatTokenizer,
  task: string,
  conversation: readonly Message[],
  tools: readonly ToolSpec[],
  endOfTurnText = "<|im_end|>",
): SupervisedRow {
  const firstAssistant = conversation.findIndex((m) => m.role === "assistant");
  if (firstAssistant < 0) throw new Error("the conversation has no assistant turn");
  const tokens: number[] = tokenizer.encode(tokenizer.applyChatTemplate(conversation.slice(0, firstAssistant), { tools, addGenerationPrompt: true }));
  const mask: number[] = tokens.map(() => 0);
  for (let i = firstAssistant; i < conversation.length; i++) {
    const message = conversation[i];
    if (message.role !== "assistant") continue;
    const turn = externalTurnTokens(tokenizer, conversation.slice(0, i), tools, message, endOfTurnText);
    tokens.push(...turn);
    mask.push(...turn.map(() => 1));
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
  tokens: number;
}

/** One optimizer step of masked next-token loss over `rows`, in micro-batches of at most `microBatchTokens`. */
export function supervisedStep(policy: Policy, optimizer: AdamW, rows: readonly SupervisedRow[], microBatchTokens = 4096): SupervisedStepResult {
  const total = rows.reduce((n, r) => n + r.lossMask.reduce((a, b) => a + b, 0) - r.lossMask[0], 0);
  const micro = planMicroBatches(rows, microBatchTokens).map((batch) => {
    const width = Math.max(...batch.map((r) => r.tokens.length));
    const ids = new Int32Array(batch.length * width);
    const mask = new Float32Array(batch.length * (width - 1));
    batch.forEach((row, b) => {
      ids.set(row.tokens, b * width);
      for (let t = 1; t < row.tokens.length; t++) mask[b * (width - 1) + t - 1] = row.lossMask[t];
    });
    return { inputIds: tf.tensor2d(ids, [batch.length, width], "int32"), mask: tf.tensor2d(mask, [batch.length, width - 1]) };
  });
  try {
    const result = trainStep(policy.model, optimizer, micro, (m) =>
      tf.tidy(() => tf.div(tf.neg(tf.sum(tf.mul(tokenLogProbs(policy.model, m.inputIds, { mask: m.mask }).logProbs, m.mask))), Math.max(1, total)) as tf.Scalar),
    );
    policy.bumpVersion();
    return { loss: result.loss, gradNorm: result.gradNorm, tokens: total };
  } finally {
    for (const m of micro) tf.dispose([m.inputIds, m.mask]);
  }
}
