/**
 * The learner: the trainable policy, its optimizer, the frozen reference and the step count.
 * It runs in whichever thread holds it (the training loop puts it in a worker thread in
 * `async` mode so that generation and training use both cores), and it speaks only in
 * plain data: trajectory groups in, versioned flat weights out. With `gradientThreads: 2`
 * a second thread computes gradients for a share of each GRPO update's micro-batches
 * (gradient-thread.ts).
 */
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { access, readFile, writeFile } from "node:fs/promises";
import {
  ADAPTER_CONFIG_FILE,
  Policy,
  initBackend,
  parseSafetensors,
  serializeSafetensors,
  type AdamW,
  type AdamWOptions,
  type ExportedWeights,
  type OptimizerState,
} from "@agentrl/policy";
import type { TrajectoryGroup } from "@agentrl/rollout";
import { RL_DEFAULTS, type RlSettings } from "./defaults.js";
import {
  checkGrpoOptions,
  DEFAULT_GRPO,
  EMPTY_UPDATE_METRICS,
  grpoUpdate,
  prepareBatch,
  type GrpoOptions,
  type UpdateMetrics,
} from "./grpo.js";
import { GradientThread } from "./threads/gradient-thread.js";
import { sharedSupervisedStep, type SupervisedRow, type SupervisedStepResult } from "./sft.js";

/**
 * Gradient threads that pay off here: 2 when the backend computes on one core per thread
 * (wasm, cpu) and the machine has at least 2 cores, else 1.
 */
export async function availableGradientThreads(): Promise<1 | 2> {
  if (availableParallelism() < 2) return 1;
  return (await initBackend()) === "tensorflow" ? 1 : 2;
}

export interface LearningRateSchedule {
  /** Peak learning rate. Default 1e-4 (the config schema's `rl.learningRate`). */
  learningRate: number;
  /** Steps of linear warm-up from 0 to the peak. Default 0. */
  warmupSteps: number;
  /** After warm-up: `constant`, or `cosine` decay to `minLearningRateRatio` × peak at `totalSteps`. Default `cosine`. */
  schedule: "constant" | "cosine";
  /** Floor of the cosine schedule as a fraction of the peak. Default 0.1. */
  minLearningRateRatio: number;
  /** Steps of the whole run (for the cosine schedule). Default: `runTraining`'s `steps`; for a learner alone `rl.steps`. */
  totalSteps: number;
}

export interface LearnerOptions {
  grpo: GrpoOptions;
  schedule: LearningRateSchedule;
  /** AdamW's betas, epsilon (default 1e-4), weight decay (default 0) and gradient-norm clip (default 1.0): {@link DEFAULT_OPTIMIZER}. */
  optimizer: Omit<AdamWOptions, "learningRate">;
  /**
   * Threads computing the gradients of a GRPO update: 1 (this one), or 2 (this one and a
   * gradient thread with its own copy of the policy, sharing out the micro-batches; the
   * same update up to float summation order). Supervised steps are shared out the same way.
   * Default 1; the training loop uses 2 in async mode (on the one-core-per-thread backends,
   * wasm and cpu, with at least 2 cores).
   */
  gradientThreads: 1 | 2;
}

/** Learner options as given by a user: every part optional, merged over the defaults. */
export interface LearnerSettings {
  grpo?: Partial<GrpoOptions>;
  schedule?: Partial<LearningRateSchedule>;
  optimizer?: Omit<AdamWOptions, "learningRate">;
  gradientThreads?: 1 | 2;
}

/** The learning-rate schedule a configuration's `rl.*` section names (over its `rl.steps`). */
export function scheduleOf(
  rl: Readonly<
    Pick<RlSettings, "learningRate" | "warmupSteps" | "schedule" | "minLearningRateRatio" | "steps">
  >,
): LearningRateSchedule {
  return {
    learningRate: rl.learningRate,
    warmupSteps: rl.warmupSteps,
    schedule: rl.schedule,
    minLearningRateRatio: rl.minLearningRateRatio,
    totalSteps: rl.steps,
  };
}

/** AdamW settings a configuration's `rl.*` section names (`rl.weightDecay`, `rl.maxGradNorm`, `rl.adamEpsilon`). */
export function optimizerOf(
  rl: Readonly<Pick<RlSettings, "weightDecay" | "maxGradNorm" | "adamEpsilon">>,
): Omit<AdamWOptions, "learningRate"> {
  return { weightDecay: rl.weightDecay, maxGradNorm: rl.maxGradNorm, epsilon: rl.adamEpsilon };
}

