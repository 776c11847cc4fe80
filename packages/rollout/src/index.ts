/**
 * @agentrl/rollout: the inference engine, the episode runner, the policy pool (cross-policy
 * sampling), scheduling and the trajectory buffer. The public API, by name (a new export of
 * a module is added here on purpose).
 */
export {
  isInformative,
  POLICY_CODES,
  type PolicyId,
  type Trajectory,
  type TrajectoryGroup,
  type TurnRecord,
  type EndCause,
  endCauseOf,
  isMasked,
} from "./types.js";
export {
  formatToolCalls,
  type ParsedTurn,
  parseToolCalls,
  type ParseToolCallsOptions,
} from "./toolcall.js";
export {
  ContextLimitError,
  createPolicyEngine,
  EngineClosedError,
  type EngineModel,
  type EngineSequence,
  type EngineStats,
  type GenerationRequest,
  type GenerationResult,
  InferenceEngine,
  type InferenceEngineOptions,
  type PolicyWeights,
  type WeightUpdateMode,
  type GenerationEngine,
  affordableDecodeThreads,
  createPolicyEnginePool,
  decodeThreadsFor,
  defaultDecodeThreads,
  EnginePool,
  EngineThreadError,
  startEngineThreads,
  ThreadEngine,
} from "./engine/index.js";
export {
  ExternalChatModel,
  type ExternalChatModelOptions,
  ExternalModelError,
} from "./external.js";
export { PolicyPool, type PolicyPoolOptions } from "./pool.js";
export {
  InferenceServerError,
  RemoteEngine,
  type RemoteEngineOptions,
  type RemoteServerState,
  type TokenCompletionChoice,
  type TokenCompletionRequest,
} from "./remote.js";
export {
  type ChatTokenizer,
  EPISODE_DEFAULTS,
  type EpisodeDependencies,
  type EpisodeOptions,
  type EpisodeSpec,
  EpisodeTimeoutError,
  externalTurnTokens,
  replyTokens,
  runEpisode,
  TurnTimeoutError,
} from "./episode.js";
export { type EnvironmentRoute, RoutingEnvironmentClient, RoutingError } from "./routing.js";
export { FaultInjectingClient, type FaultInjectionOptions, InjectedFaultError } from "./faults.js";
export {
  BufferClosedError,
  type BufferStats,
  TrajectoryBuffer,
  type TrajectoryBufferOptions,
} from "./buffer.js";
export { type MetricsSnapshot, type TaskMetrics } from "./metrics.js";
export {
  RolloutScheduler,
  type RolloutSchedulerOptions,
  SchedulerError,
  type TaskMixEntry,
} from "./scheduler.js";
export {
  decodeRolloutState,
  encodeRolloutState,
  type InFlightGroup,
  type RolloutState,
  RolloutStateError,
} from "./state.js";
export {
  ApiError,
  type ChatCompletionRequest,
  ChatServer,
  type ChatServerOptions,
  isLoopbackHost,
  type ListeningAddress,
  type ModelServerOptions,
  type RunningModelServer,
  ServeConfigError,
  type ServeEngine,
  startModelServer,
} from "./serve/index.js";
export {
  type AgentContext,
  AgentEpisodes,
  type AgentEpisodesOptions,
  type AgentFunction,
  type AgentResult,
  type AgentSession,
  checkTemplate,
  type EpisodeHandle,
  type EpisodeIdentity,
  type FinishOptions,
  type GatewayEngine,
  GatewayError,
  type GatewayStats,
  RecordingGateway,
  type RecordingGatewayOptions,
  type TemplateCheck,
} from "./gateway/index.js";
