/**
 * `@agentrl/rollout/internal`: what benches and tests reach for besides the public API of the
 * package entry (./index.ts, what the README documents). No stability promise.
 */
export { NO_POLICY, NO_VERSION, POLICY_IDS } from "./types.js";
export { jsonLikePython, TOOL_CALL_CLOSE, TOOL_CALL_OPEN } from "./toolcall.js";
export { policyEngineModel } from "./engine/index.js";
export { POLICY_VERSION_HEADER } from "./remote.js";
export { RolloutMetrics } from "./metrics.js";
export { ChatCompletionRequestSchema, parseChatCompletionRequest } from "./serve/index.js";
export { EpisodeRecorder } from "./gateway/index.js";
