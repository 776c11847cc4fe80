/**
 * The episode runner: plays ONE episode of a task instance and builds its trajectory as
 * ONE token sequence, incrementally:
 *
 *   prompt = tokenize(template(opening messages, tools, generation prompt))     mask 0
 *   per turn:
 *     the exact generated tokens (ending with `<|im_end|>`)                    mask 1
 *       with the sampler's log-probs, policy version and pool member
 *     the environment's reply tokens                                           mask 0
 *       = tokenize(template(conversation after, generation prompt) − text so far)
 *
 * Generated text is never re-tokenized. The environment's reply tokens come from the text
 * the template adds after what the sequence already says, checked textually: when
 * `decode(sequence)` is a prefix of the templated conversation, the rest is the reply.
 * When it is not (the template renders history differently from what was generated, e.g.
 * the model's JSON spacing differs from `tojson`, or a template that drops old reasoning),
 * the runner falls back to the template's text after the same number of end-of-turn
 * markers, and counts it in `metrics.templateFallbacks`.
 *
 * An episode ALWAYS ends with a trajectory: environment faults, time limits, parse
 * failures and cancellation become a status, never a throw. The status says who ended the
 * episode (`endCauseOf`): the agent's ends (turn limit, context limit, invalid actions, its
 * own time running out while it generated) get the incomplete penalty; infrastructure's
 * (an environment or task error, a dead container or worker, an engine error, an unreachable
 * controller, a time limit hit while the environment answered) are played again up to
 * `infrastructureRetries` times, and an episode that still fails is `masked` (reward 0, its
 * group kept out of the loss) or, with `infrastructureFaults: "penalize"`, penalised as the
 * original did.
 */
import { AgentRLError } from "@agentrl/spec";
import type {
  AssistantMessage,
  EnvironmentClient,
  Message,
  SampleStatus,
  ToolSpec,
} from "@agentrl/envs";
import { ContextLimitError, type GenerationResult } from "./engine/index.js";
import type { PolicyPool } from "./pool.js";
import { parseToolCalls } from "./toolcall.js";
import {
  endCauseOf,
  type EndCause,
  NO_POLICY,
  NO_VERSION,
  POLICY_CODES,
  type PolicyId,
  type Trajectory,
  type TurnRecord,
} from "./types.js";

/** What the runner needs from a tokenizer (`@agentrl/policy`'s `Tokenizer` fits). */
export interface ChatTokenizer {
  encode(text: string): number[];
  decode(ids: readonly number[], options?: { skipSpecialTokens?: boolean }): string;
  applyChatTemplate(
    messages: readonly Message[],
    options?: { tools?: readonly ToolSpec[]; addGenerationPrompt?: boolean },
  ): string;
}

export interface EpisodeOptions {
  /** Assistant turns before the episode ends with `task limit reached`. Default 20. */
  maxTurns?: number;
  /** Tokens of the whole trajectory before it ends with `agent context limit`. Default 8,192. */
  maxTokens?: number;
  /** Tokens generated per turn at most. Default 1,024. */
  maxNewTokensPerTurn?: number;
  /** Sampling temperature; default: the engine's. */
  temperature?: number;
  /** Time limit of one turn (generation + environment), milliseconds. Default 240,000. */
  turnTimeoutMs?: number;
  /** Time limit of the whole episode, milliseconds. Default 1,800,000. */
  episodeTimeoutMs?: number;
  /** Reward of an episode the agent ended without the environment's verdict (turn/context limit, invalid actions, its own timeout). Default −0.2. */
  incompletePenalty?: number;
  /**
   * Reward of a right answer the environment says was not read from a command's output
   * (its `answerFromOutput` metric is 0: OS), at most the environment's own: training can
   * refuse to pay a right guess, so that only read answers are learnt. Default: the
   * environment's reward (evaluation always uses it).
   */
  unreadAnswerReward?: number;
  /** Times an episode ended by an infrastructure fault is played again (a fresh session of the same instance). Default 2. */
  infrastructureRetries?: number;
  /**
   * What an episode that still ends by an infrastructure fault after its retries becomes:
   * `mask` (default): reward 0 and `masked`, so that its group is dropped from the loss;
   * `penalize`: the incomplete penalty, as the original did (the policy is punished for the infrastructure).
   */
  infrastructureFaults?: "mask" | "penalize";
  /** The template's end-of-turn marker (Qwen / ChatML `<|im_end|>`). Default `<|im_end|>`. */
  endOfTurnText?: string;
  /** Keep the KV cache between turns (prefill only the environment's reply). Default true. */
  reuseCache?: boolean;
}

