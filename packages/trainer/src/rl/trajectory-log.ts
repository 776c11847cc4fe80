/**
 * Trajectory recording for the dashboard: per RL step, a bounded sample of the batch's
 * episodes as one JSON line of `trajectories.jsonl` in the run folder: every turn's text
 * (prompt, generation, the environment's reply), its tool calls, and per generated token
 * its text, policy version and sampler log-prob; per episode its status, reward, the group
 * advantage and the task-normalised one.
 *
 * Bounded in size: at most `episodesPerStep` episodes a step (whole groups, in batch
 * order), and the file rotates to `trajectories.1.jsonl` (replacing the older one) once it
 * passes `maxFileBytes`, so a run keeps at most two files.
 */
import { appendFileSync, existsSync, mkdirSync, renameSync, statSync } from "node:fs";
import { join } from "node:path";
import {
  parseToolCalls,
  type ChatTokenizer,
  type Trajectory,
  type TrajectoryGroup,
} from "@agentrl/rollout";
import { getAdvantageEstimator, normalizeAdvantagesByTask } from "./algorithms.js";

export interface TrajectoryLogOptions {
  /** Episodes recorded per step (whole groups; at least the first group). 0 turns recording off. Default 8. */
  episodesPerStep: number;
  /** Size at which `trajectories.jsonl` rotates to `trajectories.1.jsonl`. Default 32 MiB. */
  maxFileBytes?: number;
  /** Advantage estimator of the run (for the recorded group advantages). Default `grpo`. */
  advantageEstimator?: string;
}

export const TRAJECTORY_FILE = "trajectories.jsonl";
export const ROTATED_TRAJECTORY_FILE = "trajectories.1.jsonl";

/** One generated token: [text, policy version (−1 external), sampler log-prob]. */
export type RecordedToken = [string, number, number];

export interface RecordedTurn {
  policy: Trajectory["turns"][number]["policy"];
  minVersion: number;
  maxVersion: number;
  finishReason: Trajectory["turns"][number]["finishReason"];
  formatError?: string;
  /** The generation, token by token. */
  tokens: RecordedToken[];
  /** Content outside tool-call blocks. */
  content: string;
  toolCalls: { name: string; arguments: unknown }[];
  /** The environment's reply (templated text), empty after the last turn. */
  observation: string;
}

export interface RecordedEpisode {
  task: string;
  index: number;
  groupId: string;
  member: number;
  status: string;
  reward: number;
  error?: string;
  /** Group advantage (the estimator over the group's rewards). */
  advantage: number;
  /** After task advantage normalization over the recorded batch's groups of the same task. */
  taskAdvantage: number;
  minVersion: number;
  maxVersion: number;
  /** The templated prompt (system, user messages) before the first turn. */
  prompt: string;
  turns: RecordedTurn[];
}

export interface TrajectoryStepRecord {
  step: number;
  time: string;
  /** Groups and episodes of the whole batch (the record holds a sample of them). */
  batchGroups: number;
  batchEpisodes: number;
  episodes: RecordedEpisode[];
}

const generatedTokens = (trajectory: Trajectory) => trajectory.lossMask.reduce((n, m) => n + m, 0);

/** The step's record: the first groups of the batch up to `episodesPerStep` episodes. */
export function recordStep(
  step: number,
  groups: readonly TrajectoryGroup[],
  tokenizer: ChatTokenizer,
  options: TrajectoryLogOptions,
): TrajectoryStepRecord {
  const estimator = getAdvantageEstimator(options.advantageEstimator ?? "grpo");
  // Advantages over the whole batch, as the learner computes them (without skipping uniform groups).
  const all = groups.flatMap((group) => {
    const advantages = estimator(group.trajectories.map((t) => t.reward));
    return group.trajectories.map((trajectory, i) => ({
      task: group.task,
      advantage: advantages[i],
      generatedTokens: generatedTokens(trajectory),
      trajectory,
    }));
  });
  const normalized = normalizeAdvantagesByTask(all);
  const episodes: RecordedEpisode[] = [];
  let offset = 0;
  for (const group of groups) {
    if (
      episodes.length > 0 &&
      episodes.length + group.trajectories.length > options.episodesPerStep
    )
      break;
    group.trajectories.forEach((trajectory, i) => {
      episodes.push(
        recordEpisode(trajectory, all[offset + i].advantage, normalized[offset + i], tokenizer),
      );
    });
    offset += group.trajectories.length;
  }
  return {
    step,
    time: new Date().toISOString(),
    batchGroups: groups.length,
    batchEpisodes: all.length,
    episodes,
  };
}

