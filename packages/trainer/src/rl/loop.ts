/**
 * The training loop: `runTraining` is a short list of named phases (open the run, start the
 * samplers, then per step: take a batch, train, publish, measure, record), each a function below.
 * Two modes, one code path:
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
import type { ExportedWeights } from "@agentrl/policy";
import {
  PolicyPool,
  isInformative,
  RolloutScheduler,
  TrajectoryBuffer,
  createPolicyEngine,
  type EngineStats,
  type TrajectoryGroup,
} from "@agentrl/rollout";
import { DecodeThreads } from "./decode-threads.js";
import type { LearnerUpdate } from "./learner.js";
import { DEFAULT_GRPO } from "./grpo.js";
import type { Metrics } from "./logging.js";
import { batchMetrics, describeFailures, describeFaults, engineMetrics } from "./batch-metrics.js";
import type { StepRecord, TrainingRunOptions } from "./training-options.js";
import { closeRun, openRun, saveCheckpoint, type Run, type Sampling } from "./run-resources.js";

export { ROLLOUT_STATE_FILE } from "./run-resources.js";
export {
  TrainingOptionsError,
  type ExternalPolicyMember,
  type StepRecord,
  type TrainingRunOptions,
} from "./training-options.js";

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

/** Runs the loop to `steps` (or until aborted); returns the last step's record. */
export async function runTraining(options: TrainingRunOptions): Promise<StepRecord | undefined> {
  const run = await openRun({ log: (line) => console.warn(`agentrl: ${line}`), ...options });
  const resumedAt = run.state.step;
  try {
    decodeThreadsOf.set(run, await startDecodeThreads(run));
  } catch (error) {
    await closeRun(run);
    throw error;
  }
  if (run.options.mode === "async") {
    run.sampling = startSampling(run, run.state.step);
    void run.sampling.scheduler.start();
  }
  let record: StepRecord | undefined;
  try {
    while (run.state.step < run.options.steps && !run.options.signal?.aborted) {
      const began = performance.now();
      const batch = await takeBatch(run);
      if (!batch) break; // aborted while waiting
      const waited = performance.now();
      run.options.onBatch?.({ step: run.state.step + 1, groups: batch.groups });
      run.trajectoryLog?.write(run.state.step + 1, batch.groups);
      const update = await run.learner.update(batch.groups);
      const trained = performance.now();
      const version = await publish(run, update, batch.groups);
      const synced = performance.now();
      const times = { began, waited, trained, synced };
      const metrics = stepMetrics(run, batch, update, version, times, resumedAt);
      warnAboutStep(run, batch, update);
      record = await recordStep(run, version, metrics);
    }
    if (
      run.options.signal?.aborted &&
      record &&
      run.state.step % run.options.checkpoint.every !== 0
    )
      await saveCheckpoint(run);
  } finally {
    await closeRun(run);
    decodeThreadsOf.get(run)?.close();
  }
  return record;
}

/** The decode threads of each open run (none without `rollout.decodeThreads` or with servers). */
const decodeThreadsOf = new WeakMap<Run, DecodeThreads | undefined>();

/** Starts the run's decode threads on the samplers' policy (its version now), seeded from (seed, step). */
async function startDecodeThreads(run: Run): Promise<DecodeThreads | undefined> {
  const { options, state, remote } = run;
  if (remote || !options.rollout.decodeThreads) return undefined;
  return DecodeThreads.start(
    run.current,
    { ...samplerEngineOptions(run), seed: stepSeed(state.seed, state.step, 5) },
    options.rollout.decodeThreads,
    options.log,
  );
}

/** The samplers' engine settings (see TrainingRunOptions.rollout.engine). */
function samplerEngineOptions(run: Run) {
  const { options } = run;
  return {
    ...options.rollout.engine,
    maxBatchSize: options.rollout.engine.maxBatchSize ?? options.rollout.maxConcurrentEpisodes,
    // async: an update arrives every step while episodes are mid-way; re-prefilling every
    // in-flight context after each one would double the rollout's compute (see TrainingRunOptions.rollout.engine)
    keepCachesOnUpdate: options.rollout.engine.keepCachesOnUpdate ?? options.mode === "async",
  };
}

