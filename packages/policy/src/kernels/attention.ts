/**
 * Decode/prefill attention over per-sequence KV caches, and the memory those caches live in.
 *
 * - `KernelHeap` (one per process, `kernelHeap()`): a single WebAssembly.Memory holding every
 *   sequence's KV cache plus the scratch of attention calls, with a buddy allocator
 *   (power-of-two blocks aligned to their size; a released block merges with its free
 *   buddy, a larger free block is split; the memory grows only when nothing free fits, and
 *   never shrinks). It is separate from tfjs-backend-wasm's heap.
 *   `heap.f32` is a Float32Array view of the whole memory, re-created when the memory has
 *   grown (growing detaches the old buffer): read it again after every allocation.
 * - `attendRows`: the attention of a batch of query rows, each over its own sequence's
 *   cache of one layer. Two implementations with the same layout and results (≤ 1e-5):
 *   a hand-written WebAssembly SIMD kernel (`attention.wat`, compiled by
 *   scripts/build-kernels.mjs into `attention-wasm.ts`), used when the engine validates
 *   SIMD and headDim is a multiple of 4, and plain JS loops (the fallback and reference).
 *   `AGENTRL_ATTENTION_KERNEL=js|wasm` or `setAttentionKernel` chooses one.
 *
 * Cache layout (see KVSequence): per layer, keys [kvHeads, capacity, headDim] then values
 * the same, float offsets into `heap.f32`. Query head h uses kv head ⌊h / group⌋ (HF repeat_kv).
 */
import { ATTENTION_WASM_BASE64 } from "./attention-wasm.js";
import { BackendUnavailableError } from "../backend.js";

// ---------------------------------------------------------------- WebAssembly (typed locally: no DOM lib)

interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}
interface WasmApi {
  Memory: new (descriptor: { initial: number; maximum?: number }) => WasmMemory;
  Module: new (bytes: Uint8Array) => object;
  Instance: new (
    module: object,
    imports: Record<string, Record<string, unknown>>,
  ) => { exports: Record<string, unknown> };
  validate(bytes: Uint8Array): boolean;
}
const wasmApi = (globalThis as { WebAssembly?: WasmApi }).WebAssembly;

type RowsExport = (
  data: number,
  rows: number,
  rowWidth: number,
  heads: number,
  kvHeads: number,
  headDim: number,
  bias: number,
  cos: number,
  sin: number,
  meta: number,
  out: number,
  scale: number,
  scores: number,
) => void;
type AttendExport = (
  q: number,
  out: number,
  k: number,
  v: number,
  headStride: number,
  length: number,
  kvHeads: number,
  group: number,
  headDim: number,
  scale: number,
  scores: number,
) => void;

// ---------------------------------------------------------------- the heap

const PAGE_BYTES = 65536;
/** wasm32's limit: 4 GiB. */
const MAX_PAGES = 65536;
const INITIAL_PAGES = 32;
/** Smallest block (bytes); every block is a power of two ≥ this, so blocks stay 16-byte aligned. */
const MIN_BLOCK_BYTES = 64;

/** A block of the kernel heap: byte offset and size (a power of two). */
export interface HeapBlock {
  offset: number;
  bytes: number;
}

/** Raw memory behind the heap: a WebAssembly.Memory, or (no WebAssembly at all) an ArrayBuffer copied on growth. */
interface Backing {
  readonly buffer: ArrayBuffer;
  grow(pages: number): void;
}

function createBacking(pages: number): { backing: Backing; memory?: WasmMemory } {
  if (wasmApi) {
    const memory = new wasmApi.Memory({ initial: pages });
    return {
      backing: {
        get buffer() {
          return memory.buffer;
        },
        grow: (more) => void memory.grow(more),
      },
      memory,
    };
  }
  let buffer = new ArrayBuffer(pages * PAGE_BYTES);
  return {
    backing: {
      get buffer() {
        return buffer;
      },
      grow(more) {
        const next = new ArrayBuffer(buffer.byteLength + more * PAGE_BYTES);
        new Uint8Array(next).set(new Uint8Array(buffer));
        buffer = next;
      },
    },
  };
}

