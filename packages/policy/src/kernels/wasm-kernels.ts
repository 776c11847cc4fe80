/**
 * Kernels registered on the wasm backend (only faster, never different):
 * - `UnsortedSegmentSum` (the gradient of `gather`, i.e. of the embedding) on top of wasm's
 *   own `ScatterNd`, which sums duplicate indices;
 * - `Slice`, `SplitV`, `Unpack` and `GatherV2` that read the wasm heap in place (the
 *   originals copy the whole input out of the heap on every call), and an `Identity` that
 *   shares data instead of copying (every tensor saved for a gradient goes through it).
 */
import * as tf from "@tensorflow/tfjs-core";

let wasmKernelsRegistered = false;
/** `UnsortedSegmentSum` for wasm: `scatterND(segmentIds[:,None], x, [numSegments, ...])`. */
export function registerWasmKernels(): void {
  if (wasmKernelsRegistered) return;
  wasmKernelsRegistered = true;
  registerWasmSliceKernels();
  if (tf.getKernel("UnsortedSegmentSum", "wasm")) return;
  const scatter = tf.getKernel("ScatterNd", "wasm");
  const reshape = tf.getKernel("Reshape", "wasm");
  const cast = tf.getKernel("Cast", "wasm");
  tf.registerKernel({
    kernelName: "UnsortedSegmentSum",
    backendName: "wasm",
    kernelFunc: ({ inputs, backend, attrs }) => {
      const { x, segmentIds } = inputs as { x: tf.TensorInfo; segmentIds: tf.TensorInfo };
      const { numSegments } = attrs as unknown as { numSegments: number };
      const count = segmentIds.shape.reduce((a, b) => a * b, 1);
      const rowShape = x.shape.slice(segmentIds.shape.length);
      const intIds =
        segmentIds.dtype === "int32"
          ? segmentIds
          : (cast.kernelFunc({
              inputs: { x: segmentIds },
              backend,
              attrs: { dtype: "int32" },
            }) as tf.TensorInfo);
      const indices = reshape.kernelFunc({
        inputs: { x: intIds },
        backend,
        attrs: { shape: [count, 1] },
      }) as tf.TensorInfo;
      const updates = reshape.kernelFunc({
        inputs: { x },
        backend,
        attrs: { shape: [count, ...rowShape] },
      }) as tf.TensorInfo;
      const result = scatter.kernelFunc({
        inputs: { indices, updates },
        backend,
        attrs: { shape: [numSegments, ...rowShape] },
      }) as tf.TensorInfo;
      const disposeData = (info: tf.TensorInfo) =>
        (backend as tf.KernelBackend).disposeData(info.dataId);
      disposeData(indices);
      disposeData(updates);
      if (intIds !== segmentIds) disposeData(intIds);
      return result;
    },
  });
}

/** The parts of tfjs-backend-wasm's backend object the slice kernels use. */
interface WasmBackendHeap {
  makeOutput(shape: number[], dtype: tf.DataType): tf.TensorInfo;
  typedArrayFromHeap(info: tf.TensorInfo): Float32Array | Int32Array | Uint8Array;
}

/**
 * x[begin : begin + size] copied from a view of the wasm heap. tfjs-backend-wasm's own
 * Slice (which its SplitV and Unpack call directly) first copies the WHOLE input out of the
 * heap (`readSync`) on every call, so splitting a tensor into n parts copied it n times
 * (page faults included): a split of [8128, 32] into 16 took 15-100 ms instead of ~0.2.
 */
