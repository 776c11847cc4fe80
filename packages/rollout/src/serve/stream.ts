/**
 * Streaming one choice: generated token ids in, OpenAI `delta`s out.
 *
 * Text is released as soon as it is certain to be content: never the part from a
 * `<tool_call>` on (tool calls go out as one `tool_calls` delta at the end, once parsed), nor
 * a tail that could still become a stop string or the opening of a tool call, nor (when
 * tools are parsed, whose content is trimmed) leading or trailing whitespace. At the end,
 * whatever the final message's content has beyond what was released goes out, then the
 * tool calls. The deltas' content therefore always adds up to `message.content`.
 *
 * The server feeds it each slice of a chunked generation (see chunked.ts) as it arrives.
 */
import { StreamDecoder } from "@agentrl/policy";
import { TOOL_CALL_OPEN } from "../toolcall.js";
import { cutAtStop, type ChatPrompt, type ChoiceOutcome, type ServeTokenizer } from "./chat.js";

/** One chunk's `delta` of a choice. */
export type StreamDelta =
  | { content: string }
  | {
      tool_calls: {
        index: number;
        id: string;
        type: "function";
        function: { name: string; arguments: string };
      }[];
    };

export class ChoiceStreamer {
  private readonly decoder: StreamDecoder;
  private readonly stops: readonly string[];
  private readonly parseTools: boolean;
  /** Everything is a tool call (tool_choice forced one): release no content while generating. */
  private readonly forced: boolean;
  /** Decoded text so far, cut at a stop string once one appears. */
  private text = "";
  private isStopped = false;
  /** Content released so far. */
  private released = "";
  /** Where content starts in `text` (after leading whitespace, when tools are parsed); -1 until known. */
  private contentStart: number;

  constructor(tokenizer: ServeTokenizer, prompt: ChatPrompt, stops: readonly string[]) {
    this.decoder = new StreamDecoder((ids) => tokenizer.decode(ids, { skipSpecialTokens: true }));
    this.stops = stops;
    this.parseTools = prompt.parseTools;
    this.forced = prompt.forcedOpening !== "";
    this.contentStart = this.parseTools ? -1 : 0;
  }

  /** Takes the next generated token; returns the content delta it releases, if any. */
  push(token: number): StreamDelta[] {
    if (this.isStopped || this.forced) return [];
    this.text += this.decoder.push(token);
    const cut = cutAtStop(this.text, this.stops);
    if (cut.stopped) {
      this.text = cut.text;
      this.isStopped = true;
    }
    return this.release(this.safeEnd());
  }

  /** The rest of the content and the tool calls of the final message (from `interpretGeneration`). */
  finish(outcome: ChoiceOutcome): StreamDelta[] {
    const deltas: StreamDelta[] = [];
    const content = outcome.message.content ?? "";
    if (content.startsWith(this.released) && content.length > this.released.length) {
      deltas.push({ content: content.slice(this.released.length) });
      this.released = content;
    }
    const calls = outcome.message.tool_calls ?? [];
    if (calls.length > 0)
      deltas.push({ tool_calls: calls.map((call, index) => ({ index, ...call })) });
    return deltas;
  }

  /** A stop string appeared: later tokens are ignored (generation may end). */
  get stopped(): boolean {
    return this.isStopped;
  }

  /** Content released so far. */
  get releasedContent(): string {
    return this.released;
  }

  /** End (exclusive) of the text certain to be content. */
  private safeEnd(): number {
    let end = this.text.length;
    if (!this.isStopped) end -= longestSuffixPrefix(this.text, this.stops);
    if (this.parseTools) {
      const open = this.text.indexOf(TOOL_CALL_OPEN);
      end =
        open >= 0
          ? Math.min(end, open)
          : Math.min(end, this.text.length - longestSuffixPrefix(this.text, [TOOL_CALL_OPEN]));
      // Trailing whitespace may be trimmed away (text before a tool call, or the end).
      while (end > 0 && /\s/.test(this.text[end - 1])) end -= 1;
    }
    return end;
  }

  private release(end: number): StreamDelta[] {
    if (this.contentStart < 0) {
      const first = this.text.search(/\S/);
      if (first < 0) return [];
      this.contentStart = first;
    }
    const from = this.contentStart + this.released.length;
    if (end <= from) return [];
    const piece = this.text.slice(from, end);
    this.released += piece;
    return [{ content: piece }];
  }
}

/** Length of the longest suffix of `text` that is a proper prefix of one of `markers`. */
export function longestSuffixPrefix(text: string, markers: readonly string[]): number {
  let longest = 0;
  for (const marker of markers) {
    for (let length = Math.min(marker.length - 1, text.length); length > longest; length--) {
      if (text.endsWith(marker.slice(0, length))) {
        longest = length;
        break;
      }
    }
  }
  return longest;
}
