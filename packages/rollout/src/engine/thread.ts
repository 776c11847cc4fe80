/**
 * `ThreadEngine`: an inference engine in a worker thread. tfjs's wasm backend computes on one
 * core per thread, so an engine in the main thread decodes on one core whatever the machine
 * has; a second engine in a worker thread (see `EnginePool`) decodes on another.
 *
 * The thread holds its own copy of the policy's weights, sent at start and on every
 * `updateWeights` (flat buffers in a SharedArrayBuffer: one copy from the sender, however many
 * threads read it, freed once every thread has loaded it). tfjs's wasm backend keeps a
 * model's weights in the memory of its own thread, so each thread still holds one copy: with
 * LoRA, the frozen base is sent once at start and every update carries only the adapters. Requests go to the thread as messages; its engine (the same
 * `InferenceEngine`, same options) answers each with the result and its current statistics,
 * which `stats()` reports (the last ones received).
 */
import { Worker } from "node:worker_threads";
import { AgentRLError } from "@agentrl/spec";
import {
  PolicySnapshot,
  parameterCount,
  type ExportedWeights,
  type LoraOptions,
  type ModelConfig,
  type NamedWeight,
  type Policy,
} from "@agentrl/policy";
import {
  ContextLimitError,
  EngineClosedError,
  type EngineStats,
  type GenerationEngine,
  type GenerationRequest,
  type GenerationResult,
  type InferenceEngineOptions,
} from "./types.js";
import type { PolicyWeights } from "./policy-model.js";

/** The engine thread failed to start, crashed or answered with an unexpected error. */
export class EngineThreadError extends AgentRLError {}

/**
 * Weights as sent to an engine thread: flat buffers, in the model's own layout (`internal`,
 * from a snapshot) or HF layout (`hf`, exported). With `lora`: the adapters (and how they
 * attach); `tensors` is then the frozen base (internal layout, at start) or empty (updates).
 */
export interface ThreadWeights {
  version: number;
  layout: "internal" | "hf";
  tensors: NamedWeight[];
  lora?: { options: LoraOptions; adapters: NamedWeight[] };
}

/** What the thread starts from (its `workerData`). */
export interface EngineThreadData {
  config: ModelConfig;
  /** Ids from here on are never sampled (a config vocabulary padded past the tokenizer's). */
  usableVocabulary?: number;
  weights: ThreadWeights;
  options: InferenceEngineOptions;
}

/** Messages to the thread. */
export type EngineThreadMessage =
  | { kind: "generate"; id: number; request: Omit<GenerationRequest, "signal"> }
  | { kind: "abort"; id: number }
  | { kind: "release"; cacheKey: string }
  | { kind: "weights"; id: number; weights: ThreadWeights };

/** Answers of the thread: to a call (`id`), always with its engine's statistics then. */
export interface EngineThreadReply {
  id: number;
  result?: GenerationResult;
  error?: { name: string; message: string; stack?: string };
  stats: EngineStats;
}

/** Copies tensors into one SharedArrayBuffer (views of it), so that any number of threads read them without a copy each. */
export function sharedTensors(
  tensors: readonly { name: string; shape: number[]; data: ArrayLike<number> }[],
): NamedWeight[] {
  let total = 0;
  for (const tensor of tensors) total += tensor.data.length;
  const buffer = new SharedArrayBuffer(total * Float32Array.BYTES_PER_ELEMENT);
  let offset = 0;
  return tensors.map(({ name, shape, data }) => {
    const view = new Float32Array(buffer, offset * Float32Array.BYTES_PER_ELEMENT, data.length);
    view.set(data);
    offset += data.length;
    return { name, shape: [...shape], data: view };
  });
}

/**
 * Copies a snapshot's tensors into one SharedArrayBuffer, one tensor at a time (a model's
 * worth of plain arrays never exists at once besides the shared one).
 */
