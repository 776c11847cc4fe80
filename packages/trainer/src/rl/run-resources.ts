/**
 * The resources of one training run (loop.ts): opened from the options and the newest
 * checkpoint (the learner, the samplers' policies, the servers, the logs, the buffer and an
 * async checkpoint's rollout), written into a checkpoint, and closed.
 */
import { join } from "node:path";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { Policy, TokenizerFileError } from "@agentrl/policy";
import {
  RemoteEngine,
  RolloutScheduler,
  TrajectoryBuffer,
  createPolicyEngine,
  type ChatTokenizer,
  type EngineStats,
  type GenerationEngine,
  type MetricsSnapshot,
  type InFlightGroup,
  type PolicyWeights,
  decodeRolloutState,
  encodeRolloutState,
  type RolloutState,
} from "@agentrl/rollout";
import {
  latestCheckpoint,
  trimMetrics,
  writeCheckpoint,
  writeFileDurably,
  writeJson,
} from "./checkpoint.js";
import { openLearner, type LearnerHandle } from "./threads/learner-thread.js";
import { availableGradientThreads } from "./learner.js";
import { CROSS_POLICY_DEFAULTS } from "./defaults.js";
import { JsonlWriter, TensorBoardWriter } from "./logging.js";
import { TrajectoryLog } from "./trajectory-log.js";
import { externalModel, type TrainingRunOptions } from "./training-options.js";

export interface RunState {
  step: number;
  seed: number;
  mode: "async" | "sync";
  /** Data cursor: groups taken so far (async) — sync runs derive everything from the step. */
  groupsTrained: number;
  /** The rollout scheduler's per-task record of informative groups (kept across the steps of sync mode). */
  informativeHistory?: Record<string, boolean[]>;
}

/** The rollout state of an async checkpoint (buffered groups and groups in flight), in the checkpoint's folder. */
export const ROLLOUT_STATE_FILE = "rollout.bin";

/**
 * Gradient threads of the learner when not given: in async mode 2 (a gradient thread shares
 * out each update's micro-batches with the learner, so training also uses the part of a core
 * the rollout thread leaves idle) on backends that compute on one core per thread (wasm, cpu)
 * with 2 cores or more; otherwise 1 (sync mode: the single-threaded baseline).
 */
async function defaultGradientThreads(mode: TrainingRunOptions["mode"]): Promise<1 | 2> {
  return mode === "async" ? availableGradientThreads() : 1;
}

/** Everything a run holds between its steps. */
export interface Run {
  options: TrainingRunOptions;
  state: RunState;
  checkpoints: string;
  /** The learner (trainable policy + optimizer), here or in a worker thread. */
  learner: LearnerHandle;
  /** The samplers' policies: the current one, and a stale copy for cross-policy sampling. */
  current: Policy;
  stale?: Policy;
  tokenizer: ChatTokenizer;
  refreshEvery: number;
  external: ReturnType<typeof externalModel>;
  /** `agentrl serve` servers generating the current policy's turns, when configured. */
  remote?: RemoteEngine;
  jsonl: JsonlWriter;
  tensorboard: TensorBoardWriter;
  trajectoryLog?: TrajectoryLog;
  buffer: TrajectoryBuffer;
  /** Which recent groups of each task were informative: kept across the per-step schedulers of sync mode. */
  informativeHistory: Map<string, boolean[]>;
  /** Async resume: the checkpoint's rollout (its buffered groups, and the groups in flight to play again). */
  restored?: RolloutState;
  restoredIds: Set<string>;
  replay: InFlightGroup[];
  /** The running samplers (async: one for the whole run; sync: one per step). */
  sampling?: Sampling;
  rolloutSnapshot?: MetricsSnapshot;
  /** Engine counters at the previous step (async: one engine for the whole run; sync: a new one each step). */
  engineBefore?: EngineStats;
}

/** The samplers of a step (sync) or of the run (async): engines, policy pool, scheduler. */
export interface Sampling {
  scheduler: RolloutScheduler;
  /** The current policy's engine: in-process (with decode threads, an EnginePool), or the servers. */
  currentEngine: GenerationEngine<PolicyWeights> | RemoteEngine;
  staleEngine?: ReturnType<typeof createPolicyEngine>;
  close(): Promise<void>;
}

/** Opening phase: the resume state, the learner and the samplers' policies, the servers, the logs, the buffer. */
export async function openRun(options: TrainingRunOptions): Promise<Run> {
  const external = externalModel(options);
  const checkpoints = join(options.runDirectory, "checkpoints");
  const resumeFrom = options.resume ? await latestCheckpoint(checkpoints) : undefined;
  const state: RunState = { step: 0, seed: options.seed, mode: options.mode, groupsTrained: 0 };
  if (resumeFrom)
    Object.assign(
      state,
      JSON.parse(await readFile(join(resumeFrom.folder, "run.json"), "utf8")) as RunState,
    );

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
  const current = await Policy.load(options.modelDirectory, { trainable: false });
  const tokenizer: ChatTokenizer | undefined = current.tokenizer;
  if (!tokenizer) throw new TokenizerFileError(`no tokenizer.json in ${options.modelDirectory}`);
  let stale: Policy | undefined;
  if (resumeFrom) {
    await learner.restore(resumeFrom.folder);
    current.importWeights(await learner.exportWeights());
  }
  if (options.crossPolicy.staleProbability > 0) {
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
  const replay: InFlightGroup[] = restored?.inFlight ?? [];
  if (restored)
    options.log?.(
      `resumed at step ${state.step}: ${restored.groups.length} buffered group(s) restored (trained first), ${replay.length} in-flight group(s) played again`,
    );
  return {
    options,
    state,
    checkpoints,
    learner,
    current,
    stale,
    tokenizer,
    refreshEvery: options.crossPolicy.refreshEvery ?? CROSS_POLICY_DEFAULTS.refreshEvery,
    external,
    remote,
    jsonl,
    tensorboard,
    trajectoryLog,
    buffer,
    informativeHistory,
    restored,
    restoredIds: new Set(restored?.groups.map((group) => group.groupId)),
    replay,
  };
}

/** The learner, the stale copy, the run state and (async) the rollout, written atomically. */
export async function saveCheckpoint(run: Run): Promise<void> {
  const { options, state, buffer, sampling, stale } = run;
  // Taken now, in one tick, with the weights of this step: every group is either waiting, in flight, or not yet drawn.
  const rollout =
    options.mode === "async" && sampling
      ? encodeRolloutState({
          groups: buffer.waitingGroups(),
          inFlight: sampling.scheduler.groupsInProgress(),
        })
      : undefined;
  await writeCheckpoint(
    run.checkpoints,
    state.step,
    async (folder) => {
      await run.learner.save(folder);
      if (rollout) await writeFileDurably(join(folder, ROLLOUT_STATE_FILE), rollout);
      if (stale) await stale.save(join(folder, "stale"));
      await writeJson(join(folder, "run.json"), {
        ...state,
        informativeHistory: Object.fromEntries(run.informativeHistory),
      });
    },
    { keep: options.checkpoint.keep },
  );
}

/** Closing phase: samplers, servers, buffer, logs, learner and policies. */
export async function closeRun(run: Run): Promise<void> {
  await run.sampling?.close();
  run.remote?.close();
  run.buffer.close();
  run.tensorboard.close();
  await run.learner.close();
  run.current.dispose();
  run.stale?.dispose();
}
