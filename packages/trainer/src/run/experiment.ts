/**
 * `runExperiment(options)`: one training experiment, what `agentrl train` runs, callable from
 * a script or a notebook with this package alone. Phases, top to bottom (each one function):
 *   1. resolve the configuration (the schema of ./config.ts) and the run folder (config.yaml written there);
 *   2. open the task families in-process (os and db only when a Docker engine answers);
 *   3. the starting model: `model.directory`, else a fresh `model.preset` model;
 *   4. evaluate it on the test split ("before warm start");
 *   5. the supervised warm start (skipped when a warm checkpoint exists), evaluate again;
 *   6. GRPO (`runTraining`), with periodic evaluations into metrics.jsonl and a plot;
 *   7. evaluate the final policy, write results.md / results.json: before / after warm start / after RL.
 *
 * Every evaluation is cached in `<run>/evaluations/*.json`, so `resume` only redoes what was
 * not finished, and memoised per model in `<model>/evaluations/<key>.json`; a new run moves
 * an earlier run's outputs to `<run>/previous/`. Aborting `signal` stops the RL phase after a
 * checkpoint. Progress goes to `createProgress` (none by default), lines to `print`.
 */
import { existsSync } from "node:fs";
import { createHash } from "node:crypto";
import { mkdir, readFile, readdir, rename, rm, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { PRESET_VOCAB_SIZES, Policy, initBackend } from "@agentrl/policy";
import {
  HttpEnvironmentClient,
  InProcessEnvironmentClient,
  createTaskFamily,
  isDockerAvailable,
  tokenFromEnvironment,
  type CurriculumTaskFamily,
  type EnvironmentClient,
  type Split,
  type TaskFamilyOptions,
} from "@agentrl/envs";
import { FaultInjectingClient, RoutingEnvironmentClient, type EnvironmentRoute, type EpisodeOptions, type TaskMixEntry } from "@agentrl/rollout";
import { isCompleteModelFolder, latestCheckpoint, writeModelFolder } from "../rl/checkpoint.js";
import { ConfigError, configToYaml, defaultConfig, loadConfig, taskDifficulties, type TrainConfig } from "./config.js";
import { evaluate, faultedTasks, successCount, type TaskEvaluation } from "./evaluate.js";
import { grpoOptionsOf } from "../rl/grpo.js";
import { optimizerOf, scheduleOf } from "../rl/learner.js";
import { runTraining, type TrainingRunOptions } from "../rl/loop.js";
import { lineChartSvg, type Series } from "./plot.js";
import { formatPerTask, formatSeconds, type ProgressFactory } from "./progress.js";
import { DOCKER_FAMILIES, initWarmStartModel, runWarmStart } from "./warmstart/index.js";

/** Where the run prints its lines. */
export type Printer = (line: string) => void;

/** Creates a task family by name (the registry's unless a test swaps it). */
export type FamilyFactory = (name: string, options: TaskFamilyOptions) => Promise<CurriculumTaskFamily>;

/** A shipped, already warm-started model (relative to the working directory): used as the warm checkpoint when present. */
export const SHIPPED_WARM_START = "models/warmstart";

export interface ExperimentOptions {
  /** The configuration; default: the embedded default run (`defaultConfig()`). Use `loadConfig` / `resolveTrainConfig` for YAML and overrides. */
  config?: TrainConfig;
  /** Where lines go. Default `console.log`. */
  print?: Printer;
  createFamily?: FamilyFactory;
  /** Aborting stops after the current RL step, with a checkpoint. */
  signal?: AbortSignal;
  /** Progress bars of the phases (see ./progress.ts). Default none. */
  createProgress?: ProgressFactory;
  /** The warm start's own progress bar (see `WarmStartOptions.progress`). Default true. */
  bars?: boolean;
}

/** Test success per task at the three points of the run (undefined when not measured). */
export interface ExperimentResult {
  runDirectory: string;
  finalModel: string | undefined;
  steps: number;
  tables: { before?: Record<string, TaskEvaluation>; warmStart?: Record<string, TaskEvaluation>; final?: Record<string, TaskEvaluation> };
  /** The same test instances at the rollout temperature (`evaluation.sampled`), when the main tables are greedy. */
  sampledTables?: { warmStart?: Record<string, TaskEvaluation>; final?: Record<string, TaskEvaluation> };
}

// ── 1. configuration ────────────────────────────────────────────────────────

export interface ResolveConfigOptions {
  /** YAML configuration file. Default: none (the embedded default run). */
  config?: string;
  /** `key=value` overrides applied after the file. */
  set?: string[];
  /** Continue from the newest checkpoint of the run folder. Default false. */
  resume?: boolean;
  /** Run folder (overrides `run.directory`). */
  runDirectory?: string;
}

/** The configuration of a run: the file (or, when resuming, the run's own config.yaml), the overrides, then the flags. */
export async function resolveTrainConfig(options: ResolveConfigOptions): Promise<TrainConfig> {
  let file = options.config;
  if (!file && options.resume && options.runDirectory && existsSync(join(options.runDirectory, "config.yaml"))) file = join(options.runDirectory, "config.yaml");
  const config = await loadConfig({ file, set: options.set });
  if (options.runDirectory) config.run.directory = options.runDirectory;
  if (options.resume) config.run.resume = true;
  return config;
}

// ── 2. environments ─────────────────────────────────────────────────────────

export interface OpenedTasks {
  client: EnvironmentClient;
  /** The configured tasks that run (os/db dropped without Docker). */
  tasks: TrainConfig["tasks"];
  /** Train and test indices per task (at the configured difficulties). */
  indices: Map<string, Record<Split, number[]>>;
  close(): Promise<void>;
}

/**
 * A client whose `getIndices` answers with the configured indices (the difficulty
 * selection), so that the scheduler and `evaluate` see only those.
 */
class SelectedIndicesClient implements EnvironmentClient {
  constructor(private readonly inner: EnvironmentClient, private readonly indices: Map<string, Record<Split, number[]>>) {}
  startSample(name: string, index: number) { return this.inner.startSample(name, index); }
  interact(sessionId: string, message: Parameters<EnvironmentClient["interact"]>[1]) { return this.inner.interact(sessionId, message); }
  cancel(sessionId: string) { return this.inner.cancel(sessionId); }
  async getIndices(name: string, split: Split = "test"): Promise<number[]> {
    return this.indices.get(name)?.[split] ?? this.inner.getIndices(name, split);
  }
  async close() { await this.inner.close?.(); }
}

/** The controller that plays `task`'s episodes (`tasks[].controller`, else `environments.controller`), or undefined for in-process. */
export function controllerOf(config: TrainConfig, task: TrainConfig["tasks"][number]): string | undefined {
  return task.controller ?? config.environments.controller;
}

/** Waits until `attempt` succeeds or `seconds` pass (a controller starting, its workers registering); rethrows the last failure. */
async function waitFor<T>(seconds: number, attempt: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (Date.now() >= deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  }
}

/**
 * Opens the configured tasks: in-process families (os and db left out, in ONE printed line,
 * when no Docker engine answers) and tasks behind controllers (`tasks[].controller`,
 * `environments.controller`), whose instances at the configured difficulties the controller
 * lists. One client routes each task's episodes to its place.
 */
export async function openTasks(config: TrainConfig, print: Printer, createFamily: FamilyFactory = createTaskFamily): Promise<OpenedTasks> {
  const wantsDocker = config.tasks.some((task) => DOCKER_FAMILIES.has(task.name) && !controllerOf(config, task));
  const docker = wantsDocker ? await isDockerAvailable() : false;
  const families: CurriculumTaskFamily[] = [];
  const controllers = new Map<string, { client: HttpEnvironmentClient; tasks: string[] }>();
  const tasks: TrainConfig["tasks"] = [];
  const skipped: string[] = [];
  const indices = new Map<string, Record<Split, number[]>>();
  const closeAll = async () => {
    await Promise.all(families.map((f) => f.close?.()));
    await Promise.all([...controllers.values()].map(({ client }) => client.close()));
  };
  for (const task of config.tasks) {
    const url = controllerOf(config, task);
    if (url) {
      const entry = controllers.get(url) ?? { client: new HttpEnvironmentClient({ url, token: tokenFromEnvironment(config.environments.tokenFile) }), tasks: [] };
      controllers.set(url, entry);
      const at = async (split: Split) => (await Promise.all(taskDifficulties(task).map((difficulty) => entry.client.getIndices(task.name, split, difficulty)))).flat();
      try {
        const test = await waitFor(config.environments.waitSeconds, () => at("test"));
        indices.set(task.name, { train: task.indices ?? (await at("train")), test });
      } catch (error) {
        await closeAll();
        throw new ConfigError(`task "${task.name}" on the controller ${url}: ${(error as Error).message} (waited ${config.environments.waitSeconds} s: is \`agentrl env serve\` running there with a worker of ${task.name}, and the token right?)`);
      }
      print(`${task.name}: through the controller ${url} (${indices.get(task.name)!.train.length} train / ${indices.get(task.name)!.test.length} test instances)`);
      entry.tasks.push(task.name);
      tasks.push(task);
      continue;
    }
    if (DOCKER_FAMILIES.has(task.name) && !docker) {
      skipped.push(task.name);
      continue;
    }
    let family: CurriculumTaskFamily;
    try {
      family = await createFamily(task.name, { seed: config.run.worldSeed });
    } catch (error) {
      await closeAll();
      throw new ConfigError(`task "${task.name}" failed to start: ${(error as Error).message}`);
    }
    const unknown = taskDifficulties(task).filter((difficulty) => !family.difficulties.includes(difficulty));
    if (unknown.length > 0) {
      await family.close?.();
      await closeAll();
      throw new ConfigError(`task "${task.name}" has no difficulty ${unknown.join(", ")} (its difficulties: ${family.difficulties.join(", ")})`);
    }
    const at = (split: Split) => taskDifficulties(task).flatMap((difficulty) => family.indicesAt(split, difficulty));
    indices.set(task.name, { train: task.indices ?? at("train"), test: at("test") });
    families.push(family);
    tasks.push(task);
  }
  if (skipped.length) print(`${skipped.join(" and ")} left out: no Docker engine reachable (start one with scripts/start-dockerd.sh); training on ${tasks.map((t) => t.name).join(", ") || "nothing"}`);
  if (tasks.length === 0) throw new ConfigError("no task can run (every configured task needs Docker, and no Docker engine is reachable)");
  const concurrency = Math.max(config.rollout.concurrency, config.evaluation.concurrency);
  const routes: EnvironmentRoute[] = [];
  if (families.length) routes.push({ tasks: families.map((family) => family.name), client: new InProcessEnvironmentClient(families, { concurrency }), label: "in-process" });
  for (const [url, { client, tasks: names }] of controllers) routes.push({ tasks: names, client, label: url });
  const routed = new RoutingEnvironmentClient(routes);
  return {
    client: new SelectedIndicesClient(routed, indices),
    tasks,
    indices,
    close: async () => {
      await routed.close();
      await Promise.all(families.map((family) => family.close?.()));
    },
  };
}

// ── 3-5. models, evaluation, warm start ─────────────────────────────────────

function hasModel(directory: string | undefined): directory is string {
  return directory !== undefined && existsSync(join(directory, "config.json"));
}

/** The starting model: `model.directory`, else a fresh `model.preset` model in `<run>/initial-model` (made once). */
async function startingModel(config: TrainConfig, print: Printer): Promise<string> {
  if (config.model.directory) {
    if (!hasModel(config.model.directory)) throw new ConfigError(`model.directory: no config.json in ${config.model.directory}`);
    return config.model.directory;
  }
  const directory = join(config.run.directory, "initial-model");
  // The run's own model folders are written atomically and accepted only when complete.
  if (isCompleteModelFolder(directory)) return directory;
  const architecture = { preset: config.model.preset, overrides: config.model.architecture ?? {}, vocabSize: config.model.vocabSize ?? PRESET_VOCAB_SIZES[config.model.preset], chatTemplate: config.model.chatTemplate };
  await writeModelFolder(directory, (folder) => initWarmStartModel(folder, architecture, { seed: config.run.seed, worldSeed: config.run.worldSeed, log: () => {} }));
  const written = JSON.parse(await readFile(join(directory, "config.json"), "utf8")) as { hidden_size: number; num_hidden_layers: number; vocab_size: number };
  print(`fresh ${config.model.preset} model (hidden ${written.hidden_size}, ${written.num_hidden_layers} layers, ${written.vocab_size} tokens) → ${directory}`);
  return directory;
}

/** The model's longest sequence (`max_position_embeddings` of config.json). */
async function maxPositions(directory: string): Promise<number> {
  const raw = JSON.parse(await readFile(join(directory, "config.json"), "utf8")) as { max_position_embeddings?: number };
  return raw.max_position_embeddings ?? Number.MAX_SAFE_INTEGER;
}

/** The episode limits of rollout and evaluation. */
function episodeOptions(config: TrainConfig): EpisodeOptions {
  return {
    maxTurns: config.rollout.maxTurns,
    maxTokens: config.rollout.maxTokens,
    maxNewTokensPerTurn: config.rollout.maxNewTokensPerTurn,
    turnTimeoutMs: config.rollout.turnTimeoutSeconds * 1000,
    episodeTimeoutMs: config.rollout.episodeTimeoutSeconds * 1000,
    incompletePenalty: config.rollout.incompletePenalty,
    infrastructureRetries: config.rollout.infrastructureRetries,
    infrastructureFaults: config.rollout.infrastructureFaults,
  };
}

export interface EvaluationRequest {
  config: TrainConfig;
  client: EnvironmentClient;
  tasks: string[];
  limit: number;
  phase: string;
  createProgress?: ProgressFactory;
  /** Ask for plain progress lines (no bar). */
  plain?: boolean;
  signal?: AbortSignal;
  /** Where a note goes when a stored measurement is used. Default: nowhere. */
  print?: Printer;
}

/** Evaluates a loaded policy on the test split with a progress bar. */
async function evaluatePolicy(policy: Policy, request: EvaluationRequest): Promise<Record<string, TaskEvaluation>> {
  const { config } = request;
  const total = request.tasks.length * request.limit * config.evaluation.samples;
  const progress = request.createProgress?.(request.phase, total, "episode", { plain: request.plain, minimumIntervalMs: 10_000 });
  try {
    return await evaluate({
      client: request.client,
      policy,
      tasks: request.tasks,
      split: "test",
      limit: request.limit,
      samples: config.evaluation.samples,
      temperature: config.evaluation.temperature,
      concurrency: config.evaluation.concurrency,
      episode: episodeOptions(config),
      seed: config.run.seed,
      signal: request.signal,
      onProgress: (done) => progress?.update(done),
    });
  } finally {
    progress?.stop();
  }
}

/** The test instances `evaluate` plays for `task`: the first `limit` of the client's test split (hex SHA-256, 16 characters). */
async function testInstancesDigest(client: Pick<EnvironmentClient, "getIndices">, task: string, limit: number): Promise<string> {
  const indices = (await client.getIndices(task, "test")).slice(0, limit);
  return createHash("sha256").update(indices.join(",")).digest("hex").slice(0, 16);
}

/**
 * The episode options that decide how an episode plays. How infrastructure faults are handled
 * (retries, masking) is left out: it changes no episode that meets no fault, and faults are
 * not reproducible anyway, so memos made before those options existed stay valid.
 */
function playKey(options: EpisodeOptions): EpisodeOptions {
  const { infrastructureRetries: _retries, infrastructureFaults: _faults, ...play } = options;
  return play;
}

/**
 * What determines one task's evaluation result: the model's files, the task, the test
 * instances it is measured on (a digest of their indices, so a changed split or difficulty
 * changes the key by itself), every evaluation setting and the backend (greedy ties may
 * break differently on another backend). Sampled evaluations also depend on the other tasks
 * evaluated with it (they share the episode seeds), so then the whole task list and its
 * instances count, and so does the run's seed; a greedy evaluation plays the same episodes
 * whatever the seed (it is keyed as seed 0), so a run with another seed reuses its memos.
 * Hex SHA-256, 16 characters.
 */
export async function evaluationKey(directory: string, request: Pick<EvaluationRequest, "config" | "tasks" | "limit"> & { client: Pick<EnvironmentClient, "getIndices"> }, task: string): Promise<string> {
  const hash = createHash("sha256");
  for (const file of (await readdir(directory)).filter((f) => f === "config.json" || f === "tokenizer.json" || f === "tokenizer_config.json" || f.endsWith(".safetensors")).sort()) {
    hash.update(file).update(await readFile(join(directory, file)));
  }
  const { config, client, limit } = request;
  const together = config.evaluation.temperature > 0 ? await Promise.all(request.tasks.map(async (other) => `${other}@${await testInstancesDigest(client, other, limit)}`)) : null;
  hash.update(
    JSON.stringify({
      task,
      instances: await testInstancesDigest(client, task, limit),
      together,
      limit,
      samples: config.evaluation.samples,
      temperature: config.evaluation.temperature,
      episode: playKey(episodeOptions(config)),
      // Greedy decoding draws no random numbers: seed 0's key, so earlier memos stay valid.
      seed: config.evaluation.temperature > 0 ? config.run.seed : 0,
      // World 0 adds nothing to the key, so memos made before worlds had their own seed stay valid.
      ...(config.run.worldSeed !== 0 ? { worldSeed: config.run.worldSeed } : {}),
      backend: await initBackend(),
    }),
  );
  return hash.digest("hex").slice(0, 16);
}

/**
 * Evaluates the model of `directory`, or returns stored results: this run's
 * `<run>/evaluations/<name>.json` (resume), else per task a memo `<model>/evaluations/<key>.json`
 * or `models/warmstart/evaluations/<key>.json` keyed by {@link evaluationKey}: the same files
 * and settings give the same numbers, so the shipped checkpoint carries its own measurement
 * (and the fresh model's, which is re-made bit-identically from the seed). Only the tasks
 * without a memo are evaluated. A task with episodes ended by an infrastructure fault is
 * stored nowhere (it measured the engine as well as the model) and is said in one line.
 */
export async function evaluateCached(name: string, directory: string, request: EvaluationRequest): Promise<Record<string, TaskEvaluation>> {
  const file = join(request.config.run.directory, "evaluations", `${name}.json`);
  if (existsSync(file)) return JSON.parse(await readFile(file, "utf8")) as Record<string, TaskEvaluation>;
  const result: Record<string, TaskEvaluation> = {};
  const missing: { task: string; key: string }[] = [];
  for (const task of request.tasks) {
    const key = await evaluationKey(directory, request, task);
    const memo = [join(directory, "evaluations", `${key}.json`), join(SHIPPED_WARM_START, "evaluations", `${key}.json`)].find((path) => existsSync(path));
    if (!memo) {
      missing.push({ task, key });
      continue;
    }
    result[task] = JSON.parse(await readFile(memo, "utf8")) as TaskEvaluation;
    request.print?.(`${request.phase}: ${task} measured before with the same model files and settings (${memo})`);
  }
  if (missing.length > 0) {
    const policy = await Policy.load(directory, { trainable: false });
    let measured: Record<string, TaskEvaluation>;
    try {
      measured = await evaluatePolicy(policy, { ...request, tasks: missing.map((m) => m.task) });
    } finally {
      policy.dispose();
    }
    if (request.signal?.aborted) return { ...result, ...measured };
    await mkdir(join(directory, "evaluations"), { recursive: true }).catch(() => {});
    for (const { task, key } of missing) {
      result[task] = measured[task];
      // A result with infrastructure faults measures the engine too: never the model's memo.
      if ((measured[task].infrastructureFaults ?? 0) > 0) continue;
      await writeFile(join(directory, "evaluations", `${key}.json`), JSON.stringify(measured[task], null, 2)).catch(() => {});
    }
  }
  const faulted = faultedTasks(result);
  if (faulted.length > 0) {
    // Not stored for the run either, so that `--resume` measures those tasks again.
    request.print?.(
      `${request.phase}: episodes ended by an infrastructure fault after their retries, counted as failures (${faulted.join(", ")}); ` +
        `not stored: is the Docker engine answering (docker ps; restart: bash scripts/start-dockerd.sh)? Then measure again with --resume`,
    );
    return result;
  }
  await mkdir(join(request.config.run.directory, "evaluations"), { recursive: true });
  await writeFile(file, JSON.stringify(result, null, 2));
  return result;
}

/** What the warm-start phase needs; one call, so that the phase can be swapped. */
export interface WarmStartPhaseOptions {
  config: TrainConfig;
  /** Model to start from. */
  modelDirectory: string;
  /** Where the warm-started model goes (Hugging Face layout). */
  outputDirectory: string;
  /** Families that run, with their training indices. */
  tasks: OpenedTasks;
  print: Printer;
  bars?: boolean;
  createProgress?: ProgressFactory;
  signal?: AbortSignal;
}

/** The tasks the warm start plays (its expert episodes run in-process): those without a controller. */
function inProcessTasks(config: TrainConfig, opened: OpenedTasks, print: Printer): string[] {
  const remote = opened.tasks.filter((task) => controllerOf(config, task)).map((task) => task.name);
  const local = opened.tasks.filter((task) => !controllerOf(config, task)).map((task) => task.name);
  if (local.length === 0) throw new ConfigError(`the warm start plays expert episodes in the trainer's process, and every task (${remote.join(", ")}) is behind a controller: set warmStart.checkpoint to a warm model, or warmStart.enabled: false`);
  if (remote.length) print(`warm start: on the in-process tasks ${local.join(", ")} only (${remote.join(", ")} behind a controller)`);
  return local;
}

/**
 * The supervised warm start on expert episodes (`runWarmStart` of ../warmstart.ts) on the
 * families that run, at their difficulties; its own evaluations are off (this command
 * measures before and after on the same test instances as the RL phase).
 */
export async function warmStartPhase(options: WarmStartPhaseOptions): Promise<void> {
  const { config } = options;
  const difficulties = [...new Set(options.tasks.tasks.flatMap(taskDifficulties))].sort((a, b) => a - b);
  await runWarmStart({
    model: options.modelDirectory,
    out: options.outputDirectory,
    tasks: inProcessTasks(config, options.tasks, options.print),
    difficulties,
    curriculum: "uniform",
    steps: config.warmStart.steps,
    minutes: config.warmStart.minutes,
    batchSize: config.warmStart.batchEpisodes,
    learningRate: config.warmStart.learningRate,
    maxSequenceTokens: config.rollout.maxTokens,
    microBatchTokens: config.rl.microBatchTokens,
    seed: config.run.seed,
    worldSeed: config.run.worldSeed,
    evalLimit: 0,
    saveDtype: "F32",
    progress: options.bars ?? true,
    createProgress: options.createProgress,
    logEvery: 10,
    log: options.print,
  });
}

/** Whether the model section is the default one (a fresh tiny model): only then may the shipped warm start stand in for it. */
function usesDefaultModel(config: TrainConfig): boolean {
  const defaults = defaultConfig().model;
  return (
    !config.model.directory &&
    config.model.preset === defaults.preset &&
    JSON.stringify(config.model.architecture) === JSON.stringify(defaults.architecture) &&
    config.model.chatTemplate === defaults.chatTemplate &&
    config.model.vocabSize === defaults.vocabSize
  );
}

/** A warm model that exists already: `warmStart.checkpoint`, this run's, or the shipped `models/warmstart` (only for the default model). */
function existingWarmModel(config: TrainConfig): { directory: string; note: string } | undefined {
  if (config.warmStart.checkpoint) {
    if (!hasModel(config.warmStart.checkpoint)) throw new ConfigError(`warmStart.checkpoint: no config.json in ${config.warmStart.checkpoint}`);
    return { directory: config.warmStart.checkpoint, note: `warm start: skipped, starting from ${config.warmStart.checkpoint}` };
  }
  if (!config.warmStart.enabled) return undefined;
  const own = join(config.run.directory, "warmstart", "model");
  if (isCompleteModelFolder(own)) return { directory: own, note: `warm start: already done in this run folder (${own})` };
  if (usesDefaultModel(config) && hasModel(SHIPPED_WARM_START)) return { directory: SHIPPED_WARM_START, note: `warm start: skipped, using the shipped checkpoint ${SHIPPED_WARM_START}` };
  return undefined;
}

/** The warm model: an existing one, or a new warm start from `start` into `<run>/warmstart/model`. Undefined when the phase is off. */
async function warmModel(config: TrainConfig, start: () => Promise<string>, opened: OpenedTasks, options: ExperimentOptions, print: Printer): Promise<string | undefined> {
  const existing = existingWarmModel(config);
  if (existing) {
    print(existing.note);
    return existing.directory;
  }
  if (!config.warmStart.enabled) return undefined;
  const own = join(config.run.directory, "warmstart", "model");
  const began = performance.now();
  const modelDirectory = await start();
  await writeModelFolder(own, (folder) => warmStartPhase({ config, modelDirectory, outputDirectory: folder, tasks: opened, print, bars: options.bars, createProgress: options.createProgress, signal: options.signal }));
  if (!hasModel(own)) throw new Error(`the warm start wrote no model into ${own}`);
  print(`warm start: done in ${formatSeconds((performance.now() - began) / 1000)} → ${own}`);
  return own;
}

// ── 6. RL ───────────────────────────────────────────────────────────────────

interface MetricsLine {
  step: number;
  [key: string]: number | string;
}

async function readMetrics(runDirectory: string): Promise<MetricsLine[]> {
  const file = join(runDirectory, "metrics.jsonl");
  if (!existsSync(file)) return [];
  return (await readFile(file, "utf8")).split("\n").filter((line) => line.trim()).map((line) => JSON.parse(line) as MetricsLine);
}

/** Series `prefix<task>` of the metrics lines, one per task, over steps. */
function seriesOf(lines: readonly MetricsLine[], prefix: string): Series[] {
  const byTask = new Map<string, Series>();
  for (const line of lines) {
    for (const [key, value] of Object.entries(line)) {
      if (!key.startsWith(prefix) || typeof value !== "number") continue;
      const task = key.slice(prefix.length);
      if (task.includes("/")) continue;
      if (!byTask.has(task)) byTask.set(task, { name: task, points: [] });
      byTask.get(task)!.points.push({ x: line.step, y: value });
    }
  }
  return [...byTask.values()].sort((a, b) => a.name.localeCompare(b.name));
}

/**
 * Writes success-per-task plots of the run (training batches; test evaluations when there are
 * any). `final`, when given, is the final evaluation: the last point of each test curve (the
 * periodic evaluations skip the last step, which it measures on more instances).
 */
export async function writePlots(runDirectory: string, final?: { step: number; results: Record<string, TaskEvaluation>; instances: number }): Promise<string[]> {
  const lines = await readMetrics(runDirectory);
  if (final) lines.push({ step: final.step, ...Object.fromEntries(Object.values(final.results).map((r) => [`eval/success/${r.task}`, r.success])) });
  const written: string[] = [];
  const plots: [string, string, string][] = [
    ["success-train.svg", "success/", "Success per task on training batches"],
    ["success-test.svg", "eval/success/", `Success per task on the test split${final ? ` (last point: final evaluation, ${final.instances} a task)` : ""}`],
  ];
  for (const [file, prefix, title] of plots) {
    const series = seriesOf(lines, prefix);
    if (series.length === 0) continue;
    await writeFile(join(runDirectory, file), lineChartSvg(series, { title, xLabel: "RL step", yLabel: "success" }));
    written.push(join(runDirectory, file));
  }
  return written;
}

/** The RL phase: `runTraining` with progress, evaluations and the signal. Returns the folder of the final policy. */
async function reinforcementLearning(config: TrainConfig, modelDirectory: string, opened: OpenedTasks, options: ExperimentOptions, print: Printer): Promise<{ finalModel: string | undefined; steps: number }> {
  const runDirectory = config.run.directory;
  const checkpoints = join(runDirectory, "checkpoints");
  const latest = config.run.resume ? await latestCheckpoint(checkpoints) : undefined;
  if (latest) print(`resuming RL from ${latest.folder} (step ${latest.step})`);
  if (latest && latest.step >= config.rl.steps) return { finalModel: join(latest.folder, "policy"), steps: latest.step };
  const external = config.crossPolicy.external;
  if (external) print(`crossPolicy.external: ${external.model} at ${external.url} takes a turn with p = ${external.probability} (loss mask 0)`);

  const tasks: TaskMixEntry[] = opened.tasks.map((task) => ({
    name: task.name,
    weight: task.weight,
    indices: opened.indices.get(task.name)!.train,
    ...(task.concurrency ? { concurrency: task.concurrency } : {}),
  }));
  const taskNames = opened.tasks.map((task) => task.name);
  const contextLength = Math.min(config.rollout.maxTokens, await maxPositions(modelDirectory));
  const progress = options.createProgress?.("RL", config.rl.steps, "step");
  progress?.update(latest?.step ?? 0, "waiting for the first batch");
  let steps = latest?.step ?? 0;
  try {
    await runTraining({
      modelDirectory,
      runDirectory,
      client: config.rollout.injectInfrastructureFaults > 0 ? new FaultInjectingClient(opened.client, { sessionShare: config.rollout.injectInfrastructureFaults, seed: config.run.seed }) : opened.client,
      tasks,
      ...trainingSettings(config),
      rollout: {
        maxConcurrentEpisodes: config.rollout.concurrency,
        engine: { temperature: config.rl.temperature, maxSequenceLength: contextLength },
        episode: { ...episodeOptions(config), maxTokens: contextLength, temperature: config.rl.temperature, unreadAnswerReward: config.rollout.unreadAnswerReward },
        maxStaleness: config.rl.maxStaleness === "infinite" ? Infinity : config.rl.maxStaleness,
        uninformativeWeight: config.rollout.uninformativeWeight,
        ...(config.rollout.servers.length > 0 ? { servers: { urls: config.rollout.servers, apiKey: config.rollout.serverApiKey ?? process.env.AGENTRL_API_KEY } } : {}),
      },
      crossPolicy: {
        staleProbability: config.crossPolicy.staleProbability,
        refreshEvery: config.crossPolicy.refreshEvery,
        ...(external ? { external: { baseUrl: external.url, model: external.model, probability: external.probability } } : {}),
      },
      checkpoint: config.checkpoint,
      trajectories: { episodesPerStep: config.run.trajectories },
      resume: config.run.resume,
      signal: options.signal,
      onStep: (record) => {
        steps = record.step;
        const success = Object.fromEntries(taskNames.filter((t) => `success/${t}` in record.metrics).map((t) => [t, record.metrics[`success/${t}`]]));
        progress?.update(record.step, `reward ${record.metrics.reward.toFixed(2)} | success ${formatPerTask(success)}`);
      },
      ...(config.evaluation.every > 0
        ? {
            evaluation: {
              every: config.evaluation.every,
              run: async (policy: Policy, step: number) => {
                // The last step's policy is the final model: the final tables measure it on more instances.
                if (step >= config.rl.steps) return {};
                const result = await evaluatePolicy(policy, { config, client: opened.client, tasks: taskNames, limit: config.evaluation.limit, phase: "test eval", createProgress: options.createProgress, plain: true, signal: options.signal });
                return Object.fromEntries(Object.values(result).flatMap((r) => [[`eval/success/${r.task}`, r.success], [`eval/reward/${r.task}`, r.meanReward]]));
              },
            },
          }
        : {}),
    });
  } finally {
    progress?.stop();
  }
  await writePlots(runDirectory);
  const last = await latestCheckpoint(checkpoints);
  return { finalModel: last ? join(last.folder, "policy") : undefined, steps: last?.step ?? steps };
}

/** The RL loop's settings that follow from the configuration alone (the rest are the run's own objects). */
export function trainingSettings(config: TrainConfig): Pick<TrainingRunOptions, "mode" | "steps" | "batchGroups" | "dynamicSamplingGroups" | "groupSize" | "seed" | "learner"> {
  return {
    mode: config.rl.mode,
    steps: config.rl.steps,
    batchGroups: config.rl.batchGroups,
    dynamicSamplingGroups: config.rl.dynamicSamplingGroups,
    groupSize: config.rl.groupSize,
    seed: config.run.seed,
    learner: {
      grpo: grpoOptionsOf(config.rl),
      schedule: scheduleOf(config.rl),
      optimizer: optimizerOf(config.rl),
      ...(config.rl.gradientThreads === "auto" ? {} : { gradientThreads: config.rl.gradientThreads }),
    },
  };
}

// ── 7. the table ────────────────────────────────────────────────────────────

/** One column of {@link successTable}: one run's results, or the same point of several seeds' runs. */
export type SuccessColumn = [string, Record<string, TaskEvaluation> | readonly Record<string, TaskEvaluation>[] | undefined];

/** Mean and sample standard deviation (n − 1; 0 for one value) of `values`, in percent. */
function meanAndSpread(values: readonly number[]): string {
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  if (values.length === 1) return `${(100 * mean).toFixed(1)}%`;
  const sd = Math.sqrt(values.reduce((a, b) => a + (b - mean) ** 2, 0) / (values.length - 1));
  return `${(100 * mean).toFixed(1)} ± ${(100 * sd).toFixed(1)}%`;
}

/**
 * A markdown table of test success per task, one column per measured point. A column of
 * several seeds' results shows `mean ± sd` over the seeds (sample standard deviation); its
 * mean row is the mean ± sd of each seed's mean over tasks. A cell with episodes ended by an
 * infrastructure fault says how many (`(46 faulted)`, summed over seeds), with a note below.
 */
export function successTable(columns: readonly SuccessColumn[]): string {
  const present = columns
    .filter((c): c is [string, NonNullable<SuccessColumn[1]>] => c[1] !== undefined)
    .map(([name, r]): [string, readonly Record<string, TaskEvaluation>[]] => [name, Array.isArray(r) ? r : [r as Record<string, TaskEvaluation>]])
    .filter(([, runs]) => runs.length > 0);
  const tasks = [...new Set(present.flatMap(([, runs]) => runs.flatMap((r) => Object.keys(r))))].sort();
  const faultCount = (runs: readonly Record<string, TaskEvaluation>[], task: string) => runs.reduce((sum, r) => sum + (r[task]?.infrastructureFaults ?? 0), 0);
  const cell = (runs: readonly Record<string, TaskEvaluation>[], task: string) => {
    const values = runs.filter((r) => r[task]).map((r) => r[task].success);
    const faults = faultCount(runs, task);
    return values.length ? `${meanAndSpread(values)}${faults > 0 ? ` (${faults} faulted)` : ""}` : "—";
  };
  const mean = (runs: readonly Record<string, TaskEvaluation>[]) => {
    const perRun = runs.map((r) => tasks.filter((t) => r[t]).map((t) => r[t].success)).filter((v) => v.length > 0);
    return perRun.length ? meanAndSpread(perRun.map((v) => v.reduce((a, b) => a + b, 0) / v.length)) : "—";
  };
  const lines = [
    `| task | ${present.map(([name]) => name).join(" | ")} |`,
    `|---|${present.map(() => "---:").join("|")}|`,
    ...tasks.map((task) => `| ${task} | ${present.map(([, runs]) => cell(runs, task)).join(" | ")} |`),
    `| **mean** | ${present.map(([, runs]) => mean(runs)).join(" | ")} |`,
  ];
  if (present.some(([, runs]) => tasks.some((task) => faultCount(runs, task) > 0))) lines.push("", "(N faulted): N episodes ended by an infrastructure fault after their retries and count as failures: the cell understates the model.");
  // Families that say where an answer came from (OS): how many successes read it, per column (summed over seeds).
  for (const task of tasks) {
    const read = present.flatMap(([name, runs]) => {
      const measured = runs.map((r) => r[task]).filter((r) => r?.successesFromOutput !== undefined);
      if (measured.length === 0) return [];
      const fromOutput = measured.reduce((sum, r) => sum + r.successesFromOutput!, 0);
      const successes = measured.reduce((sum, r) => sum + successCount(r), 0);
      return [`${name} ${fromOutput} of ${successes}`];
    });
    if (read.length > 0) lines.push("", `${task}: successes that answered a line a command printed (the others guessed or composed their answer): ${read.join(", ")}.`);
  }
  return lines.join("\n");
}


/** What one RL run writes into its folder (the starting model and the warm start are kept and reused). */
const RUN_OUTPUTS = ["checkpoints", "evaluations", "metrics.jsonl", "tensorboard", "results.md", "results.json", "success-test.svg", "success-train.svg"];

/**
 * A new run (not `--resume`) in a folder that holds an earlier run's outputs moves them to
 * `<run>/previous/` (replacing an older one there), so that none of them (a cached final
 * evaluation, a later checkpoint `--resume` would pick) is taken for the new run's.
 * Returns the names moved.
 */
export async function setAsideEarlierRun(runDirectory: string): Promise<string[]> {
  const present = RUN_OUTPUTS.filter((name) => existsSync(join(runDirectory, name)));
  if (present.length === 0) return [];
  const previous = join(runDirectory, "previous");
  await rm(previous, { recursive: true, force: true });
  await mkdir(previous, { recursive: true });
  for (const name of present) await rename(join(runDirectory, name), join(previous, name));
  return present;
}

/** Runs one experiment (see the file comment). */
export async function runExperiment(options: ExperimentOptions = {}): Promise<ExperimentResult> {
  const print = options.print ?? ((line: string) => console.log(line));
  const began = performance.now();
  const config = options.config ?? defaultConfig();
  const runDirectory = config.run.directory;
  if (config.model.backend !== "auto") process.env.AGENTRL_BACKEND = config.model.backend;
  await initBackend();
  await mkdir(runDirectory, { recursive: true });
  const setAside = config.run.resume ? [] : await setAsideEarlierRun(runDirectory);
  await writeFile(join(runDirectory, "config.yaml"), configToYaml(config));
  print(`run folder: ${resolve(runDirectory)}${config.run.resume ? " (resuming)" : ""}`);
  if (setAside.length > 0) print(`run folder held an earlier run: moved its ${setAside.join(", ")} to ${join(runDirectory, "previous")} (continue a run with --resume)`);

  const opened = await openTasks(config, print, options.createFamily);
  const taskNames = opened.tasks.map((task) => task.name);
  const evaluation = (limit: number, phase: string, at = config): EvaluationRequest => ({ config: at, client: opened.client, tasks: taskNames, limit, phase, createProgress: options.createProgress, signal: options.signal, print });
  const tables: ExperimentResult["tables"] = {};
  // The second, sampled table: the same evaluation at the rollout temperature.
  const sampledConfig = config.evaluation.sampled && config.evaluation.temperature === 0 ? { ...config, evaluation: { ...config.evaluation, temperature: config.rl.temperature } } : undefined;
  const sampledTables: NonNullable<ExperimentResult["sampledTables"]> = {};
  try {
    // The starting model is made only when something needs it (a shipped warm start may make it unnecessary).
    let startDirectory: string | undefined;
    const start = async () => (startDirectory ??= await startingModel(config, print));
    if (config.evaluation.beforeWarmStart) tables.before = await evaluateCached("before", await start(), evaluation(config.evaluation.finalLimit, "eval start"));
    const warm = await warmModel(config, start, opened, options, print);
    if (warm) tables.warmStart = await evaluateCached("warmstart", warm, evaluation(config.evaluation.finalLimit, "eval warm"));
    if (warm && sampledConfig) sampledTables.warmStart = await evaluateCached("warmstart-sampled", warm, evaluation(config.evaluation.finalLimit, "eval warm, sampled", sampledConfig));
    if (options.signal?.aborted) return { runDirectory, finalModel: undefined, steps: 0, tables };

    const rlStart = warm ?? (await start());
    const { finalModel, steps } = await reinforcementLearning(config, rlStart, opened, options, print);
    if (options.signal?.aborted) {
      print(`stopped at RL step ${steps} with a checkpoint${finalModel ? ` (${finalModel})` : ""}; continue with: agentrl train --resume --run-dir ${runDirectory}`);
      return { runDirectory, finalModel, steps, tables, sampledTables };
    }
    if (finalModel) tables.final = await evaluateCached(`final-step-${steps}`, finalModel, evaluation(config.evaluation.finalLimit, "eval final"));
    if (finalModel && sampledConfig) sampledTables.final = await evaluateCached(`final-step-${steps}-sampled`, finalModel, evaluation(config.evaluation.finalLimit, "eval final, sampled", sampledConfig));
    if (tables.final) await writePlots(runDirectory, { step: steps, results: tables.final, instances: config.evaluation.finalLimit });
    const table = successTable([
      ["before warm start", tables.before],
      ["after warm start", tables.warmStart],
      [`after RL (step ${steps})`, tables.final],
    ]);
    const heading = (at: TrainConfig) => `test success per task (${at.evaluation.finalLimit} instances each, ${at.evaluation.samples} sample(s), temperature ${at.evaluation.temperature})`;
    let report = `${heading(config)}:\n${table}`;
    if (sampledConfig && (sampledTables.warmStart || sampledTables.final)) {
      const sampled = successTable([
        ["after warm start", sampledTables.warmStart],
        [`after RL (step ${steps})`, sampledTables.final],
      ]);
      report += `\n\n${heading(sampledConfig)}, the rollout's:\n${sampled}`;
    }
    await writeFile(join(runDirectory, "results.md"), `# Test success per task\n\n${report}\n`);
    await writeFile(join(runDirectory, "results.json"), JSON.stringify({ steps, finalModel, ...tables, ...(sampledConfig ? { sampled: { temperature: sampledConfig.evaluation.temperature, ...sampledTables } } : {}) }, null, 2));
    print(`\n${report}`);
    if (finalModel) print(`final model: ${finalModel}`);
    print(`done in ${formatSeconds((performance.now() - began) / 1000)}; metrics: ${join(runDirectory, "metrics.jsonl")}, plots: ${join(runDirectory, "success-*.svg")}`);
    return { runDirectory, finalModel, steps, tables, sampledTables };
  } finally {
    await opened.close();
  }
}