function sharedSnapshotTensors(
  values: ReadonlyMap<string, { shape: number[]; dataSync(): unknown }>,
): NamedWeight[] {
  let total = 0;
  for (const tensor of values.values()) total += tensor.shape.reduce((a, b) => a * b, 1);
  const buffer = new SharedArrayBuffer(total * Float32Array.BYTES_PER_ELEMENT);
  let offset = 0;
  return [...values].map(([name, tensor]) => {
    const size = tensor.shape.reduce((a, b) => a * b, 1);
    const view = new Float32Array(buffer, offset * Float32Array.BYTES_PER_ELEMENT, size);
    view.set(tensor.dataSync() as Float32Array);
    offset += size;
    return { name, shape: tensor.shape.slice(), data: view };
  });
}

/** Weights for engine threads from a snapshot (model layout) or exported weights (HF layout); LoRA adapters ride along as they are. */
export function threadWeights(weights: PolicyWeights): ThreadWeights {
  if (weights instanceof PolicySnapshot) {
    return {
      version: weights.version,
      layout: "internal",
      tensors: sharedSnapshotTensors(weights.values),
      ...(weights.lora
        ? {
            lora: {
              options: weights.lora.options,
              adapters: [...weights.lora.adapters].map(([name, tensor]) => ({
                name,
                shape: tensor.shape.slice(),
                data: tensor.dataSync() as Float32Array,
              })),
            },
          }
        : {}),
    };
  }
  const exported = weights as ExportedWeights;
  return {
    version: exported.version,
    layout: "hf",
    tensors: sharedTensors(exported.tensors),
    ...(exported.lora ? { lora: exported.lora } : {}),
  };
}

/** Bytes of one copy of a model's weights (float32). */
export function weightBytes(config: ModelConfig): number {
  return 4 * parameterCount(config);
}

