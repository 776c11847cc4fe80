/**
 * The training configuration: one zod schema, read from YAML, overridable with
 * `--set a.b=value`. Every key has a description and a default; the defaults ARE the
 * embedded default run of `agentrl train` (a tiny model, warm start, then asynchronous
 * GRPO with task advantage normalization and cross-policy sampling on the five task
 * families at easy difficulty, in about 20 minutes on 2 CPU cores).
 *
 * `docs/config.md` is generated from this schema (`scripts/generate-config-docs.ts`).
 */
import { AgentRLError } from "@agentrl/spec";
import { readFile } from "node:fs/promises";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { z } from "zod";
import { EPISODE_DEFAULTS } from "@agentrl/rollout";
import { advantageEstimatorNames, policyLossNames } from "../rl/algorithms.js";
import { CROSS_POLICY_DEFAULTS, RL_DEFAULTS, WARM_START_DEFAULTS } from "../rl/defaults.js";

/** A configuration that cannot be read or is invalid; the message names the key and the file. */
export class ConfigError extends AgentRLError {}

const positiveInteger = () => z.number().int().positive();
const nonNegativeInteger = () => z.number().int().nonnegative();
const probability = () => z.number().min(0).max(1);
/** A name registered with the RL core (a policy loss, an advantage estimator), checked when the configuration is read: registered ones are selectable from YAML. */
const registeredName = (what: string, names: () => string[]) =>
  z.string().refine((name) => names().includes(name), {
    error: (issue) => `unknown ${what} "${String(issue.input)}"; registered: ${names().join(", ")}`,
  });

export const TaskConfigSchema = z
  .object({
    name: z
      .string()
      .min(1)
      .describe(
        "Task family name: `os`, `db` (these two need Docker), `kg`, `webshop`, `alfworld`.",
      ),
    weight: z
      .number()
      .positive()
      .default(1)
      .describe("Relative weight of the task in the training mix."),
    difficulty: z
      .union([nonNegativeInteger(), z.array(nonNegativeInteger()).min(1)])
      .default(0)
      .describe(
        "Difficulty level(s) to train and evaluate on; 0 is the easiest (one or two right tool calls solve it).",
      ),
    indices: z
      .array(nonNegativeInteger())
      .optional()
      .describe(
        "Explicit training sample indices (overrides `difficulty` for training). Default: the family's train split at `difficulty`.",
      ),
    concurrency: positiveInteger()
      .optional()
      .describe(
        "Episodes of this task running at once at most. Default: no limit beyond `rollout.concurrency`.",
      ),
    controller: z
      .url({
        protocol: /^https?$/,
        error: "controller must be an http(s) URL, e.g. http://10.0.0.5:5020",
      })
      .optional()
      .describe(
        "Controller (`agentrl env serve`, with workers of this task) that plays its episodes over HTTP (start_sample / interact / cancel, the AgentBench FC protocol) instead of the trainer's own process, e.g. `http://10.0.0.5:5020`. Default: `environments.controller`, else in-process.",
      ),
    familyOptions: z
      .record(z.string(), z.unknown())
      .optional()
      .describe(
        "Options of the task family in the trainer's process (beside the world seed), e.g. `{ generatedSize: 1200 }` for os: generated training tasks whose answers a constant cannot win (docs/tasks/os.md). Default none.",
      ),
  })
  .strict();

const EnvironmentsSchema = z
  .object({
    controller: z
      .url({
        protocol: /^https?$/,
        error: "environments.controller must be an http(s) URL, e.g. http://10.0.0.5:5020",
      })
      .optional()
      .describe(
        "Controller that plays the episodes of every task without its own `tasks[].controller`. Default: none (the tasks run in the trainer's process).",
      ),
    tokenFile: z
      .string()
      .min(1)
      .optional()
      .describe(
        "File holding the controllers' token (what `env serve` wrote, a mounted secret). Default: env AGENTRL_TOKEN, else `~/.agentrl/controller-token`.",
      ),
    waitSeconds: positiveInteger()
      .default(180)
      .describe(
        "How long the run waits at its start for each controller to answer and serve its tasks (its workers register by heartbeat).",
      ),
  })
  .strict();

export const DEFAULT_TASK_NAMES = ["alfworld", "db", "kg", "os", "webshop"] as const;

