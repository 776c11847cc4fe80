/**
 * The warm start's training rows: expert episodes of the task families (over one world or
 * several), as token sequences with their loss masks, drawn as a weighted round-robin with a
 * curriculum over difficulties.
 */
import { Rng } from "@agentrl/policy";
import {
  createTaskFamily,
  EnvironmentError,
  openFamilies,
  playEpisode,
  type CurriculumTaskFamily,
  type Split,
  type TaskFamilyOptions,
} from "@agentrl/envs";
import type { ChatTokenizer } from "@agentrl/rollout";
import { expertSequence, type SupervisedRow } from "../../rl/sft.js";
import { WarmStartError } from "./options.js";

/** Opens the families by name (@agentrl/envs' openFamilies); one that fails to start is skipped with one line. */
export async function openWarmStartFamilies(
  tasks: readonly string[],
  options: TaskFamilyOptions,
  log: (line: string) => void,
): Promise<CurriculumTaskFamily[]> {
  const { families, failures } = await openFamilies(tasks, options);
  for (const { name, error } of failures)
    log(`warm start: skipping task ${name}: ${error.message.split("\n")[0]}`);
  return families;
}

/** The training row of one expert episode of `family` on sample `index`, or undefined when the expert failed. */
async function expertRow(
  family: CurriculumTaskFamily,
  index: number,
  tokenizer: ChatTokenizer,
): Promise<SupervisedRow | undefined> {
  const episode = await playEpisode(family, index, family.expert(index));
  if (episode.reward < 1 - 1e-9 || episode.status !== "completed") return undefined;
  return expertSequence(tokenizer, family.name, episode.messages, episode.tools);
}

export interface ExpertRowOptions {
  /** Task families by name. Required. */
  tasks: string[];
  /** The tokenizer that renders and encodes the conversations (a `Policy`'s `Tokenizer`). Required. */
  tokenizer: ChatTokenizer;
  /** Rows per task, spread evenly over `difficulties`. Default 64. */
  perTask?: number;
  /** Difficulties to draw from. Default `[0]`. */
  difficulties?: number[];
  /** Seed of the instance choice. Default 0. */
  seed?: number;
  /** Seed of the worlds. Default 0. */
  worldSeed?: number;
  /** Split the instances come from. Default `train` (never evaluate on these). */
  split?: Split;
  /** Rows longer than this many tokens are skipped. Default: no limit. */
  maxSequenceTokens?: number;
  /** Options for `createTaskFamily` (besides `seed`). Default none. */
  familyOptions?: TaskFamilyOptions;
  /** Where one-line notes go (a family that failed to start). Default `console.log`. */
  log?: (line: string) => void;
}

/**
 * A fixed pool of expert training rows: `perTask` successful expert episodes per task
 * (randomly chosen instances of the split, evenly over the difficulties), each as one token
 * sequence with the loss on the assistant's tokens. Families that fail to start are skipped.
 */
export async function collectExpertRows(options: ExpertRowOptions): Promise<SupervisedRow[]> {
  const log = options.log ?? console.log;
  const difficulties = options.difficulties ?? [0];
  const perTask = options.perTask ?? 64;
  const random = new Rng(options.seed ?? 0);
  const families = await openWarmStartFamilies(
    options.tasks,
    { ...options.familyOptions, seed: options.worldSeed ?? 0 },
    log,
  );
  const rows: SupervisedRow[] = [];
  try {
    for (const family of families) {
      for (let k = 0; k < perTask; k++) {
        const difficulty = difficulties[k % difficulties.length];
        const indices = family.indicesAt(options.split ?? "train", difficulty);
        if (indices.length === 0) continue;
        for (let attempt = 0; attempt < 5; attempt++) {
          const row = await expertRow(
            family,
            indices[random.nextInt(indices.length)],
            options.tokenizer,
          );
          if (
            row &&
            (options.maxSequenceTokens === undefined ||
              row.tokens.length <= options.maxSequenceTokens)
          ) {
            rows.push(row);
            break;
          }
        }
      }
    }
  } finally {
    await Promise.all(families.map((family) => family.close?.()));
  }
  return rows;
}

