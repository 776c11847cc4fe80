/**
 * Tokenizer and chat template of the policy: Hugging Face `tokenizer.json` files through
 * `@huggingface/tokenizers`, chat templates through `@huggingface/jinja`, and a byte-level
 * BPE trainer for models trained from scratch.
 */
export {
  Tokenizer,
  TokenizerError,
  type ApplyChatTemplateOptions,
  type DecodeOptions,
  type EncodeOptions,
  type TokenizerOptions,
} from "./tokenizer.js";
export {
  QWEN25_CHAT_TEMPLATE,
  COMPACT_CHAT_TEMPLATE,
  CHAT_TEMPLATES,
  type ChatTemplateName,
  ChatTemplateError,
  parseToolCallArguments,
  prepareMessagesForTemplate,
  qwen25AssistantText,
  toJsonLikePython,
  renderChatTemplate,
  type ChatMessage,
  type ChatTemplateOptions,
  type ChatToolCall,
  type ChatToolSpec,
} from "./chat-template.js";
export { StreamDecoder, type DecodeFunction } from "./stream-decoder.js";
export {
  BYTE_TO_UNICODE,
  BpeTrainingError,
  DEFAULT_SPECIAL_TOKENS,
  QWEN2_PRETOKENIZER_PATTERN,
  trainByteLevelBpe,
  type SpecialTokenSpec,
  type TrainByteLevelBpeOptions,
  type TrainedTokenizerFiles,
} from "./train-bpe.js";
export {
  TokenizerFileError,
  type AddedTokenJson,
  type GenerationConfig,
  type TokenizerConfig,
  type TokenizerJson,
} from "./files.js";