/**
 * Weights of the default mix (others 1). OS and KG learn from fewer informative groups per
 * step (an OS episode's sampled success starts near 2 %, KG's near 14 %), so they get more
 * of them: with weight 1 each, 120 steps lifted KG by 13 points and OS not at all; with OS
 * at 2, OS by 10 and KG by 3 (docs/warmstart.md, "Runs K and L").
 */
export const DEFAULT_TASK_WEIGHTS: Partial<Record<(typeof DEFAULT_TASK_NAMES)[number], number>> = {
  kg: 1.5,
  os: 2.5,
};

/**
 * Difficulties of the default mix (others 0). DB trains and is evaluated on all three of its
 * levels (INSERT, UPDATE/DELETE, SELECT kinds: all 60 AgentBench dev samples), which the
 * shipped warm start trains on; the other families' level 0 holds 200+ test instances.
 */
export const DEFAULT_TASK_DIFFICULTIES: Partial<
  Record<(typeof DEFAULT_TASK_NAMES)[number], number[]>
> = { db: [0, 1, 2] };

/** Architecture of the shipped warm start (`agentrl sft --preset default`) and of the default run's fresh model. */
export const DEFAULT_ARCHITECTURE = {
  hiddenSize: 128,
  intermediateSize: 384,
  numHiddenLayers: 3,
  numAttentionHeads: 4,
  numKeyValueHeads: 2,
  headDim: 32,
  maxPositionEmbeddings: 2048,
} as const;

const ModelSchema = z
  .object({
    directory: z
      .string()
      .optional()
      .describe(
        "Model folder in Hugging Face layout (config.json, model.safetensors, tokenizer.json), e.g. a Qwen2.5 checkpoint. Default: a fresh model of `preset`, made once in `<run>/initial-model`.",
      ),
    preset: z
      .enum(["test", "tiny", "small"])
      .default("tiny")
      .describe("Architecture of a fresh model when no `directory` is given."),
    architecture: z
      .object({
        hiddenSize: positiveInteger().optional(),
        intermediateSize: positiveInteger().optional(),
        numHiddenLayers: positiveInteger().optional(),
        numAttentionHeads: positiveInteger().optional(),
        numKeyValueHeads: positiveInteger().optional(),
        headDim: positiveInteger().optional(),
        maxPositionEmbeddings: positiveInteger().optional(),
      })
      .strict()
      .optional()
      .default({ ...DEFAULT_ARCHITECTURE })
      .describe(
        "Fields of a fresh model's architecture replacing the preset's, e.g. `{hiddenSize: 192, numHiddenLayers: 3}`. Default: the shipped warm start's (d 128, 3 layers, 4 heads / 2 kv heads, MLP 384, 2,048 positions: 1.1 M parameters).",
      ),
    vocabSize: positiveInteger()
      .optional()
      .describe(
        "Tokenizer vocabulary of a fresh model. Default: the preset's (test 512, tiny 4096, small 8192; the built-in corpus yields about 2,100 at most).",
      ),
    chatTemplate: z
      .enum(["compact", "qwen2.5"])
      .default("compact")
      .describe(
        "Chat template of a fresh model's tokenizer: `compact` lists tools as one-line signatures (KG prompts 3× shorter), `qwen2.5` is Qwen2.5-Instruct's.",
      ),
    backend: z
      .enum(["auto", "tensorflow", "wasm", "cpu"])
      .default("auto")
      .describe(
        "tfjs backend: `auto` picks the fastest that loads (tensorflow, then wasm, then cpu).",
      ),
  })
  .strict();

const WarmStartSchema = z
  .object({
    enabled: z
      .boolean()
      .default(true)
      .describe("Run the supervised warm start on expert episodes before RL."),
    steps: positiveInteger()
      .default(WARM_START_DEFAULTS.steps)
      .describe(
        "Optimizer steps of the warm start at most (also the length of its cosine schedule).",
      ),
    minutes: z
      .number()
      .positive()
      .default(4)
      .describe(
        "Time budget of the warm start in minutes (it stops at `steps` or this, whichever comes first).",
      ),
    learningRate: z
      .number()
      .positive()
      .default(WARM_START_DEFAULTS.learningRate)
      .describe("Peak learning rate of the warm start (cosine decay to 0.1 × peak)."),
    batchEpisodes: positiveInteger()
      .default(WARM_START_DEFAULTS.batchEpisodes)
      .describe("Expert episodes (training rows) per warm-start step."),
    checkpoint: z
      .string()
      .optional()
      .describe(
        "A model folder that already had its warm start: the phase is skipped and RL starts from it. Default: `models/warmstart-os-weighted` when present (for the default model), else the warm start this run folder already holds.",
      ),
  })
  .strict();

