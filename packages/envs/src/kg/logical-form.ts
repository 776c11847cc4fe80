/**
 * Logical forms of questions (a subset of GrailQA's S-expressions), their execution on the
 * knowledge graph, their text form, and the English question they stand for.
 *
 *   (JOIN (R people.person.place_of_birth) m.0001a)   the birthplaces of entity m.0001a
 *   (AND <a> <b>)                                     the entities in both sets
 *   (COUNT <a>)                                       the number of entities in a set
 *   (ARGMAX <a> film.film.runtime)                    the members of a with the largest value
 */
import { AgentRLError } from "@agentrl/spec";
import { ATTRIBUTE_INFO, NUMBER_TYPE, RELATIONS, TYPE_NOUNS, type EntityType } from "./schema.js";
import type { KnowledgeGraph } from "./world.js";

export type LogicalForm =
  | { kind: "entity"; entity: number }
  /** The objects of `relation` from the entities of `from`. */
  | { kind: "join"; relation: string; from: LogicalForm }
  | { kind: "and"; left: LogicalForm; right: LogicalForm }
  | { kind: "count"; of: LogicalForm }
  | { kind: "argmax" | "argmin"; of: LogicalForm; attribute: string };

/** What a logical form denotes: a set of entities of one type, or a number. */
export type Denotation =
  | { kind: "entities"; type: string; members: number[] }
  | { kind: "number"; type: typeof NUMBER_TYPE; value: number };

export class LogicalFormError extends AgentRLError {}

/** The type of what `form` denotes (`type.int` for counts). */
export function typeOf(form: LogicalForm, world: KnowledgeGraph): string {
  switch (form.kind) {
    case "entity":
      return world.entities[form.entity].type;
    case "join":
      return relationSpec(form.relation).range;
    case "and":
      return typeOf(form.left, world);
    case "count":
      return NUMBER_TYPE;
    case "argmax":
    case "argmin":
      return typeOf(form.of, world);
  }
}

/** Executes `form` on `world` (entity sets come back sorted). */
export function execute(form: LogicalForm, world: KnowledgeGraph): Denotation {
  switch (form.kind) {
    case "entity":
      return { kind: "entities", type: world.entities[form.entity].type, members: [form.entity] };
    case "join":
      return {
        kind: "entities",
        type: relationSpec(form.relation).range,
        members: world.neighbors(entitiesOf(form.from, world), form.relation),
      };
    case "and": {
      const right = new Set(entitiesOf(form.right, world));
      return {
        kind: "entities",
        type: typeOf(form, world),
        members: entitiesOf(form.left, world).filter((entity) => right.has(entity)),
      };
    }
    case "count":
      return { kind: "number", type: NUMBER_TYPE, value: entitiesOf(form.of, world).length };
    case "argmax":
    case "argmin":
      return {
        kind: "entities",
        type: typeOf(form, world),
        members: world.extreme(
          entitiesOf(form.of, world),
          form.attribute,
          form.kind === "argmax" ? "max" : "min",
        ),
      };
  }
}

function entitiesOf(form: LogicalForm, world: KnowledgeGraph): number[] {
  const denotation = execute(form, world);
  if (denotation.kind !== "entities")
    throw new LogicalFormError("a count cannot be used as a set of entities");
  return denotation.members;
}

/** The answer as the original compares it: entity ids, or the number as a string. */
export function answerStrings(denotation: Denotation, world: KnowledgeGraph): string[] {
  if (denotation.kind === "number") return [String(denotation.value)];
  return denotation.members.map((entity) => world.entities[entity].id);
}

/** S-expression text of `form` (entities by id). */
export function toSExpression(form: LogicalForm, world: KnowledgeGraph): string {
  switch (form.kind) {
    case "entity":
      return world.entities[form.entity].id;
    case "join":
      return `(JOIN (R ${form.relation}) ${toSExpression(form.from, world)})`;
    case "and":
      return `(AND ${toSExpression(form.left, world)} ${toSExpression(form.right, world)})`;
    case "count":
      return `(COUNT ${toSExpression(form.of, world)})`;
    case "argmax":
      return `(ARGMAX ${toSExpression(form.of, world)} ${form.attribute})`;
    case "argmin":
      return `(ARGMIN ${toSExpression(form.of, world)} ${form.attribute})`;
  }
}

/** Topic entities of `form`, in order of first appearance. */
export function topicEntities(form: LogicalForm): number[] {
  const found: number[] = [];
  const visit = (node: LogicalForm): void => {
    switch (node.kind) {
      case "entity":
        if (!found.includes(node.entity)) found.push(node.entity);
        return;
      case "join":
        visit(node.from);
        return;
      case "and":
        visit(node.left);
        visit(node.right);
        return;
      default:
        visit(node.of);
    }
  };
  visit(form);
  return found;
}

/** Number of JOINs on the longest path from a topic entity to the answer. */
export function hopCount(form: LogicalForm): number {
  switch (form.kind) {
    case "entity":
      return 0;
    case "join":
      return 1 + hopCount(form.from);
    case "and":
      return Math.max(hopCount(form.left), hopCount(form.right));
    default:
      return hopCount(form.of);
  }
}

// ---------------------------------------------------------------------------------------
// English

/** The question `form` asks, e.g. "what are the films directed by Mara Ellison?" */
export function questionText(form: LogicalForm, world: KnowledgeGraph): string {
  switch (form.kind) {
    case "count":
      return `how many ${nounPhrase(form.of, world)} are there?`;
    case "argmax":
    case "argmin": {
      const info = ATTRIBUTE_INFO.get(form.attribute);
      if (!info) throw new LogicalFormError(`unknown attribute ${form.attribute}`);
      const word =
        info.kind === "date"
          ? form.kind === "argmax"
            ? "latest"
            : "earliest"
          : form.kind === "argmax"
            ? "largest"
            : "smallest";
      return `which of the ${nounPhrase(form.of, world)} has the ${word} ${info.label}?`;
    }
    case "entity":
      return `what is ${world.entities[form.entity].name}?`;
    default:
      return `what are the ${nounPhrase(form, world)}?`;
  }
}

/** A plural noun phrase for a set: "films directed by X and starring Y". */
function nounPhrase(form: LogicalForm, world: KnowledgeGraph): string {
  switch (form.kind) {
    case "entity":
      return world.entities[form.entity].name;
    case "join":
      return `${TYPE_NOUNS[relationSpec(form.relation).range]} ${filterPhrase(form, world)}`;
    case "and":
      return `${TYPE_NOUNS[typeOf(form, world) as EntityType]} ${filterPhrase(form.left, world)} and ${filterPhrase(form.right, world)}`;
    default:
      throw new LogicalFormError(`no noun phrase for ${form.kind}`);
  }
}

/** The part after the noun: "directed by X". */
function filterPhrase(form: LogicalForm, world: KnowledgeGraph): string {
  if (form.kind !== "join") throw new LogicalFormError(`no filter phrase for ${form.kind}`);
  const subject =
    form.from.kind === "entity"
      ? world.entities[form.from.entity].name
      : `the ${nounPhrase(form.from, world)}`;
  return relationSpec(form.relation).phrase.replace("{X}", subject);
}

function relationSpec(name: string) {
  const spec = RELATIONS.get(name);
  if (!spec) throw new LogicalFormError(`unknown relation ${name}`);
  return spec;
}
