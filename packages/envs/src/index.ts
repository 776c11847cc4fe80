/**
 * @agentrl/envs: the task API, the controller and workers, the Docker runtime and the five
 * task families. The public API, by name (a new export of a module is added here on
 * purpose); the generated families' internals are namespaces (`kg`, `webshop`, `alfworld`).
 */
export {
  type AssistantMessage, type CurriculumTaskFamily, type Difficulty, type EnvironmentClient,
  EnvironmentError, type Expert, type InteractResult, type JsonSchema, type Message,
  SAMPLE_STATUSES, type SampleStatus, type Split, type StartResult, type TaskFamily,
  type TaskFamilyOptions, type TaskSession, type ToolCall, type ToolSpec
} from "./types.js";
export {
  FunctionCallSession, NO_TOOL_CALL_MESSAGE, type Outcome, type SessionLimits, type ToolReply,
  truncateOutput, validateArguments
} from "./session.js";
export {
  createTaskFamily, isTaskName, TASK_NAMES, type TaskName
} from "./registry.js";
export {
  type EpisodeRecord, playEpisode, playEpisodes
} from "./play.js";
export {
  Controller, type ControllerOptions, DEFAULT_CONTROLLER_PORT, EnvironmentApiError,
  HttpEnvironmentClient, type HttpEnvironmentClientOptions, InProcessEnvironmentClient,
  type InProcessEnvironmentClientOptions, ServerConfigError, serveWorker, SESSION_HEADER,
  TaskWorker, type TaskWorkerOptions, type WorkerServer, type WorkerServerOptions,
  AGENTBENCH_PREFIX, calculateOverall, defaultTokenFile, generateToken, parseTextAction,
  serverToken, TASK_NAME_ALIASES, tokenFromEnvironment
} from "./server/index.js";
export * as alfworld from "./alfworld/index.js";
export {
  buildImages, type BuildImagesOptions, type BuildProgress, type BuildResult, type Capability,
  ContainerError, type ContainerSpec, debianMirror, defaultEnvironmentsDir, DockerRuntime,
  type DockerRuntimeOptions, DockerUnavailableError, type ExecOptions, type ExecResult,
  FailedSession, hasAgentBenchData, HASH_LABEL, hashFolder, HOST_DIR_LABEL, HOST_LABEL,
  ImageBuildError, imageHash, IMAGES, type ImageSpec, imagesUpToDate, isDockerAvailable,
  type Lease, PID_LABEL, readPackageList, resolveAgentBenchDir, RUN_LABEL, Slots, TaskDataError,
  TIMEOUT_EXIT_CODE, WarmPool, type WarmPoolOptions,
  copyImage, copyImagesToHost, createTaskFamilyOnEngines, DockerEngine, DockerEngineSet,
  type DockerEngineSetOptions, DockerHostError, type DockerHostSpec, type EngineFamilyFactory,
  type EngineHostsOptions, type EngineState, type ImageCopy, MultiEngineTaskFamily, parseDockerHost,
  buildRuntimeImage, dockerCliPath, RUNTIME_IMAGE, type RuntimeImageInputs, runtimeImageInputs
} from "./docker/index.js";
export * as kg from "./kg/index.js";
export { hashString, mixSeeds, Random } from "./random.js";
export * as webshop from "./webshop/index.js";
export { loadOsSamples, type OsSample } from "./os/data.js";
export { loadDbSamples, type DbSample } from "./db/data.js";
export {
  connectMcpServer, createMcpTaskFamily, createTaskMcpServer, type McpCallRecord, mcpResultText,
  type McpServerSpec, type McpTask, type McpTaskFamilyOptions, mcpToolSpecs, type TaskMcpServerOptions
} from "./mcp/index.js";