export class KernelHeap {
  /** @internal The WebAssembly.Memory (undefined only where WebAssembly is missing). */
  readonly memory?: WasmMemory;
  private readonly backing: Backing;
  private view: Float32Array;
  private intView: Int32Array;
  /** First byte never handed out (the bump pointer); the first 64 bytes stay unused. */
  private top = MIN_BLOCK_BYTES;
  /** Free blocks' offsets per size class (log2 of the size). */
  private readonly free: Set<number>[] = Array.from({ length: 33 }, () => new Set());
  private live = 0;
  private scratchBlock?: HeapBlock;

  constructor(initialPages = INITIAL_PAGES) {
    const { backing, memory } = createBacking(initialPages);
    this.backing = backing;
    this.memory = memory;
    this.view = new Float32Array(backing.buffer);
    this.intView = new Int32Array(backing.buffer);
  }

  /** The whole heap as floats; re-created after growth. Do not keep it across an allocation. */
  get f32(): Float32Array {
    if (this.view.buffer !== this.backing.buffer) this.view = new Float32Array(this.backing.buffer);
    return this.view;
  }

  /** The whole heap as 32-bit integers (same rules as `f32`). */
  get i32(): Int32Array {
    if (this.intView.buffer !== this.backing.buffer)
      this.intView = new Int32Array(this.backing.buffer);
    return this.intView;
  }

  /** Bytes the memory has (it grows, never shrinks). */
  get byteLength(): number {
    return this.backing.buffer.byteLength;
  }

  /** Bytes in blocks handed out and not released (size classes, not requested sizes), the scratch block included. */
  get liveBytes(): number {
    return this.live;
  }

  /** Bytes of the scratch block (kept between calls, grown as needed). */
  get scratchBytes(): number {
    return this.scratchBlock?.bytes ?? 0;
  }

  /**
   * A block of at least `bytes` bytes, rounded up to a power of two and aligned to its size
   * (a buddy allocator): a free block of that size, else a larger free block split in
   * halves, else new space at the end (the memory grows when needed).
   */
  allocate(bytes: number): HeapBlock {
    const sizeClass = 32 - Math.clz32(Math.max(bytes, MIN_BLOCK_BYTES) - 1);
    const size = 2 ** sizeClass;
    let larger = sizeClass;
    while (larger < this.free.length && this.free[larger].size === 0) larger++;
    let offset: number;
    if (larger < this.free.length) {
      offset = this.free[larger].values().next().value as number;
      this.free[larger].delete(offset);
      // keep the lower half, free the upper halves down to the size wanted
      for (let split = larger - 1; split >= sizeClass; split--)
        this.free[split].add(offset + 2 ** split);
    } else {
      offset = Math.ceil(this.top / size) * size;
      const end = offset + size;
      if (end > MAX_PAGES * PAGE_BYTES)
        throw new RangeError(
          `kernel heap would pass 4 GiB (${end} bytes): dispose sequences you no longer need`,
        );
      this.freeRange(this.top, offset); // the alignment gap
      if (end > this.byteLength) {
        const pages = this.byteLength / PAGE_BYTES;
        const needed = Math.ceil((end - this.byteLength) / PAGE_BYTES);
        this.backing.grow(Math.min(Math.max(needed, pages), MAX_PAGES - pages)); // at least double
      }
      this.top = end;
    }
    this.live += size;
    return { offset, bytes: size };
  }

  /** Gives a block back; it merges with its free buddy (offset ± size), repeatedly. */
  release(block: HeapBlock): void {
    if (block.bytes === 0) return;
    this.live -= block.bytes;
    this.addFree(block.offset, Math.log2(block.bytes));
  }

