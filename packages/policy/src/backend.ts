/**
 * Backend selection and the kernel work-arounds training needs.
 *
 * Order of preference: `@tensorflow/tfjs-node-gpu` → `@tensorflow/tfjs-node` → wasm → cpu.
 * The native packages are optional dependencies that usually do not install here, so
 * probing catches ANY error. `AGENTRL_BACKEND` (`tensorflow`, `wasm`, `cpu`) forces one.
 *
 * Fixes applied on every backend (they are only faster, never different):
 * - `BatchMatMul` gradient re-registered to transpose explicitly: wasm hands a matmul to
 *   XNNPACK only without transpose flags (flags run 10-40× slower).
 * - `UnsortedSegmentSum` (the gradient of `gather`, i.e. of the embedding) registered for
 *   wasm on top of wasm's own `ScatterNd`, which sums duplicate indices.
 * - wasm's `Slice`, `SplitV` and `Unpack` replaced: the originals copy the whole input out
 *   of the wasm heap on every call (a split into n parts copied it n times); wasm's
 *   `Identity` (every tensor saved for a gradient goes through it) shares data instead of copying.
 */
import * as tf from "@tensorflow/tfjs-core";
import "@tensorflow/tfjs-backend-cpu";
import "./vendor/tfjs-gradients.js"; // tfjs-core's Node build registers no gradients
// tfjs-core's Node build registers no gradients: this inlined copy of its
// register_all_gradients does (added by the lead; see scripts/vendor-tfjs-gradients.sh).
import "./vendor/tfjs-gradients.js";
import { createRequire } from "node:module";

export type BackendName = "tensorflow" | "wasm" | "cpu";
export const BACKEND_NAMES: readonly BackendName[] = ["tensorflow", "wasm", "cpu"];

/** A forced backend could not be loaded. */
export class BackendUnavailableError extends Error {
  override name = "BackendUnavailableError";
}

export interface InitBackendOptions {
  /** Force a backend; default: `process.env.AGENTRL_BACKEND`, else the fastest that loads. */
  backend?: BackendName;
  /** Where the one-line "using backend X" message goes; default `console.error`; `null` silences it. */
  log?: ((line: string) => void) | null;
}

let activeBackend: Promise<string> | undefined;
let warnedUninitialised = false;

/** Warns once when a model is built before initBackend() (tfjs would silently use its default, usually the slow cpu). */
export function warnIfBackendNotInitialised(): void {
  if (activeBackend || warnedUninitialised) return;
  warnedUninitialised = true;
  console.error(`agentrl: initBackend() was not called; using tfjs's default backend '${tf.getBackend()}' (call await initBackend() first)`);
}

/**
 * Loads and activates a backend once per process (later calls return the same name).
 * Returns tfjs's backend name: `tensorflow`, `wasm` or `cpu`.
 */
export function initBackend(options: InitBackendOptions = {}): Promise<string> {
  activeBackend ??= selectBackend(options);
  return activeBackend;
}

/** Switch to another backend in the same process (tests, benchmarks). Variables do not move: create models after. */
export async function setBackend(name: BackendName, options: Pick<InitBackendOptions, "log"> = {}): Promise<string> {
  activeBackend = selectBackend({ ...options, backend: name });
  return activeBackend;
}

/** Backends that load on this machine, in order of preference (probes; does not switch). */
export async function availableBackends(): Promise<BackendName[]> {
  const found: BackendName[] = [];
  if ((await loadNativePackage()) !== undefined) found.push("tensorflow");
  if (await loadWasm().then(() => true, () => false)) found.push("wasm");
  found.push("cpu");
  return found;
}

async function selectBackend(options: InitBackendOptions): Promise<string> {
  const log = options.log === undefined ? (line: string) => console.error(line) : options.log;
  const forced = options.backend ?? parseBackendEnvironment(process.env.AGENTRL_BACKEND);
  installGradientFixes();
  const candidates: BackendName[] = forced ? [forced] : ["tensorflow", "wasm", "cpu"];
  for (const candidate of candidates) {
    const detail = await tryActivate(candidate);
    if (detail !== undefined) {
      log?.(`agentrl: tfjs backend ${tf.getBackend()}${detail ? ` (${detail})` : ""}${forced ? " [forced]" : ""}`);
      return tf.getBackend();
    }
  }
  throw new BackendUnavailableError(
    forced === "tensorflow"
      ? "backend 'tensorflow' requested but neither @tensorflow/tfjs-node-gpu nor @tensorflow/tfjs-node loads: npm install @tensorflow/tfjs-node@4.22.0"
      : forced === "wasm"
        ? "backend 'wasm' requested but @tensorflow/tfjs-backend-wasm does not load: npm install @tensorflow/tfjs-backend-wasm@4.22.0"
        : `no tfjs backend could be activated (tried ${candidates.join(", ")})`,
  );
}

