/**
 * The KG task family: AgentBench's knowledge-graph QA rebuilt on a generated world (Freebase
 * is not available here). Questions come from logical forms of 1 to 4 hops with
 * intersections, counts and superlatives; the agent answers through the original's seven
 * tools and ends with the plain text `Final Answer: #k`. Reward: exact set match (1/0),
 * with F1 as the `f1` metric. See docs/tasks/kg.md.
 */
import { z } from "zod";
import type { TaskFamilyOptions } from "../types.js";
import {
  EnvironmentError,
  type CurriculumTaskFamily,
  type Expert,
  type Message,
  type Split,
  type TaskSession,
} from "../types.js";
import { planExpert, wrongPlanExpert } from "./expert.js";
import {
  DIFFICULTIES,
  decodeIndex,
  encodeIndex,
  generateInstance,
  planFor,
  TEST_OFFSET,
  type KgInstance,
} from "./instances.js";
import { KgSession } from "./session.js";
import { DEFAULT_WORLD_SIZES, generateWorld, type KnowledgeGraph } from "./world.js";

export { KgSession, KgToolError } from "./session.js";
export { exactMatch, f1Score } from "./reward.js";
export {
  generateWorld,
  KnowledgeGraph,
  DEFAULT_WORLD_SIZES,
  type Entity,
  type WorldSizes,
} from "./world.js";
export {
  generateInstance,
  planFor,
  encodeIndex,
  decodeIndex,
  splitOfProgram,
  DIFFICULTIES,
  type KgInstance,
  type PlanStep,
} from "./instances.js";
export {
  execute,
  questionText,
  toSExpression,
  type LogicalForm,
  type Denotation,
} from "./logical-form.js";
export { KG_TOOLS, instructions, questionMessage } from "./prompt.js";
export { planExpert, wrongPlanExpert } from "./expert.js";
export { indicesByTopicType, topicTypeOf, type KgInstanceSource } from "./topics.js";

const optionsSchema = z.looseObject({
  /** Seed of the world and the instances. Default 0. */
  seed: z.number().int().default(0),
  /** Training instances per difficulty. Default 5,000. */
  trainSize: z.number().int().min(0).max(TEST_OFFSET).default(5_000),
  /** Test instances per difficulty. Default 200. */
  testSize: z.number().int().min(0).max(TEST_OFFSET).default(200),
  /** Action budget per episode. Default 15, as in the original. */
  maxTurns: z.number().int().min(1).default(15),
  /** The expert calls get_relations / get_attributes before each hop / superlative. Default false. */
  expertExplores: z.boolean().default(false),
  /** Show one solved example (an intersection question of the train side) before the question, like the original's `one_shot`. Default false. */
  oneShot: z.boolean().default(false),
});

export type KgOptions = z.infer<typeof optionsSchema>;

/** The KG family with its world and instance cache; what `createTaskFamily` returns. */
export class KgTaskFamily implements CurriculumTaskFamily {
  readonly name = "kg";
  readonly difficulties: number[] = [...DIFFICULTIES];
  readonly world: KnowledgeGraph;
  private readonly cache = new Map<number, KgInstance>();
  private example: Message[] | undefined;

  constructor(readonly options: KgOptions) {
    this.world = generateWorld(options.seed, DEFAULT_WORLD_SIZES);
  }

  indicesAt(split: Split, difficulty: number): number[] {
    if (!this.difficulties.includes(difficulty)) return [];
    const size = split === "train" ? this.options.trainSize : this.options.testSize;
    return Array.from({ length: size }, (_, k) => encodeIndex(difficulty, split, k));
  }

  indices(split: Split): number[] {
    return this.difficulties.flatMap((difficulty) => this.indicesAt(split, difficulty));
  }

  /** Instance `index` (generated on first use, then cached). Throws EnvironmentError for unknown indices. */
  instance(index: number): KgInstance {
    const cached = this.cache.get(index);
    if (cached) return cached;
    let decoded: ReturnType<typeof decodeIndex>;
    try {
      decoded = decodeIndex(index);
    } catch (error) {
      throw new EnvironmentError((error as Error).message);
    }
    const size = decoded.split === "train" ? this.options.trainSize : this.options.testSize;
    if (!this.difficulties.includes(decoded.difficulty) || decoded.k >= size) {
      throw new EnvironmentError(
        `kg has no sample ${index} (difficulties ${this.difficulties.join(", ")}; ${this.options.trainSize} train and ${this.options.testSize} test per difficulty)`,
      );
    }
    const instance = generateInstance(this.world, this.options.seed, index);
    if (this.cache.size >= 50_000) this.cache.clear();
    this.cache.set(index, instance);
    return instance;
  }

  async startSession(index: number): Promise<TaskSession> {
    const instance = this.instance(index);
    const example = this.options.oneShot ? await this.oneShotExample() : undefined;
    return new KgSession(instance, this.world, { maxTurns: this.options.maxTurns, example });
  }

  /**
   * The one-shot example: the first train-side intersection question of difficulty 2, solved
   * by the exploring expert (question, calls, observations, final answer).
   */
  private async oneShotExample(): Promise<Message[]> {
    if (this.example) return this.example;
    for (let k = 0; k < 1000; k++) {
      const instance = generateInstance(this.world, this.options.seed, encodeIndex(2, "train", k));
      if (instance.logicalForm.kind !== "and") continue;
      const session = new KgSession(instance, this.world, { maxTurns: this.options.maxTurns });
      const messages = [...session.start.messages];
      const expert = planExpert(planFor(instance.logicalForm, this.world, true));
      for (let turn = 0; turn < this.options.maxTurns && !session.finished; turn++) {
        const action = await expert.act(messages, session.start.tools);
        messages.push(action);
        if (action.tool_calls === undefined) break;
        messages.push(...(await session.interact(action)).messages);
      }
      this.example = messages.slice(1);
      return this.example;
    }
    throw new EnvironmentError("kg: found no intersection question for the one-shot example");
  }

  expert(index: number): Expert {
    return planExpert(
      planFor(this.instance(index).logicalForm, this.world, this.options.expertExplores),
    );
  }

  wrongExpert(index: number): Expert {
    return wrongPlanExpert(
      planFor(this.instance(index).logicalForm, this.world, this.options.expertExplores),
    );
  }
}

/** Builds the KG family (the world is generated once, instances on demand). */
export async function createTaskFamily(
  options: TaskFamilyOptions = {},
): Promise<CurriculumTaskFamily> {
  const parsed = optionsSchema.safeParse(options);
  if (!parsed.success) throw new EnvironmentError(`invalid kg options: ${parsed.error.message}`);
  return new KgTaskFamily(parsed.data);
}