/** The library's schedule defaults: {@link RL_DEFAULTS} (./defaults.ts), the schema's too. */
export const DEFAULT_SCHEDULE: LearningRateSchedule = scheduleOf(RL_DEFAULTS);

/** AdamW settings of the learner: the schema's defaults. */
export const DEFAULT_OPTIMIZER: Omit<AdamWOptions, "learningRate"> = optimizerOf(RL_DEFAULTS);

export function learningRateAt(step: number, schedule: LearningRateSchedule): number {
  const peak = schedule.learningRate;
  if (step < schedule.warmupSteps) return (peak * (step + 1)) / (schedule.warmupSteps + 1);
  if (schedule.schedule === "constant") return peak;
  const span = Math.max(1, schedule.totalSteps - schedule.warmupSteps);
  const progress = Math.min(1, (step - schedule.warmupSteps) / span);
  const floor = peak * schedule.minLearningRateRatio;
  return floor + (peak - floor) * 0.5 * (1 + Math.cos(Math.PI * progress));
}

export interface LearnerUpdate {
  /** The new weights; undefined when the batch had nothing to train on. */
  weights: ExportedWeights | undefined;
  metrics: UpdateMetrics & {
    learningRate: number;
    step: number;
    /** Groups of the batch dropped from the loss for an infrastructure fault. */
    droppedInfrastructureGroups: number;
    advantages: Record<string, { mean: number; std: number; tokens: number }>;
  };
}

export class Learner {
  readonly policy: Policy;
  readonly optimizer: AdamW;
  readonly reference: Policy | undefined;
  readonly options: LearnerOptions;
  /** The gradient thread when `gradientThreads` is 2. */
  readonly gradientThread: GradientThread | undefined;
  /** Optimizer steps taken (RL and supervised). */
  step = 0;

  private constructor(
    policy: Policy,
    reference: Policy | undefined,
    options: LearnerOptions,
    gradientThread: GradientThread | undefined,
  ) {
    this.policy = policy;
    this.reference = reference;
    this.options = options;
    this.gradientThread = gradientThread;
    this.optimizer = policy.createOptimizer({
      ...options.optimizer,
      learningRate: options.schedule.learningRate,
    });
  }

  /** Loads the model of `modelDirectory`; the reference is a frozen copy of it when the KL coefficient is > 0. */
  static async load(modelDirectory: string, options: LearnerSettings = {}): Promise<Learner> {
    const full: LearnerOptions = {
      grpo: { ...DEFAULT_GRPO, ...options.grpo },
      schedule: { ...DEFAULT_SCHEDULE, ...options.schedule },
      optimizer: { ...DEFAULT_OPTIMIZER, ...options.optimizer },
      gradientThreads: options.gradientThreads ?? 1,
    };
    if (full.gradientThreads !== 1 && full.gradientThreads !== 2)
      throw new RangeError(`gradientThreads must be 1 or 2, got ${full.gradientThreads}`);
    checkGrpoOptions(full.grpo);
    // The gradient thread loads its copy while this thread loads its own.
    const starting =
      full.gradientThreads === 2
        ? GradientThread.start(modelDirectory, { reference: full.grpo.klCoefficient > 0 })
        : undefined;
    starting?.catch(() => {}); // awaited below
    const policy = await Policy.load(modelDirectory, { trainable: true });
    let reference: Policy | undefined;
    if (full.grpo.klCoefficient > 0) {
      const snapshot = policy.snapshot();
      reference = policy.fromSnapshot(snapshot);
      snapshot.dispose();
    }
    let gradientThread: GradientThread | undefined;
    try {
      gradientThread = await starting;
    } catch (error) {
      policy.dispose();
      reference?.dispose();
      throw error;
    }
    return new Learner(policy, reference, full, gradientThread);
  }

  private setLearningRate(): number {
    this.optimizer.learningRate = learningRateAt(this.step, this.options.schedule);
    return this.optimizer.learningRate;
  }

