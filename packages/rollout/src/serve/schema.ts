/**
 * The request body of `POST /v1/chat/completions` (OpenAI's chat-completions format), as a
 * zod schema, and the OpenAI-style error body every failure is answered with.
 *
 * Fields that change the meaning of a request and that the server cannot honour
 * (non-zero penalties, `logit_bias`, JSON response formats, image content) are refused
 * with a 400 rather than silently ignored.
 */
import { AgentRLError } from "@agentrl/spec";
import { z } from "zod";

/** Text content: a string, or an array of `{type: "text", text}` parts (joined). */
const TextContentSchema = z.union([
  z.string(),
  z.array(
    z
      .object({ type: z.string(), text: z.string().optional() })
      .refine((part) => part.type === "text" && part.text !== undefined, {
        message: 'only text content parts ({type: "text", text}) are supported',
      }),
  ),
]);

const ToolCallSchema = z.object({
  id: z.string(),
  type: z.literal("function").default("function"),
  function: z.object({
    name: z.string().min(1),
    /** A JSON string, as in OpenAI's API (an object is accepted too and stringified). */
    arguments: z.union([z.string(), z.record(z.string(), z.unknown())]),
  }),
});

const MessageSchema = z.discriminatedUnion("role", [
  z.object({ role: z.literal("system"), content: TextContentSchema, name: z.string().optional() }),
  z.object({
    role: z.literal("developer"),
    content: TextContentSchema,
    name: z.string().optional(),
  }),
  z.object({ role: z.literal("user"), content: TextContentSchema, name: z.string().optional() }),
  z.object({
    role: z.literal("assistant"),
    content: TextContentSchema.nullable().optional(),
    tool_calls: z.array(ToolCallSchema).nullable().optional(),
    name: z.string().optional(),
    refusal: z.string().nullable().optional(),
  }),
  z.object({
    role: z.literal("tool"),
    tool_call_id: z.string(),
    content: TextContentSchema,
    name: z.string().optional(),
  }),
]);

const ToolSchema = z.object({
  type: z.literal("function"),
  function: z.looseObject({
    name: z.string().min(1).max(64),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
  }),
});

const ToolChoiceSchema = z.union([
  z.enum(["none", "auto", "required"]),
  z.object({ type: z.literal("function"), function: z.object({ name: z.string().min(1) }) }),
]);

const zeroOnly = (name: string) =>
  z
    .number()
    .nullable()
    .optional()
    .refine((value) => value === undefined || value === null || value === 0, {
      message: `${name} is not supported (only 0)`,
    });

/** Most completions (`n`) one request may ask for. */
export const MAXIMUM_CHOICES = 16;

