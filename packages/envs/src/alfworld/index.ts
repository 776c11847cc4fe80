/**
 * The ALFWorld task family, rebuilt on procedurally generated households of the ALFRED
 * domain (the original's ALFRED game files cannot be had here). See docs/tasks/alfworld.md.
 *
 *   const family = await createTaskFamily({ seed: 0 });
 *   const [index] = family.indicesAt("test", 2);
 *   const record = await playEpisode(family, index, family.expert(index));
 */
import { z } from "zod";
import type { TaskFamilyOptions } from "../types.js";
import {
  EnvironmentError,
  type CurriculumTaskFamily,
  type Expert,
  type Split,
  type TaskSession,
} from "../types.js";
import { AlfworldExpert, WrongExpert } from "./expert.js";
import {
  DIFFICULTIES,
  TEST_OFFSET,
  decodeIndex,
  encodeIndex,
  generateInstance,
  type Instance,
} from "./generate.js";
import { AlfworldSession, type AlfworldSessionOptions } from "./session.js";

export { AlfworldExpert, WrongExpert, planFor, seenNames } from "./expert.js";
export {
  DIFFICULTIES,
  DIFFICULTY_STRIDE,
  TASKS_AT_DIFFICULTY,
  TEST_OFFSET,
  canonicalForm,
  decodeIndex,
  encodeIndex,
  fingerprint,
  generateInstance,
  splitOfInstance,
  type DecodedIndex,
  type Instance,
} from "./generate.js";
export { MATCH_THRESHOLD, matchAction, sentenceBleu } from "./match.js";
export {
  AlfworldSession,
  INSTRUCTION,
  REPEAT_LIMIT,
  TAKE_ACTION_TOOL,
  openingMessages,
  repeatedTooOften,
  type AlfworldSessionOptions,
} from "./session.js";
export {
  NOTHING_HAPPENS,
  TASK_TYPES,
  World,
  type Goal,
  type TaskType,
  type WorldState,
} from "./world.js";

const optionsSchema = z.object({
  seed: z.number().int().nonnegative().default(0),
  trainSize: z.number().int().positive().max(TEST_OFFSET).default(5_000),
  testSize: z.number().int().positive().max(TEST_OFFSET).default(200),
  maxSteps: z.number().int().positive().default(20),
  showAvailableActions: z.boolean().default(true),
  maxOutputChars: z.number().int().positive().default(4_000),
});

/** The family's settings (all optional; defaults in brackets). */
export interface AlfworldOptions extends AlfworldSessionOptions {
  /** Seed of the generated households [0]. */
  seed?: number;
  /** Training instances per difficulty [5,000]; at most 500,000. */
  trainSize?: number;
  /** Test instances per difficulty [200]; at most 500,000. */
  testSize?: number;
}

export class AlfworldTaskFamily implements CurriculumTaskFamily {
  readonly name = "alfworld";
  readonly difficulties: number[] = [...DIFFICULTIES];
  private readonly settings: z.infer<typeof optionsSchema>;

  constructor(options: AlfworldOptions = {}) {
    const parsed = optionsSchema.safeParse(options);
    if (!parsed.success)
      throw new EnvironmentError(`alfworld: invalid options: ${parsed.error.message}`);
    this.settings = parsed.data;
  }

  /** Number of instances per difficulty in a split. */
  size(split: Split): number {
    return split === "train" ? this.settings.trainSize : this.settings.testSize;
  }

  indicesAt(split: Split, difficulty: number): number[] {
    if (!this.difficulties.includes(difficulty)) return [];
    return Array.from({ length: this.size(split) }, (_, k) => encodeIndex(split, difficulty, k));
  }

  indices(split: Split): number[] {
    return this.difficulties.flatMap((difficulty) => this.indicesAt(split, difficulty));
  }

  /** The generated instance behind an index (checked against the configured sizes). */
  instance(index: number): Instance {
    const { position, split } = decodeIndex(index);
    if (position >= this.size(split)) {
      throw new EnvironmentError(
        `alfworld: index ${index} is beyond the ${split} split (${this.size(split)} per difficulty)`,
      );
    }
    return generateInstance(this.settings.seed, index);
  }

  async startSession(index: number): Promise<TaskSession> {
    const { maxSteps, showAvailableActions, maxOutputChars } = this.settings;
    return new AlfworldSession(this.instance(index), {
      maxSteps,
      showAvailableActions,
      maxOutputChars,
    });
  }

  expert(index: number): Expert {
    return new AlfworldExpert(this.instance(index));
  }

  wrongExpert(index: number): Expert {
    return new WrongExpert(this.instance(index));
  }
}

export async function createTaskFamily(
  options: TaskFamilyOptions = {},
): Promise<CurriculumTaskFamily> {
  return new AlfworldTaskFamily(options as AlfworldOptions);
}