const ExternalModelSchema = z
  .object({
    url: z
      .string()
      .url()
      .describe("Base URL of an OpenAI-compatible API, e.g. `http://127.0.0.1:8000/v1`."),
    model: z.string().min(1).describe("The `model` field sent."),
    probability: probability()
      .default(0.5)
      .describe("Probability that a turn comes from the external model."),
  })
  .strict();

const RlSchema = z
  .object({
    mode: z
      .enum(["async", "sync"])
      .default(RL_DEFAULTS.mode)
      .describe(
        "`async`: rollout never stops, the learner trains in its own thread (data-parallel with a gradient thread, which holds a second copy of the policy); `sync`: generate a batch, train, repeat (the baseline).",
      ),
    steps: positiveInteger()
      .default(RL_DEFAULTS.steps)
      .describe(
        "Optimizer steps of the RL phase (the default run: ~18 of its ~24 min on a quiet 2-core machine; from the shipped warm start a step takes ~10 s on average).",
      ),
    batchGroups: positiveInteger()
      .default(RL_DEFAULTS.batchGroups)
      .describe("Complete groups (task instances) per step."),
    groupSize: positiveInteger()
      .default(RL_DEFAULTS.groupSize)
      .describe("Episodes per task instance (GRPO's n)."),
    learningRate: z
      .number()
      .positive()
      .default(RL_DEFAULTS.learningRate)
      .describe(
        "Peak learning rate (AdamW). From the shipped warm start RL lifts no family and lowers greedy OS; it harms least when it moves least: 1e-4 kept the greedy mean at 53.5 / 53.6 % against 52.4 / 52.4 at 2e-4 (two seeds each, the warm start 54.0; docs/warmstart.md). 2e-4 until session 34.",
      ),
    warmupSteps: nonNegativeInteger()
      .default(RL_DEFAULTS.warmupSteps)
      .describe("Steps of linear learning-rate warm-up."),
    schedule: z
      .enum(["constant", "cosine"])
      .default(RL_DEFAULTS.schedule)
      .describe(
        "Learning rate after warm-up: constant, or cosine decay to `minLearningRateRatio` × peak at the last step (the final weights then move little, which steadies the final evaluation).",
      ),
    minLearningRateRatio: probability()
      .default(RL_DEFAULTS.minLearningRateRatio)
      .describe("Floor of the cosine schedule as a fraction of the peak."),
    weightDecay: z
      .number()
      .nonnegative()
      .default(RL_DEFAULTS.weightDecay)
      .describe("AdamW decoupled weight decay."),
    adamEpsilon: z
      .number()
      .positive()
      .default(RL_DEFAULTS.adamEpsilon)
      .describe(
        "AdamW's ε, added to √v. Adam scales each parameter's step to about the learning rate whatever its gradient's size; a parameter whose gradient is far below ε (e.g. the output rows of tokens the batch never uses) moves proportionally less. At 1e-8 (the usual value) GRPO's noise-sized gradients wreck KG within 8 steps at lr 6e-4 (docs/warmstart.md).",
      ),
    maxGradNorm: z
      .number()
      .nonnegative()
      .default(RL_DEFAULTS.maxGradNorm)
      .describe("Clip of the global gradient norm; 0 turns it off."),
    clipLow: z
      .number()
      .nonnegative()
      .default(RL_DEFAULTS.clipLow)
      .describe("PPO clip ε_low: the ratio is clipped below at 1 − ε_low."),
    clipHigh: z
      .number()
      .nonnegative()
      .default(RL_DEFAULTS.clipHigh)
      .describe("PPO clip ε_high: the ratio is clipped above at 1 + ε_high."),
    dualClip: z
      .number()
      .nonnegative()
      .default(RL_DEFAULTS.dualClip)
      .describe("Dual-clip constant c for negative advantages; 0 turns it off."),
    policyLoss: registeredName("policy loss", policyLossNames)
      .default(RL_DEFAULTS.policyLoss)
      .describe(
        "Policy loss, by its registered name (`registerPolicyLoss` adds more): `ppo_clip` (PPO-clip + dual-clip against the sampler's log-probs, the original); `tis_token` / `tis_sequence` (decoupled PPO weighted by the truncated importance ratio min(π_trainer/π_sampler, importanceCap), per token / per sequence); `icepop` (tokens whose ratio lies outside [importanceRatioLow, importanceRatioHigh] are rejected). The last three need ppoEpochs 1.",
      ),
    importanceCap: z
      .number()
      .positive()
      .default(RL_DEFAULTS.importanceCap)
      .describe("Cap C of the truncated importance weights of tis_token and tis_sequence."),
    importanceRatioLow: z
      .number()
      .min(0)
      .max(1)
      .default(RL_DEFAULTS.importanceRatioLow)
      .describe(
        "Lower bound of π_trainer/π_sampler: icepop rejects tokens below it; `train/importanceRatioShareBelow` counts them.",
      ),
    importanceRatioHigh: z
      .number()
      .min(1)
      .default(RL_DEFAULTS.importanceRatioHigh)
      .describe(
        "Upper bound of π_trainer/π_sampler: icepop rejects tokens above it; `train/importanceRatioShareAbove` counts them.",
      ),
    mismatchKlAlarm: z
      .number()
      .nonnegative()
      .default(RL_DEFAULTS.mismatchKlAlarm)
      .describe(
        "An ALARM line is logged when a step's mismatch KL (k3, sampler vs trainer log-probs of the same tokens, `train/mismatchKl`) exceeds this.",
      ),
    klCoefficient: z
      .number()
      .nonnegative()
      .default(RL_DEFAULTS.klCoefficient)
      .describe(
        "Coefficient of the k3 KL penalty to the frozen starting policy; 0 skips the reference model. AgentRL uses 1e-4 at lr 1e-6; at lr 2e-4 (the default until session 34) 1e-4 let RL erode a family it barely trains on (ALFWorld 100 → 94.5 / 97.0 / 99.5 % greedy in three default runs); 0.05 kept it at 100 % in all three, the means within the seeds' spread (greedy 51.7 ± 1.0 against 51.2 ± 0.7 %; README).",
      ),
    entropyCoefficient: z
      .number()
      .nonnegative()
      .default(RL_DEFAULTS.entropyCoefficient)
      .describe("Coefficient of the entropy bonus."),
    reduction: z
      .enum(["token-mean", "sequence-mean"])
      .default(RL_DEFAULTS.reduction)
      .describe("How the per-token loss is averaged."),
    advantageEstimator: registeredName("advantage estimator", advantageEstimatorNames)
      .default(RL_DEFAULTS.advantageEstimator)
      .describe(
        "Group advantage, by its registered name (`registerAdvantageEstimator` adds more): `grpo` (R − mean)/(std + ε), `grpo_no_std` R − mean, or `grpo_shuffled`, a control: GRPO's advantages permuted at random within each group (the update's size without its signal).",
      ),
    taskAdvantageNormalization: z
      .boolean()
      .default(RL_DEFAULTS.taskAdvantageNormalization)
      .describe("Re-normalise advantages per task across the batch before the loss (AgentRL)."),
    negativeAdvantageScale: z
      .number()
      .min(0)
      .max(1)
      .default(RL_DEFAULTS.negativeAdvantageScale)
      .describe(
        "Factor on negative advantages (after normalization): below 1 a failed episode's tokens are pushed down less than a successful one's are pulled up; 0 learns from successes only. 1 is plain GRPO.",
      ),
    ppoEpochs: positiveInteger()
      .default(RL_DEFAULTS.ppoEpochs)
      .describe("Optimizer steps over the same batch."),
    skipUniformGroups: z
      .boolean()
      .default(RL_DEFAULTS.skipUniformGroups)
      .describe(
        "Drop groups whose rewards are all equal before the loss: their advantages are 0, so they only cost compute (DAPO's dynamic-sampling filter).",
      ),
    dynamicSamplingGroups: nonNegativeInteger()
      .default(RL_DEFAULTS.dynamicSamplingGroups)
      .describe(
        "DAPO's dynamic sampling (async mode): a step may draw up to this many more groups to replace the groups of its batch whose rewards are all equal, so that it trains on `batchGroups` informative ones. The batch's success metrics count every group drawn; `rollout/dynamic_sampling_dropped_groups` counts the replaced ones. 0 turns it off.",
      ),
    microBatchTokens: positiveInteger()
      .default(RL_DEFAULTS.microBatchTokens)
      .describe(
        "Tokens per micro-batch, padding included and a group's shared prompt counted once (gradients accumulate across micro-batches). On wasm the heap is capped at 4 GiB: the shipped model (d 128) peaks at ~2.5 GB of process memory with 4,096; a large model needs less (`examples/hf-model.yaml`: 512 for a 0.5B model).",
      ),
    gradientThreads: z
      .union([z.literal(1), z.literal(2), z.literal("auto")])
      .default(RL_DEFAULTS.gradientThreads)
      .describe(
        "Threads computing each update's gradients: 2 adds a gradient thread that shares the micro-batches with the learner (the same update, faster when a core is partly idle). `auto`: 2 in async mode on wasm/cpu with 2+ cores, else 1 (sync mode is the single-threaded baseline).",
      ),
    temperature: z
      .number()
      .positive()
      .default(RL_DEFAULTS.temperature)
      .describe("Sampling temperature of the rollout (the loss divides logits by it too)."),
    maxStaleness: z
      .union([nonNegativeInteger(), z.literal("infinite")])
      .default(RL_DEFAULTS.maxStaleness)
      .describe(
        "Largest age (policy versions) of a group when it is trained on; older groups are dropped. `infinite` for no bound.",
      ),
  })
  .strict();