export const ChatCompletionRequestSchema = z.looseObject({
  model: z.string().min(1),
  /** The conversation; absent when the request sends `prompt_token_ids` instead (token-in). */
  messages: z.array(MessageSchema).min(1, "messages must hold at least one message").optional(),
  /**
   * agentrl extension (token-in): the whole prompt as token ids, already templated; used as
   * it is, never re-tokenized. Replaces `messages` (tools then live inside the prompt).
   */
  prompt_token_ids: z.array(z.number().int().nonnegative()).min(1).optional(),
  /**
   * vLLM's `return_token_ids` (agentrl form): each choice also carries `token_ids`,
   * `token_logprobs` (at the sampling temperature) and `token_versions` (policy version of
   * the weights that produced each token).
   */
  return_token_ids: z.boolean().nullable().optional(),
  /** vLLM's `return_tokens_as_token_ids`: `logprobs.content[].token` reads `token_id:<id>`. */
  return_tokens_as_token_ids: z.boolean().nullable().optional(),
  /** vLLM's `stop_token_ids`: generation also ends at these ids (the tokenizer's stop ids always apply). */
  stop_token_ids: z.array(z.number().int().nonnegative()).max(64).nullable().optional(),
  /**
   * agentrl extension: keep this generation's KV cache under this key; the next request with
   * the same key whose prompt extends it prefills only the new tokens. Needs `n` = 1.
   */
  cache_key: z.string().min(1).max(256).nullable().optional(),
  tools: z.array(ToolSchema).optional(),
  tool_choice: ToolChoiceSchema.optional(),
  parallel_tool_calls: z.boolean().optional(),
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().gt(0).max(1).nullable().optional(),
  max_tokens: z.number().int().min(1).nullable().optional(),
  max_completion_tokens: z.number().int().min(1).nullable().optional(),
  stop: z
    .union([z.string().min(1), z.array(z.string().min(1)).max(4)])
    .nullable()
    .optional(),
  seed: z.number().int().nullable().optional(),
  n: z.number().int().min(1).max(MAXIMUM_CHOICES).nullable().optional(),
  stream: z.boolean().nullable().optional(),
  stream_options: z.object({ include_usage: z.boolean().optional() }).nullable().optional(),
  /** Per-token log-probs of the sampled tokens (no alternatives: `top_logprobs` must be 0). */
  logprobs: z.boolean().nullable().optional(),
  top_logprobs: zeroOnly("top_logprobs"),
  frequency_penalty: zeroOnly("frequency_penalty"),
  presence_penalty: zeroOnly("presence_penalty"),
  logit_bias: z
    .record(z.string(), z.number())
    .nullable()
    .optional()
    .refine((value) => !value || Object.keys(value).length === 0, {
      message: "logit_bias is not supported",
    }),
  response_format: z
    .object({ type: z.string() })
    .nullable()
    .optional()
    .refine((value) => !value || value.type === "text", {
      message: 'only response_format {type: "text"} is supported',
    }),
  user: z.string().optional(),
});

export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequestSchema>;
export type RequestMessage = NonNullable<ChatCompletionRequest["messages"]>[number];
export type RequestTool = NonNullable<ChatCompletionRequest["tools"]>[number];
export type ToolChoice = NonNullable<ChatCompletionRequest["tool_choice"]>;

/** OpenAI's error types, by HTTP status. */
export type ApiErrorType =
  | "invalid_request_error"
  | "authentication_error"
  | "not_found_error"
  | "server_error"
  | "service_unavailable";

/** A failure answered with `{error: {message, type, param, code}}` and an HTTP status. */
export class ApiError extends AgentRLError {
  constructor(
    readonly status: number,
    message: string,
    readonly type: ApiErrorType,
    /** The request field at fault (dotted path), or null. */
    readonly param: string | null = null,
    /** A machine-readable code (e.g. `invalid_api_key`, `model_not_found`), or null. */
    readonly code: string | null = null,
  ) {
    super(message);
  }

  body(): {
    error: { message: string; type: ApiErrorType; param: string | null; code: string | null };
  } {
    return {
      error: { message: this.message, type: this.type, param: this.param, code: this.code },
    };
  }
}

/** Parses a request body; throws a 400 ApiError naming the first field at fault. */
export function parseChatCompletionRequest(body: unknown): ChatCompletionRequest {
  const parsed = ChatCompletionRequestSchema.safeParse(body);
  if (parsed.success) {
    const request = parsed.data;
    const invalid = (param: string, message: string) =>
      new ApiError(400, message, "invalid_request_error", param, "invalid_value");
    if ((request.messages === undefined) === (request.prompt_token_ids === undefined))
      throw invalid(
        "messages",
        "send either messages or prompt_token_ids (token-in), not both or neither",
      );
    if (request.prompt_token_ids && (request.tools?.length || request.tool_choice))
      throw invalid(
        "tools",
        "with prompt_token_ids the tools are part of the prompt: tools and tool_choice must be absent",
      );
    if (request.prompt_token_ids && request.stream)
      throw invalid("stream", "prompt_token_ids (token-in) does not stream");
    if (request.cache_key && (request.n ?? 1) > 1)
      throw invalid("cache_key", "cache_key needs n = 1");
    return request;
  }
  const issue = parsed.error.issues[0];
  const param = issue.path.length > 0 ? issue.path.map(String).join(".") : null;
  throw new ApiError(
    400,
    param ? `${param}: ${issue.message}` : issue.message,
    "invalid_request_error",
    param,
    "invalid_value",
  );
}
