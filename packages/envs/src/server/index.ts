/** The controller, workers and clients of the function-call API (see `protocol.ts` for the routes). */
export {
  EnvironmentApiError,
  ServerConfigError,
  SESSION_HEADER,
  DEFAULT_CONTROLLER_PORT,
  TASK_NAME_ALIASES,
} from "./protocol.js";
export { AGENTBENCH_PREFIX, calculateOverall, parseTextAction } from "./agentbench.js";
export { defaultTokenFile, generateToken, serverToken, tokenFromEnvironment } from "./token.js";
export { Controller, type ControllerOptions } from "./controller.js";
export {
  TaskWorker,
  serveWorker,
  type TaskWorkerOptions,
  type WorkerServer,
  type WorkerServerOptions,
} from "./worker.js";
export { HttpEnvironmentClient, type HttpEnvironmentClientOptions } from "./client.js";
export {
  InProcessEnvironmentClient,
  type InProcessEnvironmentClientOptions,
} from "./in-process.js";