/**
 * The row with the prompt and observation tokens weighted `promptLossWeight` relative to the
 * assistant's (integer weights: assistant round(1/w) up to 255, others 1); unchanged for 0.
 */
export function withPromptLoss(row: SupervisedRow, promptLossWeight: number): SupervisedRow {
  if (promptLossWeight <= 0) return row;
  const assistant = assistantLossWeight(promptLossWeight);
  return { ...row, lossMask: row.lossMask.map((m) => (m ? assistant : 1)) };
}

/** The integer loss weight of an assistant token under `promptLossWeight` (1 for 0). */
export function assistantLossWeight(promptLossWeight: number): number {
  return promptLossWeight <= 0 ? 1 : Math.max(1, Math.min(255, Math.round(1 / promptLossWeight)));
}

/** Which difficulties are open at `progress` ∈ [0, 1] (see `WarmStartOptions.curriculum`). */
export function openDifficulties(
  difficulties: readonly number[],
  curriculum: "uniform" | "progressive",
  progress: number,
): number[] {
  if (curriculum === "uniform") return [...difficulties];
  const open = Math.max(
    1,
    Math.min(difficulties.length, Math.floor(progress * difficulties.length) + 1),
  );
  return difficulties.slice(0, open);
}

/** A family's other worlds (`seed + k`), each opened on first use (on the home family's servers where it can, `atWorld`) and kept until `close`. */
export class TrainingWorlds {
  private readonly opened = new Map<string, Promise<CurriculumTaskFamily>>();

  constructor(
    /** How many worlds, the home world (`seed`) included. */
    readonly count: number,
    private readonly options: {
      seed: number;
      familyOptions: TaskFamilyOptions;
      taskCounts?: Record<string, number>;
    },
  ) {}

  /** How many worlds `task`'s episodes come from: its own count, else `count`. */
  countOf(task: string): number {
    return this.options.taskCounts?.[task] ?? this.count;
  }

  /** World `k` (0 = `home`, the family already open on world `seed`) of `home`'s task. */
  family(home: CurriculumTaskFamily, k: number): Promise<CurriculumTaskFamily> {
    if (k === 0) return Promise.resolve(home);
    const key = `${home.name}/${k}`;
    let family = this.opened.get(key);
    if (!family) {
      const seed = this.options.seed + k;
      family = home.atWorld
        ? Promise.resolve(home.atWorld(seed))
        : createTaskFamily(home.name, { ...this.options.familyOptions, seed });
      this.opened.set(key, family);
    }
    return family;
  }

  async close(): Promise<void> {
    const families = await Promise.allSettled(this.opened.values());
    await Promise.all(
      families.map((result) =>
        result.status === "fulfilled" ? result.value.close?.() : undefined,
      ),
    );
    this.opened.clear();
  }
}

/** Expert episodes that may fail in the environment in a row before a stage stops. */
const MAX_ENVIRONMENT_FAILURES = 20;

/** An endless stream of fresh expert rows over the families (weighted round-robin) and their worlds, with a curriculum. */
export class ExpertStream {
  private readonly random: Rng;
  /** One turn of the round-robin: each family `weight` times in a row. */
  private readonly turn: CurriculumTaskFamily[];
  private next = 0;
  /**
   * The rows already played, by family (one object a world) and sample: the experts and the
   * worlds are deterministic, so a sample drawn again is not played again (an OS or DB episode
   * costs a container; an OS-only stage draws each of its ~2,300 samples twice on average).
   */
  private readonly played = new WeakMap<CurriculumTaskFamily, Map<number, SupervisedRow>>();
  /** Episodes that failed in the environment (a container that did not start) since the last one that did not. */
  private environmentFailures = 0;