/** The thread's start data for `policy` (its weights now, stop tokens and context from the policy unless given). */
export function engineThreadData(
  policy: Policy,
  options: InferenceEngineOptions = {},
): EngineThreadData {
  const snapshot = policy.snapshot();
  try {
    const tokenizerVocabulary = policy.tokenizer?.vocabSize;
    return {
      config: policy.config,
      usableVocabulary:
        tokenizerVocabulary !== undefined && tokenizerVocabulary < policy.config.vocabSize
          ? tokenizerVocabulary
          : undefined,
      weights: threadWeights(snapshot),
      options: {
        stopTokenIds: policy.tokenizer?.stopTokenIds ?? [],
        maxSequenceLength: policy.config.maxPositionEmbeddings,
        initialVersion: policy.version,
        ...options,
      },
    };
  } finally {
    snapshot.dispose();
  }
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

const EMPTY_STATS: EngineStats = {
  version: 0,
  waiting: 0,
  active: 0,
  reservedCacheTokens: 0,
  keptCaches: 0,
  cachedPrefixes: 0,
  decodeSteps: 0,
  generatedTokens: 0,
  prefilledTokens: 0,
  prefillCalls: 0,
  decodeFedTokens: 0,
  reusedCacheTokens: 0,
  completedRequests: 0,
  weightUpdates: 0,
  meanBatchOccupancy: 0,
  meanBatchSize: 0,
  decodeMs: 0,
  prefillMs: 0,
};

/** Rebuilds an error the thread reported, keeping the classes callers test for. */
function threadError(error: { name: string; message: string; stack?: string }): Error {
  const made =
    error.name === "ContextLimitError"
      ? new ContextLimitError(error.message)
      : error.name === "EngineClosedError"
        ? new EngineClosedError(error.message)
        : error.name === "RangeError"
          ? new RangeError(error.message)
          : new EngineThreadError(`the engine thread failed: ${error.name}: ${error.message}`);
  if (error.stack) made.stack = error.stack;
  return made;
}

/** An `InferenceEngine` in a worker thread, with a copy of the weights of its own. */
export class ThreadEngine implements GenerationEngine<PolicyWeights> {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private lastStats: EngineStats;
  private currentVersion: number;
  private failure: Error | undefined;

  private constructor(
    private readonly worker: Worker,
    data: EngineThreadData,
  ) {
    this.currentVersion = data.weights.version;
    this.lastStats = { ...EMPTY_STATS, version: this.currentVersion };
    worker.on("message", (reply: EngineThreadReply) => {
      this.lastStats = reply.stats;
      const waiter = this.pending.get(reply.id);
      if (!waiter) return;
      this.pending.delete(reply.id);
      if (this.pending.size === 0) worker.unref();
      if (reply.error) waiter.reject(threadError(reply.error));
      else waiter.resolve(reply.result);
    });
    worker.on("error", (error) =>
      this.fail(new EngineThreadError(`the engine thread crashed: ${error.message}`)),
    );
    worker.on("exit", (code) =>
      this.fail(new EngineClosedError(`the engine thread exited (code ${code})`)),
    );
    // The thread keeps the process alive only while a call waits for it (a forgotten close does not).
    worker.unref();
  }

  /** Starts a thread serving `policy`'s current weights (see `engineThreadData`); resolves once it is ready. */
  static async start(policy: Policy, options: InferenceEngineOptions = {}): Promise<ThreadEngine> {
    return ThreadEngine.fromData(engineThreadData(policy, options));
  }

  /** Starts a thread from its start data (e.g. shared by several threads). */
  static async fromData(data: EngineThreadData): Promise<ThreadEngine> {
    const entry = import.meta.url.endsWith(".ts")
      ? {
          url: new URL("./thread-source.mjs", import.meta.url),
          workerData: { ...data, entry: new URL("./thread-worker.ts", import.meta.url).href },
        }
      : { url: new URL("./thread-worker.js", import.meta.url), workerData: data };
    const worker = new Worker(entry.url, { workerData: entry.workerData });
    await new Promise<void>((resolve, reject) => {
      const onMessage = (message: { ready?: boolean; error?: { message: string } }) => {
        if (message.ready) {
          cleanup();
          resolve();
        } else if (message.error) {
          cleanup();
          void worker.terminate();
          reject(
            new EngineThreadError(`the engine thread failed to start: ${message.error.message}`),
          );
        }
      };
      const onExit = (code: number) => {
        cleanup();
        reject(new EngineThreadError(`the engine thread exited while starting (code ${code})`));
      };
      const cleanup = () => {
        worker.off("message", onMessage);
        worker.off("exit", onExit);
      };
      worker.on("message", onMessage);
      worker.on("exit", onExit);
    });
    return new ThreadEngine(worker, data);
  }

  get version(): number {
    return this.currentVersion;
  }

  generate(request: GenerationRequest): Promise<GenerationResult> {
    if (request.signal?.aborted) return Promise.reject(request.signal.reason);
    const { signal, ...plain } = request;
    const id = this.nextId++;
    const answer = this.call<GenerationResult>({ kind: "generate", id, request: plain }, id);
    if (!signal) return answer;
    return new Promise<GenerationResult>((resolve, reject) => {
      const onAbort = () => {
        this.pending.delete(id);
        if (this.pending.size === 0) this.worker.unref();
        if (!this.failure)
          this.worker.postMessage({ kind: "abort", id } satisfies EngineThreadMessage);
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      answer.then(
        (result) => {
          signal.removeEventListener("abort", onAbort);
          resolve(result);
        },
        (error) => {
          signal.removeEventListener("abort", onAbort);
          reject(error);
        },
      );
    });
  }

  releaseCache(cacheKey: string): void {
    if (!this.failure)
      this.worker.postMessage({ kind: "release", cacheKey } satisfies EngineThreadMessage);
  }

  async updateWeights(weights: PolicyWeights | ThreadWeights, version: number): Promise<void> {
    const sent = isThreadWeights(weights) ? weights : threadWeights(weights);
    const id = this.nextId++;
    await this.call<void>({ kind: "weights", id, weights: { ...sent, version } }, id);
    this.currentVersion = version;
  }

  stats(): EngineStats {
    return this.lastStats;
  }

  close(): void {
    this.fail(new EngineClosedError("the inference engine was closed"));
    void this.worker.terminate();
  }

  private call<T>(message: EngineThreadMessage, id: number): Promise<T> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      this.worker.ref();
      this.worker.postMessage(message);
    });
  }

  private fail(error: Error): void {
    this.failure ??= error;
    for (const waiter of this.pending.values()) waiter.reject(this.failure);
    this.pending.clear();
  }
}

function isThreadWeights(weights: unknown): weights is ThreadWeights {
  return (
    typeof weights === "object" && weights !== null && "layout" in weights && "tensors" in weights
  );
}
