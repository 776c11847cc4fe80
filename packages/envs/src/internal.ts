/**
 * `@agentrl/envs/internal`: what benches and tests reach for besides the public API of the
 * package entry (./index.ts, what the README documents). No stability promise.
 */
export { SAMPLE_STATUSES } from "./types.js";
export { NO_TOOL_CALL_MESSAGE, truncateOutput, validateArguments } from "./session.js";
export {
  SESSION_HEADER,
  AGENTBENCH_PREFIX,
  calculateOverall,
  generateToken,
  parseTextAction,
  TASK_NAME_ALIASES,
} from "./server/index.js";
export {
  debianMirror,
  defaultEnvironmentsDir,
  FailedSession,
  hasAgentBenchData,
  HASH_LABEL,
  hashFolder,
  HOST_DIR_LABEL,
  HOST_LABEL,
  imageHash,
  imagesUpToDate,
  PID_LABEL,
  readPackageList,
  resolveAgentBenchDir,
  RUN_LABEL,
  Slots,
  TIMEOUT_EXIT_CODE,
  WarmPool,
  copyImage,
  DockerEngine,
  DockerEngineSet,
  parseDockerHost,
  dockerCliPath,
  runtimeImageInputs,
} from "./docker/index.js";
export { hashString, mixSeeds } from "./random.js";
export { connectMcpServer, mcpResultText, mcpToolSpecs } from "./mcp/index.js";