export interface EpisodeSpec {
  task: string;
  index: number;
  groupId: string;
  member: number;
}

export interface EpisodeDependencies {
  client: EnvironmentClient;
  tokenizer: ChatTokenizer;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- engines of any policy type
  pool: PolicyPool<any>;
}

export class TurnTimeoutError extends AgentRLError {}
export class EpisodeTimeoutError extends AgentRLError {}

/** The defaults of {@link EpisodeOptions} (shared with the gateway's agent episodes). */
export const EPISODE_DEFAULTS = {
  maxTurns: 20,
  maxTokens: 8192,
  maxNewTokensPerTurn: 1024,
  turnTimeoutMs: 240_000,
  episodeTimeoutMs: 1_800_000,
  incompletePenalty: -0.2,
  infrastructureRetries: 2,
  infrastructureFaults: "mask" as "mask" | "penalize",
  endOfTurnText: "<|im_end|>",
  reuseCache: true,
};

let episodeCounter = 0;

/**
 * Plays one episode to its end, again (a fresh session) while it ends by an infrastructure
 * fault and retries are left. Never throws for environment, model or time faults.
 * `metrics.infrastructureRetries` counts the plays that were thrown away.
 */
export async function runEpisode(
  deps: EpisodeDependencies,
  spec: EpisodeSpec,
  options: EpisodeOptions = {},
  signal?: AbortSignal,
): Promise<Trajectory> {
  const settings = { ...EPISODE_DEFAULTS, ...options };
  return retryInfrastructureFaults(
    () => playEpisode(deps, spec, settings, signal),
    settings.infrastructureRetries,
    signal,
  );
}

/**
 * Plays an episode (`play`) again while it ends by an infrastructure fault and retries are
 * left (not after `signal` aborted); `metrics.infrastructureRetries` counts the plays thrown away.
 */
export async function retryInfrastructureFaults(
  play: () => Promise<Trajectory>,
  infrastructureRetries: number,
  signal?: AbortSignal,
): Promise<Trajectory> {
  if (!(Number.isInteger(infrastructureRetries) && infrastructureRetries >= 0)) {
    throw new RangeError(
      `infrastructureRetries must be a non-negative integer, got ${infrastructureRetries}`,
    );
  }
  for (let retries = 0; ; retries++) {
    const trajectory = await play();
    const fault = trajectory.endCause === "infrastructure";
    if (!fault || retries >= infrastructureRetries || signal?.aborted) {
      trajectory.metrics.infrastructureRetries = retries;
      return trajectory;
    }
  }
}

/**
 * Starts a session of `task` instance `index`. A full worker (HTTP 406) is waited for, with
 * backoff, until `signal` aborts; a session that starts after the caller gave up on it
 * (`signal` aborted, or `abandoned()`) is cancelled as soon as it exists.
 */
export async function startSampleWaiting(
  client: EnvironmentClient,
  task: string,
  index: number,
  signal: AbortSignal,
  abandoned: () => boolean = () => false,
): ReturnType<EnvironmentClient["startSample"]> {
  for (let attempt = 0; ; attempt++) {
    const starting = client.startSample(task, index);
    starting.then(
      (late) => (abandoned() || signal.aborted) && cancelQuietly(client, late.sessionId),
      () => {},
    );
    try {
      return await starting;
    } catch (error) {
      if (!isWorkerFull(error) || signal.aborted) throw error;
      await sleep(Math.min(1000, 20 * 2 ** attempt), signal);
    }
  }
}

