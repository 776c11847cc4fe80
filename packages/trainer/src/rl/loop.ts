/**
 * The training loop, read top to bottom. Two modes, one code path:
 *
 * - `async` (default): the rollout scheduler runs all the time; each step waits only for
 *   `batchGroups` complete groups in the buffer, trains (in the learner thread, so the
 *   main thread keeps generating), publishes the new version to the inference engines,
 *   and goes on. `maxStaleness` bounds how old a sample may be.
 * - `sync`: generate exactly one batch with the current policy, train, publish, repeat —
 *   the baseline async must beat. Every random stream of a step is seeded from
 *   (seed, step), so a resumed sync run continues exactly as an uninterrupted one.
 *
 * An async checkpoint also saves the rollout (`rollout.bin`, see @agentrl/rollout's state.ts):
 * the complete groups waiting in the buffer, whole, and the task instances still in flight. A
 * resume puts the groups back into the buffer before anything else (they are trained first,
 * under the same staleness rules) and plays the in-flight instances again first, once each;
 * the first step's metrics say how many (`resume/restored_groups`, `resume/resampled_groups`).
 *
 * Cross-policy sampling: a second engine holds a stale copy of the policy, refreshed every
 * `refreshEvery` steps; each turn is drawn from it with probability `staleProbability`.
 * Optionally an external model behind an OpenAI-compatible API takes each turn with its own
 * probability; its turns enter the trajectory with loss mask 0 (never trained on) and
 * version −1 (never counted against staleness).
 */
import { AgentRLError } from "@agentrl/spec";
import { join } from "node:path";
import { Policy, type ExportedWeights } from "@agentrl/policy";
import {
  ExternalChatModel,
  PolicyPool,
  RemoteEngine,
  isInformative,
  RolloutScheduler,
  TrajectoryBuffer,
  createPolicyEngine,
  type ChatTokenizer,
  type EngineStats,
  type EpisodeOptions,
  type ExternalChatModelOptions,
  type InferenceEngineOptions,
  type MetricsSnapshot,
  type RolloutSchedulerOptions,
  type TaskMixEntry,
  type TrajectoryGroup,
  type InFlightGroup,
  decodeRolloutState,
  encodeRolloutState,
} from "@agentrl/rollout";
import type { EnvironmentClient } from "@agentrl/envs";
import {
  latestCheckpoint,
  trimMetrics,
  writeCheckpoint,
  writeFileDurably,
  writeJson,
} from "./checkpoint.js";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { openLearner, type LearnerHandle } from "./threads/learner-thread.js";
import { availableGradientThreads, type LearnerSettings } from "./learner.js";
import { CROSS_POLICY_DEFAULTS } from "./defaults.js";
import { DEFAULT_GRPO } from "./grpo.js";
import { JsonlWriter, TensorBoardWriter, type Metrics } from "./logging.js";
import { TrajectoryLog, type TrajectoryLogOptions } from "./trajectory-log.js";
import { batchMetrics, describeFailures, describeFaults, engineMetrics } from "./batch-metrics.js";