  constructor(
    families: CurriculumTaskFamily[],
    private readonly tokenizer: ChatTokenizer,
    private readonly options: {
      difficulties: number[];
      taskDifficulties: Record<string, number[]>;
      curriculum: "uniform" | "progressive";
      maxSequenceTokens: number;
      promptLossWeight: number;
      seed: number;
      taskWeights: Record<string, number>;
      /** Where a failed episode's one line goes (default `console.log`). */
      log?: (line: string) => void;
    },
    private readonly worlds?: TrainingWorlds,
  ) {
    this.random = new Rng(options.seed + 7919);
    this.turn = families.flatMap((family) =>
      Array<CurriculumTaskFamily>(options.taskWeights[family.name] ?? 1).fill(family),
    );
  }

  /**
   * `count` rows at training progress `progress` ∈ [0, 1]. The episodes of a batch are played
   * at once (Docker families spend most of an episode waiting for a container), in the order
   * drawn; a failed or too long one is replaced by a new draw.
   */
  async batch(count: number, progress: number): Promise<SupervisedRow[]> {
    const rows: SupervisedRow[] = [];
    let failures = 0;
    while (rows.length < count) {
      const draws: Array<Promise<SupervisedRow | undefined>> = [];
      for (let k = rows.length; k < count; k++) {
        const home = this.turn[this.next++ % this.turn.length];
        const open = openDifficulties(
          this.options.taskDifficulties[home.name] ?? this.options.difficulties,
          this.options.curriculum,
          progress,
        );
        const difficulty = open[this.random.nextInt(open.length)];
        const worlds = this.worlds?.countOf(home.name) ?? 1;
        if (!this.worlds || worlds === 1) {
          // One world: the draws of the stream the shipped recipe was made with.
          const indices = home.indicesAt("train", difficulty);
          draws.push(
            indices.length
              ? this.row(home, indices[this.random.nextInt(indices.length)])
              : Promise.resolve(undefined),
          );
          continue;
        }
        const world = this.random.nextInt(worlds);
        const pick = this.random.next();
        draws.push(
          this.worlds.family(home, world).then((family) => {
            const indices = family.indicesAt("train", difficulty);
            return indices.length
              ? this.row(family, indices[Math.floor(pick * indices.length)])
              : undefined;
          }),
        );
      }
      for (const row of await Promise.all(draws)) {
        if (row && row.tokens.length <= this.options.maxSequenceTokens)
          rows.push(withPromptLoss(row, this.options.promptLossWeight));
        else if (++failures > 50 * count)
          throw new WarmStartError(
            `no expert episode fits in ${this.options.maxSequenceTokens} tokens; raise maxSequenceTokens`,
          );
      }
    }
    return rows;
  }

  /** The expert row of `family`'s sample `index`: played once, then kept (a failed episode is played again on its next draw). */
  private async row(
    family: CurriculumTaskFamily,
    index: number,
  ): Promise<SupervisedRow | undefined> {
    let rows = this.played.get(family);
    if (!rows) this.played.set(family, (rows = new Map()));
    const kept = rows.get(index);
    if (kept) return kept;
    let row: SupervisedRow | undefined;
    try {
      row = await expertRow(family, index, this.tokenizer);
    } catch (error) {
      // An environment fault (a container that did not start, a Docker engine under load) costs
      // one draw, not the stage: another sample is drawn in its place. Many in a row stop it.
      if (!(error instanceof EnvironmentError)) throw error;
      const message = error.message.split("\n")[0];
      if (++this.environmentFailures > MAX_ENVIRONMENT_FAILURES)
        throw new WarmStartError(
          `${this.environmentFailures} expert episodes in a row failed in the environment; the last: ${message}`,
        );
      (this.options.log ?? console.log)(
        `warm start: an expert episode of ${family.name} sample ${index} failed (${message}); drawing another`,
      );
      return undefined;
    }
    this.environmentFailures = 0;
    if (row) rows.set(index, row);
    return row;
  }
}