/**
 * Who ended an episode of `status` decides its reward: the environment's (or the agent's)
 * verdict; 0 for an infrastructure fault that is masked; otherwise the incomplete penalty.
 */
export function episodeOutcome(
  status: SampleStatus,
  verdictReward: number,
  settings: Pick<typeof EPISODE_DEFAULTS, "incompletePenalty" | "infrastructureFaults">,
): { endCause: EndCause; masked: boolean; reward: number } {
  const endCause = endCauseOf(status);
  const masked = endCause === "infrastructure" && settings.infrastructureFaults === "mask";
  const reward = endCause === "verdict" ? verdictReward : masked ? 0 : settings.incompletePenalty;
  return { endCause, masked, reward };
}

async function playEpisode(
  deps: EpisodeDependencies,
  spec: EpisodeSpec,
  settings: typeof EPISODE_DEFAULTS & EpisodeOptions,
  signal?: AbortSignal,
): Promise<Trajectory> {
  const builder = new TrajectoryBuilder(spec);
  const began = performance.now();
  const episodeController = new AbortController();
  const episodeTimer = setTimeout(
    () =>
      episodeController.abort(
        new EpisodeTimeoutError(`episode exceeded ${settings.episodeTimeoutMs} ms`),
      ),
    settings.episodeTimeoutMs,
  );
  const episodeSignal = signal
    ? AbortSignal.any([signal, episodeController.signal])
    : episodeController.signal;
  const cacheKey = `episode-${++episodeCounter}`;
  let sessionId: string | undefined;
  let finished = false;
  let startAbandoned = false;
  try {
    // A full worker answers 406: wait and retry (with backoff) until the turn's time limit.
    const start = await withDeadline(
      (startSignal) =>
        startSampleWaiting(deps.client, spec.task, spec.index, startSignal, () => startAbandoned),
      settings.turnTimeoutMs,
      episodeSignal,
    );
    sessionId = start.sessionId;
    const conversation: Message[] = [...start.messages];
    const tools = start.tools;
    builder.push(
      deps.tokenizer.encode(
        deps.tokenizer.applyChatTemplate(conversation, { tools, addGenerationPrompt: true }),
      ),
      { mask: 0 },
    );
    while (true) {
      if (builder.turns.length >= settings.maxTurns) {
        builder.end("task limit reached", `turn limit ${settings.maxTurns} reached`);
        break;
      }
      const room = settings.maxTokens - builder.length;
      if (room <= 0) {
        builder.end(
          "agent context limit",
          `trajectory reached ${builder.length} tokens (limit ${settings.maxTokens})`,
        );
        break;
      }
      const policy = deps.pool.choose();
      const turn = await withDeadline(
        (turnSignal) =>
          playTurn(deps, settings, {
            policy,
            conversation,
            tools,
            builder,
            room,
            cacheKey,
            signal: turnSignal,
            sessionId: sessionId!,
          }),
        settings.turnTimeoutMs,
        episodeSignal,
      );
      conversation.push(turn.message, ...turn.reply.messages);
      builder.environmentReward = turn.reply.reward;
      builder.environmentMetrics = turn.reply.metrics;
      const record = builder.turns[builder.turns.length - 1];
      if (turn.reply.finish) {
        finished = true;
        builder.status = turn.reply.status;
      } else {
        const environmentStart = builder.length;
        const reply = replyTokens(
          deps.tokenizer,
          builder.tokens,
          conversation,
          tools,
          settings.endOfTurnText,
        );
        builder.push(reply.tokens, { mask: 0 });
        record.templateFallback = reply.fallback;
        record.environment = [environmentStart, builder.length];
      }
      if (finished) break;
    }
  } catch (error) {
    startAbandoned = sessionId === undefined;
    builder.end(statusOfError(error, signal, builder.phase), describe(error));
  } finally {
    clearTimeout(episodeTimer);
    deps.pool.current.releaseCache(cacheKey);
    deps.pool.stale?.releaseCache(cacheKey);
    if (sessionId !== undefined && !finished) cancelQuietly(deps.client, sessionId);
  }
  return builder.build(settings, performance.now() - began);
}