const CrossPolicySchema = z
  .object({
    staleProbability: probability()
      .default(CROSS_POLICY_DEFAULTS.staleProbability)
      .describe(
        "Probability that a turn is generated by the stale copy of the policy; 0 turns cross-policy sampling off.",
      ),
    refreshEvery: positiveInteger()
      .default(CROSS_POLICY_DEFAULTS.refreshEvery)
      .describe("Steps between refreshes of the stale copy (AgentRL: 25 of 1,000)."),
    external: ExternalModelSchema.optional().describe(
      "An external model mixed in per turn (evaluation-style cross-policy sampling). Default none.",
    ),
  })
  .strict()
  // The stale copy and the external model share each turn's draw.
  .refine(
    (crossPolicy) =>
      !crossPolicy.external || crossPolicy.staleProbability + crossPolicy.external.probability <= 1,
    {
      path: ["external", "probability"],
      error: (issue) => {
        const crossPolicy = issue.input as {
          staleProbability: number;
          external: { probability: number };
        };
        return `crossPolicy.staleProbability (${crossPolicy.staleProbability}) + crossPolicy.external.probability (${crossPolicy.external.probability}) must not exceed 1`;
      },
    },
  );

const RolloutSchema = z
  .object({
    concurrency: positiveInteger()
      .default(32)
      .describe("Episodes running at once over all tasks (also the decode batch)."),
    maxTurns: positiveInteger()
      .default(5)
      .describe("Assistant turns before an episode ends with `task limit reached`."),
    maxTokens: positiveInteger()
      .default(1280)
      .describe(
        "Tokens of a whole trajectory before it ends with `agent context limit` (also capped by the model's context). Bounded by training memory: on wasm a 1,600-token row of the tiny model overflows the 4 GiB heap.",
      ),
    maxNewTokensPerTurn: positiveInteger()
      .default(96)
      .describe("Tokens generated per turn at most."),
    turnTimeoutSeconds: z
      .number()
      .positive()
      .default(120)
      .describe("Time limit of one turn (generation + environment)."),
    episodeTimeoutSeconds: z
      .number()
      .positive()
      .default(900)
      .describe("Time limit of a whole episode."),
    incompletePenalty: z
      .number()
      .default(EPISODE_DEFAULTS.incompletePenalty)
      .describe(
        "Reward of an episode the agent ended without the environment's verdict (turn or context limit, invalid actions, its own timeout).",
      ),
    unreadAnswerReward: z
      .number()
      .default(0)
      .describe(
        "Training reward of a right answer that was not read: not a line or field a command printed (OS reports it: a right guess, such as the constant `3` that alone scores 22 % of OS's test split), when lower than the environment's; 0 (the default) pays answer tasks only when read, 1 pays every right answer. Tasks graded on the system's state are always paid. The shipped warm start reads all its OS successes; from a warm start that seldom reads (`models/warmstart`), 0 took OS's training signal away (docs/tasks/os.md). Evaluation always uses the environment's reward.",
      ),
    infrastructureRetries: nonNegativeInteger()
      .default(EPISODE_DEFAULTS.infrastructureRetries)
      .describe(
        "Times an episode ended by an infrastructure fault (environment or task error, dead container or worker, engine error, unreachable controller) is played again.",
      ),
    infrastructureFaults: z
      .enum(["mask", "penalize"])
      .default(EPISODE_DEFAULTS.infrastructureFaults)
      .describe(
        "An episode still ended by an infrastructure fault after its retries: `mask` drops its group from the loss (counted in `train/droppedInfrastructureGroups`); `penalize` gives it the incomplete penalty, as the original did.",
      ),
    injectInfrastructureFaults: probability()
      .default(0)
      .describe(
        "Share of training sessions killed at their first interaction (an injected infrastructure fault, to measure masking against penalising); 0 injects none.",
      ),
    uninformativeWeight: z
      .number()
      .min(0)
      .max(1)
      .default(0.1)
      .describe(
        "Share of its weight a task keeps in the rollout mix while its last 16 groups all had equal rewards (every episode failed, or every one succeeded): such groups give GRPO zero advantages, so their episodes only cost time. The task comes back to full weight as its groups turn informative. 1 keeps the plain weighted mix.",
      ),
    decodeThreads: nonNegativeInteger()
      .default(0)
      .describe(
        "Engine threads decoding the rollout besides the main thread's engine, on copies of the current policy, each new version pushed to them; every token keeps the version that decoded it. 0 (default): the async learner already computes gradients on the other cores. A model whose copies would pass a quarter of the machine's memory gets fewer, with a log line. Ignored with `servers`.",
      ),
    servers: z
      .array(z.url())
      .default([])
      .describe(
        "`agentrl serve` servers (`http://host:port`) that generate the current policy's turns instead of the local engine: balanced by sequences in flight, each new version pushed to all; a dead server's episodes end as infrastructure faults (retried, then masked or penalised by `infrastructureFaults`; see docs/serve.md). Empty: the local engine.",
      ),
    serverApiKey: z
      .string()
      .min(1)
      .optional()
      .describe(
        "API key of `rollout.servers` (their `--api-key`). Default: env AGENTRL_API_KEY, else none.",
      ),
  })
  .strict();

