import { test, describe, before } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { initBackend } from "../backend.js";
import { presetConfig } from "../config.js";
import { Transformer } from "../model.js";
import {
  AttentionRows,
  KernelHeap,
  attendRows,
  kernelHeap,
  setAttentionKernel,
  simdAttentionAvailable,
  attentionKernel,
} from "./attention.js";

function rng(seed: number): () => number {
  let x = seed;
  return () => {
    x = (x * 1103515245 + 12345) % 2147483648;
    return (x / 2147483648) * 2 - 1;
  };
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  assert.equal(a.length, b.length);
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i] - b[i]));
  return max;
}

/** Runs attendRows with the given kernel (restoring the choice). */
function withKernel<T>(name: "js" | "wasm", run: () => T): T {
  const previous = setAttentionKernel(name);
  try {
    return run();
  } finally {
    setAttentionKernel(previous);
  }
}

before(async () => {
  await initBackend({ log: null });
});

describe("attention kernel", () => {
  test("WebAssembly SIMD is available on this machine and chosen by default", () => {
    assert.ok(simdAttentionAvailable());
    assert.equal(attentionKernel(), process.env.AGENTRL_ATTENTION_KERNEL ?? "wasm");
  });

  test("the generated module matches attention.wat (node scripts/build-kernels.mjs --check)", () => {
    const root = fileURLToPath(new URL("../../../..", import.meta.url));
    const result = spawnSync(process.execPath, ["scripts/build-kernels.mjs", "--check"], {
      cwd: root,
      encoding: "utf8",
    });
    assert.equal(result.status, 0, result.stderr);
  });

  for (const group of [1, 2, 4, 8]) {
    for (const headDim of [4, 8, 32, 64]) {
      test(`wasm = js for random q/k/v, lengths 1..300 (group ${group}, headDim ${headDim})`, () => {
        const random = rng(group * 1000 + headDim);
        const kvHeads = headDim === 64 ? 1 : 2;
        const heads = kvHeads * group;
        const qWidth = heads * headDim;
        const lengths = [1, 2, 3, 5, 31, 64, 65, 127, 200, 300];
        // each row its own cache block with spare capacity (the kv head stride is capacity·headDim)
        const heap = kernelHeap();
        const blocks = lengths.map((length) => {
          const capacity = length + 13;
          const block = heap.allocate(2 * kvHeads * capacity * headDim * 4);
          return { block, capacity };
        });
        const cache = heap.f32;
        const keyOffsets = blocks.map(({ block }) => block.offset / 4);
        const valueOffsets = blocks.map(
          ({ block, capacity }) => block.offset / 4 + kvHeads * capacity * headDim,
        );
        blocks.forEach(({ block }) => {
          for (let i = block.offset / 4; i < (block.offset + block.bytes) / 4; i++)
            cache[i] = 2 * random();
        });
        // rows [q | k | v] as feedRows reads them back (k and v are not read by attendRows)
        const rowWidth = qWidth + 2 * kvHeads * headDim;
        const data = new Float32Array(lengths.length * rowWidth).map(() => 2 * random());
        const capacities = blocks.map(({ capacity }) => capacity);
        const run = () =>
          attendRows(
            data,
            rowWidth,
            lengths.length,
            keyOffsets,
            valueOffsets,
            capacities,
            lengths,
            heads,
            kvHeads,
            headDim,
          );
        const js = withKernel("js", run);
        const wasm = withKernel("wasm", run);
        assert.equal(js.length, lengths.length * qWidth);
        const difference = maxAbsDiff(wasm, js);
        assert.ok(difference <= 1e-5, `max abs diff ${difference}`);
        assert.ok(js.some((x) => x !== 0));
        for (const { block } of blocks) heap.release(block);
      });
    }
  }

  for (const [headDim, group] of [
    [4, 1],
    [12, 4],
    [32, 4],
    [32, 2],
    [64, 8],
  ]) {
    test(`AttentionRows: biases, rotary, cache writes and attention, wasm = js (headDim ${headDim}, group ${group}, decode and prefill rows)`, () => {
      const random = rng(headDim * 10 + group);
      const kvHeads = 2;
      const heads = kvHeads * group;
      const capacity = 64;
      const heap = kernelHeap();
      // three sequences with 5, 0 and 17 cached positions; rows: one decode row for the first,
      // a prefill of 4 rows for the second, one decode row for the third
      const blocks = [5, 0, 17].map(() => heap.allocate(2 * kvHeads * capacity * headDim * 4));
      const cache = heap.f32;
      for (const block of blocks)
        for (let i = block.offset / 4; i < (block.offset + block.bytes) / 4; i++)
          cache[i] = random();
      const snapshot = blocks.map((block) =>
        cache.slice(block.offset / 4, (block.offset + block.bytes) / 4),
      );
      const owner = [0, 1, 1, 1, 1, 2];
      const positions = [5, 0, 1, 2, 3, 17];
      const rows = owner.length;
      const rowWidth = (heads + 2 * kvHeads) * headDim;
      const data = new Float32Array(rows * rowWidth).map(() => 2 * random());
      const bias = new Float32Array(rowWidth).map(() => random());
      const half = headDim / 2;
      const rope = {
        cos: new Float32Array(32 * half).map(() => random()),
        sin: new Float32Array(32 * half).map(() => random()),
      };
      const keyOffsets = owner.map((o) => blocks[o].offset / 4);
      const valueOffsets = owner.map((o) => blocks[o].offset / 4 + kvHeads * capacity * headDim);
      const capacities = owner.map(() => capacity);
      const run = () => {
        const f32 = heap.f32;
        blocks.forEach((block, i) => f32.set(snapshot[i], block.offset / 4));
        const context = new AttentionRows(rows, heads, kvHeads, headDim, positions, rope).layer(
          data.slice(),
          bias,
          keyOffsets,
          valueOffsets,
          capacities,
        );
        return {
          context,
          caches: blocks.map((block) =>
            heap.f32.slice(block.offset / 4, (block.offset + block.bytes) / 4),
          ),
        };
      };
      const js = withKernel("js", run);
      const wasm = withKernel("wasm", run);
      const difference = maxAbsDiff(wasm.context, js.context);
      assert.ok(difference <= 1e-5, `context: max abs diff ${difference}`);
      js.caches.forEach((c, i) => {
        const cacheDifference = maxAbsDiff(wasm.caches[i], c);
        assert.ok(cacheDifference <= 1e-6, `cache ${i}: max abs diff ${cacheDifference}`);
        assert.ok(maxAbsDiff(c, snapshot[i]) > 0, `cache ${i} was written`);
      });
      for (const block of blocks) heap.release(block);
    });
  }

  test("wasm = js when scores differ by hundreds (exp underflow clamped)", () => {
    const random = rng(5);
    const [heads, kvHeads, headDim, length] = [8, 2, 32, 150];
    const heap = kernelHeap();
    const block = heap.allocate(2 * kvHeads * length * headDim * 4);
    const cache = heap.f32;
    for (let i = block.offset / 4; i < (block.offset + block.bytes) / 4; i++) cache[i] = random();
    const data = new Float32Array(heads * headDim + 2 * kvHeads * headDim).map(() => 40 * random()); // scores up to ~±200
    const run = () =>
      attendRows(
        data,
        data.length,
        1,
        [block.offset / 4],
        [block.offset / 4 + kvHeads * length * headDim],
        [length],
        [length],
        heads,
        kvHeads,
        headDim,
      );
    const difference = maxAbsDiff(withKernel("wasm", run), withKernel("js", run));
    assert.ok(difference <= 1e-5, `max abs diff ${difference}`);
    heap.release(block);
  });
});

