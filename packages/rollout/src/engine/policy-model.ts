/** The engine over a `Policy` of `@agentrl/policy`. */
import {
  PolicySnapshot,
  type ExportedWeights,
  type KVSequence,
  type Policy,
} from "@agentrl/policy";
import { InferenceEngine } from "./engine.js";
import type { EngineModel, InferenceEngineOptions } from "./types.js";

/** What a policy engine accepts as new weights: an in-process snapshot, or exported flat weights. */
export type PolicyWeights = PolicySnapshot | ExportedWeights;

/**
 * The engine's view of a `Policy` of `@agentrl/policy`. The engine should own its policy
 * (e.g. `trainingPolicy.fromSnapshot(trainingPolicy.snapshot())`), so that training never
 * changes the sampler's weights behind the engine's back: new weights arrive only through
 * `engine.updateWeights`.
 */
export function policyEngineModel(policy: Policy): EngineModel<KVSequence, PolicyWeights> {
  const model = policy.model;
  return {
    createSequence: () => model.createSequence(),
    fork: (sequence, length) => sequence.fork(length),
    prefill: (sequence, tokenIds) => model.prefill(sequence, tokenIds),
    prefillBatch: (sequences, tokenLists) => model.prefillBatch(sequences, tokenLists),
    decodeStep: (sequences, tokenIds) => model.decodeStep(sequences, tokenIds),
    loadWeights: (weights) =>
      weights instanceof PolicySnapshot ? policy.restore(weights) : policy.importWeights(weights),
  };
}

/** An engine serving `policy` (stop tokens from its tokenizer unless given, version from the policy). */
export function createPolicyEngine(
  policy: Policy,
  options: InferenceEngineOptions = {},
): InferenceEngine<KVSequence, PolicyWeights> {
  return new InferenceEngine(policyEngineModel(policy), {
    stopTokenIds: policy.tokenizer?.stopTokenIds ?? [],
    maxSequenceLength: policy.config.maxPositionEmbeddings,
    initialVersion: policy.version,
    ...options,
  });
}