  private addFree(offset: number, sizeClass: number): void {
    for (;;) {
      const size = 2 ** sizeClass;
      const buddy = (offset / size) % 2 === 0 ? offset + size : offset - size;
      if (sizeClass + 1 >= this.free.length || !this.free[sizeClass].delete(buddy)) break;
      offset = Math.min(offset, buddy);
      sizeClass++;
    }
    this.free[sizeClass].add(offset);
  }

  /** Frees [start, end) (multiples of 64) as aligned power-of-two pieces. */
  private freeRange(start: number, end: number): void {
    while (start < end) {
      let size = MIN_BLOCK_BYTES;
      while (start % (2 * size) === 0 && start + 2 * size <= end) size *= 2;
      this.addFree(start, Math.log2(size));
      start += size;
    }
  }

  /** A scratch block of ≥ `bytes` (shared by all calls; valid until the next `scratch`). Byte offset. */
  scratch(bytes: number): number {
    if (!this.scratchBlock || this.scratchBlock.bytes < bytes) {
      if (this.scratchBlock) this.release(this.scratchBlock);
      this.scratchBlock = this.allocate(bytes);
    }
    return this.scratchBlock.offset;
  }
}

let sharedHeap: KernelHeap | undefined;

/** The process's kernel heap (created on first use). */
export function kernelHeap(): KernelHeap {
  return (sharedHeap ??= new KernelHeap());
}

// ---------------------------------------------------------------- kernel choice

export type AttentionKernelName = "wasm" | "js";

let simdExports: { attend: AttendExport; rows: RowsExport } | null | undefined;

function loadSimdKernel(): { attend: AttendExport; rows: RowsExport } | null {
  if (simdExports !== undefined) return simdExports;
  simdExports = null;
  const heap = kernelHeap();
  if (!wasmApi || !heap.memory) return simdExports;
  const bytes = Uint8Array.from(atob(ATTENTION_WASM_BASE64), (c) => c.charCodeAt(0));
  if (!wasmApi.validate(bytes)) return simdExports; // no WebAssembly SIMD here
  const instance = new wasmApi.Instance(new wasmApi.Module(bytes), {
    env: { memory: heap.memory },
  });
  simdExports = {
    attend: instance.exports.attend as AttendExport,
    rows: instance.exports.rows as RowsExport,
  };
  return simdExports;
}

/** Whether the WebAssembly SIMD kernel can run here. */
export function simdAttentionAvailable(): boolean {
  return loadSimdKernel() !== null;
}

let chosen: AttentionKernelName | undefined;

/** The kernel `attendRows` uses: `AGENTRL_ATTENTION_KERNEL`, else wasm where SIMD validates, else js. */
export function attentionKernel(): AttentionKernelName {
  if (chosen === undefined) {
    const forced =
      typeof process === "undefined" ? undefined : process.env.AGENTRL_ATTENTION_KERNEL;
    if (forced && forced !== "js" && forced !== "wasm")
      throw new BackendUnavailableError(
        `AGENTRL_ATTENTION_KERNEL must be "js" or "wasm", not "${forced}"`,
      );
    chosen =
      (forced as AttentionKernelName | undefined) ?? (simdAttentionAvailable() ? "wasm" : "js");
    if (chosen === "wasm" && !simdAttentionAvailable())
      throw new BackendUnavailableError(
        "AGENTRL_ATTENTION_KERNEL=wasm but WebAssembly SIMD is not available",
      );
  }
  return chosen;
}

/** Chooses the attention kernel (tests, benchmarks); returns the previous choice. Caches are shared, so switching is safe at any time. */
export function setAttentionKernel(name: AttentionKernelName): AttentionKernelName {
  const previous = attentionKernel();
  if (name === "wasm" && !simdAttentionAvailable())
    throw new BackendUnavailableError("WebAssembly SIMD is not available");
  chosen = name;
  return previous;
}