export interface TrainingRunOptions {
  /** Starting weights, Hugging Face layout (ignored when resuming from a checkpoint). */
  modelDirectory: string;
  /** Where checkpoints, metrics.jsonl and tensorboard/ go. */
  runDirectory: string;
  client: EnvironmentClient;
  tasks: TaskMixEntry[];
  /** `async` (default) or `sync`. */
  mode: "async" | "sync";
  /** Optimizer steps of the run. */
  steps: number;
  /** Complete groups per step. */
  batchGroups: number;
  /**
   * DAPO's dynamic sampling (async mode): a step draws up to this many further groups to
   * replace the groups of its batch whose rewards are all equal (they carry no GRPO signal).
   * The batch's success and reward metrics still count every group drawn. Default 0 (off).
   */
  dynamicSamplingGroups?: number;
  /** Episodes per task instance (GRPO's n). */
  groupSize: number;
  seed: number;
  learner: LearnerSettings;
  /** Run the learner in a worker thread. Default: true in async mode, false in sync mode. */
  learnerThread?: boolean;
  rollout: {
    /** Episodes running at once. */
    maxConcurrentEpisodes: number;
    /**
     * Engine settings of the samplers. `maxBatchSize` defaults to `maxConcurrentEpisodes`;
     * `keepCachesOnUpdate` defaults to true in async mode (episodes keep their KV caches
     * across the weight update of every step; the recorded log-probs stay exact) and false
     * in sync mode (no update happens while a batch is generated).
     */
    engine: InferenceEngineOptions;
    episode: EpisodeOptions;
    /**
     * `agentrl serve` servers that generate the current policy's turns instead of a local
     * engine (balanced by in-flight sequences; each new version is pushed to all of them).
     * Default none (local engine).
     */
    servers?: { urls: string[]; apiKey?: string };
    /** Largest staleness (policy versions) of a group when taken; `Infinity` for none. */
    maxStaleness: number;
    /**
     * Plays each episode instead of the built-in runner (e.g. the user's agent through the
     * recording gateway: `trainAgent`). Default: the built-in runner.
     */
    playEpisode?: RolloutSchedulerOptions["playEpisode"];
    /** Buffer capacity in groups. Default 2 × batchGroups. */
    bufferGroups?: number;
    /** Share of its weight a task keeps while its recent groups all had equal rewards (see RolloutSchedulerOptions). Default 1. */
    uninformativeWeight?: number;
  };
  crossPolicy: {
    /** Probability that a turn comes from the stale policy; 0 turns cross-policy sampling off. */
    staleProbability: number;
    /** Steps between refreshes of the stale copy. Default 2 (the schema's `crossPolicy.refreshEvery`; AgentRL: 25 of 1,000). */
    refreshEvery?: number;
    /** An external model drawn per turn besides the stale copy (see ExternalPolicyMember). Default none. */
    external?: ExternalPolicyMember;
  };
  checkpoint: { every: number; keep: number };
  /** Resume from the newest checkpoint of the run directory, if any. */
  resume: boolean;
  /** Called with each step's batch of complete groups just before it is trained on; `step` is the number of the step it makes (as in its record and metrics, from 1). */
  onBatch?: (batch: { step: number; groups: readonly TrajectoryGroup[] }) => void;
  /** Record a sample of each step's episodes into `trajectories.jsonl` for the dashboard (see trajectory-log.ts). Default off. */
  trajectories?: TrajectoryLogOptions;
  /** Called after each step with its record; and every `evaluation.every` steps, the evaluation hook. */
  onStep?: (record: StepRecord) => void;
  evaluation?: { every: number; run: (policy: Policy, step: number) => Promise<Metrics> };
  /** Aborting stops the run after the current step, with a checkpoint. */
  signal?: AbortSignal;
  /** Where warnings go (one line each). Default `console.warn`. */
  log?: (line: string) => void;
}

/**
 * The external member of the cross-policy pool: a model behind an OpenAI-compatible
 * `POST {baseUrl}/chat/completions` (the rollout's ExternalChatModel), drawn for a turn with
 * `probability`; the stale copy keeps its own `staleProbability`, the current policy takes
 * the rest. Its answers are tokenized with the chat template and enter the trajectory with
 * loss mask 0 and policy id `external`, so they shape episodes but are never trained on, and
 * with version −1, so they never count against `maxStaleness`.
 *
 * `temperature` defaults to the rollout's sampling temperature (the episode's, else the
 * engine's) and `maxTokens` to the episode's `maxNewTokensPerTurn`, when those are set.
 */
export interface ExternalPolicyMember extends ExternalChatModelOptions {
  /** Probability that a turn comes from the external model; `staleProbability` + this must not exceed 1. */
  probability: number;
}

/** Thrown before anything loads when the run's options contradict each other. */
export class TrainingOptionsError extends AgentRLError {}

export interface StepRecord {
  step: number;
  version: number;
  metrics: Metrics;
}

interface RunState {
  step: number;
  seed: number;
  mode: "async" | "sync";
  /** Data cursor: groups taken so far (async) — sync runs derive everything from the step. */
  groupsTrained: number;
  /** The rollout scheduler's per-task record of informative groups (kept across the steps of sync mode). */
  informativeHistory?: Record<string, boolean[]>;
}

/** Seed of stream `stream` at step `step`: distinct, deterministic streams. */
export function stepSeed(seed: number, step: number, stream: number): number {
  let h = (seed ^ 0x9e3779b9) >>> 0;
  for (const v of [step, stream]) {
    h = Math.imul(h ^ v, 0x85ebca6b) >>> 0;
    h = (h ^ (h >>> 13)) >>> 0;
    h = Math.imul(h, 0xc2b2ae35) >>> 0;
    h = (h ^ (h >>> 16)) >>> 0;
  }
  return h;
}

