/** MCP: task families over an MCP server's tools, and the project's families as MCP servers. */
export {
  connectMcpServer,
  createMcpTaskFamily,
  type McpCallRecord,
  mcpResultText,
  type McpServerSpec,
  type McpTask,
  type McpTaskFamilyOptions,
  mcpToolSpecs,
} from "./family.js";
export { createTaskMcpServer, type TaskMcpServerOptions } from "./server.js";
