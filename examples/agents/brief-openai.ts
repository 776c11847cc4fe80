/**
 * The smallest agent to train: one `openai` chat completion per task, rewarded by the
 * agent's own function (no environment): 1 when the reply is at most eight words.
 *
 *   npm run agentrl -- train --agent examples/agents/brief-openai.ts --steps 5 --run-dir runs/brief
 *
 * agentrl hands the function a base URL and an API key per episode (the recording gateway);
 * the module exports the agent (default) and its tasks.
 */
import OpenAI from "openai";
import type { AgentContext } from "@agentrl/rollout";

interface Task {
  prompt: string;
}

export const tasks: Task[] = [
  { prompt: "Say hello to a new colleague." },
  { prompt: "What is a knowledge graph?" },
  { prompt: "Name a film genre." },
  { prompt: "Describe the weather today." },
];

export default async function agent(task: Task, { baseURL, apiKey, model }: AgentContext) {
  const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
  const completion = await client.chat.completions.create({
    model,
    messages: [{ role: "user", content: task.prompt }],
    max_tokens: 24,
  });
  const words = (completion.choices[0].message.content ?? "").trim().split(/\s+/);
  return words.length <= 8 ? 1 : 0;
}
