/**
 * Backend selection and the kernel work-arounds training needs.
 *
 * Order of preference: `@tensorflow/tfjs-node-gpu` → `@tensorflow/tfjs-node` → wasm → cpu.
 * The native packages are optional dependencies that usually do not install here, so
 * probing catches ANY error. `AGENTRL_BACKEND` (`tensorflow`, `wasm`, `cpu`) forces one.
 *
 * Fixes applied on every backend (they are only faster, never different; the kernels are in
 * kernels/gradient-fixes.ts and kernels/wasm-kernels.ts):
 * - `BatchMatMul` gradient re-registered to transpose explicitly: wasm hands a matmul to
 *   XNNPACK only without transpose flags (flags run 10-40× slower).
 * - `UnsortedSegmentSum` (the gradient of `gather`, i.e. of the embedding) registered for
 *   wasm on top of wasm's own `ScatterNd`, which sums duplicate indices.
 * - wasm's `Slice`, `SplitV` and `Unpack` replaced: the originals copy the whole input out
 *   of the wasm heap on every call (a split into n parts copied it n times); wasm's
 *   `Identity` (every tensor saved for a gradient goes through it) shares data instead of copying.
 */
import { AgentRLError } from "@agentrl/spec";
import * as tf from "@tensorflow/tfjs-core";
import "@tensorflow/tfjs-backend-cpu";
import "./vendor/tfjs-gradients.js"; // tfjs-core's Node build registers no gradients
// tfjs-core's Node build registers no gradients: this inlined copy of its
// register_all_gradients does (added by the lead; see scripts/vendor-tfjs-gradients.sh).
import "./vendor/tfjs-gradients.js";
import { createRequire } from "node:module";
import { installGradientFixes } from "./kernels/gradient-fixes.js";
import { registerWasmKernels } from "./kernels/wasm-kernels.js";

export { installGradientFixes };

export type BackendName = "tensorflow" | "wasm" | "cpu";
export const BACKEND_NAMES: readonly BackendName[] = ["tensorflow", "wasm", "cpu"];

/** A forced backend could not be loaded. */
export class BackendUnavailableError extends AgentRLError {}

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
  console.error(
    `agentrl: initBackend() was not called; using tfjs's default backend '${tf.getBackend()}' (call await initBackend() first)`,
  );
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
export async function setBackend(
  name: BackendName,
  options: Pick<InitBackendOptions, "log"> = {},
): Promise<string> {
  activeBackend = selectBackend({ ...options, backend: name });
  return activeBackend;
}

/** Backends that load on this machine, in order of preference (probes; does not switch). */
export async function availableBackends(): Promise<BackendName[]> {
  const found: BackendName[] = [];
  if ((await loadNativePackage()) !== undefined) found.push("tensorflow");
  if (
    await loadWasm().then(
      () => true,
      () => false,
    )
  )
    found.push("wasm");
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
      log?.(
        `agentrl: tfjs backend ${tf.getBackend()}${detail ? ` (${detail})` : ""}${forced ? " [forced]" : ""}`,
      );
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
    throw new BackendUnavailableError(
      `AGENTRL_BACKEND='${value}' is not one of ${BACKEND_NAMES.join(", ")}`,
    );
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
