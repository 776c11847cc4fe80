/**
 * One KG episode: the seven tools over the generated knowledge graph with the original's
 * variable semantics, and the plain-text `Final Answer: #k` that ends it.
 *
 * Observations (as in AgentBench FC, `Observation: ` prefix kept):
 *   get_relations / get_attributes  Observation: [a.b.c, d.e.f]
 *   get_neighbors / intersection / argmax / argmin
 *                                   Observation: variable #2, which are instances of film.film
 *   count                           Observation: variable #3, which is a number
 *   any failure                     Error processing tool call: <reason>
 */
import { AgentRLError } from "@agentrl/spec";
import { FunctionCallSession, type Outcome, type ToolReply } from "../session.js";
import type { Message } from "../types.js";
import { answerStrings, type Denotation } from "./logical-form.js";
import type { KgInstance } from "./instances.js";
import { KG_TOOLS, NO_VALID_CALL_MESSAGE, instructions, questionMessage } from "./prompt.js";
import { exactMatch, f1Score } from "./reward.js";
import { NUMBER_TYPE, RELATIONS } from "./schema.js";
import type { KnowledgeGraph } from "./world.js";

/** A tool misuse; its message goes back to the agent, the episode goes on. */
export class KgToolError extends AgentRLError {}

/** What a tool argument resolved to. */
type Operand =
  { kind: "entity"; entity: number } | { kind: "variable"; id: number; value: Denotation };

export interface KgSessionOptions {
  /** Action budget (assistant turns). Default 15, as in the original. */
  maxTurns?: number;
  /** A solved example conversation shown between the instructions and the question. Default none. */
  example?: Message[];
}

const FINAL_ANSWER = /(?:Find|Final) Answer: #(\d+)/;

export class KgSession extends FunctionCallSession {
  /** The variables created so far; `#k` is `variables[k]`. */
  readonly variables: Denotation[] = [];

  constructor(
    readonly instance: KgInstance,
    private readonly world: KnowledgeGraph,
    options: KgSessionOptions = {},
  ) {
    const maxTurns = options.maxTurns ?? 15;
    super(
      {
        messages: [
          { role: "system", content: instructions(maxTurns) },
          ...(options.example ?? []),
          {
            role: "user",
            content: questionMessage(
              instance.question,
              instance.entities.map((entity) => entity.name),
            ),
          },
        ],
        tools: KG_TOOLS,
      },
      { maxTurns },
    );
  }

  protected override async callTool(
    name: string,
    args: Record<string, unknown>,
  ): Promise<ToolReply> {
    try {
      return { content: this.run(name, args) };
    } catch (error) {
      if (error instanceof KgToolError)
        return { content: `Error processing tool call: ${error.message}` };
      throw error;
    }
  }

  private run(name: string, args: Record<string, unknown>): string {
    switch (name) {
      case "get_relations": {
        const operand = this.resolve(args.variable, name);
        return `Observation: [${this.world.relationsOf(this.membersOf(operand)).join(", ")}]`;
      }
      case "get_neighbors": {
        const operand = this.resolve(args.variable, name);
        const relation = String(args.relation).trim();
        if (!this.world.relationsOf(this.membersOf(operand)).includes(relation)) {
          throw new KgToolError("get_neighbors: relation must be a relation of the variable");
        }
        return this.newVariable({
          kind: "entities",
          type: RELATIONS.get(relation)!.range,
          members: this.world.neighbors(this.membersOf(operand), relation),
        });
      }
      case "intersection": {
        const first = this.entitySet(this.resolve(args.variable1, name), name);
        const second = this.entitySet(this.resolve(args.variable2, name), name);
        if (first.type !== second.type)
          throw new KgToolError("intersection: two variables must have the same type");
        const inSecond = new Set(second.members);
        return this.newVariable({
          kind: "entities",
          type: first.type,
          members: first.members.filter((entity) => inSecond.has(entity)),
        });
      }
      case "get_attributes": {
        const set = this.entitySet(this.resolve(args.variable, name), name);
        return `Observation: [${this.world.attributesOf(set.members).join(", ")}]`;
      }
      case "argmax":
      case "argmin": {
        const set = this.entitySet(this.resolve(args.variable, name), name);
        const attribute = String(args.attribute).trim();
        if (!this.world.attributesOf(set.members).includes(attribute)) {
          throw new KgToolError(`${name}: attribute must be an attribute of the variable`);
        }
        const members = this.world.extreme(
          set.members,
          attribute,
          name === "argmax" ? "max" : "min",
        );
        return this.newVariable({ kind: "entities", type: set.type, members });
      }
      case "count": {
        const set = this.entitySet(this.resolve(args.variable, name), name);
        return this.newVariable({ kind: "number", type: NUMBER_TYPE, value: set.members.length });
      }
      default:
        throw new KgToolError(`${name} does not exist`);
    }
  }

