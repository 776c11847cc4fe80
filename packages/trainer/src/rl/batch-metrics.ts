/**
 * The metrics and log lines of one training step's batch: per-task reward and success,
 * staleness, infrastructure faults, and what the engine did since the previous step.
 */
import { isInformative, type EngineStats, type TrajectoryGroup } from "@agentrl/rollout";
import type { Metrics } from "./logging.js";
import { answerSources, isSuccess } from "./success.js";

/** Staleness buckets of `staleness_tokens/*`: trained tokens generated 0, 1, 2, or 3 and more versions before the weights they are trained at. */
const STALENESS_BUCKETS = ["0", "1", "2", "3_or_more"] as const;

/**
 * Per-task reward and success of a batch (over its episodes that were given a reward: masked
 * ones, ended by an infrastructure fault, are counted apart), its staleness (the largest, and
 * the share of trained tokens per staleness), and its turns from the stale copy and the external model.
 */
export function batchMetrics(groups: readonly TrajectoryGroup[], version: number): Metrics {
  const out: Metrics = {};
  const byTask = new Map<
    string,
    {
      reward: number;
      success: number;
      partial: number;
      n: number;
      turns: number;
      groups: number;
      informative: number;
    }
  >();
  let staleness = 0;
  let tokens = 0;
  let externalTurns = 0;
  let staleTurns = 0;
  let masked = 0;
  let faults = 0;
  let retries = 0;
  const tokensByStaleness = STALENESS_BUCKETS.map(() => 0);
  for (const group of groups) {
    if (group.minVersion >= 0) staleness = Math.max(staleness, version - group.minVersion);
    const counts = byTask.get(group.task) ?? {
      reward: 0,
      success: 0,
      partial: 0,
      n: 0,
      turns: 0,
      groups: 0,
      informative: 0,
    };
    counts.groups += 1;
    counts.informative += isInformative(group) ? 1 : 0;
    byTask.set(group.task, counts);
    for (const t of group.trajectories) {
      retries += t.metrics.infrastructureRetries ?? 0;
      faults += t.endCause === "infrastructure" ? 1 : 0;
      for (let i = 0; i < t.lossMask.length; i++) {
        if (t.lossMask[i] === 1 && t.versions[i] >= 0)
          tokensByStaleness[
            Math.min(STALENESS_BUCKETS.length - 1, Math.max(0, version - t.versions[i]))
          ] += 1;
      }
      for (const turn of t.turns) {
        if (turn.policy === "external") externalTurns += 1;
        else if (turn.policy === "stale") staleTurns += 1;
      }
      tokens += t.tokens.length;
      if (t.masked) {
        masked += 1;
        continue;
      }
      counts.reward += t.reward;
      counts.success += isSuccess(t) ? 1 : 0;
      counts.partial += t.status === "completed" && t.reward > 0 && !isSuccess(t) ? 1 : 0;
      counts.turns += t.turns.length;
      counts.n += 1;
    }
  }
  let reward = 0;
  let success = 0;
  let n = 0;
  for (const [task, s] of byTask) {
    if (s.n === 0) continue;
    out[`reward/${task}`] = s.reward / s.n;
    out[`success/${task}`] = s.success / s.n;
    out[`turns/${task}`] = s.turns / s.n;
    // Graded rewards (WebShop's partial matches) and groups GRPO can learn from (unequal rewards).
    out[`partial/${task}`] = s.partial / s.n;
    out[`informative/${task}`] = s.informative / s.groups;
    reward += s.reward;
    success += s.success;
    n += s.n;
  }
  // Families that say where an answer came from (OS): the batch's successes that read it from
  // an own command's output, guessed it, or were graded on the system's state (`answerSource`).
  for (const task of byTask.keys()) {
    const sources = answerSources(
      groups
        .filter((group) => group.task === task)
        .flatMap((group) => group.trajectories.filter((t) => !t.masked)),
    );
    if (!sources) continue;
    out[`successes_read/${task}`] = sources.read;
    out[`successes_guessed/${task}`] = sources.guessed;
    out[`successes_other/${task}`] = sources.other;
    const successes = sources.read + sources.guessed + sources.other;
    if (successes > 0) out[`read_share/${task}`] = sources.read / successes;
  }
  out.reward = n ? reward / n : 0;
  out.success = n ? success / n : 0;
  out.staleness = staleness;
  out.batchTokens = tokens;
  // Counted on the batch itself, so it is the step's own count in both modes.
  out["rollout/external_turns"] = externalTurns;
  out["rollout/stale_turns"] = staleTurns;
  out["rollout/masked_episodes"] = masked;
  // Ended by the infrastructure after their retries, masked or (infrastructureFaults: penalize) penalised.
  out["rollout/infrastructure_faults"] = faults;
  out["rollout/infrastructure_retries"] = retries;
  const trainedTokens = tokensByStaleness.reduce((a, b) => a + b, 0);
  STALENESS_BUCKETS.forEach(
    (bucket, i) =>
      (out[`staleness_tokens/${bucket}`] = trainedTokens
        ? tokensByStaleness[i] / trainedTokens
        : 0),
  );
  return out;
}

