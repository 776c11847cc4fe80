/**
 * The recording gateway: unmodified agents (the `openai` client, the AI SDK, …) play through
 * an OpenAI-compatible endpoint whose every completion is recorded as exact training data.
 */
export {
  type EpisodeHandle,
  type FinishOptions,
  type GatewayEngine,
  type GatewayStats,
  RecordingGateway,
  type RecordingGatewayOptions,
} from "./gateway.js";
export {
  type EpisodeIdentity,
  EpisodeRecorder,
  type EpisodeRecorderOptions,
  GatewayError,
  type PreparedTurn,
  type RecordedGeneration,
  type RecorderTokenizer,
} from "./recorder.js";
export { checkTemplate, type TemplateCheck, type TemplateCheckStep } from "./template-check.js";
export {
  type AgentContext,
  AgentEpisodes,
  type AgentEpisodesOptions,
  type AgentFunction,
  type AgentResult,
  type AgentSession,
} from "./agent-episodes.js";