function parseBackendEnvironment(value: string | undefined): BackendName | undefined {
  if (value === undefined || value === "") return undefined;
  const normalized = value === "node" || value === "node-gpu" ? "tensorflow" : value;
  if (!(BACKEND_NAMES as readonly string[]).includes(normalized)) {
    throw new BackendUnavailableError(`AGENTRL_BACKEND='${value}' is not one of ${BACKEND_NAMES.join(", ")}`);
  }
  return normalized as BackendName;
}

/** Returns a short detail string on success, undefined when the backend does not load. */
async function tryActivate(name: BackendName): Promise<string | undefined> {
  try {
    if (name === "tensorflow") {
      const packageName = await loadNativePackage();
      if (packageName === undefined) return undefined;
      return (await tf.setBackend("tensorflow")) ? packageName : undefined;
    }
    if (name === "wasm") {
      await loadWasm();
      if (!(await tf.setBackend("wasm"))) return undefined;
      registerWasmKernels();
      return "SIMD, 1 thread";
    }
    if (!(await tf.setBackend("cpu"))) return undefined;
    tf.env().set("PROD", true); // silences tfjs's "install the node backend" banner; our log line says it
    return "pure JS";
  } catch {
    return undefined;
  }
}

let nativePackage: Promise<string | undefined> | undefined;
function loadNativePackage(): Promise<string | undefined> {
  nativePackage ??= (async () => {
    const require = createRequire(import.meta.url);
    for (const packageName of ["@tensorflow/tfjs-node-gpu", "@tensorflow/tfjs-node"]) {
      try {
        require(packageName);
        return packageName;
      } catch {
        // not installed or native addon missing: try the next one
      }
    }
    return undefined;
  })();
  return nativePackage;
}

let wasmLoaded: Promise<void> | undefined;
function loadWasm(): Promise<void> {
  wasmLoaded ??= (async () => {
    const wasm = await import("@tensorflow/tfjs-backend-wasm");
    const require = createRequire(import.meta.url);
    const distDirectory = require.resolve("@tensorflow/tfjs-backend-wasm").replace(/[^/\\]*$/, "");
    wasm.setWasmPaths(distDirectory.endsWith("/") ? distDirectory : distDirectory + "/");
  })();
  return wasmLoaded;
}