interface TurnInput {
  policy: PolicyId;
  conversation: Message[];
  tools: ToolSpec[];
  builder: TrajectoryBuilder;
  room: number;
  cacheKey: string;
  signal: AbortSignal;
  sessionId: string;
}

/** Generates one assistant turn (appending its tokens) and sends it to the environment. */
async function playTurn(
  deps: EpisodeDependencies,
  settings: typeof EPISODE_DEFAULTS & EpisodeOptions,
  input: TurnInput,
) {
  const { builder, policy } = input;
  const start = builder.length;
  let message: AssistantMessage;
  let formatError: string | undefined;
  let finishReason: TurnRecord["finishReason"] = "stop";
  let minVersion = NO_VERSION;
  let maxVersion = NO_VERSION;
  let generatedEnd: number;
  builder.phase = "generation";
  if (policy === "external") {
    if (!deps.pool.external)
      throw new Error("the policy pool drew an external turn but has no external model");
    message = await deps.pool.external.complete(input.conversation, input.tools, input.signal);
    const tokens = externalTurnTokens(
      deps.tokenizer,
      input.conversation,
      input.tools,
      message,
      settings.endOfTurnText,
    );
    if (tokens.length > input.room)
      throw new ContextLimitError(
        `the external model's turn (${tokens.length} tokens) does not fit the ${input.room} tokens left`,
      );
    builder.push(tokens, { mask: 0, policy });
    generatedEnd = builder.length;
  } else {
    const engine = deps.pool.engine(policy);
    const result: GenerationResult = await engine.generate({
      promptTokens: builder.tokens,
      maxNewTokens: Math.min(settings.maxNewTokensPerTurn, input.room),
      ...(settings.temperature !== undefined ? { temperature: settings.temperature } : {}),
      signal: input.signal,
      ...(settings.reuseCache ? { cacheKey: `${input.cacheKey}` } : {}),
    });
    builder.push(result.tokens, {
      mask: 1,
      policy,
      logprobs: result.logprobs,
      versions: result.versions,
    });
    generatedEnd = builder.length;
    minVersion = Math.min(...result.versions);
    maxVersion = Math.max(...result.versions);
    finishReason = result.finishReason;
    // A turn cut by the length limit (or ended by another stop token, e.g. <|endoftext|>) lacks the
    // end-of-turn marker the template closes every turn with: add it (mask 0).
    const last = result.tokens[result.tokens.length - 1];
    if (
      result.finishReason === "length" ||
      deps.tokenizer.decode([last]) !== settings.endOfTurnText
    ) {
      builder.push(deps.tokenizer.encode(settings.endOfTurnText), { mask: 0 });
    }
    const text = deps.tokenizer.decode(result.tokens, { skipSpecialTokens: true });
    const parsed = parseToolCalls(text, { idPrefix: `call_${builder.turns.length}` });
    message = parsed.message;
    formatError = parsed.formatError;
  }
  // The turn is on record before the environment answers: a turn whose environment fails still counts.
  builder.turns.push({
    promptLength: start,
    generated: [start, generatedEnd],
    environment: [builder.length, builder.length],
    policy,
    minVersion,
    maxVersion,
    finishReason,
    ...(formatError !== undefined ? { formatError } : {}),
    templateFallback: false,
  });
  builder.phase = "environment";
  const reply = await raceSignal(deps.client.interact(input.sessionId, message), input.signal);
  return { message, reply };
}

/**
 * Tokens of the environment's reply: the templated conversation (with the generation
 * prompt) minus the text the sequence already holds. `fallback` when that text is not a
 * prefix of the template's rendering.
 */