/** The rollout state of an async checkpoint (buffered groups and groups in flight), in the checkpoint's folder. */
export const ROLLOUT_STATE_FILE = "rollout.bin";

/**
 * DAPO's dynamic sampling: keeps the informative groups of `first` (unequal rewards) and takes
 * further groups from the buffer, one at a time and at most `extra`, until `want` are
 * informative. `drawn` is `first` and every group taken (the batch's metrics count them all).
 * When none is informative, the batch is `first` as it was (the loss skips uniform groups).
 */
export async function informativeBatch(
  buffer: Pick<TrajectoryBuffer, "take">,
  first: readonly TrajectoryGroup[],
  want: number,
  extra: number,
  signal?: AbortSignal,
): Promise<{ batch: TrajectoryGroup[]; drawn: TrajectoryGroup[] }> {
  const drawn = [...first];
  const kept = first.filter(isInformative);
  for (let k = 0; k < extra && kept.length < want; k++) {
    const [group] = await buffer.take(1, { signal });
    drawn.push(group);
    if (isInformative(group)) kept.push(group);
  }
  return { batch: kept.length > 0 ? kept : [...first], drawn };
}

/**
 * The external pool member of the run, when configured: its ExternalChatModel (temperature and
 * `max_tokens` defaulting to the rollout's) and probability. Throws TrainingOptionsError when
 * the probabilities do not fit in [0, 1].
 */
function externalModel(
  options: TrainingRunOptions,
): { model: ExternalChatModel; probability: number } | undefined {
  const { staleProbability, external } = options.crossPolicy;
  if (!external) return undefined;
  const { probability, temperature: ownTemperature, maxTokens: ownMaxTokens, ...rest } = external;
  if (!(probability >= 0 && probability <= 1) || !(staleProbability + probability <= 1)) {
    throw new TrainingOptionsError(
      `crossPolicy.external.probability (${probability}) must lie in [0, 1] and, with crossPolicy.staleProbability (${staleProbability}), sum to at most 1`,
    );
  }
  const temperature =
    ownTemperature ?? options.rollout.episode.temperature ?? options.rollout.engine.temperature;
  const maxTokens = ownMaxTokens ?? options.rollout.episode.maxNewTokensPerTurn;
  // Options given as undefined must not override ExternalChatModel's own defaults.
  const given = Object.fromEntries(
    Object.entries(rest).filter(([, value]) => value !== undefined),
  ) as typeof rest;
  const model = new ExternalChatModel({
    ...given,
    ...(temperature !== undefined ? { temperature } : {}),
    ...(maxTokens !== undefined ? { maxTokens } : {}),
  });
  return { model, probability };
}

/**
 * Gradient threads of the learner when not given: in async mode 2 (a gradient thread shares
 * out each update's micro-batches with the learner, so training also uses the part of a core
 * the rollout thread leaves idle) on backends that compute on one core per thread (wasm, cpu)
 * with 2 cores or more; otherwise 1 (sync mode: the single-threaded baseline).
 */
async function defaultGradientThreads(mode: TrainingRunOptions["mode"]): Promise<1 | 2> {
  return mode === "async" ? availableGradientThreads() : 1;
}