  /**
   * One GRPO update on complete groups; returns the new weights to publish, or `undefined`
   * weights when the batch holds no trainable token (every episode failed before
   * generating): then nothing changes and the version stays.
   */
  async update(groups: readonly TrajectoryGroup[]): Promise<LearnerUpdate> {
    const learningRate = this.setLearningRate();
    const batch = prepareBatch(groups, this.options.grpo);
    const dropped = batch.droppedInfrastructureGroups;
    if (batch.rows.length === 0 || batch.tokenCount === 0) {
      return {
        weights: undefined,
        metrics: {
          ...EMPTY_UPDATE_METRICS,
          learningRate,
          step: this.step,
          droppedInfrastructureGroups: dropped,
          advantages: {},
        },
      };
    }
    const peers = this.gradientThread ? [this.gradientThread] : [];
    const metrics = await grpoUpdate(
      this.policy,
      this.optimizer,
      batch,
      this.options.grpo,
      this.reference?.model,
      peers,
    );
    this.step += 1;
    return {
      weights: this.policy.exportWeights(),
      metrics: {
        ...metrics,
        learningRate,
        step: this.step,
        droppedInfrastructureGroups: dropped,
        advantages: batch.advantageStatistics,
      },
    };
  }

  /** One supervised step (warm start), its micro-batches shared with the gradient thread when there is one. */
  async supervised(
    rows: readonly SupervisedRow[],
    microBatchTokens?: number,
  ): Promise<SupervisedStepResult> {
    this.setLearningRate();
    const peers = this.gradientThread ? [this.gradientThread] : [];
    const result = await sharedSupervisedStep(
      this.policy,
      this.optimizer,
      rows,
      microBatchTokens ?? this.options.grpo.microBatchTokens,
      peers,
    );
    this.step += 1;
    return result;
  }

  /** Writes the policy (HF layout, `policy/`), the optimizer state and the learner state into `folder`. */
  async save(folder: string): Promise<void> {
    await this.policy.save(join(folder, "policy"));
    const state = this.optimizer.exportState();
    const tensors = state.moments.flatMap((m) => [
      { name: `${m.name}.m`, shape: m.shape, data: m.m },
      { name: `${m.name}.v`, shape: m.shape, data: m.v },
    ]);
    await writeFile(join(folder, "optimizer.safetensors"), serializeSafetensors(tensors));
    await writeFile(
      join(folder, "learner.json"),
      JSON.stringify(
        {
          step: this.step,
          version: this.policy.version,
          optimizerStep: state.step,
          learningRate: state.learningRate,
        },
        null,
        2,
      ),
    );
  }

  /**
   * Restores what `save` wrote (policy weights, optimizer moments, step, version). With LoRA,
   * the adapters (`policy/adapter/`) onto the frozen base: the merged weights beside them
   * would be a second copy of the model, and the base is shared with the samplers.
   */
  async restore(folder: string): Promise<void> {
    const adapterFolder = join(folder, "policy", "adapter");
    const hasAdapters = await access(join(adapterFolder, ADAPTER_CONFIG_FILE)).then(
      () => true,
      () => false,
    );
    if (this.policy.model.loraEnabled && hasAdapters) {
      await this.policy.loadAdapters(adapterFolder);
    } else {
      const restored = await Policy.load(join(folder, "policy"), {
        trainable: false,
        tokenizer: false,
      });
      try {
        const snapshot = restored.snapshot();
        this.policy.restore(snapshot);
        snapshot.dispose();
      } finally {
        restored.dispose();
      }
    }
    const learner = JSON.parse(await readFile(join(folder, "learner.json"), "utf8")) as {
      step: number;
      version: number;
      optimizerStep: number;
      learningRate: number;
    };
    const tensors = parseSafetensors(
      new Uint8Array(await readFile(join(folder, "optimizer.safetensors"))),
    );
    const names = new Set(
      [...tensors.keys()].filter((k) => k.endsWith(".m")).map((k) => k.slice(0, -2)),
    );
    const state: OptimizerState = {
      step: learner.optimizerStep,
      learningRate: learner.learningRate,
      moments: [...names].map((name) => ({
        name,
        shape: tensors.get(`${name}.m`)!.shape,
        m: tensors.get(`${name}.m`)!.data,
        v: tensors.get(`${name}.v`)!.data,
      })),
    };
    this.optimizer.importState(state);
    this.step = learner.step;
    this.policy.version = learner.version;
  }

  /** Frees the tensors and stops the gradient thread. */
  async dispose(): Promise<void> {
    await this.gradientThread?.close();
    this.optimizer.dispose();
    this.policy.dispose();
    this.reference?.dispose();
  }
}