const EvaluationSchema = z
  .object({
    every: nonNegativeInteger()
      .default(20)
      .describe(
        "RL steps between evaluations on the test split (success per task into metrics.jsonl and the plot); 0 turns them off. The last step has none: the final tables measure that policy.",
      ),
    limit: positiveInteger()
      .default(10)
      .describe(
        "Test instances per task in each evaluation (the first ones at the task's difficulty).",
      ),
    finalLimit: positiveInteger()
      .default(200)
      .describe("Test instances per task of the before/after tables."),
    samples: positiveInteger()
      .default(1)
      .describe("Samples per instance (pass@k with k = samples)."),
    temperature: z
      .number()
      .nonnegative()
      .default(0)
      .describe("Sampling temperature of evaluation; 0 is greedy."),
    concurrency: positiveInteger().default(40).describe("Evaluation episodes at once."),
    beforeWarmStart: z
      .boolean()
      .default(true)
      .describe("Measure the starting model too (the 'before warm start' column)."),
    sampled: z
      .boolean()
      .default(true)
      .describe(
        "With greedy evaluation (temperature 0), also measure the warm start and the final model at the rollout temperature (`rl.temperature`): a second table. RL trains the sampled policy, so that is where it shows first.",
      ),
  })
  .strict();

const CheckpointSchema = z
  .object({
    every: positiveInteger()
      .default(10)
      .describe("RL steps between checkpoints (the last step and a stop always checkpoint)."),
    keep: positiveInteger().default(3).describe("Newest checkpoints kept."),
  })
  .strict();

