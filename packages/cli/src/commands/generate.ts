/**
 * `agentrl generate`: load a model directory and print a completion of a prompt.
 * The prompt goes through the chat template (as one user message) unless `--raw`.
 */
import { InvalidArgumentError, type Command } from "commander";
import { numberOption } from "../options.js";
import { Policy, Rng, type GenerationResult } from "@agentrl/policy";

export interface GenerateCommandOptions {
  /** Model directory. */
  model: string;
  /** Prompt text. */
  prompt: string;
  /** Use the text as is instead of wrapping it in the chat template. Default false. */
  raw?: boolean;
  /** Default 128. */
  maxNewTokens?: number;
  /** 0 = greedy. Default: generation_config.json's, else 0.8. */
  temperature?: number;
  /** Default 1. */
  topP?: number;
  /** Default 0 (off). */
  topK?: number;
  /** Default 0. */
  seed?: number;
  /** Optional system message (chat mode only). */
  system?: string;
}

export interface GenerateCommandResult extends GenerationResult {
  text: string;
  promptTokens: number;
  tokensPerSecond: number;
}

/** Loads the model, builds the prompt and generates one completion. */
export async function generateCompletion(
  options: GenerateCommandOptions,
): Promise<GenerateCommandResult> {
  const policy = await Policy.load(options.model, { tokenizer: true, trainable: false });
  try {
    const tokenizer = policy.tokenizer!;
    const text = options.raw
      ? options.prompt
      : tokenizer.applyChatTemplate(
          [
            ...(options.system ? [{ role: "system" as const, content: options.system }] : []),
            { role: "user" as const, content: options.prompt },
          ],
          { addGenerationPrompt: true },
        );
    const promptIds = tokenizer.encode(text);
    if (promptIds.length === 0) throw new InvalidArgumentError("the prompt is empty");
    const temperature =
      options.temperature ??
      (typeof policy.generationConfig.temperature === "number"
        ? policy.generationConfig.temperature
        : 0.8);
    const started = performance.now();
    const [result] = policy.generate([promptIds], {
      maxNewTokens: options.maxNewTokens ?? 128,
      temperature,
      topP: options.topP ?? 1,
      topK: options.topK ?? 0,
      rng: new Rng(options.seed ?? 0),
    });
    const seconds = (performance.now() - started) / 1000;
    return {
      ...result,
      text: tokenizer.decode(result.tokens, { skipSpecialTokens: true }),
      promptTokens: promptIds.length,
      tokensPerSecond: result.tokens.length / Math.max(seconds, 1e-9),
    };
  } finally {
    policy.dispose();
  }
}

export function registerGenerateCommand(program: Command): void {
  program
    .command("generate")
    .description("print a model's completion of a prompt (chat template applied unless --raw)")
    .requiredOption("--model <dir>", "model directory (config.json, safetensors, tokenizer.json)")
    .requiredOption("--prompt <text>", "prompt text")
    .option("--raw", "feed the prompt as is, without the chat template", false)
    .option("--system <text>", "system message (chat mode)")
    .option(
      "--max-new-tokens <n>",
      "most tokens to generate",
      numberOption("--max-new-tokens", { integer: true, minimum: 1 }),
      128,
    )
    .option(
      "--temperature <t>",
      "sampling temperature, 0 = greedy (default: generation_config.json, else 0.8)",
      numberOption("--temperature", { minimum: 0 }),
    )
    .option("--top-p <p>", "nucleus sampling threshold", numberOption("--top-p", { minimum: 0 }), 1)
    .option(
      "--top-k <k>",
      "keep the k most likely tokens, 0 = off",
      numberOption("--top-k", { integer: true, minimum: 0 }),
      0,
    )
    .option("--seed <n>", "sampling seed", numberOption("--seed", { integer: true, minimum: 0 }), 0)
    .option("--verbose", "print token counts, finish reason and speed to stderr", false)
    .addHelpText(
      "after",
      '\nExamples:\n  agentrl generate --model models/tiny --prompt "List the files in /etc"\n  agentrl generate --model models/tiny --raw --prompt "<|im_start|>user\\nhi<|im_end|>\\n" --temperature 0\n',
    )
    .action(async (options: GenerateCommandOptions & { verbose: boolean }) => {
      const result = await generateCompletion(options);
      console.log(result.text);
      if (options.verbose) {
        console.error(
          `prompt ${result.promptTokens} tokens, generated ${result.tokens.length} (${result.finishReason}), ${result.tokensPerSecond.toFixed(0)} tokens/s`,
        );
      }
    });
}
