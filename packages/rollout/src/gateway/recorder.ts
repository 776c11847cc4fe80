/**
 * What the recording gateway keeps of one episode: its turns as token sequences, built the
 * way the episode runner builds a built-in trajectory (episode.ts), but from the requests an
 * unmodified agent sends.
 *
 *   request k ──template──► rendered text (conversation so far + generation prompt)
 *     append-only: decode(sequence so far) is a prefix of the rendered text
 *        → prompt = sequence so far + encode(the rest)        (the client's new messages, mask 0)
 *     otherwise (the template or the client rewrote an earlier turn)
 *        → the sequence so far is closed as one sample, and a new one starts
 *          from encode(rendered)                               (counted in `rewrites`)
 *   generation ──► the exact sampled ids, their log-probs and versions    (mask 1)
 *
 * Sampled text is never re-tokenized: the ids the engine drew stay in the sequence, and the
 * next prompt continues them. With `n` > 1 every choice is a candidate; the next request
 * continues the candidate whose text its rendering extends; the others are dropped. At the
 * end the candidate continued last (or the first choice of the last request) closes the
 * episode's last sample.
 */
import type { SampleStatus } from "@agentrl/envs";
import { AgentRLError } from "@agentrl/spec";
import {
  endCauseOf,
  NO_POLICY,
  NO_VERSION,
  POLICY_CODES,
  type Trajectory,
  type TurnRecord,
} from "../types.js";
import type { ChatTokenizer } from "../episode.js";

/** What the recorder needs from a tokenizer: the episode runner's (`@agentrl/policy`'s `Tokenizer` fits). */
export type RecorderTokenizer = ChatTokenizer;

/** One generation as the engine returned it. */
export interface RecordedGeneration {
  tokens: readonly number[];
  logprobs: readonly number[];
  versions: readonly number[];
  finishReason: "stop" | "length";
}

/** Where an episode belongs (the trainer's group of a task instance). */
export interface EpisodeIdentity {
  task: string;
  index: number;
  groupId: string;
  member: number;
}

/** A token sequence under construction, with its per-token training data. */
class SampleBuilder {
  tokens: number[] = [];
  lossMask: number[] = [];
  logprobs: number[] = [];
  versions: number[] = [];
  turns: TurnRecord[] = [];

  push(
    tokens: readonly number[],
    generated?: { logprobs: readonly number[]; versions: readonly number[] },
  ): void {
    tokens.forEach((token, i) => {
      this.tokens.push(token);
      this.lossMask.push(generated ? 1 : 0);
      this.logprobs.push(generated ? generated.logprobs[i] : 0);
      this.versions.push(generated ? generated.versions[i] : NO_VERSION);
    });
  }

  copy(): SampleBuilder {
    const copy = new SampleBuilder();
    copy.tokens = [...this.tokens];
    copy.lossMask = [...this.lossMask];
    copy.logprobs = [...this.logprobs];
    copy.versions = [...this.versions];
    copy.turns = this.turns.map((turn) => ({
      ...turn,
      generated: [...turn.generated],
      environment: [...turn.environment],
    }));
    return copy;
  }
}

/** The prompt of one request of an episode, ready for the engine. */
export interface PreparedTurn {
  /** The prompt's token ids: the episode's exact sequence so far plus the new tokens (or the whole rendering after a rewrite). */
  promptTokens: number[];
  /** This request rewrote history: the earlier sequence was closed as a sample of its own. */
  rewrite: boolean;
  /** Prompt tokens reused from the sequence so far (the rest are new). */
  continuedTokens: number;
}

export interface EpisodeRecorderOptions {
  /** The template's end-of-turn marker, added (mask 0) after a generation that did not end with it. Default `<|im_end|>`. */
  endOfTurnText?: string;
}

/** Misuse of the gateway's or the recorder's API (an unknown or finished episode, a request out of order). */
export class GatewayError extends AgentRLError {}

export class EpisodeRecorder {
  private readonly closed: SampleBuilder[] = [];
  /** The sequences the last request's choices left (one per choice). */
  private candidates: SampleBuilder[] = [];
  /** The sequence the current request continues (its prompt), until its generations arrive. */
  private preparing: SampleBuilder | undefined;
  private readonly endOfTurnText: string;
  /** Requests answered. */
  requests = 0;
  /** Requests whose rendering did not extend the sequence so far (one more sample each). */
  rewrites = 0;

  constructor(
    private readonly tokenizer: RecorderTokenizer,
    readonly identity: EpisodeIdentity,
    options: EpisodeRecorderOptions = {},
  ) {
    this.endOfTurnText = options.endOfTurnText ?? "<|im_end|>";
  }

