/**
 * Who owns a container: every container the runtime starts carries the labels `agentrl=1`,
 * `agentrl.run=<run id>`, `agentrl.host=<hostname>`, `agentrl.pid=<pid>` and
 * `agentrl.pidstart=<start time of that process, in clock ticks after boot>` (so a reused pid
 * is not taken for the owner). The reaper removes only containers whose owner is provably dead
 * on this host (`ownerIsDead`); at exit and on fatal signals each open runtime removes its own
 * (`removeAtExit`).
 */
import { readFileSync } from "node:fs";
import { hostname } from "node:os";

export const RUN_LABEL = "agentrl.run";
export const PID_LABEL = "agentrl.pid";
export const HOST_LABEL = "agentrl.host";
export const PID_START_LABEL = "agentrl.pidstart";
/** A host folder made for the container (e.g. a socket folder), deleted with its leftovers. */
export const HOST_DIR_LABEL = "agentrl.hostdir";

/** Something that removes its containers synchronously (a `DockerRuntime`). */
export interface RemovesAtExit {
  removeAllSync(): void;
}

const liveRuntimes = new Set<RemovesAtExit>();
let cleanupInstalled = false;

/**
 * At exit and on SIGINT / SIGTERM / SIGHUP, removes the containers of every open runtime (one
 * listener each for the whole process, not one per runtime: a run over many task worlds opens
 * dozens); a signal then does what it would have done (unless the program has its own handler).
 */
export function removeAtExit(runtime: RemovesAtExit): void {
  liveRuntimes.add(runtime);
  installProcessCleanup();
}

/** Stops removing `runtime`'s containers at exit (it has closed). */
export function forgetAtExit(runtime: RemovesAtExit): void {
  liveRuntimes.delete(runtime);
}

function installProcessCleanup(): void {
  if (cleanupInstalled) return;
  cleanupInstalled = true;
  process.once("exit", () => {
    for (const runtime of liveRuntimes) runtime.removeAllSync();
  });
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    const handler = () => {
      for (const runtime of liveRuntimes) runtime.removeAllSync();
      if (process.listenerCount(signal) === 1) {
        process.removeListener(signal, handler);
        process.kill(process.pid, signal);
      }
    };
    process.on(signal, handler);
  }
}

/**
 * Whether the labels name an owner process on this host that is gone: no such pid, or a pid
 * whose start time differs from the one recorded (the pid was reused).
 */
export function ownerIsDead(labels: Record<string, string>): boolean {
  if (labels[HOST_LABEL] !== undefined && labels[HOST_LABEL] !== hostname()) return false;
  const pid = Number(labels[PID_LABEL]);
  if (!Number.isInteger(pid) || pid <= 0) return false;
  if (!processAlive(pid)) return true;
  const recorded = labels[PID_START_LABEL];
  const current = processStartTime(pid);
  return recorded !== undefined && current !== undefined && recorded !== current;
}

/** Start time of a process in clock ticks after boot (/proc/<pid>/stat field 22), undefined off Linux. */
export function processStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name (which may hold spaces) start after the last ")".
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
