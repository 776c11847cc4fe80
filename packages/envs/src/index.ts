/**
 * @agentrl/envs: the task API, the controller and workers, the Docker runtime and the five
 * task families. The public API, by name (a new export of a module is added here on
 * purpose); the generated families' internals are namespaces (`kg`, `webshop`, `alfworld`).
 */
export {
  type AssistantMessage,
  type CurriculumTaskFamily,
  type Difficulty,
  type EnvironmentClient,
  EnvironmentError,
  type Expert,
  type InteractResult,
  type JsonSchema,
  type Message,
  type SampleStatus,
  type Split,
  type StartResult,
  type TaskFamily,
  type TaskFamilyOptions,
  type TaskSession,
  type ToolCall,
  type ToolSpec,
} from "./types.js";
export {
  FunctionCallSession,
  type Outcome,
  type SessionLimits,
  type ToolReply,
} from "./session.js";
export {
  createTaskFamily,
  isTaskName,
  needsDocker,
  openFamilies,
  type OpenedFamilies,
  TASK_FAMILIES,
  TASK_NAMES,
  taskFamily,
  type TaskFamilyDescriptor,
  type TaskFamilyFactory,
  type TaskName,
  UnknownTaskFamilyError,
} from "./registry.js";
export { type EpisodeRecord, playEpisode, playEpisodes } from "./play.js";
export {
  Controller,
  type ControllerOptions,
  DEFAULT_CONTROLLER_PORT,
  EnvironmentApiError,
  HttpEnvironmentClient,
  type HttpEnvironmentClientOptions,
  InProcessEnvironmentClient,
  type InProcessEnvironmentClientOptions,
  ServerConfigError,
  serveWorker,
  TaskWorker,
  type TaskWorkerOptions,
  type WorkerServer,
  type WorkerServerOptions,
  defaultTokenFile,
  serverToken,
  tokenFromEnvironment,
} from "./server/index.js";
export * as alfworld from "./alfworld/index.js";
export {
  buildImages,
  type BuildImagesOptions,
  type BuildProgress,
  type BuildResult,
  type Capability,
  ContainerError,
  type ContainerSpec,
  DockerRuntime,
  type DockerRuntimeOptions,
  DockerUnavailableError,
  type ExecOptions,
  type ExecResult,
  ImageBuildError,
  IMAGES,
  type ImageSpec,
  isDockerAvailable,
  type Lease,
  TaskDataError,
  type WarmPoolOptions,
  copyImagesToHost,
  createTaskFamilyOnEngines,
  type DockerEngineSetOptions,
  DockerHostError,
  type DockerHostSpec,
  type EngineFamilyFactory,
  type EngineHostsOptions,
  type EngineState,
  type ImageCopy,
  MultiEngineTaskFamily,
  buildRuntimeImage,
  RUNTIME_IMAGE,
  type RuntimeImageInputs,
} from "./docker/index.js";
export * as kg from "./kg/index.js";
export { Random } from "./random.js";
export * as webshop from "./webshop/index.js";
export { loadOsSamples, type OsSample } from "./os/data.js";
export { loadDbSamples, type DbSample } from "./db/data.js";
export {
  createMcpTaskFamily,
  createTaskMcpServer,
  type McpCallRecord,
  type McpServerSpec,
  type McpTask,
  type McpTaskFamilyOptions,
  type TaskMcpServerOptions,
} from "./mcp/index.js";
