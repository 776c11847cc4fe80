/**
 * The task families this package ships: one descriptor each (name, factory, whether it needs a
 * Docker engine), and `openFamilies`, the one way the CLI and the trainer open several by
 * name. Each family lives in its own folder whose `index.ts` exports
 * `createTaskFamily(options)` and whose `reward.ts` grades an episode; they load lazily so that
 * a user of one family never pays for the others (Docker, generated worlds).
 */
import { AgentRLError } from "@agentrl/spec";
import type { CurriculumTaskFamily, TaskFamilyOptions } from "./types.js";

export const TASK_NAMES = ["os", "db", "kg", "webshop", "alfworld"] as const;
export type TaskName = (typeof TASK_NAMES)[number];

/** One shipped task family. */
export interface TaskFamilyDescriptor {
  name: TaskName;
  /** Its sessions run in Docker containers (left out of a run when no engine answers). */
  needsDocker: boolean;
  /** Creates the family (its folder's `createTaskFamily`, loaded on first use). */
  create(options: TaskFamilyOptions): Promise<CurriculumTaskFamily>;
}

/** A descriptor whose factory loads the family's folder on first use. */
function descriptor(
  name: TaskName,
  needsDocker: boolean,
  load: () => Promise<{
    createTaskFamily(options: TaskFamilyOptions): Promise<CurriculumTaskFamily>;
  }>,
): TaskFamilyDescriptor {
  return { name, needsDocker, create: async (options) => (await load()).createTaskFamily(options) };
}

/** Every shipped family, in the order of TASK_NAMES. */
export const TASK_FAMILIES: readonly TaskFamilyDescriptor[] = [
  descriptor("os", true, () => import("./os/index.js")),
  descriptor("db", true, () => import("./db/index.js")),
  descriptor("kg", false, () => import("./kg/index.js")),
  descriptor("webshop", false, () => import("./webshop/index.js")),
  descriptor("alfworld", false, () => import("./alfworld/index.js")),
];

/** Thrown for a task family name this package does not ship. */
export class UnknownTaskFamilyError extends AgentRLError {}

export function isTaskName(name: string): name is TaskName {
  return (TASK_NAMES as readonly string[]).includes(name);
}

/** The descriptor of a shipped family, or undefined. */
export function taskFamily(name: string): TaskFamilyDescriptor | undefined {
  return TASK_FAMILIES.find((family) => family.name === name);
}

/** Whether the shipped family `name` needs a Docker engine (false for any other name). */
export function needsDocker(name: string): boolean {
  return taskFamily(name)?.needsDocker ?? false;
}

/** Creates a shipped family by name; an unknown name is an UnknownTaskFamilyError listing the known ones. */
export async function createTaskFamily(
  name: string,
  options: TaskFamilyOptions = {},
): Promise<CurriculumTaskFamily> {
  const family = taskFamily(name);
  if (!family)
    throw new UnknownTaskFamilyError(
      `unknown task family "${name}"; known: ${TASK_NAMES.join(", ")}`,
    );
  return family.create(options);
}

/** Creates a family by name (the registry's `createTaskFamily`, or a caller's own families). */
export type TaskFamilyFactory = (
  name: string,
  options: TaskFamilyOptions,
) => Promise<CurriculumTaskFamily>;

/** The families that started, in the order asked, and the names that failed with their errors. */
export interface OpenedFamilies {
  families: CurriculumTaskFamily[];
  failures: { name: string; error: Error }[];
}

/**
 * Opens the families `names` at once, each with `options`. A family that fails to start does
 * not stop the others: the caller decides (skip it, or close the rest and fail).
 */
export async function openFamilies(
  names: readonly string[],
  options: TaskFamilyOptions = {},
  createFamily: TaskFamilyFactory = createTaskFamily,
): Promise<OpenedFamilies> {
  const settled = await Promise.allSettled(names.map((name) => createFamily(name, options)));
  const opened: OpenedFamilies = { families: [], failures: [] };
  settled.forEach((result, k) => {
    if (result.status === "fulfilled") opened.families.push(result.value);
    else
      opened.failures.push({
        name: names[k],
        error: result.reason instanceof Error ? result.reason : new Error(String(result.reason)),
      });
  });
  return opened;
}
