/**
 * From an OpenAI chat request to a prompt, and from generated tokens to an OpenAI answer.
 *
 *   request ──toTemplateMessages──► chat template (tools unless tool_choice "none")
 *           ──+ forced opening──────► prompt text ──encode──► prompt token ids
 *   generated ids ──decode──► text ──cut at stop strings──► parseToolCalls ──► message
 *
 * `tool_choice: "required"` or a named function is enforced by writing the opening of the
 * tool call into the prompt (`<tool_call>\n` or `<tool_call>\n{"name": "X", "arguments": `):
 * the model continues from there, and that opening is put back in front of the generated
 * text before it is parsed.
 */
import type { GenerationResult } from "../engine/index.js";
import { parseToolCalls, TOOL_CALL_OPEN } from "../toolcall.js";
import type { AssistantMessage, Message, ToolCall, ToolSpec } from "@agentrl/envs";
import {
  ApiError,
  type ChatCompletionRequest,
  type RequestMessage,
  type RequestTool,
} from "./schema.js";

/** What the server needs from a tokenizer (`@agentrl/policy`'s `Tokenizer` fits). */
export interface ServeTokenizer {
  encode(text: string): number[];
  decode(ids: readonly number[], options?: { skipSpecialTokens?: boolean }): string;
  applyChatTemplate(
    messages: readonly Message[],
    options?: { tools?: readonly ToolSpec[]; addGenerationPrompt?: boolean },
  ): string;
  /** Token ids that end a turn (`<|im_end|>`, …). */
  readonly stopTokenIds: number[];
}

/** OpenAI's finish reasons that this server produces. */
export type FinishReason = "stop" | "length" | "tool_calls";

/** The prompt of one request. */
export interface ChatPrompt {
  /** The templated conversation plus the forced opening, as text. */
  text: string;
  /** `text` as token ids. */
  tokens: number[];
  /** Text written for the model after the generation prompt (tool_choice), "" when none. */
  forcedOpening: string;
  /** Parse the output for `<tool_call>` blocks (false when tool_choice is "none" or no tools). */
  parseTools: boolean;
}

function textOf(content: string | { type: string; text?: string }[] | null | undefined): string {
  if (content === null || content === undefined) return "";
  return typeof content === "string" ? content : content.map((part) => part.text ?? "").join("");
}

/** Request messages in the template's form: text parts joined, `developer` as `system`, arguments as JSON strings. */
export function toTemplateMessages(messages: readonly RequestMessage[]): Message[] {
  return messages.map((message): Message => {
    switch (message.role) {
      case "system":
      case "developer":
        return { role: "system", content: textOf(message.content) };
      case "user":
        return { role: "user", content: textOf(message.content) };
      case "tool":
        return {
          role: "tool",
          tool_call_id: message.tool_call_id,
          content: textOf(message.content),
          ...(message.name ? { name: message.name } : {}),
        };
      case "assistant": {
        const calls: ToolCall[] = (message.tool_calls ?? []).map((call) => ({
          id: call.id,
          type: "function",
          function: {
            name: call.function.name,
            arguments:
              typeof call.function.arguments === "string"
                ? call.function.arguments
                : JSON.stringify(call.function.arguments),
          },
        }));
        const content =
          message.content === null || message.content === undefined
            ? null
            : textOf(message.content);
        return calls.length > 0
          ? { role: "assistant", content, tool_calls: calls }
          : { role: "assistant", content: content ?? "" };
      }
    }
  });
}

function toToolSpecs(tools: readonly RequestTool[]): ToolSpec[] {
  return tools.map((tool) => ({
    type: "function",
    function: {
      ...tool.function,
      description: tool.function.description ?? "",
      parameters: (tool.function.parameters ?? {
        type: "object",
        properties: {},
      }) as ToolSpec["function"]["parameters"],
    },
  }));
}