// ---------------------------------------------------------------- attention of a batch of rows

/** Rotary tables [positions, headDim/2] (cos θ, sin θ per position and frequency). */
export interface RotaryTables {
  cos: Float32Array;
  sin: Float32Array;
}

/**
 * The attention part of one layer for the rows of one call (a decode step: one row per
 * sequence; a prefill chunk: consecutive positions of one sequence; or a mix), in one pass
 * per row: the q/k/v biases added, rotary applied to the q and k heads, the row's key and
 * value written into its sequence's cache at its position, and its attention over positions
 * 0..position of that cache. Rows of one sequence must come in position order. Create one
 * per call (it stages the rows' rotary table rows in the heap scratch), then `layer()` for
 * each layer; no other heap allocation may happen in between.
 */
export class AttentionRows {
  private readonly wasm: boolean;
  private readonly rowWidth: number;
  private readonly half: number;
  private readonly maxLength: number;
  /** Float offsets of the scratch regions (wasm path). */
  private readonly at = { data: 0, out: 0, bias: 0, cos: 0, sin: 0, meta: 0, scores: 0 };

  constructor(
    private readonly rows: number,
    private readonly heads: number,
    private readonly kvHeads: number,
    private readonly headDim: number,
    private readonly positions: ArrayLike<number>,
    private readonly rope: RotaryTables,
  ) {
    this.rowWidth = (heads + 2 * kvHeads) * headDim;
    this.half = headDim / 2;
    let maxPosition = 0;
    for (let row = 0; row < rows; row++) maxPosition = Math.max(maxPosition, positions[row]);
    this.maxLength = maxPosition + 1;
    this.wasm = attentionKernel() === "wasm" && headDim % 4 === 0;
    if (!this.wasm) return;
    const heap = kernelHeap();
    const round4 = (n: number) => Math.ceil(n / 4) * 4;
    const sizes = {
      data: rows * this.rowWidth,
      out: rows * heads * headDim,
      bias: this.rowWidth,
      cos: round4(rows * this.half),
      sin: round4(rows * this.half),
      meta: 4 * rows,
      scores: 20 * this.maxLength,
    };
    let offset = heap.scratch(4 * Object.values(sizes).reduce((a, b) => a + b, 0)) / 4; // may grow the heap
    for (const key of Object.keys(sizes) as (keyof typeof sizes)[]) {
      this.at[key] = offset;
      offset += sizes[key];
    }
    const f32 = heap.f32;
    for (let row = 0; row < rows; row++) {
      const from = positions[row] * this.half;
      f32.set(rope.cos.subarray(from, from + this.half), this.at.cos + row * this.half);
      f32.set(rope.sin.subarray(from, from + this.half), this.at.sin + row * this.half);
    }
  }

