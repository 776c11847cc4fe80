/**
 * `runEnvCheck` (what `agentrl env check` runs): plays a family's expert over each difficulty
 * (and optionally its wrong agent and a constant guesser) and prints a table of success,
 * reward, turns and task errors.
 */
import { AgentRLError } from "@agentrl/spec";
import {
  createTaskFamily,
  playEpisodes,
  type CurriculumTaskFamily,
  type EpisodeRecord,
  type Expert,
  type Split,
  type TaskFamilyOptions,
} from "@agentrl/envs";
import type { FamilyFactory, Printer } from "./experiment/options.js";

/** A clear failure of an `agentrl env` command (exit code 1, message without a stack). */
export class EnvCommandError extends AgentRLError {}

/** Creates the family `name`; a failure to start is an EnvCommandError naming it. */
export async function createOrExplain(
  createFamily: FamilyFactory,
  name: string,
  options: TaskFamilyOptions,
): Promise<CurriculumTaskFamily> {
  try {
    return await createFamily(name, options);
  } catch (error) {
    throw new EnvCommandError(`task family "${name}" failed to start: ${(error as Error).message}`);
  }
}

/** The family options of a command's `--seed` and `--data`. */
export function familyOptions(options: { seed?: number; data?: string }): TaskFamilyOptions {
  return {
    ...(options.seed !== undefined ? { seed: options.seed } : {}),
    ...(options.data ? { dataDir: options.data } : {}),
  };
}

export interface EnvCheckOptions {
  task: string;
  /** Default "test". */
  split?: Split;
  /** Samples per difficulty; 0 = all. Default 20. */
  limit?: number;
  /** Only this difficulty. Default: all. */
  difficulty?: number;
  /** Also run the deliberately wrong agent and count how many scored 0. */
  wrong?: boolean;
  /** Also run an agent that runs nothing and answers this text at once (the split's floor for guessing). */
  constantAnswer?: string;
  /** Episodes at once. Default 8. */
  concurrency?: number;
  seed?: number;
  data?: string;
}

export interface CheckRow {
  difficulty: number | "all";
  episodes: number;
  /** Episodes that ended `completed` with reward 1. */
  successes: number;
  meanReward: number;
  /** Mean assistant turns per episode. */
  meanTurns: number;
  taskErrors: number;
}

export interface CheckReport {
  rows: CheckRow[];
  /** With `wrong`: how many wrong-agent episodes scored 0, out of how many. */
  wrong?: { zero: number; episodes: number };
  /** With `constantAnswer`: how many of the guesser's episodes scored 1, out of how many. */
  constant?: { answer: string; successes: number; episodes: number };
}

/**
 * An agent that answers `answer` on its first turn through the family's answer tool (the first
 * tool whose name contains "answer"; an array parameter gets `[answer]`, a numeric one the number).
 */
export function constantAnswerAgent(answer: string, task: string): Expert {
  return {
    act(_history, tools) {
      const tool = tools.find((candidate) => candidate.function.name.includes("answer"));
      if (!tool)
        throw new EnvCommandError(
          `task ${task} has no answer tool to guess with (its tools: ${tools.map((t) => t.function.name).join(", ")})`,
        );
      const parameters = tool.function.parameters;
      const name = parameters.required?.[0] ?? Object.keys(parameters.properties)[0];
      if (!name)
        throw new EnvCommandError(
          `the answer tool ${tool.function.name} of task ${task} takes no argument`,
        );
      const type = (parameters.properties[name] as { type?: string }).type;
      const number = Number(answer);
      const value =
        type === "array"
          ? [answer]
          : (type === "integer" || type === "number") &&
              answer.trim() !== "" &&
              Number.isFinite(number)
            ? number
            : answer;
      return {
        role: "assistant",
        content: null,
        tool_calls: [
          {
            id: "call_0",
            type: "function",
            function: { name: tool.function.name, arguments: JSON.stringify({ [name]: value }) },
          },
        ],
      };
    },
  };
}

