/**
 * Task instances generated from their index: a logical form sampled on the world, its
 * question, its topic entities and its gold answer (the logical form executed).
 *
 * Index layout: `index = difficulty * 1_000_000 + (split === "test" ? 500_000 : 0) + k`,
 * with `0 <= k < trainSize` (or `testSize`). Each split only accepts logical forms whose hash
 * falls on its side (1 in 8 go to test), so a train and a test instance never coincide.
 *
 * Difficulties (tool calls of the shortest solution in brackets):
 *   0  one hop from a topic entity                                     [1]
 *   1  two hops                                                        [2]
 *   2  intersection of two one-hop sets [3], or a count of 1-2 hops    [2-3]
 *   3  argmax / argmin over 1-2 hops [2-3], or a chain of 3-4 hops     [3-4]
 */
import { AgentRLError } from "@agentrl/spec";
import type { Split } from "../types.js";
import {
  answerStrings,
  execute,
  questionText,
  toSExpression,
  topicEntities,
  type LogicalForm,
} from "./logical-form.js";
import { Random, hashString, mixSeeds } from "../random.js";
import { decodeInstanceIndex, encodeInstanceIndex } from "../instance-index.js";
import { RELATIONS } from "./schema.js";
import type { KnowledgeGraph } from "./world.js";

export const DIFFICULTIES = [0, 1, 2, 3] as const;
export { DIFFICULTY_STRIDE, TEST_OFFSET } from "../instance-index.js";
/** Largest gold answer set accepted (questions with huge answers are dropped, as in GrailQA). */
export const MAX_ANSWER_SIZE = 25;
/** Largest intermediate set in a chain. */
const MAX_INTERMEDIATE_SIZE = 150;
/** Largest set a count question counts. */
const MAX_COUNTED_SIZE = 60;
/** One logical form in `TEST_SHARE_DENOMINATOR` belongs to the test side. */
const TEST_SHARE_DENOMINATOR = 8;

export interface KgInstance {
  index: number;
  split: Split;
  difficulty: number;
  /** The question text, e.g. "what are the films directed by Mara Ellison?" */
  question: string;
  /** Topic entities, by name as the question shows them and by id. */
  entities: Array<{ name: string; id: string; entity: number }>;
  logicalForm: LogicalForm;
  /** S-expression of the logical form. */
  program: string;
  /** Gold answer: entity ids, or one number as a string (sorted). */
  answer: string[];
  /** Type of the answer (`type.int` for counts). */
  answerType: string;
}

export class InstanceIndexError extends AgentRLError {}

/** Index of the k-th instance of a split at a difficulty (the layout of ../instance-index.ts). */
export const encodeIndex: (difficulty: number, split: Split, k: number) => number =
  encodeInstanceIndex;

/** Splits an index into its parts; throws `InstanceIndexError` for a negative or fractional index. */
export function decodeIndex(index: number): { difficulty: number; split: Split; k: number } {
  if (!Number.isInteger(index) || index < 0)
    throw new InstanceIndexError(`invalid KG index ${index}`);
  const { difficulty, split, position } = decodeInstanceIndex(index);
  return { difficulty, split, k: position };
}

/** Which split a logical form belongs to (by a hash of its text and the seed). */
export function splitOfProgram(program: string, seed: number): Split {
  return mixSeeds(hashString(program), seed) % TEST_SHARE_DENOMINATOR === 0 ? "test" : "train";
}