function recordEpisode(
  t: Trajectory,
  advantage: number,
  taskAdvantage: number,
  tokenizer: ChatTokenizer,
): RecordedEpisode {
  const text = (start: number, end: number) =>
    end > start ? tokenizer.decode(Array.from(t.tokens.subarray(start, end))) : "";
  const turns = t.turns.map((turn): RecordedTurn => {
    const [start, end] = turn.generated;
    const tokens: RecordedToken[] = [];
    for (let i = start; i < end; i++)
      tokens.push([
        tokenizer.decode([t.tokens[i]]),
        t.versions[i],
        Math.round(t.logprobs[i] * 1000) / 1000,
      ]);
    const generation = tokenizer.decode(Array.from(t.tokens.subarray(start, end)), {
      skipSpecialTokens: true,
    });
    const parsed = parseToolCalls(generation);
    return {
      policy: turn.policy,
      minVersion: turn.minVersion,
      maxVersion: turn.maxVersion,
      finishReason: turn.finishReason,
      ...(turn.formatError ? { formatError: turn.formatError } : {}),
      tokens,
      content: typeof parsed.message.content === "string" ? parsed.message.content : "",
      toolCalls: (parsed.message.tool_calls ?? []).map((call) => ({
        name: call.function.name,
        arguments: parseArguments(call.function.arguments),
      })),
      observation: text(turn.environment[0], turn.environment[1]),
    };
  });
  return {
    task: t.task,
    index: t.index,
    groupId: t.groupId,
    member: t.member,
    status: t.status,
    reward: t.reward,
    ...(t.error ? { error: t.error } : {}),
    advantage,
    taskAdvantage,
    minVersion: t.minVersion,
    maxVersion: t.maxVersion,
    prompt: text(0, t.turns[0]?.promptLength ?? t.tokens.length),
    turns,
  };
}

function parseArguments(json: string): unknown {
  try {
    return JSON.parse(json);
  } catch {
    return json;
  }
}

/** Appends step records to `<run>/trajectories.jsonl`, rotating at `maxFileBytes`. */
export class TrajectoryLog {
  readonly path: string;
  private readonly rotated: string;
  private readonly maxFileBytes: number;
  /** Seconds the last `write` took (sampling, decoding, serialising, appending). */
  lastWriteSeconds = 0;

  constructor(
    runDirectory: string,
    private readonly tokenizer: ChatTokenizer,
    private readonly options: TrajectoryLogOptions,
  ) {
    mkdirSync(runDirectory, { recursive: true });
    this.path = join(runDirectory, TRAJECTORY_FILE);
    this.rotated = join(runDirectory, ROTATED_TRAJECTORY_FILE);
    this.maxFileBytes = options.maxFileBytes ?? 32 * 1024 * 1024;
  }

  /** Records a sample of the step's batch (nothing when `episodesPerStep` is 0). */
  write(step: number, groups: readonly TrajectoryGroup[]): void {
    if (this.options.episodesPerStep <= 0 || groups.length === 0) return;
    const began = performance.now();
    if (existsSync(this.path) && statSync(this.path).size >= this.maxFileBytes)
      renameSync(this.path, this.rotated);
    appendFileSync(
      this.path,
      `${JSON.stringify(recordStep(step, groups, this.tokenizer, this.options))}\n`,
    );
    this.lastWriteSeconds = (performance.now() - began) / 1000;
  }
}