const percent = (part: number, whole: number) =>
  `${(whole ? (100 * part) / whole : 0).toFixed(1)}%`;

function summarize(difficulty: number | "all", records: EpisodeRecord[]): CheckRow {
  const n = records.length;
  const mean = (f: (r: EpisodeRecord) => number) =>
    n ? records.reduce((sum, r) => sum + f(r), 0) / n : 0;
  return {
    difficulty,
    episodes: n,
    successes: records.filter((r) => r.status === "completed" && r.reward >= 1).length,
    meanReward: mean((r) => r.reward),
    meanTurns: mean((r) => r.turns),
    taskErrors: records.filter((r) => r.status === "task error").length,
  };
}

/** Plays the family's expert (and, with `wrong`, its wrong agent) over each difficulty and prints a table. */
export async function runEnvCheck(
  options: EnvCheckOptions,
  createFamily: FamilyFactory = createTaskFamily,
  out: Printer = (line) => console.log(line),
): Promise<CheckReport> {
  const family = await createOrExplain(createFamily, options.task, familyOptions(options));
  try {
    const split = options.split ?? "test";
    const limit = options.limit ?? 20;
    const difficulties =
      options.difficulty === undefined
        ? family.difficulties
        : family.difficulties.filter((d) => d === options.difficulty);
    if (difficulties.length === 0)
      throw new EnvCommandError(
        `task ${options.task} has no difficulty ${options.difficulty}; it has ${family.difficulties.join(", ")}`,
      );
    const play = { concurrency: options.concurrency ?? 8 };
    const rows: CheckRow[] = [];
    const all: EpisodeRecord[] = [];
    const chosen: number[] = [];
    for (const difficulty of difficulties) {
      const pool = family.indicesAt(split, difficulty);
      const indices = limit > 0 ? pool.slice(0, limit) : pool;
      const records = await playEpisodes(family, indices, (index) => family.expert(index), play);
      rows.push(summarize(difficulty, records));
      all.push(...records);
      chosen.push(...indices);
    }
    rows.push(summarize("all", all));
    out(
      `env check ${options.task} (${split} split, expert${limit > 0 ? `, at most ${limit} per difficulty` : ""})`,
    );
    out("");
    out("| difficulty | episodes | success | mean reward | mean turns | task errors |");
    out("|---|---|---|---|---|---|");
    for (const row of rows) {
      const rate = row.episodes ? percent(row.successes, row.episodes) : "-";
      out(
        `| ${row.difficulty} | ${row.episodes} | ${rate} | ${row.meanReward.toFixed(3)} | ${row.meanTurns.toFixed(2)} | ${row.taskErrors} |`,
      );
    }
    const report: CheckReport = { rows };
    if (options.wrong) {
      if (!family.wrongExpert)
        throw new EnvCommandError(`task ${options.task} has no wrong expert`);
      const wrongExpert = family.wrongExpert.bind(family);
      const records = await playEpisodes(family, chosen, (index) => wrongExpert(index), play);
      const zero = records.filter((r) => r.reward === 0).length;
      report.wrong = { zero, episodes: records.length };
      out("");
      out(
        `wrong agent: ${zero} of ${records.length} episodes scored 0${
          zero === records.length
            ? ""
            : ` — ${records.length - zero} did not (indices ${records
                .filter((r) => r.reward !== 0)
                .map((r) => r.index)
                .slice(0, 20)
                .join(", ")})`
        }`,
      );
    }
    if (options.constantAnswer !== undefined) {
      const answer = options.constantAnswer;
      const { successes, episodes } = summarize(
        "all",
        await playEpisodes(family, chosen, () => constantAnswerAgent(answer, options.task), play),
      );
      report.constant = { answer, successes, episodes };
      out("");
      out(
        `constant answer ${JSON.stringify(answer)} (no command run): ${successes} of ${episodes} episodes scored 1 (${percent(successes, episodes)}), the floor a guessing agent reaches`,
      );
    }
    return report;
  } finally {
    await family.close?.();
  }
}