const RunSchema = z
  .object({
    directory: z
      .string()
      .min(1)
      .default("runs/default")
      .describe(
        "Run folder: resolved config, checkpoints, metrics.jsonl, TensorBoard events, plots, results.",
      ),
    seed: nonNegativeInteger()
      .default(0)
      .describe(
        "Seed of the training's randomness (fresh model's weights, task draws, sampling, cross-policy choices): seeds of an ablation vary this on the same task worlds.",
      ),
    worldSeed: nonNegativeInteger()
      .default(0)
      .describe(
        "Seed of the task worlds (WebShop's catalogue, KG's graph, ALFWorld's houses, the generated OS and DB tasks), hence of their train/test instances and the fresh tokenizer's corpus. The shipped warm start was trained on world 0; on another world it meets products and entities it never saw (WebShop 0 %, KG 60 % on world 1, docs/warmstart.md).",
      ),
    resume: z
      .boolean()
      .default(false)
      .describe("Continue from the newest checkpoint of the run folder."),
    trajectories: nonNegativeInteger()
      .default(8)
      .describe(
        "Episodes recorded per RL step (whole groups) into trajectories.jsonl for the dashboard's trajectory browser; 0 turns recording off.",
      ),
  })
  .strict();

export const TrainConfigSchema = z
  .object({
    model: ModelSchema.prefault({}).describe("The policy to train."),
    tasks: z
      .array(TaskConfigSchema)
      .min(1)
      .default(
        DEFAULT_TASK_NAMES.map((name) =>
          TaskConfigSchema.parse({
            name,
            weight: DEFAULT_TASK_WEIGHTS[name] ?? 1,
            difficulty: DEFAULT_TASK_DIFFICULTIES[name] ?? 0,
          }),
        ),
      )
      .describe(
        "The task mix. Default: the five families at difficulty 0 (db at 0, 1 and 2: all its test samples), weight 1 each but kg 1.5 and os 2.5 (os and db only when a Docker engine answers). OS trains on AgentBench's tasks alone: from the shipped warm start, 300 generated OS tasks beside them (`familyOptions: { generatedSize: 300, generatedPlaces: stated }`, what the warm start learnt on) lowered greedy OS more (32.0 → 27.0 % at lr 1e-4, against 29.0 / 30.0 % without them, two seeds; docs/warmstart.md).",
      ),
    environments: EnvironmentsSchema.prefault({}).describe(
      "Where tasks run: in the trainer's process, or behind controllers (`tasks[].controller`).",
    ),
    warmStart: WarmStartSchema.prefault({}).describe("Supervised warm start on expert episodes."),
    rl: RlSchema.prefault({}).describe("GRPO: batch, schedule and loss."),
    crossPolicy: CrossPolicySchema.prefault({}).describe(
      "Cross-policy sampling: turns from a stale copy of the policy (or an external model).",
    ),
    rollout: RolloutSchema.prefault({}).describe("Episode limits and rollout concurrency."),
    evaluation: EvaluationSchema.prefault({}).describe("Evaluation on the test split."),
    checkpoint: CheckpointSchema.prefault({}).describe("Checkpoints of the RL phase."),
    run: RunSchema.prefault({}).describe("The run folder, seed and resumption."),
  })
  .strict();