export function replyTokens(
  tokenizer: ChatTokenizer,
  sequence: readonly number[],
  conversation: readonly Message[],
  tools: readonly ToolSpec[],
  endOfTurnText: string,
): { tokens: number[]; fallback: boolean } {
  const rendered = tokenizer.applyChatTemplate(conversation, { tools, addGenerationPrompt: true });
  const present = tokenizer.decode(sequence);
  if (rendered.startsWith(present))
    return { tokens: tokenizer.encode(rendered.slice(present.length)), fallback: false };
  // Not prefix-stable: take the template's text after as many end-of-turn markers as the sequence holds.
  const markers = countOccurrences(present, endOfTurnText);
  let boundary = 0;
  for (let seen = 0; seen < markers; seen++) {
    const at = rendered.indexOf(endOfTurnText, boundary);
    if (at < 0) break;
    boundary = at + endOfTurnText.length;
  }
  return { tokens: tokenizer.encode(rendered.slice(boundary)), fallback: true };
}

/** Tokens of an external model's assistant turn: its templated text, through the end-of-turn marker. */
export function externalTurnTokens(
  tokenizer: ChatTokenizer,
  conversation: readonly Message[],
  tools: readonly ToolSpec[],
  message: AssistantMessage,
  endOfTurnText: string,
): number[] {
  const before = tokenizer.applyChatTemplate(conversation, { tools, addGenerationPrompt: true });
  const after = tokenizer.applyChatTemplate([...conversation, message], {
    tools,
    addGenerationPrompt: false,
  });
  const base = after.startsWith(before)
    ? before.length
    : after.lastIndexOf("<|im_start|>assistant\n") + "<|im_start|>assistant\n".length;
  const end = after.indexOf(endOfTurnText, base);
  return tokenizer.encode(after.slice(base, end < 0 ? after.length : end + endOfTurnText.length));
}

function countOccurrences(text: string, marker: string): number {
  let count = 0;
  for (let at = text.indexOf(marker); at >= 0; at = text.indexOf(marker, at + marker.length))
    count += 1;
  return count;
}

/** Runs `work` with a signal that aborts at `timeoutMs` (TurnTimeoutError) or when `outer` aborts; rejects at once on either. */
async function withDeadline<T>(
  work: (signal: AbortSignal) => Promise<T>,
  timeoutMs: number,
  outer: AbortSignal,
): Promise<T> {
  const controller = new AbortController();
  const timer = setTimeout(
    () => controller.abort(new TurnTimeoutError(`turn exceeded ${timeoutMs} ms`)),
    timeoutMs,
  );
  const signal = AbortSignal.any([outer, controller.signal]);
  try {
    return await raceSignal(work(signal), signal);
  } finally {
    clearTimeout(timer);
  }
}

/** Rejects with the signal's reason as soon as it aborts, even if `promise` never settles. */
export function raceSignal<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    promise.catch(() => {});
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

/** The environment refused a new session because its workers are full (HTTP 406). */
function isWorkerFull(error: unknown): boolean {
  return (
    typeof error === "object" && error !== null && (error as { status?: unknown }).status === 406
  );
}

function sleep(milliseconds: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, milliseconds);
    signal.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });
}

function cancelQuietly(client: EnvironmentClient, sessionId: string): void {
  // A hung environment may never answer cancel either: never await it.
  client.cancel(sessionId).catch(() => {});
}

/**
 * The status of an episode the rollout ended with `error`, in `phase`. A time limit that
 * strikes while the agent generates is the agent's (`task limit reached`); while the
 * environment answers (or starts), the infrastructure's (`task error`), as is any other error.
 */
