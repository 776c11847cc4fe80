/**
 * @agentrl/spec: the types every agentrl package shares, defined once below all of them. The
 * public API, by name.
 */
export {
  type AssistantMessage,
  type ChatToolSpec,
  type JsonSchema,
  type Message,
  type Role,
  type SystemMessage,
  type ToolCall,
  type ToolMessage,
  type ToolSpec,
  type UserMessage,
} from "./messages.js";
export { AgentRLError } from "./errors.js";