describe("kernel heap", () => {
  test("blocks are power-of-two sized, 16-byte aligned, and reused after release", () => {
    const heap = new KernelHeap(1);
    const a = heap.allocate(100);
    assert.equal(a.bytes, 128);
    const b = heap.allocate(5000);
    assert.equal(b.bytes, 8192);
    assert.ok(a.offset > 0 && a.offset % 16 === 0 && b.offset % 16 === 0);
    assert.ok(b.offset >= a.offset + a.bytes);
    heap.release(a);
    assert.equal(heap.allocate(65).offset, a.offset); // same class
    assert.equal(heap.liveBytes, 128 + 8192);
  });

  test("released buddies merge into a larger block, and a larger free block is split", () => {
    const heap = new KernelHeap(1);
    const big = heap.allocate(1 << 16); // at 64 KiB; the alignment gap below it is freed in pieces
    heap.release(big);
    const size = heap.byteLength;
    const gap = heap.allocate(1 << 15);
    assert.ok(gap.offset < big.offset);
    const halves = [heap.allocate(1 << 15), heap.allocate(1 << 15)]; // the free 64 KiB block, split
    assert.deepEqual(
      halves.map((h) => h.offset).sort((a, b) => a - b),
      [big.offset, big.offset + (1 << 15)],
    );
    for (const half of halves) heap.release(half);
    assert.equal(heap.allocate(1 << 16).offset, big.offset); // merged again
    assert.equal(heap.byteLength, size);
    heap.release(gap);
    assert.equal(heap.liveBytes, 1 << 16);
  });

  test("growth keeps the contents and refreshes the view", () => {
    const heap = new KernelHeap(1);
    const block = heap.allocate(4096);
    const before = heap.f32;
    for (let i = 0; i < 1024; i++) before[block.offset / 4 + i] = i * 0.5;
    const size = heap.byteLength;
    heap.allocate(4 * size); // past the end: the memory grows
    assert.ok(heap.byteLength > size);
    assert.equal(before.length, 0, "the old view is detached");
    const after = heap.f32;
    assert.notEqual(after, before);
    for (let i = 0; i < 1024; i++) assert.equal(after[block.offset / 4 + i], i * 0.5);
  });

  test("sequences stay intact when the heap grows under them", () => {
    const model = new Transformer(presetConfig("test", { vocabSize: 50 }), undefined, { seed: 1 });
    const ids = Array.from({ length: 30 }, (_, t) => (t * 7 + 3) % 50);
    const reference = model.createSequence();
    const live = model.createSequence();
    model.prefill(reference, ids.slice(0, 20));
    model.prefill(live, ids.slice(0, 20));
    const heap = kernelHeap();
    const size = heap.byteLength;
    const filler = heap.allocate(2 * size); // forces growth while `live` holds its cache
    assert.ok(heap.byteLength > size);
    for (let t = 20; t < 30; t++) {
      const [a, b] = model.decodeStep([reference, live], [ids[t], ids[t]]);
      assert.ok(maxAbsDiff(a, b) === 0);
    }
    // and against a fresh sequence fed the same tokens after the growth
    const fresh = model.createSequence();
    model.prefill(fresh, ids);
    const [again] = model.decodeStep([live], [1]);
    const [expected] = model.decodeStep([fresh], [1]);
    const difference = maxAbsDiff(again, expected);
    assert.ok(difference <= 1e-4, `max abs diff ${difference}`);
    heap.release(filler);
    for (const s of [reference, live, fresh]) s.dispose();
    model.dispose();
  });

  test("the heap does not grow over many sequences joining and leaving", () => {
    // 4 kv heads of 64: 4 KiB a position, so a 160-token cache is a 1 MiB block
    const model = new Transformer(
      presetConfig("test", {
        vocabSize: 50,
        numAttentionHeads: 4,
        numKeyValueHeads: 4,
        headDim: 64,
      }),
      undefined,
      { seed: 2 },
    );
    const heap = kernelHeap();
    const random = rng(9);
    const live = heap.liveBytes - heap.scratchBytes;
    let allocated = 0;
    const allocate = heap.allocate;
    heap.allocate = function (bytes: number) {
      const block = allocate.call(this, bytes);
      if (sizeAfterWarmUp > 0) allocated += block.bytes;
      return block;
    };
    let sizeAfterWarmUp = 0;
    const running: ReturnType<Transformer["createSequence"]>[] = [];
    try {
      for (let round = 0; round < 300; round++) {
        if (round === 100) sizeAfterWarmUp = heap.byteLength;
        const sequence =
          round % 7 === 0 && running.length > 0 ? running[0].fork() : model.createSequence();
        const length = 1 + Math.floor((random() + 1) * 80); // 1..160: capacities 64, 128, 256
        model.prefill(
          sequence,
          Array.from({ length }, (_, t) => (t * 3 + round) % 50),
        );
        running.push(sequence);
        if (running.length > 8) running.splice(Math.floor((random() + 1) * 4), 1)[0].dispose();
        if (round % 5 === 0)
          model.decodeStep(
            running,
            running.map(() => 4),
          );
      }
    } finally {
      heap.allocate = allocate;
    }
    assert.ok(
      allocated > 3 * heap.byteLength,
      `${allocated} bytes allocated after the warm-up, heap ${heap.byteLength}`,
    );
    assert.equal(heap.byteLength, sizeAfterWarmUp);
    for (const s of running) s.dispose();
    assert.equal(heap.liveBytes - heap.scratchBytes, live);
    model.dispose();
  });

  test("decoding with the js and the wasm kernel gives the same logits", () => {
    const model = new Transformer(
      presetConfig("test", {
        vocabSize: 64,
        numAttentionHeads: 8,
        numKeyValueHeads: 2,
        headDim: 8,
      }),
      undefined,
      { seed: 4 },
    );
    const ids = Array.from({ length: 70 }, (_, t) => (t * 11 + 5) % 64);
    const run = () => {
      const sequence = model.createSequence();
      const out = [model.prefill(sequence, ids.slice(0, 40))];
      for (let t = 40; t < 70; t++) out.push(model.decodeStep([sequence], [ids[t]])[0]);
      sequence.dispose();
      return out;
    };
    const js = withKernel("js", run);
    const wasm = withKernel("wasm", run);
    const worst = Math.max(...js.map((logits, i) => maxAbsDiff(logits, wasm[i])));
    assert.ok(worst <= 1e-5, `max abs diff ${worst}`);
    model.dispose();
  });
});