function sliceFromHeap(
  backend: WasmBackendHeap,
  x: tf.TensorInfo,
  begin: number[],
  size: number[],
): tf.TensorInfo {
  const out = backend.makeOutput(size, x.dtype); // may grow the heap: take views after it
  const input = backend.typedArrayFromHeap(x);
  const output = backend.typedArrayFromHeap(out);
  const rank = x.shape.length;
  const strides = new Array<number>(rank);
  strides[rank - 1] = 1;
  for (let axis = rank - 2; axis >= 0; axis--)
    strides[axis] = strides[axis + 1] * x.shape[axis + 1];
  // the innermost axes that are taken whole form one contiguous run
  let runAxis = rank - 1;
  while (runAxis > 0 && begin[runAxis] === 0 && size[runAxis] === x.shape[runAxis]) runAxis--;
  const runLength = size.slice(runAxis).reduce((a, b) => a * b, 1);
  const runCount = size.slice(0, runAxis).reduce((a, b) => a * b, 1);
  const index = new Array<number>(runAxis).fill(0);
  // input and output are views of the same heap: copyWithin moves each run without a subarray
  const heap =
    input.constructor === output.constructor && input.buffer === output.buffer
      ? wholeHeapView(input)
      : undefined;
  const inputStart = input.byteOffset / input.BYTES_PER_ELEMENT;
  const outputStart = output.byteOffset / output.BYTES_PER_ELEMENT;
  let written = 0;
  for (let run = 0; run < runCount; run++) {
    let offset = begin[runAxis] * strides[runAxis];
    for (let axis = 0; axis < runAxis; axis++)
      offset += (begin[axis] + index[axis]) * strides[axis];
    if (heap)
      heap.copyWithin(outputStart + written, inputStart + offset, inputStart + offset + runLength);
    else output.set(input.subarray(offset, offset + runLength), written);
    written += runLength;
    for (let axis = runAxis - 1; axis >= 0; axis--) {
      if (++index[axis] < size[axis]) break;
      index[axis] = 0;
    }
  }
  return out;
}

/** A view of the whole heap behind `view`, of the same element type. */
function wholeHeapView(
  view: Float32Array | Int32Array | Uint8Array,
): Float32Array | Int32Array | Uint8Array {
  if (view instanceof Float32Array) return new Float32Array(view.buffer);
  if (view instanceof Int32Array) return new Int32Array(view.buffer);
  return new Uint8Array(view.buffer);
}

/** Slices this short or shorter go to wasm's own GatherV2 (a copy per slice costs more than its loop). */
const GATHER_MIN_SLICE = 16;

/**
 * GatherV2 as copies of whole slices between heap views. wasm's own kernel computes every
 * element's source index (~25 ns an element): gathering 32 embedding rows of 256 took
 * ~0.25 ms, a twentieth of a batch-32 decode step; training's embedding lookups are larger.
 */
function gatherFromHeap(
  backend: WasmBackendHeap & { readSync(dataId: object): unknown },
  x: tf.TensorInfo,
  indices: tf.TensorInfo,
  axis: number,
  batchDims: number,
): tf.TensorInfo {
  const info = tf.backend_util.segment_util.collectGatherOpShapeInfo(
    x as tf.TensorInfo as tf.Tensor,
    indices as tf.TensorInfo as tf.Tensor,
    axis,
    batchDims,
  );
  const ids = backend.readSync(indices.dataId) as Int32Array | Float32Array;
  const dimSize = x.shape[axis];
  for (const id of ids)
    if (!(id >= 0 && id <= dimSize - 1))
      throw new Error(`GatherV2: the index value ${id} is not in [0, ${dimSize - 1}]`);
  const out = backend.makeOutput(info.outputShape, x.dtype); // may grow the heap: take views after it
  const input = backend.typedArrayFromHeap(x);
  const output = backend.typedArrayFromHeap(out);
  const heap = wholeHeapView(input);
  const inputStart = input.byteOffset / input.BYTES_PER_ELEMENT;
  const outputStart = output.byteOffset / output.BYTES_PER_ELEMENT;
  const { batchSize, outerSize, dimSize: gatheredDim, sliceSize } = info;
  const perBatch = ids.length / batchSize;
  let written = outputStart;
  for (let batch = 0; batch < batchSize; batch++) {
    for (let outer = 0; outer < outerSize; outer++) {
      const base = inputStart + (batch * outerSize + outer) * gatheredDim * sliceSize;
      for (let i = 0; i < perBatch; i++) {
        const from = base + ids[batch * perBatch + i] * sliceSize;
        heap.copyWithin(written, from, from + sliceSize);
        written += sliceSize;
      }
    }
  }
  return out;
}