/** Generates instance `index` of the world. Deterministic in (world seed, index). */
export function generateInstance(world: KnowledgeGraph, seed: number, index: number): KgInstance {
  const { difficulty, split } = decodeIndex(index);
  if (!(DIFFICULTIES as readonly number[]).includes(difficulty))
    throw new InstanceIndexError(`KG index ${index} has unknown difficulty ${difficulty}`);
  const random = new Random(mixSeeds(seed, index));
  for (let attempt = 0; attempt < 5000; attempt++) {
    const form = sampleForm(world, random, difficulty);
    if (!form) continue;
    const program = toSExpression(form, world);
    if (splitOfProgram(program, seed) !== split) continue;
    const denotation = execute(form, world);
    return {
      index,
      split,
      difficulty,
      question: questionText(form, world),
      entities: topicEntities(form).map((entity) => ({
        name: world.entities[entity].name,
        id: world.entities[entity].id,
        entity,
      })),
      logicalForm: form,
      program,
      answer: answerStrings(denotation, world).sort(),
      answerType: denotation.type,
    };
  }
  throw new InstanceIndexError(`could not generate KG instance ${index} (world too small?)`);
}

/** One candidate logical form of `difficulty`, or undefined when the draw was rejected. */
function sampleForm(
  world: KnowledgeGraph,
  random: Random,
  difficulty: number,
): LogicalForm | undefined {
  switch (difficulty) {
    case 0:
      return sampleChain(world, random, 1);
    case 1:
      return sampleChain(world, random, 2);
    case 2:
      return random.chance(0.5) ? sampleIntersection(world, random) : sampleCount(world, random);
    default: {
      const draw = random.next();
      if (draw < 0.6) return sampleSuperlative(world, random);
      return sampleChain(world, random, draw < 0.85 ? 3 : 4);
    }
  }
}

/**
 * A random topic entity: a type first, with weight sqrt(number of its entities) so that
 * small vocabularies (genres, sports) appear without dominating, then an entity of it.
 */
function randomTopic(world: KnowledgeGraph, random: Random): number {
  const types = world.entityTypes();
  const weights = types.map((type) => Math.sqrt(world.entitiesOfType(type).length));
  return random.pick(world.entitiesOfType(random.weighted(types, weights)));
}

/**
 * A chain of `hops` JOINs from a random topic entity, never stepping straight back along
 * the relation it came by; undefined when sets get empty or too big.
 */
function sampleChain(
  world: KnowledgeGraph,
  random: Random,
  hops: number,
  maxFinal = MAX_ANSWER_SIZE,
): LogicalForm | undefined {
  const topic = randomTopic(world, random);
  let form: LogicalForm = { kind: "entity", entity: topic };
  let members = [topic];
  let previous: string | undefined;
  for (let hop = 0; hop < hops; hop++) {
    const back = previous ? RELATIONS.get(previous)?.reverse : undefined;
    const choices = world.relationsOf(members).filter((relation) => relation !== back);
    if (choices.length === 0) return undefined;
    const relation = random.pick(choices);
    members = world.neighbors(members, relation);
    const limit = hop === hops - 1 ? maxFinal : MAX_INTERMEDIATE_SIZE;
    if (members.length === 0 || members.length > limit) return undefined;
    form = { kind: "join", relation, from: form };
    previous = relation;
  }
  return form;
}

/** Entities that both of two one-hop sets hold, and neither set alone. */
function sampleIntersection(world: KnowledgeGraph, random: Random): LogicalForm | undefined {
  const target = randomTopic(world, random);
  // Every (reverse relation, entity) pair whose one-hop set contains the target.
  const branches: Array<{ relation: string; entity: number }> = [];
  for (const relation of world.relationsOf([target])) {
    const reverse = RELATIONS.get(relation)!.reverse;
    for (const entity of world.objects(target, relation))
      branches.push({ relation: reverse, entity });
  }
  if (branches.length < 2) return undefined;
  const [first, second] = random.sample(branches, 2);
  if (first.entity === second.entity) return undefined;
  const left: LogicalForm = {
    kind: "join",
    relation: first.relation,
    from: { kind: "entity", entity: first.entity },
  };
  const right: LogicalForm = {
    kind: "join",
    relation: second.relation,
    from: { kind: "entity", entity: second.entity },
  };
  const leftMembers = world.neighbors([first.entity], first.relation);
  const rightMembers = new Set(world.neighbors([second.entity], second.relation));
  const both = leftMembers.filter((entity) => rightMembers.has(entity));
  if (
    both.length > MAX_ANSWER_SIZE ||
    both.length >= leftMembers.length ||
    both.length >= rightMembers.size
  )
    return undefined;
  return { kind: "and", left, right };
}