  /**
   * One layer: `data` [rows, (heads + 2 kvHeads)·headDim] is [q | k | v] of each row before
   * biases and rotary; `bias` (or undefined) is added to every row; row r's cache has its
   * keys at float offset keyOffsets[r] of the heap, values at valueOffsets[r], kv head stride
   * capacities[r]·headDim. Returns the context [rows, heads·headDim]. The JS path modifies `data`.
   */
  layer(
    data: Float32Array,
    bias: Float32Array | undefined,
    keyOffsets: ArrayLike<number>,
    valueOffsets: ArrayLike<number>,
    capacities: ArrayLike<number>,
  ): Float32Array {
    const { rows, heads, kvHeads, headDim, rowWidth, positions, at } = this;
    const qWidth = heads * headDim;
    const heap = kernelHeap();
    if (this.wasm) {
      const f32 = heap.f32;
      const i32 = heap.i32;
      f32.set(data.subarray(0, rows * rowWidth), at.data);
      if (bias) f32.set(bias, at.bias);
      for (let row = 0; row < rows; row++) {
        const meta = at.meta + 4 * row;
        i32[meta] = 4 * keyOffsets[row];
        i32[meta + 1] = 4 * valueOffsets[row];
        i32[meta + 2] = 4 * capacities[row] * headDim;
        i32[meta + 3] = positions[row];
      }
      loadSimdKernel()!.rows(
        4 * at.data,
        rows,
        rowWidth,
        heads,
        kvHeads,
        headDim,
        bias ? 4 * at.bias : 0,
        4 * at.cos,
        4 * at.sin,
        4 * at.meta,
        4 * at.out,
        1 / Math.sqrt(headDim),
        4 * at.scores,
      );
      return f32.slice(at.out, at.out + rows * qWidth);
    }
    if (bias) {
      for (let row = 0, offset = 0; row < rows; row++, offset += rowWidth) {
        for (let c = 0; c < rowWidth; c++) data[offset + c] += bias[c];
      }
    }
    rotateRows(data, rows, rowWidth, positions, heads + kvHeads, headDim, this.rope);
    const cache = heap.f32;
    for (let row = 0; row < rows; row++) {
      const stride = capacities[row] * headDim;
      for (let head = 0; head < kvHeads; head++) {
        const key = row * rowWidth + (heads + head) * headDim;
        const value = key + kvHeads * headDim;
        const to = head * stride + positions[row] * headDim;
        cache.set(data.subarray(key, key + headDim), keyOffsets[row] + to);
        cache.set(data.subarray(value, value + headDim), valueOffsets[row] + to);
      }
    }
    const group = heads / kvHeads;
    if (jsScores.length < group * this.maxLength)
      jsScores = new Float32Array(2 * group * this.maxLength);
    const context = new Float32Array(rows * qWidth);
    for (let row = 0; row < rows; row++) {
      attendJs(
        data,
        row * rowWidth,
        cache,
        keyOffsets[row],
        valueOffsets[row],
        capacities[row] * headDim,
        positions[row] + 1,
        heads,
        kvHeads,
        headDim,
        context,
        row * qWidth,
        jsScores,
      );
    }
    return context;
  }
}

/**
 * Rotary embedding in place on rows (HF rotate_half: x1' = x1 cos − x2 sin, x2' = x2 cos +
 * x1 sin over the two halves of each head): row r at position positions[r] holds `heads`
 * heads of headDim from its start (the query heads, then the key heads).
 */
export function rotateRows(
  data: Float32Array,
  rows: number,
  rowWidth: number,
  positions: ArrayLike<number>,
  heads: number,
  headDim: number,
  tables: RotaryTables,
): void {
  const half = headDim / 2;
  const { cos, sin } = tables;
  for (let row = 0; row < rows; row++) {
    const table = positions[row] * half;
    for (let head = 0; head < heads; head++) {
      const first = row * rowWidth + head * headDim;
      for (let i = 0; i < half; i++) {
        const c = cos[table + i];
        const s = sin[table + i];
        const x1 = data[first + i];
        const x2 = data[first + half + i];
        data[first + i] = x1 * c - x2 * s;
        data[first + half + i] = x2 * c + x1 * s;
      }
    }
  }
}

let jsScores = new Float32Array(0);

/**
 * Attention of `rows` query rows, each over its own sequence's cache of one layer.
 * Row r: queries [heads, headDim] at data[r·rowWidth …]; keys of its kv heads at float offset
 * keyOffsets[r] of the heap (kv head stride capacities[r]·headDim), values at valueOffsets[r];
 * it attends to its first lengths[r] positions. Returns the context [rows, heads·headDim].
 * Attention alone, on either kernel (the tests' check of the two against each other); the
 * decode and prefill path uses `AttentionRows`, which also adds biases, rotates and writes the cache.
 */