/** Replaces wasm's Identity (shares data) and Slice, SplitV, Unpack, GatherV2 (copies between heap views), for non-string tensors. */
function registerWasmSliceKernels(): void {
  const replace = (
    kernelName: string,
    kernelFunc: (args: {
      inputs: tf.NamedTensorInfoMap;
      backend: unknown;
      attrs: tf.NamedAttrMap;
    }) => tf.TensorInfo | tf.TensorInfo[],
  ) => {
    const original = tf.getKernel(kernelName, "wasm");
    if (!original) return;
    tf.unregisterKernel(kernelName, "wasm");
    tf.registerKernel({
      kernelName,
      backendName: "wasm",
      kernelFunc: ((args: {
        inputs: tf.NamedTensorInfoMap;
        backend: unknown;
        attrs: tf.NamedAttrMap;
      }) =>
        Object.values(args.inputs)[0]?.dtype === "string"
          ? original.kernelFunc(args as never)
          : kernelFunc(args)) as tf.KernelFunc,
    });
  };
  // tfjs saves every tensor a gradient needs with engine.clone → Identity, which wasm copies
  // (~900 copies per training step of the tiny preset); tensors are immutable, so share the
  // data with a reference count instead, as the cpu backend does.
  replace("Identity", ({ inputs, backend }) => {
    const x = inputs.x!;
    (backend as tf.KernelBackend).incRef(x.dataId);
    return { dataId: x.dataId, shape: x.shape, dtype: x.dtype };
  });
  const wasmGather = tf.getKernel("GatherV2", "wasm");
  replace("GatherV2", (args) => {
    const { x, indices } = args.inputs as { x: tf.TensorInfo; indices: tf.TensorInfo };
    const axis = tf.util.parseAxisParam(args.attrs.axis as number, x.shape)[0];
    const batchDims = (args.attrs.batchDims as number | undefined) ?? 0;
    const sliceSize = x.shape.slice(axis + 1).reduce((a, b) => a * b, 1);
    if (
      !wasmGather ||
      sliceSize < GATHER_MIN_SLICE ||
      (x.dtype !== "float32" && x.dtype !== "int32")
    )
      return wasmGather!.kernelFunc(args as never) as tf.TensorInfo;
    return gatherFromHeap(
      args.backend as WasmBackendHeap & { readSync(dataId: object): unknown },
      x,
      indices,
      axis,
      batchDims,
    );
  });
  replace("Slice", ({ inputs, backend, attrs }) => {
    const x = inputs.x!;
    const [begin, size] = tf.slice_util.parseSliceParams(
      x as tf.TensorInfo as tf.Tensor,
      attrs.begin as number | number[],
      attrs.size as number | number[],
    );
    return sliceFromHeap(backend as WasmBackendHeap, x, begin, size);
  });
  replace("SplitV", ({ inputs, backend, attrs }) => {
    const x = inputs.x!;
    const axis = tf.util.parseAxisParam(attrs.axis as number, x.shape)[0];
    const sizes = tf.backend_util.prepareSplitSize(
      x as tf.Tensor,
      attrs.numOrSizeSplits as number | number[],
      axis,
    );
    const begin = new Array<number>(x.shape.length).fill(0);
    return sizes.map((partSize) => {
      const size = x.shape.slice();
      size[axis] = partSize;
      const part = sliceFromHeap(backend as WasmBackendHeap, x, begin, size);
      begin[axis] += partSize;
      return part;
    });
  });
  replace("Unpack", ({ inputs, backend, attrs }) => {
    const x = inputs.value!;
    const axis = ((attrs.axis as number) + x.shape.length) % x.shape.length;
    const outShape = x.shape.filter((_, i) => i !== axis);
    const begin = new Array<number>(x.shape.length).fill(0);
    const size = x.shape.slice();
    size[axis] = 1;
    return Array.from({ length: x.shape[axis] }, (_, i) => {
      begin[axis] = i;
      const part = sliceFromHeap(backend as WasmBackendHeap, x, begin, size);
      return { ...part, shape: outShape };
    });
  });
}
