import { test } from "node:test";
import assert from "node:assert/strict";
import * as tf from "@tensorflow/tfjs-core";
import { availableBackends, initBackend, setBackend, BackendUnavailableError } from "./backend.js";
import { presetConfig } from "./config.js";
import { Transformer } from "./model.js";
import { tokenLogProbs } from "./train.js";

test("AGENTRL_BACKEND rejects unknown names; a missing tfjs-node is a clear error naming the package", async () => {
  const backends = await availableBackends();
  assert.ok(backends.includes("cpu"));
  if (!backends.includes("tensorflow")) {
    await assert.rejects(
      setBackend("tensorflow", { log: null }),
      (error: Error) =>
        error instanceof BackendUnavailableError && /@tensorflow\/tfjs-node/.test(error.message),
    );
  }
  process.env.AGENTRL_BACKEND = "gpu-please";
  await assert.rejects(
    setBackend(undefined as never, { log: null }),
    /AGENTRL_BACKEND='gpu-please'/,
  );
  delete process.env.AGENTRL_BACKEND;
});

test("wasm and cpu agree on logits and gradients (including the embedding gradient)", async (t) => {
  const backends = await availableBackends();
  if (!backends.includes("wasm")) return t.skip("wasm backend does not load here");
  const config = presetConfig("test", { vocabSize: 67 });
  const ids = [
    [3, 9, 27, 14, 5, 3, 60],
    [1, 1, 2, 3, 5, 8, 13],
  ];
  const run = async (backend: "wasm" | "cpu") => {
    await setBackend(backend, { log: null });
    const model = new Transformer(config, undefined, { seed: 11 });
    const input = tf.tensor2d(ids, undefined, "int32");
    const { value, grads } = tf.variableGrads(
      () => tf.sum(tokenLogProbs(model, input, { temperature: 0.8 }).logProbs) as tf.Scalar,
      model.trainableVariables(),
    );
    // gradients of float32 variables are float32
    const embedding = (
      grads[model.variables.get("model.embed_tokens.weight")!.name].dataSync() as Float32Array
    ).slice();
    const query = (
      grads[
        model.variables.get("model.layers.0.self_attn.q_proj.weight")!.name
      ].dataSync() as Float32Array
    ).slice();
    const result = { loss: value.dataSync()[0], embedding, query };
    tf.dispose([value, input, ...Object.values(grads)]);
    model.dispose();
    return result;
  };
  const wasm = await run("wasm");
  const cpu = await run("cpu");
  assert.ok(Math.abs(wasm.loss - cpu.loss) < 1e-4, `loss ${wasm.loss} vs ${cpu.loss}`);
  const maxDiff = (a: Float32Array, b: Float32Array) =>
    a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);
  assert.ok(
    maxDiff(wasm.embedding, cpu.embedding) < 1e-4,
    "embedding gradient (UnsortedSegmentSum on wasm)",
  );
  assert.ok(maxDiff(wasm.query, cpu.query) < 1e-4, "q_proj gradient (BatchMatMul gradient)");
  assert.ok(wasm.embedding.some((v) => v !== 0));
  await initBackend({ log: null });
});

/** The tensors `ops` makes on wasm and on cpu, as plain data (shape, dtype, values). */
async function onWasmAndCpu(ops: () => tf.Tensor[]) {
  const run = async (backend: "wasm" | "cpu") => {
    await setBackend(backend, { log: null });
    return tf.tidy(() =>
      ops().map((p) => ({ shape: p.shape, dtype: p.dtype, values: Array.from(p.dataSync()) })),
    );
  };
  return { wasm: await run("wasm"), cpu: await run("cpu") };
}

test("wasm's replaced Slice, SplitV and Unpack equal cpu's (strided, contiguous, int32)", async (t) => {
  const backends = await availableBackends();
  if (!backends.includes("wasm")) return t.skip("wasm backend does not load here");
  const { wasm, cpu } = await onWasmAndCpu(() => {
    const x = tf.reshape(tf.range(0, 3 * 4 * 5 * 6), [3, 4, 5, 6]);
    const ints = tf.cast(x, "int32");
    return [
      tf.slice(x, [1, 1, 2, 0], [2, 2, 3, 6]),
      tf.slice(x, [0, 2, 0, 1], [3, 1, 5, 4]),
      tf.slice(x, [2, 0, 0, 0], [1, 4, 5, 6]),
      tf.slice(ints, [0, 0, 1, 2], [3, 4, 2, 3]),
      ...tf.split(x, [1, 3, 2], 3),
      ...tf.split(tf.reshape(x, [60, 6]), 4, 0),
      ...tf.unstack(x, 1),
      ...tf.unstack(ints, 0),
    ];
  });
  assert.deepEqual(wasm, cpu);
  assert.equal(wasm.length, 4 + 3 + 4 + 4 + 3);
  await initBackend({ log: null });
});

test("wasm's replaced GatherV2 equals cpu's (rows, inner axes, batchDims, int32, short slices, bad index)", async (t) => {
  const backends = await availableBackends();
  if (!backends.includes("wasm")) return t.skip("wasm backend does not load here");
  const { wasm, cpu } = await onWasmAndCpu(() => {
    const x = tf.reshape(tf.range(0, 4 * 6 * 32), [4, 6, 32]);
    const ints = tf.cast(x, "int32");
    return [
      tf.gather(tf.reshape(x, [24, 32]), tf.tensor1d([5, 0, 23, 5], "int32")), // rows (the embedding lookup)
      tf.gather(x, tf.tensor1d([3, 1], "int32"), 1), // an inner axis
      tf.gather(
        x,
        tf.tensor2d(
          [
            [1, 2],
            [0, 0],
            [5, 4],
            [3, 3],
          ],
          [4, 2],
          "int32",
        ),
        1,
        1,
      ), // batchDims 1
      tf.gather(ints, tf.tensor1d([2, 2, 0], "int32")),
      tf.gather(x, tf.tensor1d([31, 0, 7], "int32"), 2), // slices of 1: wasm's own kernel
    ];
  });
  assert.deepEqual(wasm, cpu);
  await setBackend("wasm", { log: null });
  assert.throws(
    () => tf.tidy(() => tf.gather(tf.zeros([4, 32]), tf.tensor1d([4], "int32"))),
    /index value 4 is not in \[0, 3\]/,
  );
  await initBackend({ log: null });
});

test("wasm's Identity shares data: a clone outlives its source, and a variable reassigned after a gradient keeps the saved value", async (t) => {
  const backends = await availableBackends();
  if (!backends.includes("wasm")) return t.skip("wasm backend does not load here");
  await setBackend("wasm", { log: null });
  const source = tf.tensor1d([1, 2, 3]);
  const copy = tf.clone(source);
  source.dispose();
  assert.deepEqual(Array.from(copy.dataSync()), [1, 2, 3]);
  const weight = tf.variable(tf.tensor1d([2, 3, 4]));
  // d/dw sum(w²) = 2w uses the saved w; reassigning w afterwards must not change it
  const { grads } = tf.variableGrads(() => {
    const loss = tf.sum(tf.square(weight)) as tf.Scalar;
    weight.assign(tf.tensor1d([100, 100, 100]));
    return loss;
  }, [weight]);
  assert.deepEqual(Array.from(grads[weight.name].dataSync()), [4, 6, 8]);
  tf.dispose([copy, weight, ...Object.values(grads)]);
  await initBackend({ log: null });
});
