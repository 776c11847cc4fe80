/**
 * The decode path's KV cache: one sequence's keys and values in the kernel heap
 * (kernels/attention.ts), outside tfjs's memory, so sequences join and leave a batch for free.
 */
import type { ModelConfig } from "./config.js";
import { kernelHeap, type HeapBlock } from "./kernels/attention.js";

/** What a sequence needs of its model: the shape of the cache (the model itself is the owner). */
export interface KVCacheOwner {
  readonly config: ModelConfig;
}

/** Frees the heap block of a sequence that was garbage-collected without `dispose()`. */
const unreleasedCaches = new FinalizationRegistry<HeapBlock>((block) =>
  kernelHeap().release(block),
);

/**
 * One sequence's KV cache, in the kernel heap (kernels/attention.ts: one WebAssembly.Memory
 * shared by all sequences, separate from tfjs's heap). The sequence owns one block laid out
 * per layer as keys [kvHeads, capacity, headDim] then values [kvHeads, capacity, headDim]
 * (the first `length` positions used). Decode steps append one position in place; when
 * full, the capacity doubles (a new block, the used positions copied, the old block back to
 * the heap's free list: amortised O(1)). Attention reads the cache where it is, so sequences
 * join and leave a batch for free. `dispose()` gives the block back (a sequence garbage-
 * collected without it is freed by a FinalizationRegistry, later).
 */
export class KVSequence {
  /** @internal Positions the cache holds per kv head. */
  capacity = 0;
  /** The heap block (byte offset, size); {0, 0} before the first token. Shared with the finalizer. */
  private readonly block: HeapBlock = { offset: 0, bytes: 0 };
  private tokenCount = 0;
  private disposed = false;

  constructor(private readonly model: KVCacheOwner) {}

  /** Tokens in the cache. */
  get length(): number {
    return this.tokenCount;
  }

  get isDisposed(): boolean {
    return this.disposed;
  }

  /** Frees this sequence's cache. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.freeBlock();
    this.capacity = 0;
  }

  private freeBlock(): void {
    if (this.block.bytes === 0) return;
    unreleasedCaches.unregister(this);
    kernelHeap().release({ ...this.block });
    this.block.offset = 0;
    this.block.bytes = 0;
  }

  /** @internal */
  assertUsable(model: KVCacheOwner): void {
    if (this.disposed) throw new Error("sequence is disposed");
    if (model !== this.model) throw new Error("sequence belongs to another model");
  }

  /** @internal Float offset in `kernelHeap().f32` of a layer's keys (kv head 0). */
  keyOffset(layer: number): number {
    return cacheOffset(this.model.config, this.block.offset / 4, this.capacity, layer, 0);
  }

  /** @internal Float offset in `kernelHeap().f32` of a layer's values (kv head 0). */
  valueOffset(layer: number): number {
    return cacheOffset(this.model.config, this.block.offset / 4, this.capacity, layer, 1);
  }

  /**
   * A new sequence holding a copy of this one's cache (e.g. one prompt prefilled once, then
   * sampled n times), or of its first `positions` positions only (the cache of a prompt's
   * beginning: a position's keys and values depend on the tokens up to it alone). Copies only
   * those positions.
   */
  fork(positions = this.tokenCount): KVSequence {
    if (this.disposed) throw new Error("sequence is disposed");
    if (!Number.isInteger(positions) || positions < 0 || positions > this.tokenCount)
      throw new RangeError(`fork of ${positions} positions from a sequence of ${this.tokenCount}`);
    const copy = new KVSequence(this.model);
    if (positions > 0) {
      copy.reserve(positions);
      copyPositions(
        this.model.config,
        this.block.offset / 4,
        this.capacity,
        copy.block.offset / 4,
        copy.capacity,
        positions,
      );
      copy.tokenCount = positions;
    }
    return copy;
  }

  /**
   * @internal Makes room for `positions` positions in total: capacity doubles from 64 (and
   * takes whatever else fits in the power-of-two block).
   */
  reserve(positions: number): void {
    if (positions <= this.capacity) return;
    const { numHiddenLayers: layers, numKeyValueHeads: kvHeads, headDim } = this.model.config;
    const bytesPerPosition = 2 * layers * kvHeads * headDim * 4;
    let wanted = Math.max(64, 2 * this.capacity);
    while (wanted < positions) wanted *= 2;
    const heap = kernelHeap();
    const block = heap.allocate(wanted * bytesPerPosition); // may grow the heap
    const capacity = Math.floor(block.bytes / bytesPerPosition);
    if (this.tokenCount > 0)
      copyPositions(
        this.model.config,
        this.block.offset / 4,
        this.capacity,
        block.offset / 4,
        capacity,
        this.tokenCount,
      );
    this.freeBlock();
    this.block.offset = block.offset;
    this.block.bytes = block.bytes;
    this.capacity = capacity;
    unreleasedCaches.register(this, this.block, this);
  }

  /** @internal */
  setLength(length: number): void {
    this.tokenCount = length;
  }
}

/** Float offset of a layer's keys (part 0) or values (part 1) in a cache block starting at float `base`. */
function cacheOffset(
  config: ModelConfig,
  base: number,
  capacity: number,
  layer: number,
  part: 0 | 1,
): number {
  return base + (2 * layer + part) * config.numKeyValueHeads * capacity * config.headDim;
}

/** Copies the first `positions` positions of every layer's keys and values between two cache blocks of the heap. */
function copyPositions(
  config: ModelConfig,
  fromBase: number,
  fromCapacity: number,
  toBase: number,
  toCapacity: number,
  positions: number,
): void {
  const { numHiddenLayers: layers, numKeyValueHeads: kvHeads, headDim } = config;
  const cache = kernelHeap().f32;
  for (let layer = 0; layer < layers; layer++) {
    for (const part of [0, 1] as const) {
      const source = cacheOffset(config, fromBase, fromCapacity, layer, part);
      const target = cacheOffset(config, toBase, toCapacity, layer, part);
      for (let head = 0; head < kvHeads; head++) {
        const start = source + head * fromCapacity * headDim;
        cache.copyWithin(target + head * toCapacity * headDim, start, start + positions * headDim);
      }
    }
  }
}