export function attendRows(
  data: Float32Array,
  rowWidth: number,
  rows: number,
  keyOffsets: ArrayLike<number>,
  valueOffsets: ArrayLike<number>,
  capacities: ArrayLike<number>,
  lengths: ArrayLike<number>,
  heads: number,
  kvHeads: number,
  headDim: number,
): Float32Array {
  const qWidth = heads * headDim;
  const group = heads / kvHeads;
  let maxLength = 0;
  for (let row = 0; row < rows; row++) maxLength = Math.max(maxLength, lengths[row]);
  const heap = kernelHeap();
  if (attentionKernel() === "wasm" && headDim % 4 === 0 && rowWidth % 4 === 0) {
    const attend = loadSimdKernel()!.attend;
    const inputFloats = rows * rowWidth;
    const outputFloats = rows * qWidth;
    const scratch = heap.scratch(4 * (inputFloats + outputFloats + 20 * maxLength)) / 4; // may grow the heap
    const f32 = heap.f32;
    f32.set(data.subarray(0, inputFloats), scratch);
    const output = scratch + inputFloats;
    const scores = 4 * (output + outputFloats);
    const scale = 1 / Math.sqrt(headDim);
    for (let row = 0; row < rows; row++) {
      attend(
        4 * (scratch + row * rowWidth),
        4 * (output + row * qWidth),
        4 * keyOffsets[row],
        4 * valueOffsets[row],
        4 * capacities[row] * headDim,
        lengths[row],
        kvHeads,
        group,
        headDim,
        scale,
        scores,
      );
    }
    return f32.slice(output, output + outputFloats);
  }
  if (jsScores.length < group * maxLength) jsScores = new Float32Array(2 * group * maxLength);
  const cache = heap.f32;
  const context = new Float32Array(rows * qWidth);
  for (let row = 0; row < rows; row++) {
    attendJs(
      data,
      row * rowWidth,
      cache,
      keyOffsets[row],
      valueOffsets[row],
      capacities[row] * headDim,
      lengths[row],
      heads,
      kvHeads,
      headDim,
      context,
      row * qWidth,
      jsScores,
    );
  }
  return context;
}

/**
 * Attention of one query row in plain JS (the fallback, and the reference for the wasm
 * kernel): queries [heads, headDim] at `queryOffset` of `queries`, over the first `length`
 * positions of one layer's cache in `cache` (keys of kv head 0 at `keyOffset`, values at
 * `valueOffset`, kv head stride `headStride` floats); writes [heads, headDim] to `output` at
 * `outputOffset`. `scores`: scratch of ≥ group·length floats. Each key row is read once for
 * the whole group of query heads that shares it.
 */
export function attendJs(
  queries: Float32Array,
  queryOffset: number,
  cache: Float32Array,
  keyOffset: number,
  valueOffset: number,
  headStride: number,
  length: number,
  heads: number,
  kvHeads: number,
  headDim: number,
  output: Float32Array,
  outputOffset: number,
  scores: Float32Array,
): void {
  const group = heads / kvHeads;
  if (group === 4)
    return attendJsGroupOf4(
      queries,
      queryOffset,
      cache,
      keyOffset,
      valueOffset,
      headStride,
      length,
      kvHeads,
      headDim,
      output,
      outputOffset,
      scores,
    );
  const scale = 1 / Math.sqrt(headDim);
  for (let kvHead = 0; kvHead < kvHeads; kvHead++) {
    const keyBase = keyOffset + kvHead * headStride;
    const valueBase = valueOffset + kvHead * headStride;
    const firstQuery = queryOffset + kvHead * group * headDim;
    const firstOutput = outputOffset + kvHead * group * headDim;
    for (let position = 0; position < length; position++) {
      const key = keyBase + position * headDim;
      for (let member = 0; member < group; member++) {
        const query = firstQuery + member * headDim;
        let dot = 0;
        for (let c = 0; c < headDim; c++) dot += queries[query + c] * cache[key + c];
        scores[member * length + position] = dot * scale;
      }
    }
    for (let member = 0; member < group; member++) {
      const row = member * length;
      let max = -Infinity;
      for (let position = 0; position < length; position++)
        if (scores[row + position] > max) max = scores[row + position];
      let sum = 0;
      for (let position = 0; position < length; position++) {
        const e = Math.exp(scores[row + position] - max);
        scores[row + position] = e;
        sum += e;
      }
      const inverse = 1 / sum;
      for (let position = 0; position < length; position++) scores[row + position] *= inverse;
      output.fill(0, firstOutput + member * headDim, firstOutput + (member + 1) * headDim);
    }
    for (let position = 0; position < length; position++) {
      const value = valueBase + position * headDim;
      for (let member = 0; member < group; member++) {
        const p = scores[member * length + position];
        const out = firstOutput + member * headDim;
        for (let c = 0; c < headDim; c++) output[out + c] += p * cache[value + c];
      }
    }
  }
}