export type TrainConfig = z.infer<typeof TrainConfigSchema>;
export type TaskConfig = TrainConfig["tasks"][number];

/** The embedded default run's configuration. */
export function defaultConfig(): TrainConfig {
  return TrainConfigSchema.parse({});
}

/** Difficulty levels of a task entry as a list. */
export function taskDifficulties(task: TaskConfig): number[] {
  return Array.isArray(task.difficulty) ? task.difficulty : [task.difficulty];
}

// ── --set overrides ─────────────────────────────────────────────────────────

export interface Override {
  /** Dotted key, e.g. `rl.steps` or `tasks.0.weight`. */
  path: string[];
  /** The value parsed as YAML: `3` a number, `true` a boolean, `[kg, os]` a list. */
  value: unknown;
  /** The original `key=value` text. */
  text: string;
}

/** Parses `a.b=value`; the value is read as YAML, so it is typed (numbers, booleans, lists, objects). */
export function parseOverride(text: string): Override {
  const equals = text.indexOf("=");
  if (equals <= 0)
    throw new ConfigError(`--set expects key=value (e.g. rl.steps=20), got "${text}"`);
  const key = text.slice(0, equals).trim();
  const raw = text.slice(equals + 1);
  const path = key.split(".");
  if (path.some((part) => part === "")) throw new ConfigError(`--set: malformed key "${key}"`);
  let value: unknown;
  try {
    value = raw.trim() === "" ? "" : parseYaml(raw);
  } catch (error) {
    throw new ConfigError(
      `--set ${key}: cannot parse the value "${raw}": ${(error as Error).message}`,
    );
  }
  return { path, value, text };
}

