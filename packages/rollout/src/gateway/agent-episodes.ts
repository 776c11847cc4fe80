/**
 * Episodes of an unmodified agent, for the rollout scheduler: `AgentEpisodes.play` has the
 * signature of `runEpisode`, so a `RolloutScheduler` (and the trainer's loop) can play the
 * user's agent function in place of the built-in episode runner. Each episode:
 *
 *   1. opens an episode on the recording gateway (its own API key) in front of the pool's
 *      current engine;
 *   2. calls `agent(task, { baseURL, apiKey, model, signal, session? })`; the agent talks to
 *      the gateway with any OpenAI-compatible client and returns its reward (or nothing, when
 *      the reward comes from the project's environment, whose session it was given);
 *   3. finishes the gateway episode: the recorded turns become the trajectory.
 *
 * Who ended the episode decides the reward, as for built-in tasks: a returned reward (or the
 * environment's verdict) is `completed`; the episode's time running out, or an environment
 * session the agent left unfinished, is the agent's (`task limit reached`, the incomplete
 * penalty); an agent that throws, or an environment that fails, is an infrastructure fault,
 * played again up to `infrastructureRetries` times, then masked (or penalised, per
 * `infrastructureFaults`).
 *
 * When a template rewrite split the episode into several samples (see recorder.ts), the
 * trajectory is the LAST sample (the one holding the final turns); `metrics.droppedTurns`
 * counts the turns of the others, which are not trained on.
 */
import type {
  AssistantMessage,
  InteractResult,
  Message,
  SampleStatus,
  ToolSpec,
} from "@agentrl/envs";
import {
  EPISODE_DEFAULTS,
  EpisodeTimeoutError,
  episodeOutcome,
  raceSignal,
  retryInfrastructureFaults,
  startSampleWaiting,
  type EpisodeDependencies,
  type EpisodeOptions,
  type EpisodeSpec,
} from "../episode.js";
import type { ServeTokenizer } from "../serve/chat.js";
import { endCauseOf, NO_VERSION, type Trajectory } from "../types.js";
import { RecordingGateway, type GatewayEngine, type RecordingGatewayOptions } from "./gateway.js";
import { GatewayError } from "./recorder.js";

/** A project environment's session, handed to the agent for tasks whose reward the environment gives. */
export interface AgentSession {
  readonly messages: Message[];
  readonly tools: ToolSpec[];
  /** One turn: the agent's message to the environment; its reply (and, at the end, reward and status). */
  interact(message: AssistantMessage): Promise<InteractResult>;
}

export interface AgentContext {
  /** The gateway's base URL (`http://127.0.0.1:port/v1`): the OpenAI client's `baseURL`. */
  baseURL: string;
  /** The episode's key: the OpenAI client's `apiKey`. */
  apiKey: string;
  /** A model id to send (any is accepted). */
  model: string;
  /** Aborted when the episode's time is up or the run stops. */
  signal: AbortSignal;
  /** The task's name and instance index. */
  taskName: string;
  index: number;
  /** The environment's session, for environment tasks. */
  session?: AgentSession;
}

/** What an agent returns: its reward, or with a status and metrics; nothing to take the environment's verdict. */
export type AgentResult =
  | number
  | { reward: number; status?: SampleStatus; metrics?: Record<string, number> }
  | void
  | undefined;

export type AgentFunction<Task> = (task: Task, context: AgentContext) => Promise<AgentResult>;

export interface AgentEpisodesOptions<Task> {
  agent: AgentFunction<Task>;
  /** The task object the agent gets for a task name and index. */
  taskOf: (taskName: string, index: number) => Task;
  /** Tasks whose episodes get a session of the project's environment (`deps.client`); default none. */
  environmentTasks?: readonly string[];
  /** Gateway settings (the engine and tokenizer come from the scheduler). */
  gateway?: Omit<RecordingGatewayOptions, "engine" | "tokenizer">;
}

type Settings = typeof EPISODE_DEFAULTS & EpisodeOptions;

export class AgentEpisodes<Task> {
  private gatewayInstance: RecordingGateway | undefined;
  private starting: Promise<RecordingGateway> | undefined;
  private deps: EpisodeDependencies | undefined;

  constructor(private readonly options: AgentEpisodesOptions<Task>) {}

  /** The gateway, once the first episode started it. */
  get gateway(): RecordingGateway | undefined {
    return this.gatewayInstance;
  }

  /** Plays one episode of the agent (the scheduler's `playEpisode`); never throws for the agent's or the environment's faults. */
  readonly play = async (
    deps: EpisodeDependencies,
    spec: EpisodeSpec,
    episodeOptions: EpisodeOptions = {},
    signal?: AbortSignal,
  ): Promise<Trajectory> => {
    const settings = { ...EPISODE_DEFAULTS, ...episodeOptions };
    // The engine behind the gateway is always the scheduler's latest pool's current member.
    this.deps = deps;
    const gateway = await this.start(deps, settings);
    return retryInfrastructureFaults(
      () => this.playOnce(gateway, deps, spec, settings, signal),
      settings.infrastructureRetries,
      signal,
    );
  };

  /** Stops the gateway. */
  async close(): Promise<void> {
    await (await this.starting?.catch(() => undefined))?.close();
  }

