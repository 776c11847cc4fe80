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
 * adjacent) [(end − start)·g, end], −1e9 where a key lies after the row's position.
 */
export interface CausalPlan {
  chunks: { start: number; end: number; mask: tf.Tensor2D }[];
}

export function causalPlan(
  steps: number,
  group: number,
  chunkPositions = ATTENTION_CHUNK_POSITIONS,
): CausalPlan {
  const chunks: CausalPlan["chunks"] = [];
  for (let start = 0; start < steps; start += chunkPositions) {
    const end = Math.min(steps, start + chunkPositions);
    const data = new Float32Array((end - start) * group * end);
    for (let position = start; position < end; position++) {
      for (let member = 0; member < group; member++) {
        const row = ((position - start) * group + member) * end;
        data.fill(-1e9, row + position + 1, row + end);
      }
    }
    chunks.push({ start, end, mask: tf.tensor2d(data, [(end - start) * group, end]) });
  }
  return { chunks };
}

/**
 * Causal grouped-query attention for training, as rank-2 matmuls only (the fast path of
 * wasm; its batched matmul runs at ~2 GFLOP/s). q [B, S, H, hd] (already scaled by
 * 1/√hd), keys/values [B, S, kvH, hd]. For each (sequence, kv head), the g = H/kvH query
 * heads that share it form one matrix [S·g, hd] (position-major) against keysᵀ [hd, S]; the
 * queries go in chunks of positions so the keys after a chunk's last position are never
 * computed (about half the work at long S). Returns [B·S, H·hd] (query head h uses kv head
 * ⌊h/g⌋, as HF repeat_kv).
 */
export function causalAttention(
  q: tf.Tensor4D,
  keys: tf.Tensor4D,
  values: tf.Tensor4D,
  plan: CausalPlan,
): tf.Tensor2D {
  const [batch, steps, heads, headDim] = q.shape;
  const kvHeads = keys.shape[2];
  const group = heads / kvHeads;
  const blocks = batch * kvHeads;
  // per-block matrices by splitting rank-2 views along rows (wasm's Unpack is slower)
  const queries = tf.split(
    tf.reshape(
      tf.transpose(tf.reshape(q, [batch, steps, kvHeads, group * headDim]), [0, 2, 1, 3]),
      [blocks * steps * group, headDim],
    ),
    blocks,
    0,
  );
  const keysT = tf.split(
    tf.reshape(tf.transpose(keys, [0, 2, 3, 1]), [blocks * headDim, steps]),
    blocks,
    0,
  );
  const valueBlocks = tf.split(
    tf.reshape(tf.transpose(values, [0, 2, 1, 3]), [blocks * steps, headDim]),
    blocks,
    0,
  );
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
      const chunkKeys =
        end === steps ? keysT[block] : tf.slice(keysT[block], [0, 0], [headDim, end]);
      const chunkValues =
        end === steps ? valueBlocks[block] : tf.slice(valueBlocks[block], [0, 0], [end, headDim]);
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