/** Runs the loop to `steps` (or until aborted); returns the last step's record. */
export async function runTraining(options: TrainingRunOptions): Promise<StepRecord | undefined> {
  options = { log: (line) => console.warn(`agentrl: ${line}`), ...options };
  const external = externalModel(options);
  const checkpoints = join(options.runDirectory, "checkpoints");
  const resumeFrom = options.resume ? await latestCheckpoint(checkpoints) : undefined;
  const state: RunState = { step: 0, seed: options.seed, mode: options.mode, groupsTrained: 0 };
  if (resumeFrom)
    Object.assign(
      state,
      JSON.parse(await readFile(join(resumeFrom.folder, "run.json"), "utf8")) as RunState,
    );

  // The learner (trainable policy + optimizer), here or in a worker thread.
  const learner: LearnerHandle = await openLearner({
    modelDirectory: options.modelDirectory,
    learner: {
      ...options.learner,
      // The cosine schedule spans the run unless told otherwise.
      schedule: { totalSteps: options.steps, ...options.learner.schedule },
      gradientThreads:
        options.learner.gradientThreads ?? (await defaultGradientThreads(options.mode)),
    },
    thread: options.learnerThread ?? options.mode === "async",
  });
  // The samplers: the current policy, and a stale copy for cross-policy sampling.
  const current = await Policy.load(options.modelDirectory, { trainable: false });
  const tokenizer: ChatTokenizer | undefined = current.tokenizer;
  if (!tokenizer) throw new Error(`no tokenizer.json in ${options.modelDirectory}`);
  const crossPolicy = options.crossPolicy.staleProbability > 0;
  const refreshEvery = options.crossPolicy.refreshEvery ?? CROSS_POLICY_DEFAULTS.refreshEvery;
  let stale: Policy | undefined;
  if (resumeFrom) {
    await learner.restore(resumeFrom.folder);
    current.importWeights(await learner.exportWeights());
  }
  if (crossPolicy) {
    stale = resumeFrom
      ? await Policy.load(join(resumeFrom.folder, "stale"), { trainable: false, tokenizer: false })
      : current.fromSnapshot(current.snapshot());
  }

  // Steps after the checkpoint (all of them, with none yet) are run again: their old metrics lines go.
  if (options.resume) await trimMetrics(join(options.runDirectory, "metrics.jsonl"), state.step);

  // Remote rollout: the servers start from the trainer's weights.
  const servers = options.rollout.servers;
  const remote = servers?.urls.length
    ? await RemoteEngine.connect({
        servers: servers.urls,
        apiKey: servers.apiKey,
        temperature: options.rollout.engine.temperature,
        log: options.log,
      })
    : undefined;
  if (remote) await remote.updateWeights(current.exportWeights(), current.version);

  const jsonl = new JsonlWriter(join(options.runDirectory, "metrics.jsonl"));
  const tensorboard = new TensorBoardWriter(join(options.runDirectory, "tensorboard"));
  const trajectoryLog = options.trajectories?.episodesPerStep
    ? new TrajectoryLog(options.runDirectory, tokenizer, {
        advantageEstimator: options.learner.grpo?.advantageEstimator,
        ...options.trajectories,
      })
    : undefined;
  const buffer = new TrajectoryBuffer({
    capacityGroups: options.rollout.bufferGroups ?? 2 * options.batchGroups,
    maxStaleness: options.rollout.maxStaleness,
  });
  buffer.setPolicyVersion(current.version);
  // Which recent groups of each task were informative: kept across the per-step schedulers of sync mode.
  const informativeHistory = new Map<string, boolean[]>(
    Object.entries(state.informativeHistory ?? {}),
  );
  // Async resume: the groups the checkpoint's buffer held go back first; its groups in flight are played again first.
  const rolloutFile = resumeFrom ? join(resumeFrom.folder, ROLLOUT_STATE_FILE) : undefined;
  const restored =
    options.mode === "async" && rolloutFile && existsSync(rolloutFile)
      ? decodeRolloutState(await readFile(rolloutFile))
      : undefined;
  for (const group of restored?.groups ?? []) buffer.put(group);
  const restoredIds = new Set(restored?.groups.map((group) => group.groupId));
  const replay: InFlightGroup[] = restored?.inFlight ?? [];
  if (restored)
    options.log?.(
      `resumed at step ${state.step}: ${restored.groups.length} buffered group(s) restored (trained first), ${replay.length} in-flight group(s) played again`,
    );

  const makeSampling = (step: number) => {
    const engineOptions = {
      ...options.rollout.engine,
      maxBatchSize: options.rollout.engine.maxBatchSize ?? options.rollout.maxConcurrentEpisodes,
      // async: an update arrives every step while episodes are mid-way; re-prefilling every
      // in-flight context after each one would double the rollout's compute (see TrainingRunOptions.rollout.engine)
      keepCachesOnUpdate: options.rollout.engine.keepCachesOnUpdate ?? options.mode === "async",
    };
    const currentEngine =
      remote ??
      createPolicyEngine(current, { ...engineOptions, seed: stepSeed(state.seed, step, 1) });
    const staleEngine = stale
      ? createPolicyEngine(stale, { ...engineOptions, seed: stepSeed(state.seed, step, 2) })
      : undefined;
    const pool = new PolicyPool<ExportedWeights>({
      current: currentEngine as never,
      stale: staleEngine as never,
      staleProbability: options.crossPolicy.staleProbability,
      ...(external ? { external: external.model, externalProbability: external.probability } : {}),
      refreshEvery: Number.MAX_SAFE_INTEGER, // the loop refreshes the stale copy itself
      seed: stepSeed(state.seed, step, 3),
    });
    const scheduler = new RolloutScheduler({
      client: options.client,
      tokenizer,
      pool,
      buffer,
      tasks: options.tasks,
      groupSize: options.groupSize,
      maxConcurrentEpisodes: options.rollout.maxConcurrentEpisodes,
      seed: stepSeed(state.seed, step, 4),
      episode: options.rollout.episode,
      ...(options.rollout.playEpisode ? { playEpisode: options.rollout.playEpisode } : {}),
      uninformativeWeight: options.rollout.uninformativeWeight ?? 1,
      informativeHistory,
      ...(options.mode === "sync" ? { maxGroups: options.batchGroups } : {}),
      // Ids stay unique over a resumed run's lifetime; the in-flight instances of the checkpoint go first.
      ...(restored ? { replay, groupIdPrefix: `s${step}.` } : {}),
    });
    const close = async () => {
      await scheduler.stop();
      if (!remote) currentEngine.close();
      staleEngine?.close();
    };
    return { scheduler, close, currentEngine, staleEngine };
  };

  const saveCheckpoint = async () => {
    // Taken now, in one tick, with the weights of this step: every group is either waiting, in flight, or not yet drawn.
    const rollout =
      options.mode === "async" && sampling
        ? encodeRolloutState({
            groups: buffer.waitingGroups(),
            inFlight: sampling.scheduler.groupsInProgress(),
          })
        : undefined;
    await writeCheckpoint(
      checkpoints,
      state.step,
      async (folder) => {
        await learner.save(folder);
        if (rollout) await writeFileDurably(join(folder, ROLLOUT_STATE_FILE), rollout);
        if (stale) await stale.save(join(folder, "stale"));
        await writeJson(join(folder, "run.json"), {
          ...state,
          informativeHistory: Object.fromEntries(informativeHistory),
        });
      },
      { keep: options.checkpoint.keep },
    );
  };

  const resumedAt = state.step;
  let sampling = options.mode === "async" ? makeSampling(state.step) : undefined;
  void sampling?.scheduler.start();
  let record: StepRecord | undefined;
  let rolloutSnapshot: MetricsSnapshot | undefined;
  // Engine counters at the previous step (async: one engine for the whole run; sync: a new one each step).
  let engineBefore: EngineStats | undefined;
  try {
    while (state.step < options.steps && !options.signal?.aborted) {
      const began = performance.now();
      // 1. Wait for a batch of complete groups.
      let groups: TrajectoryGroup[];
      /** With dynamic sampling: every group drawn this step (the batch's metrics count them all). */
      let drawn: TrajectoryGroup[] | undefined;
      if (options.mode === "sync") {
        sampling = makeSampling(state.step);
        await sampling.scheduler.start();
        rolloutSnapshot = sampling.scheduler.snapshot();
        engineBefore = undefined;
        groups = buffer.takeAvailable(options.batchGroups);
        await sampling.close();
      } else {
        try {
          groups = await buffer.take(options.batchGroups, { signal: options.signal });
          if ((options.dynamicSamplingGroups ?? 0) > 0)
            ({ batch: groups, drawn } = await informativeBatch(
              buffer,
              groups,
              options.batchGroups,
              options.dynamicSamplingGroups!,
              options.signal,
            ));
        } catch (error) {
          if (options.signal?.aborted) break;
          throw error;
        }
        rolloutSnapshot = sampling!.scheduler.snapshot();
      }
      const waited = performance.now();
      options.onBatch?.({ step: state.step + 1, groups });
      trajectoryLog?.write(state.step + 1, groups);
      // 2. Train on it.
      const update = await learner.update(groups);
      const trained = performance.now();
      // 3. Publish the new version to the samplers (current always; stale every k steps).
      state.step += 1;
      state.groupsTrained += groups.length;
      const weights = update.weights;
      if (!weights)
        options.log?.(
          `step ${state.step}: no trainable tokens in the batch (${describeFailures(groups)}); weights unchanged`,
        );
      const version = weights?.version ?? current.version;
      if (weights && stale && state.step % refreshEvery === 0) {
        if (sampling?.staleEngine && options.mode === "async")
          await sampling.staleEngine.updateWeights(weights, version);
        else stale.importWeights(weights);
      }
      // Async: the engine owns `current`; remote: every server gets the version, and `current` too.
      if (weights && (options.mode === "async" || remote))
        await (remote ?? sampling!.currentEngine).updateWeights(weights, version);
      if (weights && (options.mode === "sync" || remote)) current.importWeights(weights);
      buffer.setPolicyVersion(version);
      const synced = performance.now();

      const seconds = (synced - began) / 1000;
      const { advantages, ...updateMetrics } = update.metrics;
      const metrics: Metrics = {
        ...batchMetrics(drawn ?? groups, version - 1),
        ...(restored && state.step === resumedAt + 1
          ? {
              "resume/restored_groups": restored.groups.length,
              "resume/resampled_groups": replay.length,
            }
          : {}),
        ...(restoredIds.size > 0
          ? {
              "resume/restored_groups_trained": (drawn ?? groups).filter((group) =>
                restoredIds.has(group.groupId),
              ).length,
            }
          : {}),
        ...(drawn
          ? { "rollout/dynamic_sampling_dropped_groups": drawn.length - groups.length }
          : {}),
        ...Object.fromEntries(Object.entries(updateMetrics).map(([k, v]) => [`train/${k}`, v])),
        ...Object.fromEntries(
          Object.entries(advantages).flatMap(([task, a]) => [
            [`advantage_mean/${task}`, a.mean],
            [`advantage_std/${task}`, a.std],
          ]),
        ),
        "time/wait": (waited - began) / 1000,
        "time/train": (trained - waited) / 1000,
        "time/sync": (synced - trained) / 1000,
        "time/step": seconds,
        ...(trajectoryLog ? { "time/trajectory_log": trajectoryLog.lastWriteSeconds } : {}),
        "throughput/train_tokens_per_second":
          update.metrics.processedTokens / Math.max(1e-9, (trained - waited) / 1000),
        "throughput/rollout_tokens_per_second": rolloutSnapshot?.generatedTokensPerSecond ?? 0,
        "rollout/format_errors": rolloutSnapshot?.formatErrors ?? 0,
        "buffer/dropped_stale_groups": rolloutSnapshot?.buffer?.droppedStaleGroups ?? 0,
        ...engineMetrics(rolloutSnapshot?.engines.current, engineBefore),
      };
      engineBefore = rolloutSnapshot?.engines.current;
      const alarm = options.learner.grpo?.mismatchKlAlarm ?? DEFAULT_GRPO.mismatchKlAlarm;
      if (update.metrics.mismatchKl > alarm) {
        options.log?.(
          `step ${state.step}: ALARM mismatch KL ${update.metrics.mismatchKl.toExponential(2)} > ${alarm} (sampler vs trainer log-probs of the same tokens; ratio in [${update.metrics.importanceRatioMin.toFixed(3)}, ${update.metrics.importanceRatioMax.toFixed(3)}], ${(100 * (update.metrics.importanceRatioShareBelow + update.metrics.importanceRatioShareAbove)).toFixed(1)} % of tokens out of bounds): check staleness, the sampler's temperature and weight sync`,
        );
      }
      if (update.metrics.droppedInfrastructureGroups > 0) {
        options.log?.(
          `step ${state.step}: ${update.metrics.droppedInfrastructureGroups} group(s) dropped from the loss for infrastructure faults: ${describeFaults(drawn ?? groups)}`,
        );
      }
      if (options.evaluation && state.step % options.evaluation.every === 0) {
        Object.assign(metrics, await options.evaluation.run(current, state.step));
      }
      record = { step: state.step, version, metrics };
      jsonl.write({ step: state.step, version, time: new Date().toISOString(), ...metrics });
      tensorboard.scalars(state.step, metrics);
      options.onStep?.(record);
      if (state.step % options.checkpoint.every === 0 || state.step === options.steps)
        await saveCheckpoint();
    }
    if (options.signal?.aborted && record && state.step % options.checkpoint.every !== 0)
      await saveCheckpoint();
  } finally {
    await sampling?.close();
    remote?.close();
    buffer.close();
    tensorboard.close();
    await learner.close();
    current.dispose();
    stale?.dispose();
  }
  return record;
}