  private start(deps: EpisodeDependencies, settings: Settings): Promise<RecordingGateway> {
    this.starting ??= (async () => {
      const tokenizer = deps.tokenizer as Partial<ServeTokenizer>;
      if (!Array.isArray(tokenizer.stopTokenIds))
        throw new GatewayError(
          "the recording gateway needs a tokenizer with stopTokenIds (the policy's Tokenizer)",
        );
      const current = () => this.deps!.pool.current;
      const engine: GatewayEngine = {
        get version() {
          return current().version;
        },
        generate: (request) => current().generate(request),
        releaseCache: (key) => current().releaseCache(key),
      };
      const gateway = new RecordingGateway({
        ...(settings.temperature !== undefined
          ? { temperature: settings.temperature }
          : { engineTemperature: true }),
        maxEpisodeTokens: settings.maxTokens,
        maxTokensPerRequest: settings.maxNewTokensPerTurn,
        defaultMaxTokens: settings.maxNewTokensPerTurn,
        ...this.options.gateway,
        engine,
        tokenizer: tokenizer as ServeTokenizer,
      });
      await gateway.listen(0);
      this.gatewayInstance = gateway;
      return gateway;
    })();
    return this.starting;
  }

  private async playOnce(
    gateway: RecordingGateway,
    deps: EpisodeDependencies,
    spec: EpisodeSpec,
    settings: Settings,
    outer?: AbortSignal,
  ): Promise<Trajectory> {
    const began = performance.now();
    const episode = gateway.openEpisode(spec);
    const controller = new AbortController();
    const timer = setTimeout(
      () =>
        controller.abort(
          new EpisodeTimeoutError(`episode exceeded ${settings.episodeTimeoutMs} ms`),
        ),
      settings.episodeTimeoutMs,
    );
    const signal = outer ? AbortSignal.any([outer, controller.signal]) : controller.signal;
    let status: SampleStatus = "completed";
    let reward = 0;
    let error: string | undefined;
    let metrics: Record<string, number> = {};
    let session: { id: string; last?: InteractResult } | undefined;
    try {
      let agentSession: AgentSession | undefined;
      if (this.options.environmentTasks?.includes(spec.task)) {
        // A full worker is waited for, until the episode's time is up.
        const started = await startSampleWaiting(deps.client, spec.task, spec.index, signal);
        const opened: { id: string; last?: InteractResult } = { id: started.sessionId };
        session = opened;
        agentSession = {
          messages: started.messages,
          tools: started.tools,
          interact: async (message) =>
            (opened.last = await deps.client.interact(opened.id, message)),
        };
      }
      const task = this.options.taskOf(spec.task, spec.index);
      const result = await raceSignal(
        this.options.agent(task, {
          baseURL: episode.baseURL,
          apiKey: episode.apiKey,
          model: gateway.modelName,
          signal,
          taskName: spec.task,
          index: spec.index,
          ...(agentSession ? { session: agentSession } : {}),
        }),
        signal,
      );
      if (typeof result === "number") reward = result;
      else if (result && typeof result === "object") {
        reward = result.reward;
        status = result.status ?? "completed";
        metrics = result.metrics ?? {};
      } else if (session?.last?.finish) {
        reward = session.last.reward;
        status = session.last.status;
        metrics = session.last.metrics;
      } else {
        status = session ? "task limit reached" : "task error";
        error = session
          ? "the agent returned before its environment session finished"
          : "the agent returned no reward";
      }
      if (!Number.isFinite(reward)) {
        status = "task error";
        error = `the agent's reward is not a finite number: ${reward}`;
      }
    } catch (thrown) {
      const timedOut = thrown instanceof EpisodeTimeoutError;
      status =
        outer?.aborted && thrown === outer.reason
          ? "cancelled"
          : timedOut
            ? "task limit reached"
            : "task error";
      error = thrown instanceof Error ? `${thrown.name}: ${thrown.message}` : String(thrown);
    } finally {
      clearTimeout(timer);
      if (session && !session.last?.finish) deps.client.cancel(session.id).catch(() => {});
    }
    const { masked, reward: finalReward } = episodeOutcome(status, reward, settings);
    const samples = gateway.finishEpisode(episode.apiKey, finalReward, {
      status,
      masked,
      ...(error !== undefined ? { error } : {}),
      metrics,
    });
    const durationMs = performance.now() - began;
    const last = samples[samples.length - 1];
    // Nothing recorded: nothing to train on, so the group stays out of the loss whoever ended it.
    if (!last)
      return emptyTrajectory(spec, status, error ?? "the agent made no request", durationMs);
    const dropped = samples.slice(0, -1).reduce((sum, sample) => sum + sample.turns.length, 0);
    last.environmentReward = reward;
    last.metrics = { ...last.metrics, durationMs, droppedTurns: dropped };
    return last;
  }
}

/** An episode without a single request: nothing to train on, masked (its group stays out of the loss). */
function emptyTrajectory(
  spec: EpisodeSpec,
  status: SampleStatus,
  error: string,
  durationMs: number,
): Trajectory {
  const reward = 0;
  const masked = true;
  return {
    ...spec,
    tokens: new Int32Array(0),
    lossMask: new Uint8Array(0),
    logprobs: new Float32Array(0),
    versions: new Int32Array(0),
    policyIds: new Int8Array(0),
    reward,
    environmentReward: reward,
    status,
    endCause: endCauseOf(status),
    masked,
    error,
    turns: [],
    minVersion: NO_VERSION,
    maxVersion: NO_VERSION,
    metrics: {
      turns: 0,
      durationMs,
      generatedTokens: 0,
      templateFallbacks: 0,
      formatErrors: 0,
      gatewayRequests: 0,
      templateRewrites: 0,
      droppedTurns: 0,
    },
    weight: 1,
  };
}
