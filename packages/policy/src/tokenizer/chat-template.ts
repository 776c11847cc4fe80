/**
 * Chat messages and chat templates.
 *
 * The messages and tools are `@agentrl/spec`'s OpenAI-style types, the same `@agentrl/envs`
 * speaks, so a conversation from an environment renders as it is.
 *
 * Templates are Jinja (Hugging Face `chat_template`), rendered by `@huggingface/jinja`.
 */
import { Template } from "@huggingface/jinja";
import {
  AgentRLError,
  type AssistantMessage,
  type ChatToolSpec,
  type Message,
  type ToolCall,
} from "@agentrl/spec";

/** One message of a conversation: `@agentrl/spec`'s {@link Message}, by the name this package has always used. */
export type ChatMessage = Message;
/** One tool call of an assistant turn: `@agentrl/spec`'s {@link ToolCall}. */
export type ChatToolCall = ToolCall;
/** A tool description as the templates read it (only the name is required); `@agentrl/spec`'s. */
export type { ChatToolSpec };

/** Options of {@link renderChatTemplate}. */
export interface ChatTemplateOptions {
  /** Tools offered to the model; rendered by the template (Qwen2.5: a `<tools>` block). Default: none. */
  tools?: readonly ChatToolSpec[];
  /** Append the opening of an assistant turn (`<|im_start|>assistant\n`). Default `false`. */
  addGenerationPrompt?: boolean;
  /** Further variables for the template (e.g. `bos_token`, `eos_token`). Default `{}`. */
  variables?: Record<string, unknown>;
}

/** A template that failed to parse or render. */
export class ChatTemplateError extends AgentRLError {}

/** The opening of the system turn when tools are given: the system message's content, else Qwen's default line. */
const SYSTEM_WITH_TOOLS = `{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
`;

/**
 * The rest of both templates, shared: the system turn without tools, the message loop
 * (turns, assistant tool calls, tool responses grouped into one user turn) and the
 * generation prompt. Written once so that the two templates cannot drift apart.
 */
const SYSTEM_AND_MESSAGES = `{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
`;

/**
 * The chat template of Qwen2.5-Instruct (`chat_template` of its `tokenizer_config.json`),
 * verbatim. It renders:
 * - a system turn, the default being "You are Qwen, created by Alibaba Cloud. You are a
 *   helpful assistant." when the conversation does not open with a system message;
 * - with tools: the tool list as one JSON object per line inside `<tools></tools>` in the
 *   system turn, followed by the instruction to answer in `<tool_call></tool_call>` tags;
 * - assistant tool calls as `\n<tool_call>\n{"name": "...", "arguments": {...}}\n</tool_call>`
 *   after the (optional) content;
 * - tool results as a user turn `<|im_start|>user\n<tool_response>\n...\n</tool_response><|im_end|>`,
 *   consecutive tool messages sharing one user turn.
 */
export const QWEN25_CHAT_TEMPLATE =
  SYSTEM_WITH_TOOLS +
  `    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
` +
  SYSTEM_AND_MESSAGES;

/**
 * {@link QWEN25_CHAT_TEMPLATE} with the tool list shortened for tiny models trained from
 * scratch: each tool is one line `name(argument, ...)` (no descriptions, no JSON schema),
 * and the call instruction is one line. Everything else (turn markers, tool-call and
 * tool-response rendering) is Qwen2.5's, character for character. A tiny model cannot use
 * the descriptions, and attention over them is most of the cost of every training row
 * (see docs/warmstart.md for the token counts).
 */
export const COMPACT_CHAT_TEMPLATE =
  SYSTEM_WITH_TOOLS +
  `    {{- "\\n\\n# Tools\\n" }}
    {%- for tool in tools %}
        {%- set function = tool.function if tool.function is defined else tool %}
        {{- "\\n" + function.name + "(" }}
        {%- if function.parameters is defined and function.parameters.properties is defined %}
            {%- for name, schema in function.parameters.properties.items() %}
                {{- name }}
                {%- if not loop.last %}{{- ", " }}{%- endif %}
            {%- endfor %}
        {%- endif %}
        {{- ")" }}
    {%- endfor %}
    {{- "\\n\\nCall a tool with <tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
` +
  SYSTEM_AND_MESSAGES;

/** The chat templates the project writes into the models it makes, by name. */
export const CHAT_TEMPLATES = {
  "qwen2.5": QWEN25_CHAT_TEMPLATE,
  compact: COMPACT_CHAT_TEMPLATE,
} as const;
export type ChatTemplateName = keyof typeof CHAT_TEMPLATES;