  /**
   * The prompt of the next request, whose rendered conversation is `rendered` (template with
   * generation prompt and any forced opening). Joins it to the candidate it extends.
   */
  prepare(rendered: string): PreparedTurn {
    if (this.preparing)
      throw new GatewayError("a request of this episode is already being answered");
    for (const candidate of this.candidates) {
      const present = this.tokenizer.decode(candidate.tokens);
      if (!rendered.startsWith(present)) continue;
      const sample = candidate.copy();
      const start = sample.tokens.length;
      sample.push(this.tokenizer.encode(rendered.slice(present.length)));
      const last = sample.turns[sample.turns.length - 1];
      if (last) last.environment = [start, sample.tokens.length];
      this.preparing = sample;
      this.candidates = [];
      return { promptTokens: [...sample.tokens], rewrite: false, continuedTokens: start };
    }
    const rewrite = this.candidates.length > 0;
    if (rewrite) {
      this.rewrites += 1;
      this.closed.push(this.candidates[0]);
    }
    this.candidates = [];
    const sample = new SampleBuilder();
    sample.push(this.tokenizer.encode(rendered));
    this.preparing = sample;
    return { promptTokens: [...sample.tokens], rewrite, continuedTokens: 0 };
  }

  /** Records the request's generations (one per choice, in order); each becomes a candidate. */
  complete(generations: readonly RecordedGeneration[]): void {
    const base = this.preparing;
    if (!base) throw new GatewayError("complete() without prepare()");
    this.preparing = undefined;
    this.requests += 1;
    this.candidates = generations.map((generation) => {
      const sample = base.copy();
      const start = sample.tokens.length;
      sample.push(generation.tokens, {
        logprobs: generation.logprobs,
        versions: generation.versions,
      });
      const generatedEnd = sample.tokens.length;
      // A turn cut by the length limit (or ended by another stop token) lacks the end-of-turn marker
      // the template closes every turn with: add it (mask 0), as the episode runner does.
      const last = generation.tokens[generation.tokens.length - 1];
      if (
        generation.tokens.length === 0 ||
        generation.finishReason === "length" ||
        this.tokenizer.decode([last]) !== this.endOfTurnText
      ) {
        sample.push(this.tokenizer.encode(this.endOfTurnText));
      }
      const versions = generation.versions.length > 0 ? generation.versions : [NO_VERSION];
      sample.turns.push({
        promptLength: start,
        generated: [start, generatedEnd],
        environment: [sample.tokens.length, sample.tokens.length],
        policy: "current",
        minVersion: Math.min(...versions),
        maxVersion: Math.max(...versions),
        finishReason: generation.finishReason,
        templateFallback: false,
      });
      return sample;
    });
  }

  /** The request failed (nothing was generated): the episode stays where it was. */
  abandon(): void {
    this.preparing = undefined;
  }

  /** The episode's samples so far: the closed ones, then the sequence continued last. */
  private samples(): SampleBuilder[] {
    return [...this.closed, ...this.candidates.slice(0, 1)];
  }

  /**
   * The episode as trajectories (one, or one more per rewrite), each with `reward`. `status`
   * says who ended it (default `completed`: the user's reward is a verdict).
   */
  trajectories(
    reward: number,
    options: {
      status?: SampleStatus;
      masked?: boolean;
      error?: string;
      durationMs?: number;
      metrics?: Record<string, number>;
    } = {},
  ): Trajectory[] {
    const status = options.status ?? "completed";
    const masked = options.masked ?? false;
    return this.samples().map((sample) => {
      const current = sample.versions.filter(
        (version, i) => sample.lossMask[i] === 1 && version >= 0,
      );
      return {
        ...this.identity,
        tokens: Int32Array.from(sample.tokens),
        lossMask: Uint8Array.from(sample.lossMask),
        logprobs: Float32Array.from(sample.logprobs),
        versions: Int32Array.from(sample.versions),
        policyIds: Int8Array.from(sample.lossMask, (mask) =>
          mask === 1 ? POLICY_CODES.current : NO_POLICY,
        ),
        reward: masked ? 0 : reward,
        environmentReward: reward,
        status,
        endCause: endCauseOf(status),
        masked,
        ...(options.error !== undefined ? { error: options.error } : {}),
        turns: sample.turns,
        minVersion: current.length > 0 ? current.reduce((a, b) => Math.min(a, b)) : NO_VERSION,
        maxVersion: current.length > 0 ? current.reduce((a, b) => Math.max(a, b)) : NO_VERSION,
        metrics: {
          ...options.metrics,
          turns: sample.turns.length,
          durationMs: options.durationMs ?? 0,
          generatedTokens: sample.lossMask.reduce((sum, mask) => sum + mask, 0),
          templateFallbacks: 0,
          formatErrors: 0,
          gatewayRequests: this.requests,
          templateRewrites: this.rewrites,
        },
        weight: 1,
      };
    });
  }
}