/** `attendJs` for 4 query heads per kv head, the four accumulators in registers (~2× faster in V8). */
function attendJsGroupOf4(
  queries: Float32Array,
  queryOffset: number,
  cache: Float32Array,
  keyOffset: number,
  valueOffset: number,
  headStride: number,
  length: number,
  kvHeads: number,
  headDim: number,
  output: Float32Array,
  outputOffset: number,
  scores: Float32Array,
): void {
  const scale = 1 / Math.sqrt(headDim);
  for (let kvHead = 0; kvHead < kvHeads; kvHead++) {
    const keyBase = keyOffset + kvHead * headStride;
    const valueBase = valueOffset + kvHead * headStride;
    const q0 = queryOffset + kvHead * 4 * headDim;
    const [q1, q2, q3] = [q0 + headDim, q0 + 2 * headDim, q0 + 3 * headDim];
    let [max0, max1, max2, max3] = [-Infinity, -Infinity, -Infinity, -Infinity];
    for (let position = 0; position < length; position++) {
      const key = keyBase + position * headDim;
      let [s0, s1, s2, s3] = [0, 0, 0, 0];
      for (let c = 0; c < headDim; c++) {
        const k = cache[key + c];
        s0 += queries[q0 + c] * k;
        s1 += queries[q1 + c] * k;
        s2 += queries[q2 + c] * k;
        s3 += queries[q3 + c] * k;
      }
      s0 *= scale;
      s1 *= scale;
      s2 *= scale;
      s3 *= scale;
      scores[position] = s0;
      scores[length + position] = s1;
      scores[2 * length + position] = s2;
      scores[3 * length + position] = s3;
      if (s0 > max0) max0 = s0;
      if (s1 > max1) max1 = s1;
      if (s2 > max2) max2 = s2;
      if (s3 > max3) max3 = s3;
    }
    const inverses = [max0, max1, max2, max3].map((max, member) => {
      const row = member * length;
      let sum = 0;
      for (let position = 0; position < length; position++) {
        const e = Math.exp(scores[row + position] - max);
        scores[row + position] = e;
        sum += e;
      }
      return 1 / sum;
    });
    const o0 = outputOffset + kvHead * 4 * headDim;
    const [o1, o2, o3] = [o0 + headDim, o0 + 2 * headDim, o0 + 3 * headDim];
    output.fill(0, o0, o0 + 4 * headDim);
    for (let position = 0; position < length; position++) {
      const value = valueBase + position * headDim;
      const p0 = scores[position] * inverses[0];
      const p1 = scores[length + position] * inverses[1];
      const p2 = scores[2 * length + position] * inverses[2];
      const p3 = scores[3 * length + position] * inverses[3];
      for (let c = 0; c < headDim; c++) {
        const v = cache[value + c];
        output[o0 + c] += p0 * v;
        output[o1 + c] += p1 * v;
        output[o2 + c] += p2 * v;
        output[o3 + c] += p3 * v;
      }
    }
  }
}