/** How many entities a chain of 1-2 hops reaches. */
function sampleCount(world: KnowledgeGraph, random: Random): LogicalForm | undefined {
  const chain = sampleChain(world, random, random.chance(0.5) ? 1 : 2, MAX_COUNTED_SIZE);
  if (!chain) return undefined;
  const counted = execute(chain, world);
  // A count of one is a lookup in disguise: ask only for sets of two or more.
  if (counted.kind !== "entities" || counted.members.length < 2) return undefined;
  return { kind: "count", of: chain };
}

/** The member of a 1-2 hop set with the largest / smallest attribute (a unique winner). */
function sampleSuperlative(world: KnowledgeGraph, random: Random): LogicalForm | undefined {
  const chain = sampleChain(world, random, random.chance(0.6) ? 1 : 2, MAX_INTERMEDIATE_SIZE);
  if (!chain) return undefined;
  const members = execute(chain, world);
  if (members.kind !== "entities") return undefined;
  const attributes = world.attributesOf(members.members);
  if (attributes.length === 0) return undefined;
  const attribute = random.pick(attributes);
  const valued = members.members.filter((entity) => world.value(entity, attribute) !== undefined);
  if (valued.length < 2) return undefined;
  const kind = random.chance(0.5) ? "argmax" : "argmin";
  if (world.extreme(valued, attribute, kind === "argmax" ? "max" : "min").length !== 1)
    return undefined;
  return { kind, of: chain, attribute };
}

// ---------------------------------------------------------------------------------------
// The plan: the tool calls that solve an instance

/** An argument of a planned call: a topic entity by name, or the variable of an earlier step. */
export type PlanArgument = { entity: string } | { step: number } | { text: string };

export interface PlanStep {
  tool:
    | "get_relations"
    | "get_neighbors"
    | "intersection"
    | "get_attributes"
    | "argmax"
    | "argmin"
    | "count";
  arguments: Record<string, PlanArgument>;
  /** True when the call creates a new variable. */
  createsVariable: boolean;
}

/**
 * The tool calls that execute `form` step by step. With `explore`, each get_neighbors is
 * preceded by get_relations and each argmax / argmin by get_attributes, as in the original's
 * one-shot example.
 */
export function planFor(form: LogicalForm, world: KnowledgeGraph, explore = false): PlanStep[] {
  const steps: PlanStep[] = [];
  const emit = (node: LogicalForm): PlanArgument => {
    switch (node.kind) {
      case "entity":
        return { entity: world.entities[node.entity].name };
      case "join": {
        const from = emit(node.from);
        if (explore)
          steps.push({
            tool: "get_relations",
            arguments: { variable: from },
            createsVariable: false,
          });
        steps.push({
          tool: "get_neighbors",
          arguments: { variable: from, relation: { text: node.relation } },
          createsVariable: true,
        });
        return { step: steps.length - 1 };
      }
      case "and": {
        const left = emit(node.left);
        const right = emit(node.right);
        steps.push({
          tool: "intersection",
          arguments: { variable1: left, variable2: right },
          createsVariable: true,
        });
        return { step: steps.length - 1 };
      }
      case "count": {
        const of = emit(node.of);
        steps.push({ tool: "count", arguments: { variable: of }, createsVariable: true });
        return { step: steps.length - 1 };
      }
      case "argmax":
      case "argmin": {
        const of = emit(node.of);
        if (explore)
          steps.push({
            tool: "get_attributes",
            arguments: { variable: of },
            createsVariable: false,
          });
        steps.push({
          tool: node.kind,
          arguments: { variable: of, attribute: { text: node.attribute } },
          createsVariable: true,
        });
        return { step: steps.length - 1 };
      }
    }
  };
  emit(form);
  return steps;
}