function statusOfError(
  error: unknown,
  outer: AbortSignal | undefined,
  phase: TrajectoryBuilder["phase"],
): SampleStatus {
  if (error instanceof ContextLimitError) return "agent context limit";
  if (outer?.aborted && error === outer.reason) return "cancelled";
  if (
    (error instanceof TurnTimeoutError || error instanceof EpisodeTimeoutError) &&
    phase === "generation"
  )
    return "task limit reached";
  return "task error";
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/** Accumulates the parallel per-token arrays of a trajectory. */
class TrajectoryBuilder {
  readonly tokens: number[] = [];
  private readonly lossMask: number[] = [];
  private readonly logprobs: number[] = [];
  private readonly versions: number[] = [];
  private readonly policyIds: number[] = [];
  readonly turns: TurnRecord[] = [];
  status: SampleStatus = "running";
  error: string | undefined;
  environmentReward = 0;
  environmentMetrics: Record<string, number> = {};
  /** What the episode is waiting for: the environment's start or reply, or the agent's generation. */
  phase: "environment" | "generation" = "environment";

  constructor(private readonly spec: EpisodeSpec) {}

  get length(): number {
    return this.tokens.length;
  }

  push(
    tokens: readonly number[],
    meta: {
      mask: 0 | 1;
      policy?: PolicyId;
      logprobs?: readonly number[];
      versions?: readonly number[];
    },
  ): void {
    tokens.forEach((token, i) => {
      this.tokens.push(token);
      this.lossMask.push(meta.mask);
      this.logprobs.push(meta.logprobs?.[i] ?? 0);
      this.versions.push(meta.versions?.[i] ?? NO_VERSION);
      this.policyIds.push(meta.policy ? POLICY_CODES[meta.policy] : NO_POLICY);
    });
  }

  /** The environment's reward, or the unread-answer reward when that is set, lower, and the answer was not read from an output. */
  private verdictReward(unreadAnswerReward: number | undefined): number {
    if (unreadAnswerReward === undefined || this.environmentMetrics.answerFromOutput !== 0)
      return this.environmentReward;
    return Math.min(this.environmentReward, unreadAnswerReward);
  }

  /** Ends the episode from the rollout's side (the environment did not finish it). */
  end(status: SampleStatus, error: string): void {
    if (this.status !== "running") return;
    this.status = status;
    this.error = error;
  }

  build(
    settings: Pick<typeof EPISODE_DEFAULTS, "incompletePenalty" | "infrastructureFaults"> &
      Pick<EpisodeOptions, "unreadAnswerReward">,
    durationMs: number,
  ): Trajectory {
    const status: SampleStatus = this.status === "running" ? "unknown" : this.status;
    const { endCause, masked, reward } = episodeOutcome(
      status,
      this.verdictReward(settings.unreadAnswerReward),
      settings,
    );
    const currentVersions = this.versions.filter(
      (version, i) => this.policyIds[i] === POLICY_CODES.current && version >= 0,
    );
    const generatedTokens = this.lossMask.reduce((sum, mask) => sum + mask, 0);
    return {
      task: this.spec.task,
      index: this.spec.index,
      groupId: this.spec.groupId,
      member: this.spec.member,
      tokens: Int32Array.from(this.tokens),
      lossMask: Uint8Array.from(this.lossMask),
      logprobs: Float32Array.from(this.logprobs),
      versions: Int32Array.from(this.versions),
      policyIds: Int8Array.from(this.policyIds),
      reward,
      environmentReward: this.environmentReward,
      status,
      endCause,
      masked,
      ...(this.error !== undefined ? { error: this.error } : {}),
      turns: this.turns,
      minVersion:
        currentVersions.length > 0 ? currentVersions.reduce((a, b) => Math.min(a, b)) : NO_VERSION,
      maxVersion:
        currentVersions.length > 0 ? currentVersions.reduce((a, b) => Math.max(a, b)) : NO_VERSION,
      metrics: {
        ...this.environmentMetrics,
        turns: this.turns.length,
        durationMs,
        generatedTokens,
        templateFallbacks: this.turns.filter((turn) => turn.templateFallback).length,
        formatErrors: this.turns.filter((turn) => turn.formatError !== undefined).length,
      },
      weight: 1,
    };
  }
}
