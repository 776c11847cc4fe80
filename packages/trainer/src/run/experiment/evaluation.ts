/** Phases 4, 5 and 7: evaluations on the test split, stored in the run folder and memoised per model files and settings. */
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import type { EnvironmentClient } from "@agentrl/envs";
import type { EpisodeOptions } from "@agentrl/rollout";
import { initBackend, Policy } from "@agentrl/policy";
import type { TrainConfig } from "../config.js";
import { evaluate, faultedTasks, type TaskEvaluation } from "../evaluate.js";
import { type Printer, SHARED_EVALUATION_MEMOS } from "./options.js";
import type { ProgressFactory } from "../progress.js";

export function episodeOptions(config: TrainConfig): EpisodeOptions {
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
export async function evaluatePolicy(
  policy: Policy,
  request: EvaluationRequest,
): Promise<Record<string, TaskEvaluation>> {
  const { config } = request;
  const total = request.tasks.length * request.limit * config.evaluation.samples;
  const progress = request.createProgress?.(request.phase, total, "episode", {
    plain: request.plain,
    minimumIntervalMs: 10_000,
  });
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
async function testInstancesDigest(
  client: Pick<EnvironmentClient, "getIndices">,
  task: string,
  limit: number,
): Promise<string> {
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
export async function evaluationKey(
  directory: string,
  request: Pick<EvaluationRequest, "config" | "tasks" | "limit"> & {
    client: Pick<EnvironmentClient, "getIndices">;
  },
  task: string,
): Promise<string> {
  const hash = createHash("sha256");
  for (const file of (await readdir(directory))
    .filter(
      (f) =>
        f === "config.json" ||
        f === "tokenizer.json" ||
        f === "tokenizer_config.json" ||
        f.endsWith(".safetensors"),
    )
    .sort()) {
    hash.update(file).update(await readFile(join(directory, file)));
  }
  const { config, client, limit } = request;
  const together =
    config.evaluation.temperature > 0
      ? await Promise.all(
          request.tasks.map(
            async (other) => `${other}@${await testInstancesDigest(client, other, limit)}`,
          ),
        )
      : null;
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
 * or `models/warmstart/evaluations/<key>.json` (SHARED_EVALUATION_MEMOS) keyed by {@link evaluationKey}: the same files
 * and settings give the same numbers, so the shipped checkpoint carries its own measurement
 * (and the fresh model's, which is re-made bit-identically from the seed). Only the tasks
 * without a memo are evaluated. A task with episodes ended by an infrastructure fault is
 * stored nowhere (it measured the engine as well as the model) and is said in one line.
 */
export async function evaluateCached(
  name: string,
  directory: string,
  request: EvaluationRequest,
): Promise<Record<string, TaskEvaluation>> {
  const file = join(request.config.run.directory, "evaluations", `${name}.json`);
  if (existsSync(file))
    return JSON.parse(await readFile(file, "utf8")) as Record<string, TaskEvaluation>;
  const result: Record<string, TaskEvaluation> = {};
  const missing: { task: string; key: string }[] = [];
  for (const task of request.tasks) {
    const key = await evaluationKey(directory, request, task);
    const memo = [
      join(directory, "evaluations", `${key}.json`),
      join(SHARED_EVALUATION_MEMOS, `${key}.json`),
    ].find((path) => existsSync(path));
    if (!memo) {
      missing.push({ task, key });
      continue;
    }
    result[task] = JSON.parse(await readFile(memo, "utf8")) as TaskEvaluation;
    request.print?.(
      `${request.phase}: ${task} measured before with the same model files and settings (${memo})`,
    );
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
      await writeFile(
        join(directory, "evaluations", `${key}.json`),
        JSON.stringify(measured[task], null, 2),
      ).catch(() => {});
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