let wasmKernelsRegistered = false;
/** `UnsortedSegmentSum` for wasm: `scatterND(segmentIds[:,None], x, [numSegments, ...])`. */
function registerWasmKernels(): void {
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
          : (cast.kernelFunc({ inputs: { x: segmentIds }, backend, attrs: { dtype: "int32" } }) as tf.TensorInfo);
      const indices = reshape.kernelFunc({ inputs: { x: intIds }, backend, attrs: { shape: [count, 1] } }) as tf.TensorInfo;
      const updates = reshape.kernelFunc({ inputs: { x }, backend, attrs: { shape: [count, ...rowShape] } }) as tf.TensorInfo;
      const result = scatter.kernelFunc({
        inputs: { indices, updates },
        backend,
        attrs: { shape: [numSegments, ...rowShape] },
      }) as tf.TensorInfo;
      const disposeData = (info: tf.TensorInfo) => (backend as tf.KernelBackend).disposeData(info.dataId);
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
function sliceFromHeap(backend: WasmBackendHeap, x: tf.TensorInfo, begin: number[], size: number[]): tf.TensorInfo {
  const out = backend.makeOutput(size, x.dtype); // may grow the heap: take views after it
  const input = backend.typedArrayFromHeap(x);
  const output = backend.typedArrayFromHeap(out);
  const rank = x.shape.length;
  const strides = new Array<number>(rank);
  strides[rank - 1] = 1;
  for (let axis = rank - 2; axis >= 0; axis--) strides[axis] = strides[axis + 1] * x.shape[axis + 1];
  // the innermost axes that are taken whole form one contiguous run
  let runAxis = rank - 1;
  while (runAxis > 0 && begin[runAxis] === 0 && size[runAxis] === x.shape[runAxis]) runAxis--;
  const runLength = size.slice(runAxis).reduce((a, b) => a * b, 1);
  const runCount = size.slice(0, runAxis).reduce((a, b) => a * b, 1);
  const index = new Array<number>(runAxis).fill(0);
  // input and output are views of the same heap: copyWithin moves each run without a subarray
  const heap = input.constructor === output.constructor && input.buffer === output.buffer ? wholeHeapView(input) : undefined;
  const inputStart = input.byteOffset / input.BYTES_PER_ELEMENT;
  const outputStart = output.byteOffset / output.BYTES_PER_ELEMENT;
  let written = 0;
  for (let run = 0; run < runCount; run++) {
    let offset = begin[runAxis] * strides[runAxis];
    for (let axis = 0; axis < runAxis; axis++) offset += (begin[axis] + index[axis]) * strides[axis];
    if (heap) heap.copyWithin(outputStart + written, inputStart + offset, inputStart + offset + runLength);
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
function wholeHeapView(view: Float32Array | Int32Array | Uint8Array): Float32Array | Int32Array | Uint8Array {
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
function gatherFromHeap(backend: WasmBackendHeap & { readSync(dataId: object): unknown }, x: tf.TensorInfo, indices: tf.TensorInfo, axis: number, batchDims: number): tf.TensorInfo {
  const info = tf.backend_util.segment_util.collectGatherOpShapeInfo(x as tf.TensorInfo as tf.Tensor, indices as tf.TensorInfo as tf.Tensor, axis, batchDims);
  const ids = backend.readSync(indices.dataId) as Int32Array | Float32Array;
  const dimSize = x.shape[axis];
  for (const id of ids) if (!(id >= 0 && id <= dimSize - 1)) throw new Error(`GatherV2: the index value ${id} is not in [0, ${dimSize - 1}]`);
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
  const replace = (kernelName: string, kernelFunc: (args: { inputs: tf.NamedTensorInfoMap; backend: unknown; attrs: tf.NamedAttrMap }) => tf.TensorInfo | tf.TensorInfo[]) => {
    const original = tf.getKernel(kernelName, "wasm");
    if (!original) return;
    tf.unregisterKernel(kernelName, "wasm");
    tf.registerKernel({
      kernelName,
      backendName: "wasm",
      kernelFunc: ((args: { inputs: tf.NamedTensorInfoMap; backend: unknown; attrs: tf.NamedAttrMap }) =>
        Object.values(args.inputs)[0]?.dtype === "string" ? original.kernelFunc(args as never) : kernelFunc(args)) as tf.KernelFunc,
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
    if (!wasmGather || sliceSize < GATHER_MIN_SLICE || (x.dtype !== "float32" && x.dtype !== "int32")) return wasmGather!.kernelFunc(args as never) as tf.TensorInfo;
    return gatherFromHeap(args.backend as WasmBackendHeap & { readSync(dataId: object): unknown }, x, indices, axis, batchDims);
  });
  replace("Slice", ({ inputs, backend, attrs }) => {
    const x = inputs.x!;
    const [begin, size] = tf.slice_util.parseSliceParams(x as tf.TensorInfo as tf.Tensor, attrs.begin as number | number[], attrs.size as number | number[]);
    return sliceFromHeap(backend as WasmBackendHeap, x, begin, size);
  });
  replace("SplitV", ({ inputs, backend, attrs }) => {
    const x = inputs.x!;
    const axis = tf.util.parseAxisParam(attrs.axis as number, x.shape)[0];
    const sizes = tf.backend_util.prepareSplitSize(x as tf.Tensor, attrs.numOrSizeSplits as number | number[], axis);
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

let gradientFixesInstalled = false;
/** Re-registers the `BatchMatMul` gradient with explicit transposes (no transpose flags). */
export function installGradientFixes(): void {
  // Must run after ./vendor/tfjs-gradients.js (imported above) so that this registration wins.
  if (gradientFixesInstalled) return;
  gradientFixesInstalled = true;
  const transposeLast = (t: tf.Tensor) => {
    const axes = t.shape.map((_, i) => i);
    [axes[axes.length - 1], axes[axes.length - 2]] = [axes[axes.length - 2], axes[axes.length - 1]];
    return tf.transpose(t, axes);
  };
  const matMul = (a: tf.Tensor, b: tf.Tensor) => tf.matMul(a, b);
  const silenceOverrideWarning = console.warn;
  console.warn = () => {};
  try {
    tf.registerGradient({
      kernelName: "BatchMatMul",
      inputsToSave: ["a", "b"],
      gradFunc: (dy, saved, attrs) => {
        const [a, b] = saved;
        const { transposeA, transposeB } = attrs as unknown as { transposeA: boolean; transposeB: boolean };
        const gradient = dy as tf.Tensor;
        let gradA: tf.Tensor;
        let gradB: tf.Tensor;
        if (!transposeA && !transposeB) {
          gradA = matMul(gradient, transposeLast(b));
          gradB = matMul(transposeLast(a), gradient);
        } else if (!transposeA && transposeB) {
          gradA = matMul(gradient, b);
          gradB = matMul(transposeLast(gradient), a);
        } else if (transposeA && !transposeB) {
          gradA = matMul(b, transposeLast(gradient));
          gradB = matMul(a, gradient);
        } else {
          gradA = matMul(transposeLast(b), transposeLast(gradient));
          gradB = matMul(transposeLast(gradient), transposeLast(a));
        }
        return { a: () => reduceToShape(gradA, a.shape), b: () => reduceToShape(gradB, b.shape) };
      },
    });
  } finally {
    console.warn = silenceOverrideWarning;
  }
}

/** Sums a broadcast gradient back to the input's batch shape. */
function reduceToShape(gradient: tf.Tensor, shape: number[]): tf.Tensor {
  if (gradient.shape.length === shape.length && gradient.shape.every((d, i) => d === shape[i])) return gradient;
  const extra = gradient.rank - shape.length;
  let reduced = extra > 0 ? tf.sum(gradient, [...Array(extra).keys()]) : gradient;
  const broadcastAxes = shape.map((d, i) => (d === 1 && reduced.shape[i] !== 1 ? i : -1)).filter((i) => i >= 0);
  if (broadcastAxes.length > 0) reduced = tf.sum(reduced, broadcastAxes, true);
  return tf.reshape(reduced, shape);
}
