/** Training unmodified agents (the `openai` client, the AI SDK, …) through the recording gateway. */
export {
  type AgentTasks,
  trainAgent,
  TrainAgentError,
  type TrainAgentOptions,
} from "./train-agent.js";
