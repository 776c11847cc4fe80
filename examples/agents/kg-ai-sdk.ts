/**
 * An AI SDK agent with tools, trained unmodified (docs/harness.md):
 *
 *   npm run agentrl -- train --agent examples/agents/kg-ai-sdk.ts --steps 10 --run-dir runs/kg-agent
 *
 * The agent is plain AI SDK code: `generateText` with tools and `stopWhen`, over the
 * OpenAI-compatible provider. agentrl hands it a base URL and an API key per episode (the
 * recording gateway) and, because KG is one of the project's environments, a session whose
 * tools it wraps; the environment's verdict is the reward (the function returns nothing).
 */
import { generateText, jsonSchema, stepCountIs, tool, type ToolSet } from "ai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import type { AgentContext } from "@agentrl/rollout";

/** The tasks: KG's, rewarded by the KG environment. */
export const environmentTasks = ["kg"];
export const tasks = {};

export default async function agent(
  _task: unknown,
  { baseURL, apiKey, model, session }: AgentContext,
): Promise<void> {
  if (!session) throw new Error("this agent plays environment tasks (it needs a session)");
  const provider = createOpenAICompatible({ name: "policy", baseURL, apiKey });
  const tools: ToolSet = Object.fromEntries(
    session.tools.map((spec) => [
      spec.function.name,
      tool({
        description: spec.function.description,
        inputSchema: jsonSchema(spec.function.parameters as Parameters<typeof jsonSchema>[0]),
        execute: async (input, { toolCallId }) => {
          const reply = await session.interact({
            role: "assistant",
            content: null,
            tool_calls: [
              {
                id: toolCallId,
                type: "function",
                function: { name: spec.function.name, arguments: JSON.stringify(input) },
              },
            ],
          });
          return reply.messages.map((message) => message.content).join("\n");
        },
      }),
    ]),
  );
  const system = session.messages
    .filter((message) => message.role === "system")
    .map((message) => message.content)
    .join("\n");
  const prompt = session.messages
    .filter((message) => message.role === "user")
    .map((message) => message.content)
    .join("\n");
  const { text } = await generateText({
    model: provider(model),
    system,
    prompt,
    tools,
    stopWhen: stepCountIs(8),
    maxOutputTokens: 96,
  });
  // The final answer ("Final Answer: #k") is a turn of plain text; the environment scores it.
  await session.interact({ role: "assistant", content: text });
}