  /** Stores a new variable and describes it the way the original does. */
  private newVariable(value: Denotation): string {
    this.variables.push(value);
    const id = this.variables.length - 1;
    return value.kind === "number"
      ? `Observation: variable #${id}, which is a number`
      : `Observation: variable #${id}, which are instances of ${value.type}`;
  }

  /** `#k`, a topic entity's name, or an entity id (`m.0...`). */
  private resolve(raw: unknown, tool: string): Operand {
    const text = String(raw)
      .trim()
      .replace(/^[Vv]ariable\s+/, "");
    if (text.startsWith("#")) {
      const id = Number(text.slice(1));
      if (!Number.isInteger(id) || id < 0 || id >= this.variables.length) {
        const known =
          this.variables.length === 0
            ? "there are no variables yet"
            : `the variables are #0 to #${this.variables.length - 1}`;
        throw new KgToolError(`${tool}: variable ${text} does not exist (${known})`);
      }
      return { kind: "variable", id, value: this.variables[id] };
    }
    const topic = this.instance.entities.find((entity) => entity.name === text);
    if (topic) return { kind: "entity", entity: topic.entity };
    const byId = /^[mf]\.\w+$/.test(text) ? this.world.entityById(text) : undefined;
    if (byId !== undefined) return { kind: "entity", entity: byId };
    throw new KgToolError(`${tool}: variable must be a variable or an entity`);
  }

  /** Entities of an operand (a count has none). */
  private membersOf(operand: Operand): number[] {
    if (operand.kind === "entity") return [operand.entity];
    return operand.value.kind === "entities" ? operand.value.members : [];
  }

  /** The operand as a set-of-entities variable, as intersection / argmax / count need. */
  private entitySet(operand: Operand, tool: string): { type: string; members: number[] } {
    if (operand.kind === "entity")
      throw new KgToolError(`${tool}: the argument must be a variable such as #0, not an entity`);
    if (operand.value.kind !== "entities")
      throw new KgToolError(`${tool}: variable #${operand.id} is a number, not a set of entities`);
    return operand.value;
  }

  /** A plain-text turn: `Final Answer: #k` ends the episode; anything else is a format error. */
  protected override async onText(
    content: string,
  ): Promise<{ content: string; outcome?: Outcome }> {
    const text = content.split("Observation:")[0].replaceAll("\\_", "_");
    const match = FINAL_ANSWER.exec(text);
    if (!match) return { content: NO_VALID_CALL_MESSAGE };
    const id = Number(match[1]);
    if (id >= this.variables.length) {
      return {
        content: `Invalid variable id #${id}: there are ${this.variables.length} variables.`,
        outcome: {
          reward: 0,
          status: "agent validation failed",
          metrics: { f1: 0, exact_match: 0 },
        },
      };
    }
    const predicted = answerStrings(this.variables[id], this.world);
    const correct = exactMatch(predicted, this.instance.answer);
    return {
      content: "Final answer received.",
      outcome: {
        reward: correct ? 1 : 0,
        status: "completed",
        metrics: { f1: f1Score(predicted, this.instance.answer), exact_match: correct ? 1 : 0 },
      },
    };
  }
}
