/** Worker-thread entry of `ThreadEngine` (see thread.ts): an `InferenceEngine` over a policy copy of its own. */
import { parentPort, workerData } from "node:worker_threads";
import { Policy, Transformer, initBackend, snapshotFromFlat } from "@agentrl/policy";
import { InferenceEngine } from "./engine.js";
import { policyEngineModel } from "./policy-model.js";
import type {
  EngineThreadData,
  EngineThreadMessage,
  EngineThreadReply,
  ThreadWeights,
} from "./thread.js";

const port = parentPort!;
const data = workerData as EngineThreadData;

function describe(error: unknown): { name: string; message: string; stack?: string } {
  const e = error as Error;
  return { name: e?.name ?? "Error", message: e?.message ?? String(error), stack: e?.stack };
}

function load(policy: Policy, weights: ThreadWeights): void {
  // LoRA: the frozen base is already here; the adapters are the update.
  if (weights.lora)
    return policy.importWeights({ version: weights.version, tensors: [], lora: weights.lora });
  if (weights.layout === "hf") return policy.importWeights(weights);
  const snapshot = snapshotFromFlat(weights.version, weights.tensors);
  try {
    policy.restore(snapshot);
  } finally {
    snapshot.dispose();
  }
}

try {
  await initBackend();
  let model: Transformer;
  if (data.weights.layout === "internal") {
    const snapshot = snapshotFromFlat(data.weights.version, data.weights.tensors);
    model = new Transformer(data.config, undefined, { trainable: false, values: snapshot.values });
    snapshot.dispose();
  } else {
    model = new Transformer(data.config, undefined, { trainable: false });
  }
  const policy = new Policy(model, { version: data.weights.version });
  if (data.weights.layout === "hf") policy.importWeights(data.weights);
  if (data.weights.lora && data.weights.layout === "internal") load(policy, data.weights);
  if (data.usableVocabulary !== undefined) model.limitVocabulary(data.usableVocabulary);
  // The start weights are in the model now: let the shared buffer go (freed once no thread holds it).
  data.weights = { ...data.weights, tensors: [], lora: undefined };
  const base = policyEngineModel(policy);
  const engine = new InferenceEngine(
    { ...base, loadWeights: (weights: ThreadWeights) => load(policy, weights) },
    data.options,
  );
  const aborts = new Map<number, AbortController>();
  const reply = (message: Omit<EngineThreadReply, "stats">) =>
    port.postMessage({ ...message, stats: engine.stats() } satisfies EngineThreadReply);
  port.on("message", (message: EngineThreadMessage) => {
    if (message.kind === "generate") {
      const abort = new AbortController();
      aborts.set(message.id, abort);
      engine
        .generate({ ...message.request, signal: abort.signal })
        .then(
          (result) => reply({ id: message.id, result }),
          (error) => reply({ id: message.id, error: describe(error) }),
        )
        .finally(() => aborts.delete(message.id));
    } else if (message.kind === "abort") {
      aborts.get(message.id)?.abort(new Error("aborted by the caller"));
    } else if (message.kind === "release") {
      engine.releaseCache(message.cacheKey);
    } else if (message.kind === "weights") {
      engine.updateWeights(message.weights, message.weights.version).then(
        () => reply({ id: message.id }),
        (error) => reply({ id: message.id, error: describe(error) }),
      );
    }
  });
  port.postMessage({ ready: true });
} catch (error) {
  port.postMessage({ error: describe(error) });
}