type Container = Record<string, unknown> | unknown[];

/** Sets `value` at `path` inside `target`, creating objects (or arrays, for numeric keys) on the way. */
export function setPath(
  target: Record<string, unknown>,
  path: readonly string[],
  value: unknown,
): void {
  let node: Container = target;
  for (let i = 0; i < path.length - 1; i++) {
    const key = path[i];
    const existing = (node as Record<string, unknown>)[key];
    if (existing === undefined || existing === null || typeof existing !== "object") {
      const created: Container = /^\d+$/.test(path[i + 1]) ? [] : {};
      (node as Record<string, unknown>)[key] = created;
      node = created;
    } else {
      node = existing as Container;
    }
  }
  (node as Record<string, unknown>)[path[path.length - 1]] = value;
}

// ── loading and validation ──────────────────────────────────────────────────

/** `tasks[0].name` from the path `["tasks", 0, "name"]`. */
export function formatKey(path: readonly PropertyKey[]): string {
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else out += out ? `.${String(part)}` : String(part);
  }
  return out || "(top level)";
}

function describeIssue(issue: z.core.$ZodIssue): string[] {
  if (issue.code === "unrecognized_keys") {
    return issue.keys.map((key) => `unknown key "${formatKey([...issue.path, key])}"`);
  }
  return [`${formatKey(issue.path)}: ${issue.message}`];
}

/**
 * Validates a raw object (from YAML plus overrides). `source` names where it came from
 * (a file path, or "the defaults"); keys set by `--set` are named as such.
 * @throws ConfigError listing every problem, each with its key.
 */
export function validateConfig(
  raw: unknown,
  source: string,
  overrides: readonly Override[] = [],
): TrainConfig {
  const result = TrainConfigSchema.safeParse(raw ?? {});
  if (result.success) return result.data;
  const lines = result.error.issues.flatMap((issue) => {
    const key = formatKey(issue.path);
    const fromSet = overrides.find((o) =>
      key.startsWith(formatKey(o.path.map((p) => (/^\d+$/.test(p) ? Number(p) : p)))),
    );
    return describeIssue(issue).map((line) =>
      fromSet ? `${line} (from --set ${fromSet.text})` : line,
    );
  });
  throw new ConfigError(`invalid configuration in ${source}:\n  ${lines.join("\n  ")}`);
}

export interface LoadConfigOptions {
  /** YAML file; default none (the embedded defaults). */
  file?: string;
  /** `key=value` overrides, applied in order after the file. */
  set?: readonly string[];
}

/** Reads the YAML file (if any), applies the overrides and validates. */
export async function loadConfig(options: LoadConfigOptions = {}): Promise<TrainConfig> {
  let raw: unknown = {};
  const source = options.file ?? "the default configuration";
  if (options.file) {
    let text: string;
    try {
      text = await readFile(options.file, "utf8");
    } catch (error) {
      throw new ConfigError(`cannot read config file ${options.file}: ${(error as Error).message}`);
    }
    try {
      raw = parseYaml(text) ?? {};
    } catch (error) {
      throw new ConfigError(
        `config file ${options.file} is not valid YAML: ${(error as Error).message}`,
      );
    }
    if (typeof raw !== "object" || Array.isArray(raw))
      throw new ConfigError(
        `config file ${options.file} must hold a mapping of sections (model, tasks, rl, …)`,
      );
  }
  const overrides = (options.set ?? []).map(parseOverride);
  for (const override of overrides)
    setPath(raw as Record<string, unknown>, override.path, override.value);
  return validateConfig(raw, source, overrides);
}

/** The resolved configuration as YAML (written into the run folder). */
export function configToYaml(config: TrainConfig): string {
  return `# agentrl train: resolved configuration (defaults filled in)\n${stringifyYaml(config)}`;
}