/** "3 × task error (ContextLimitError: …), 1 × agent context limit" for a batch's episodes. */
export function describeFailures(groups: readonly TrajectoryGroup[]): string {
  // Per status: the count, and the first error as an example (errors carry numbers, e.g. token counts).
  const counts = new Map<string, { n: number; example?: string }>();
  for (const t of groups.flatMap((g) => g.trajectories)) {
    const entry = counts.get(t.status) ?? { n: 0, example: t.error?.slice(0, 80) };
    entry.n++;
    counts.set(t.status, entry);
  }
  return [...counts]
    .map(([status, { n, example }]) => `${n} × ${status}${example ? ` (e.g. ${example})` : ""}`)
    .join(", ");
}

/**
 * The episodes of `groups` ended by an infrastructure fault, per task, with the first one's
 * error (say, a container the engine did not start): what a user needs to see that an engine hangs.
 */
export function describeFaults(groups: readonly TrajectoryGroup[]): string {
  const faulted = groups
    .flatMap((g) => g.trajectories)
    .filter((t) => t.endCause === "infrastructure");
  const perTask = new Map<string, number>();
  for (const t of faulted) perTask.set(t.task, (perTask.get(t.task) ?? 0) + 1);
  const example = faulted.find((t) => t.error)?.error?.slice(0, 160);
  return `${[...perTask].map(([task, n]) => `${task} ${n}`).join(", ")} episode(s)${example ? `, e.g. "${example}"` : ""}`;
}

/**
 * What the current engine did since the previous step: generated, prefilled and reused
 * (kept or prefix cache) tokens, and seconds in decode steps and prefill.
 */
export function engineMetrics(
  now: EngineStats | undefined,
  before: EngineStats | undefined,
): Metrics {
  if (!now) return {};
  const delta = (
    key:
      | "generatedTokens"
      | "prefilledTokens"
      | "reusedCacheTokens"
      | "decodeMs"
      | "prefillMs"
      | "decodeSteps",
  ) => now[key] - (before?.[key] ?? 0);
  const steps = delta("decodeSteps");
  const batchSum =
    now.meanBatchSize * now.decodeSteps - (before ? before.meanBatchSize * before.decodeSteps : 0);
  return {
    "rollout/generated_tokens": delta("generatedTokens"),
    "rollout/prefilled_tokens": delta("prefilledTokens"),
    "rollout/reused_cache_tokens": delta("reusedCacheTokens"),
    "rollout/mean_decode_batch": steps > 0 ? batchSum / steps : 0,
    "time/rollout_decode": delta("decodeMs") / 1000,
    "time/rollout_prefill": delta("prefillMs") / 1000,
  };
}