/** Renders the request's conversation into prompt text and tokens. Throws a 400 ApiError for a bad tool_choice. */
export function buildPrompt(tokenizer: ServeTokenizer, request: ChatCompletionRequest): ChatPrompt {
  // Token-in: the caller's ids are the prompt, as they are.
  if (request.prompt_token_ids)
    return {
      text: tokenizer.decode(request.prompt_token_ids),
      tokens: request.prompt_token_ids,
      forcedOpening: "",
      parseTools: false,
    };
  const tools = request.tools ?? [];
  const choice = request.tool_choice ?? (tools.length > 0 ? "auto" : "none");
  if (choice !== "none" && choice !== "auto" && tools.length === 0) {
    throw new ApiError(
      400,
      "tool_choice requires tools",
      "invalid_request_error",
      "tool_choice",
      "invalid_value",
    );
  }
  let forcedOpening = "";
  if (choice === "required") forcedOpening = `${TOOL_CALL_OPEN}\n`;
  if (typeof choice === "object") {
    const name = choice.function.name;
    if (!tools.some((tool) => tool.function.name === name)) {
      throw new ApiError(
        400,
        `tool_choice names the function "${name}", which is not among the tools`,
        "invalid_request_error",
        "tool_choice",
        "invalid_value",
      );
    }
    forcedOpening = `${TOOL_CALL_OPEN}\n{"name": ${JSON.stringify(name)}, "arguments": `;
  }
  const offered = choice === "none" ? [] : toToolSpecs(tools);
  let text: string;
  try {
    text =
      tokenizer.applyChatTemplate(toTemplateMessages(request.messages ?? []), {
        tools: offered,
        addGenerationPrompt: true,
      }) + forcedOpening;
  } catch (error) {
    throw new ApiError(
      400,
      `the chat template could not render the messages: ${(error as Error).message}`,
      "invalid_request_error",
      "messages",
      "invalid_value",
    );
  }
  return { text, tokens: tokenizer.encode(text), forcedOpening, parseTools: offered.length > 0 };
}

/** Stop strings of a request as a list. */
export function stopStrings(request: ChatCompletionRequest): string[] {
  const stop = request.stop;
  if (stop === undefined || stop === null) return [];
  return typeof stop === "string" ? [stop] : stop;
}

/** Cuts `text` before the first stop string; `stopped` tells whether one was found. */
export function cutAtStop(
  text: string,
  stops: readonly string[],
): { text: string; stopped: boolean } {
  let cut = -1;
  for (const stop of stops) {
    const at = text.indexOf(stop);
    if (at >= 0 && (cut < 0 || at < cut)) cut = at;
  }
  return cut < 0 ? { text, stopped: false } : { text: text.slice(0, cut), stopped: true };
}

/** Stop strings that are one token of the vocabulary become stop token ids too (generation ends there). */
export function stopTokenIdsFor(tokenizer: ServeTokenizer, stops: readonly string[]): number[] {
  const ids = new Set(tokenizer.stopTokenIds);
  for (const stop of stops) {
    const encoded = tokenizer.encode(stop);
    if (encoded.length === 1 && tokenizer.decode(encoded) === stop) ids.add(encoded[0]);
  }
  return [...ids];
}

/** The assistant's answer of one choice. */
export interface ChoiceOutcome {
  message: AssistantMessage;
  finishReason: FinishReason;
  /** The generated text after the forced opening, cut at a stop string (special tokens dropped). */
  text: string;
}

export interface InterpretOptions {
  prompt: ChatPrompt;
  stops: readonly string[];
  /** Prefix of tool-call ids (`${idPrefix}_${i}`). */
  idPrefix: string;
  /** Keep only the first tool call (the request's `parallel_tool_calls: false`). Default false. */
  singleToolCall?: boolean;
}

/** Turns one generation into the assistant message and finish reason of a choice. */
export function interpretGeneration(
  tokenizer: ServeTokenizer,
  result: Pick<GenerationResult, "tokens" | "finishReason">,
  options: InterpretOptions,
): ChoiceOutcome {
  const decoded = tokenizer.decode(result.tokens, { skipSpecialTokens: true });
  const { text, stopped } = cutAtStop(decoded, options.stops);
  const lengthFinish = result.finishReason === "length" && !stopped;
  if (!options.prompt.parseTools) {
    return {
      message: { role: "assistant", content: text },
      finishReason: lengthFinish ? "length" : "stop",
      text,
    };
  }
  const parsed = parseToolCalls(options.prompt.forcedOpening + text, {
    idPrefix: options.idPrefix,
  });
  const message = assistantMessage(parsed.message);
  if (options.singleToolCall && message.tool_calls)
    message.tool_calls = message.tool_calls.slice(0, 1);
  if (parsed.toolCalls > 0)
    return { message, finishReason: lengthFinish ? "length" : "tool_calls", text };
  return {
    message: { role: "assistant", content: parsed.message.content ?? "" },
    finishReason: lengthFinish ? "length" : "stop",
    text,
  };
}

function assistantMessage(message: AssistantMessage): ChoiceOutcome["message"] {
  return message.tool_calls && message.tool_calls.length > 0
    ? { role: "assistant", content: message.content, tool_calls: message.tool_calls }
    : { role: "assistant", content: message.content ?? "" };
}

/** Sampling settings of a request, with the server's defaults. */
export interface SamplingSettings {
  temperature: number;
  maxNewTokens: number;
  choices: number;
}

export function samplingSettings(
  request: ChatCompletionRequest,
  defaults: { temperature: number; maxTokens: number },
): SamplingSettings {
  return {
    temperature: request.temperature ?? defaults.temperature,
    maxNewTokens: request.max_completion_tokens ?? request.max_tokens ?? defaults.maxTokens,
    choices: request.n ?? 1,
  };
}