/**
 * Sampling phase: engines on the current and stale policies, their pool, and the rollout
 * scheduler, seeded from (seed, step). With decode threads, the current policy's engine is the
 * in-process one and the threads as one `EnginePool`; `engineStart` is its counters now (the
 * threads' count on from earlier phases).
 */
function startSampling(run: Run, step: number): Sampling & { engineStart?: EngineStats } {
  const { options, state, remote, stale, external } = run;
  const engineOptions = samplerEngineOptions(run);
  const local = remote
    ? undefined
    : createPolicyEngine(run.current, { ...engineOptions, seed: stepSeed(state.seed, step, 1) });
  const threads = decodeThreadsOf.get(run);
  const currentEngine = remote ?? (threads ? threads.join(local!) : local!);
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
    tokenizer: run.tokenizer,
    pool,
    buffer: run.buffer,
    tasks: options.tasks,
    groupSize: options.groupSize,
    maxConcurrentEpisodes: options.rollout.maxConcurrentEpisodes,
    seed: stepSeed(state.seed, step, 4),
    episode: options.rollout.episode,
    ...(options.rollout.playEpisode ? { playEpisode: options.rollout.playEpisode } : {}),
    uninformativeWeight: options.rollout.uninformativeWeight ?? 1,
    informativeHistory: run.informativeHistory,
    ...(options.mode === "sync" ? { maxGroups: options.batchGroups } : {}),
    // Ids stay unique over a resumed run's lifetime; the in-flight instances of the checkpoint go first.
    ...(run.restored ? { replay: run.replay, groupIdPrefix: `s${step}.` } : {}),
  });
  const close = async () => {
    await scheduler.stop();
    local?.close(); // the decode threads stay for the next phase
    staleEngine?.close();
  };
  return {
    scheduler,
    close,
    currentEngine,
    staleEngine,
    engineStart: threads ? currentEngine.stats() : undefined,
  };
}

/** A step's batch: the groups trained on and, with dynamic sampling, every group drawn (the batch's metrics count them all). */
interface Batch {
  groups: TrajectoryGroup[];
  drawn?: TrajectoryGroup[];
}

/** Batch phase: sync generates exactly one batch with fresh samplers; async waits for `batchGroups` complete groups. Undefined when aborted while waiting. */
async function takeBatch(run: Run): Promise<Batch | undefined> {
  const { options, buffer } = run;
  if (options.mode === "sync") {
    const sampling = startSampling(run, run.state.step);
    run.sampling = sampling;
    await run.sampling.scheduler.start();
    run.rolloutSnapshot = run.sampling.scheduler.snapshot();
    // A new in-process engine each step; the decode threads' counters go on from earlier steps.
    run.engineBefore = sampling.engineStart;
    const groups = buffer.takeAvailable(options.batchGroups);
    await run.sampling.close();
    return { groups };
  }
  let batch: Batch;
  try {
    batch = { groups: await buffer.take(options.batchGroups, { signal: options.signal }) };
    if ((options.dynamicSamplingGroups ?? 0) > 0) {
      const { batch: groups, drawn } = await informativeBatch(
        buffer,
        batch.groups,
        options.batchGroups,
        options.dynamicSamplingGroups!,
        options.signal,
      );
      batch = { groups, drawn };
    }
  } catch (error) {
    if (options.signal?.aborted) return undefined;
    throw error;
  }
  run.rolloutSnapshot = run.sampling!.scheduler.snapshot();
  return batch;
}

/** Publish phase: the step counts; the new version goes to the samplers (current always; stale every `refreshEvery` steps) and the buffer. Returns the version. */
async function publish(
  run: Run,
  update: LearnerUpdate,
  groups: readonly TrajectoryGroup[],
): Promise<number> {
  const { options, state, stale, remote, sampling, current } = run;
  state.step += 1;
  state.groupsTrained += groups.length;
  const weights = update.weights;
  if (!weights)
    options.log?.(
      `step ${state.step}: no trainable tokens in the batch (${describeFailures(groups)}); weights unchanged`,
    );
  const version = weights?.version ?? current.version;
  if (weights && stale && state.step % run.refreshEvery === 0) {
    if (sampling?.staleEngine && options.mode === "async")
      await sampling.staleEngine.updateWeights(weights, version);
    else stale.importWeights(weights);
  }
  // Async: the engine owns `current` (with decode threads, the pool: every engine gets the
  // version); remote: every server gets the version, and `current` too; sync: `current` and the
  // decode threads, before the next batch.
  if (weights && (options.mode === "async" || remote))
    await (remote ?? sampling!.currentEngine).updateWeights(weights, version);
  if (weights && (options.mode === "sync" || remote)) current.importWeights(weights);
  if (weights && options.mode === "sync")
    await decodeThreadsOf.get(run)?.updateWeights(weights, version);
  run.buffer.setPolicyVersion(version);
  return version;
}

