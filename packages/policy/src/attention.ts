/**
 * Attention helpers of the model (model.ts): the rotary tables, and causal grouped-query
 * attention for the training pass (`Transformer.forward`) written as rank-2 matmuls only,
 * the fast path of tfjs's wasm backend. (The decode path's attention is kernels/attention.ts.)
 */
import * as tf from "@tensorflow/tfjs-core";

/** cos/sin tables [positions, headDim/2] for θ_i = base^(-2i/headDim). */
export function rotaryTables(
  positions: number,
  headDim: number,
  base: number,
): { cos: Float32Array; sin: Float32Array } {
  const half = headDim / 2;
  const cos = new Float32Array(positions * half);
  const sin = new Float32Array(positions * half);
  for (let p = 0; p < positions; p++) {
    for (let i = 0; i < half; i++) {
      const angle = p / Math.pow(base, (2 * i) / headDim);
      cos[p * half + i] = Math.cos(angle);
      sin[p * half + i] = Math.sin(angle);
    }
  }
  return { cos, sin };
}

/** Query positions per attention chunk: a chunk of queries only meets the keys up to its last position. */
export const ATTENTION_CHUNK_POSITIONS = 128;

/**
 * How `causalAttention` cuts S positions into query chunks, with one additive mask per
 * chunk: chunk [start, end) has rows (position-major, the g query heads of a kv head
 * adjacent) [(end − start)·g, offset + end], −1e9 where a key lies after the row's position.
 * `offset` keys come first, seen by every position: a prefix shared by the batch's sequences
 * (see `causalAttention`'s `prefix`).
 */
export interface CausalPlan {
  chunks: { start: number; end: number; mask: tf.Tensor2D }[];
  /** Keys before the sequences' own: the shared prefix's length, 0 without one. */
  offset: number;
}

export function causalPlan(
  steps: number,
  group: number,
  chunkPositions = ATTENTION_CHUNK_POSITIONS,
  offset = 0,
): CausalPlan {
  const chunks: CausalPlan["chunks"] = [];
  for (let start = 0; start < steps; start += chunkPositions) {
    const end = Math.min(steps, start + chunkPositions);
    const width = offset + end;
    const data = new Float32Array((end - start) * group * width);
    for (let position = start; position < end; position++) {
      for (let member = 0; member < group; member++) {
        const row = ((position - start) * group + member) * width;
        data.fill(-1e9, row + offset + position + 1, row + width);
      }
    }
    chunks.push({ start, end, mask: tf.tensor2d(data, [(end - start) * group, width]) });
  }
  return { chunks, offset };
}

/**
 * Causal grouped-query attention for training, as rank-2 matmuls only (the fast path of
 * wasm; its batched matmul runs at ~2 GFLOP/s). q [B, S, H, hd] (already scaled by
 * 1/√hd), keys/values [B, S, kvH, hd]. For each (sequence, kv head), the g = H/kvH query
 * heads that share it form one matrix [S·g, hd] (position-major) against keysᵀ [hd, S]; the
 * queries go in chunks of positions so the keys after a chunk's last position are never
 * computed (about half the work at long S). Returns [B·S, H·hd] (query head h uses kv head
 * ⌊h/g⌋, as HF repeat_kv).
 *
 * With `prefix` (keys/values [1, P, kvH, hd] of P positions before every sequence, the plan's
 * offset P): each sequence also attends to those keys, as if its S positions followed them;
 * their gradient is the sum over the sequences. A GRPO group's episodes share their prompt:
 * its positions are computed once for the group instead of once per episode.
 */
export function causalAttention(
  q: tf.Tensor4D,
  keys: tf.Tensor4D,
  values: tf.Tensor4D,
  plan: CausalPlan,
  prefix?: { keys: tf.Tensor4D; values: tf.Tensor4D },
): tf.Tensor2D {
  const [batch, steps, heads, headDim] = q.shape;
  const kvHeads = keys.shape[2];
  const group = heads / kvHeads;
  const blocks = batch * kvHeads;
  const offset = prefix ? prefix.keys.shape[1] : 0;
  if (offset !== plan.offset)
    throw new RangeError(
      `the plan's offset ${plan.offset} is not the prefix's ${offset} positions`,
    );
  // per-block matrices by splitting rank-2 views along rows (wasm's Unpack is slower)
  const queries = tf.split(
    tf.reshape(
      tf.transpose(tf.reshape(q, [batch, steps, kvHeads, group * headDim]), [0, 2, 1, 3]),
      [blocks * steps * group, headDim],
    ),
    blocks,
    0,
  );
  let keysT = tf.split(
    tf.reshape(tf.transpose(keys, [0, 2, 3, 1]), [blocks * headDim, steps]),
    blocks,
    0,
  );
  let valueBlocks = tf.split(
    tf.reshape(tf.transpose(values, [0, 2, 1, 3]), [blocks * steps, headDim]),
    blocks,
    0,
  );
  if (prefix) {
    // block b = (sequence, kv head b mod kvH): the prefix's keys of that head before its own
    const prefixKeysT = tf.split(
      tf.reshape(tf.transpose(prefix.keys, [0, 2, 3, 1]), [kvHeads * headDim, offset]),
      kvHeads,
      0,
    );
    const prefixValues = tf.split(
      tf.reshape(tf.transpose(prefix.values, [0, 2, 1, 3]), [kvHeads * offset, headDim]),
      kvHeads,
      0,
    );
    // new arrays: the ones tf.split returned are its tape record's outputs
    keysT = keysT.map((own, block) => tf.concat([prefixKeysT[block % kvHeads], own], 1));
    valueBlocks = valueBlocks.map((own, block) =>
      tf.concat([prefixValues[block % kvHeads], own], 0),
    );
  }
  const { chunks } = plan;
  const contexts = queries.map((query, block) => {
    const queryChunks =
      chunks.length === 1
        ? [query]
        : tf.split(
            query,
            chunks.map((c) => (c.end - c.start) * group),
            0,
          );
    const outputs = queryChunks.map((chunkQueries, i) => {
      const { end, mask } = chunks[i];
      const width = offset + end;
      const chunkKeys =
        end === steps ? keysT[block] : tf.slice(keysT[block], [0, 0], [headDim, width]);
      const chunkValues =
        end === steps ? valueBlocks[block] : tf.slice(valueBlocks[block], [0, 0], [width, headDim]);
      const probabilities = tf.softmax(
        tf.add(tf.matMul(chunkQueries as tf.Tensor2D, chunkKeys as tf.Tensor2D), mask),
      );
      return tf.matMul(probabilities, chunkValues as tf.Tensor2D);
    });
    return outputs.length === 1 ? outputs[0] : tf.concat(outputs, 0);
  });
  const stacked = tf.reshape(contexts.length === 1 ? contexts[0] : tf.concat(contexts, 0), [
    batch,
    kvHeads,
    steps,
    group * headDim,
  ]);
  return tf.reshape(tf.transpose(stacked, [0, 2, 1, 3]), [batch * steps, heads * headDim]);
}
