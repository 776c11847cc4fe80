/**
 * The function-call API every task family speaks (AgentRL / AgentBench FC).
 *
 * Spec types first: everything else in `@agentrl/envs` (the controller, the HTTP client,
 * the in-process client, the task families) is written against these.
 */

import { AgentRLError, type AssistantMessage, type Message, type ToolSpec } from "@agentrl/spec";

/**
 * The conversation types (OpenAI-style messages, tool calls, tool specs) are `@agentrl/spec`'s,
 * the same the policy's chat template takes; re-exported here as part of this package's API.
 */
export type { AssistantMessage, JsonSchema, Message, ToolCall, ToolSpec } from "@agentrl/spec";

/** The statuses of the original (`finish = status !== "running"`). */
export const SAMPLE_STATUSES = [
  "running",
  "completed",
  "agent context limit",
  "agent validation failed",
  "agent invalid action",
  "task limit reached",
  "task error",
  "cancelled",
  "unknown",
] as const;
export type SampleStatus = (typeof SAMPLE_STATUSES)[number];

export type Split = "train" | "test";

/** What `start` returns: the opening conversation and the tools the agent may call. */
export interface StartResult {
  messages: Message[];
  tools: ToolSpec[];
}

/** What one `interact` returns: only the NEW messages since the last call. */
export interface InteractResult {
  finish: boolean;
  /** The episode's reward so far (the last one given counts). */
  reward: number;
  status: SampleStatus;
  messages: Message[];
  /** Task-specific numbers, e.g. `{ f1: 0.5 }` for KG, `{ score: 0.8 }` for WebShop. */
  metrics: Record<string, number>;
}

/** A running episode of one task instance. */
export interface TaskSession {
  readonly start: StartResult;
  /** Takes one assistant message; always resolves (task faults become status `task error`). */
  interact(message: AssistantMessage): Promise<InteractResult>;
  /** Ends the session early (status `cancelled`) and frees its resources. Idempotent. */
  cancel(): Promise<void>;
}

/** A difficulty level, from 0 ("one correct tool call solves it") upward. */
export type Difficulty = number;

/** A task family: OS, DB, KG, WebShop, ALFWorld, or one of your own. */
export interface TaskFamily {
  readonly name: string;
  /** Sample indices of a split. Train and test never share an index. */
  indices(split: Split): number[];
  /** Starts a session on sample `index`. Resources are freed when the session finishes. */
  startSession(index: number): Promise<TaskSession>;
  /** Frees family-wide resources (containers, servers). */
  close?(): Promise<void>;
}

/** A scripted solver that plays a session through the same API (demos, tests, warm start). */
export interface Expert {
  /** Given the conversation so far and the tools, the next assistant message. */
  act(history: Message[], tools: ToolSpec[]): AssistantMessage | Promise<AssistantMessage>;
}

/** A task family that also ships an expert and a difficulty curriculum. */
export interface CurriculumTaskFamily extends TaskFamily {
  readonly difficulties: Difficulty[];
  /** Indices of a split at one difficulty; `[]` for a difficulty not in `difficulties` (every family alike). */
  indicesAt(split: Split, difficulty: Difficulty): number[];
  /** A fresh expert for sample `index`. */
  expert(index: number): Expert;
  /** An agent that answers sample `index` deliberately wrong (must score 0); for checks. */
  wrongExpert?(index: number): Expert;
  /**
   * The same family on world `seed` (other generated tasks, the same test split), sharing this
   * one's containers and servers; closing it ends only its own sessions. Families without it
   * open a world with `createTaskFamily(name, { seed })`.
   */
  atWorld?(seed: number): CurriculumTaskFamily;
}

/** Errors raised to callers of the environment API (never to the agent). */
export class EnvironmentError extends AgentRLError {}

/**
 * How a client (HTTP or in-process) drives sessions on a controller. The rollout engine
 * only depends on this.
 */
export interface EnvironmentClient {
  startSample(name: string, index: number): Promise<{ sessionId: string } & StartResult>;
  interact(sessionId: string, message: AssistantMessage): Promise<InteractResult>;
  cancel(sessionId: string): Promise<void>;
  getIndices(name: string, split?: Split): Promise<number[]>;
  close?(): Promise<void>;
}

/** Options every family's `createTaskFamily(options)` takes (the registry passes them through). */
export interface TaskFamilyOptions {
  /** Seed of the generated worlds and instances (same seed, same instances). Default 0. */
  seed?: number;
  /** Folder of the AgentBench data (OS, DB). Default `../shared/data/agentbench` when it exists. */
  dataDir?: string;
  /** Number of generated training instances per difficulty (generated families). */
  trainSize?: number;
  /** Number of generated test instances per difficulty (generated families). */
  testSize?: number;
  /** Family-specific settings (e.g. Docker options for OS and DB). */
  [key: string]: unknown;
}