/** Measure phase: the step's metrics (batch, resume, update, advantages, times, throughput, engine). */
function stepMetrics(
  run: Run,
  { groups, drawn }: Batch,
  update: LearnerUpdate,
  version: number,
  time: { began: number; waited: number; trained: number; synced: number },
  resumedAt: number,
): Metrics {
  const { state, restored, restoredIds, rolloutSnapshot, trajectoryLog } = run;
  const { advantages, ...updateMetrics } = update.metrics;
  const metrics: Metrics = {
    ...batchMetrics(drawn ?? groups, version - 1),
    ...(restored && state.step === resumedAt + 1
      ? {
          "resume/restored_groups": restored.groups.length,
          "resume/resampled_groups": run.replay.length,
        }
      : {}),
    ...(restoredIds.size > 0
      ? {
          "resume/restored_groups_trained": (drawn ?? groups).filter((group) =>
            restoredIds.has(group.groupId),
          ).length,
        }
      : {}),
    ...(drawn ? { "rollout/dynamic_sampling_dropped_groups": drawn.length - groups.length } : {}),
    ...Object.fromEntries(Object.entries(updateMetrics).map(([k, v]) => [`train/${k}`, v])),
    ...Object.fromEntries(
      Object.entries(advantages).flatMap(([task, a]) => [
        [`advantage_mean/${task}`, a.mean],
        [`advantage_std/${task}`, a.std],
      ]),
    ),
    "time/wait": (time.waited - time.began) / 1000,
    "time/train": (time.trained - time.waited) / 1000,
    "time/sync": (time.synced - time.trained) / 1000,
    "time/step": (time.synced - time.began) / 1000,
    ...(trajectoryLog ? { "time/trajectory_log": trajectoryLog.lastWriteSeconds } : {}),
    "throughput/train_tokens_per_second":
      update.metrics.processedTokens / Math.max(1e-9, (time.trained - time.waited) / 1000),
    "throughput/rollout_tokens_per_second": rolloutSnapshot?.generatedTokensPerSecond ?? 0,
    "rollout/format_errors": rolloutSnapshot?.formatErrors ?? 0,
    "buffer/dropped_stale_groups": rolloutSnapshot?.buffer?.droppedStaleGroups ?? 0,
    ...engineMetrics(rolloutSnapshot?.engines.current, run.engineBefore),
    ...decodeThreadsOf.get(run)?.metrics(),
  };
  run.engineBefore = rolloutSnapshot?.engines.current;
  return metrics;
}

/** The step's warnings: the sampler/trainer mismatch alarm and the groups dropped for infrastructure faults. */
function warnAboutStep(run: Run, { groups, drawn }: Batch, update: LearnerUpdate): void {
  const { options, state } = run;
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
}

/** Record phase: the evaluation when due, metrics.jsonl and TensorBoard, `onStep`, and the checkpoint when due. */
async function recordStep(run: Run, version: number, metrics: Metrics): Promise<StepRecord> {
  const { options, state } = run;
  if (options.evaluation && state.step % options.evaluation.every === 0) {
    Object.assign(metrics, await options.evaluation.run(run.current, state.step));
  }
  const record = { step: state.step, version, metrics };
  run.jsonl.write({ step: state.step, version, time: new Date().toISOString(), ...metrics });
  run.tensorboard.scalars(state.step, metrics);
  options.onStep?.(record);
  if (state.step % options.checkpoint.every === 0 || state.step === options.steps)
    await saveCheckpoint(run);
  return record;
}