/**
 * Tool-call arguments as the templates expect them.
 *
 * OpenAI's format (and the envs API) carries `arguments` as a JSON *string*, while the
 * Qwen2.5 template (like most Hugging Face templates) writes `tool_call.arguments | tojson`,
 * i.e. expects an object: a string would be rendered quoted and escaped. So a string that
 * parses as JSON is replaced by the parsed value (this is what `transformers` and vLLM do
 * too). A string that is not valid JSON is kept as it is, and renders as a JSON string.
 */
export function parseToolCallArguments(argumentsText: string): unknown {
  try {
    return JSON.parse(argumentsText);
  } catch {
    return argumentsText;
  }
}

/**
 * The messages as plain objects for the template: tool-call arguments parsed (see
 * {@link parseToolCallArguments}) and a `null` assistant content turned into `""` (which the
 * templates test as false, like `None`).
 */
export function prepareMessagesForTemplate(
  messages: readonly ChatMessage[],
): Record<string, unknown>[] {
  return messages.map((message) => {
    if (message.role !== "assistant") return { ...message };
    const prepared: Record<string, unknown> = { ...message, content: message.content ?? "" };
    if (message.tool_calls !== undefined) {
      prepared.tool_calls = message.tool_calls.map((call) => ({
        ...call,
        function: {
          name: call.function.name,
          arguments: parseToolCallArguments(call.function.arguments),
        },
      }));
    }
    return prepared;
  });
}

/**
 * JSON as Python's `json.dumps(value, ensure_ascii=False)` writes it (and so the `tojson`
 * filter of chat templates): `", "` between items and `": "` after keys.
 */
export function toJsonLikePython(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(toJsonLikePython).join(", ")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value).map(
      ([key, item]) => `${JSON.stringify(key)}: ${toJsonLikePython(item)}`,
    );
    return `{${entries.join(", ")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/**
 * The text a model has to generate after Qwen2.5's generation prompt (`<|im_start|>assistant\n`,
 * before `<|im_end|>`) for the template to render `message` the same way: the content, then
 * each tool call as `<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>`, joined by
 * newlines. Use it to turn structured (e.g. expert) messages into training text.
 */
export function qwen25AssistantText(message: AssistantMessage): string {
  let text = message.content ?? "";
  for (const call of message.tool_calls ?? []) {
    const argumentsJson = toJsonLikePython(parseToolCallArguments(call.function.arguments));
    if (text.length > 0) text += "\n";
    text += `<tool_call>\n{"name": "${call.function.name}", "arguments": ${argumentsJson}}\n</tool_call>`;
  }
  return text;
}

/** Parsed templates, by source text (parsing the Qwen2.5 template takes ~1 ms). */
const parsedTemplates = new Map<string, Template>();

function parseTemplate(source: string): Template {
  let template = parsedTemplates.get(source);
  if (template === undefined) {
    try {
      template = new Template(source);
    } catch (error) {
      throw new ChatTemplateError(`chat template does not parse: ${(error as Error).message}`);
    }
    if (parsedTemplates.size > 32) parsedTemplates.clear();
    parsedTemplates.set(source, template);
  }
  return template;
}

/**
 * Renders a conversation with a Jinja chat template, as `transformers`'
 * `apply_chat_template(messages, tools=..., add_generation_prompt=..., tokenize=False)` does.
 *
 * Prefix stability (what the rollout engine relies on), for the Qwen2.5 template: if
 * `messages[0..k]` ends with a user or tool message, then
 * `render(messages[0..k], addGenerationPrompt) + generated + "<|im_end|>\n"` is a prefix of
 * `render(messages[0..k+1])` when `messages[k+1]` is the assistant message parsed from
 * `generated`, provided `generated` is in the template's canonical form: content, then for
 * each call `\n<tool_call>\n{"name": "<name>", "arguments": <arguments as tojson writes them,
 * i.e. separators ", " and ": ">}\n</tool_call>` (no newline before the first call if there
 * is no content). It does NOT hold (the rendering of earlier text changes) when:
 * - the generated text is not canonical (other JSON spacing or key order, text after a tool
 *   call, missing newlines): the template re-writes the call from the parsed structure;
 * - a run of consecutive tool messages is split: a tool message that is last closes its user
 *   turn with `<|im_end|>`, a following tool message would have continued that turn;
 * - the first message changes (system message added or removed), or the tool list changes.
 */
export function renderChatTemplate(
  templateSource: string,
  messages: readonly ChatMessage[],
  options: ChatTemplateOptions = {},
): string {
  const template = parseTemplate(templateSource);
  const context: Record<string, unknown> = {
    ...options.variables,
    messages: prepareMessagesForTemplate(messages),
    add_generation_prompt: options.addGenerationPrompt ?? false,
  };
  // Like transformers: `tools` is defined whenever given (an empty list is false in Jinja).
  if (options.tools !== undefined) context.tools = options.tools;
  try {
    return template.render(context);
  } catch (error) {
    throw new ChatTemplateError(`chat template failed to render: ${(error as Error).message}`);
  }
}
