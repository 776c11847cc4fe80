/**
 * Choosing KG instances by what they ask about: the type of a question's first topic entity
 * (a person, a film, a city, a university, …). The shipped warm start answers one-hop
 * questions about people and films far better than about places, organizations, teams,
 * schools and languages (docs/harness.md), so a run can train where it is weak:
 *
 *   const kg = (await createTaskFamily("kg", { seed: 1000 })) as kg.KgTaskFamily;
 *   const weak = indicesByTopicType(kg, "train", 0, { exclude: ["people.person", "film.film"] });
 *
 * The instances are the family's own (same indices, same questions): only the selection
 * differs, so a model trained on some and evaluated on others of the same selection is
 * compared with its starting point on exactly those.
 */
import type { Split } from "../types.js";
import type { EntityType } from "./schema.js";
import type { KgInstance } from "./instances.js";
import type { KnowledgeGraph } from "./world.js";

/** What `indicesByTopicType` needs of the family (`KgTaskFamily` has it). */
export interface KgInstanceSource {
  readonly world: KnowledgeGraph;
  indicesAt(split: Split, difficulty: number): number[];
  instance(index: number): KgInstance;
}

/** The type of instance `index`'s first topic entity. */
export function topicTypeOf(family: KgInstanceSource, index: number): EntityType {
  const instance = family.instance(index);
  return family.world.entities[instance.entities[0].entity].type;
}

/**
 * The indices of a split and difficulty whose first topic entity has one of the `include`d
 * types (default: any) and none of the `exclude`d ones, in the family's order.
 */
export function indicesByTopicType(
  family: KgInstanceSource,
  split: Split,
  difficulty: number,
  selection: { include?: readonly string[]; exclude?: readonly string[] },
): number[] {
  return family.indicesAt(split, difficulty).filter((index) => {
    const type = topicTypeOf(family, index);
    if (selection.include && !selection.include.includes(type)) return false;
    return !selection.exclude?.includes(type);
  });
}
