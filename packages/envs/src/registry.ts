/**
 * The task families this package ships, created by name. Each family lives in its own
 * folder whose `index.ts` exports `createTaskFamily(options)`; they load lazily so that a
 * user of one family never pays for the others (Docker, generated worlds).
 */
import type { CurriculumTaskFamily, TaskFamilyOptions } from "./types.js";

export const TASK_NAMES = ["os", "db", "kg", "webshop", "alfworld"] as const;
export type TaskName = (typeof TASK_NAMES)[number];

export function isTaskName(name: string): name is TaskName {
  return (TASK_NAMES as readonly string[]).includes(name);
}

export async function createTaskFamily(
  name: string,
  options: TaskFamilyOptions = {},
): Promise<CurriculumTaskFamily> {
  switch (name) {
    case "os":
      return (await import("./os/index.js")).createTaskFamily(options);
    case "db":
      return (await import("./db/index.js")).createTaskFamily(options);
    case "kg":
      return (await import("./kg/index.js")).createTaskFamily(options);
    case "webshop":
      return (await import("./webshop/index.js")).createTaskFamily(options);
    case "alfworld":
      return (await import("./alfworld/index.js")).createTaskFamily(options);
    default:
      throw new Error(`unknown task family "${name}"; known: ${TASK_NAMES.join(", ")}`);
  }
}
