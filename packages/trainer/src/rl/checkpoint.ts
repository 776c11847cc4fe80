/**
 * Checkpoints that survive a crash at any instant.
 *
 * A checkpoint is a folder `<root>/step-<000123>/` written in full under a temporary name
 * (`.step-<000123>.tmp-<pid>`), flushed, then renamed into place: a rename is atomic, so a
 * reader sees either the previous set of checkpoints or the new complete one, never a
 * half-written folder. Leftover temporary folders of a crashed write are removed at the
 * next write. Old checkpoints are pruned to `keep`.
 *
 * Model folders a run makes for itself (its initial model, its warm-start model) are written
 * the same way (`writeModelFolder`): filled under a temporary name, a completion marker
 * written last, renamed into place; `isCompleteModelFolder` accepts only folders with the
 * marker, so a run killed while writing one makes it again instead of loading half a model.
 */
import { mkdir, readdir, rename, rm, writeFile, readFile, open } from "node:fs/promises";
import { existsSync } from "node:fs";
import { basename, dirname, join } from "node:path";

const PREFIX = "step-";
const MANIFEST = "checkpoint.json";

export interface CheckpointManifest {
  step: number;
  /** ISO time of the write. */
  writtenAt: string;
  /** Files of the checkpoint (relative), for a quick integrity check on load. */
  files: string[];
}

export function checkpointName(step: number): string {
  return `${PREFIX}${String(step).padStart(6, "0")}`;
}

/** Writes a file and flushes it to disk before returning. */
export async function writeFileDurably(path: string, data: string | Uint8Array): Promise<void> {
  const handle = await open(path, "w");
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function syncDirectory(path: string): Promise<void> {
  const handle = await open(path, "r");
  try {
    await handle.sync();
  } catch {
    // Some file systems refuse fsync on a directory; the rename is still atomic.
  } finally {
    await handle.close();
  }
}

/**
 * Writes checkpoint `step` under `root`: `write(folder)` fills a temporary folder, which is
 * then made durable and renamed into place. Returns the final folder.
 */
export async function writeCheckpoint(
  root: string,
  step: number,
  write: (folder: string) => Promise<void>,
  options: { keep?: number } = {},
): Promise<string> {
  await mkdir(root, { recursive: true });
  await removeTemporaryFolders(root);
  const final = join(root, checkpointName(step));
  const temporary = join(root, `.${checkpointName(step)}.tmp-${process.pid}`);
  await rm(temporary, { recursive: true, force: true });
  await mkdir(temporary, { recursive: true });
  await write(temporary);
  const files = (await readdir(temporary, { recursive: true, withFileTypes: true }))
    .filter((entry) => entry.isFile())
    .map((entry) =>
      join(entry.parentPath ?? (entry as unknown as { path: string }).path, entry.name).slice(
        temporary.length + 1,
      ),
    )
    .sort();
  for (const file of files) await syncFile(join(temporary, file));
  const manifest: CheckpointManifest = { step, writtenAt: new Date().toISOString(), files };
  await writeFileDurably(join(temporary, MANIFEST), JSON.stringify(manifest, null, 2));
  await syncDirectory(temporary);
  if (existsSync(final)) await rm(final, { recursive: true, force: true });
  await rename(temporary, final);
  await syncDirectory(root);
  if (options.keep !== undefined) await pruneCheckpoints(root, options.keep);
  return final;
}

async function syncFile(path: string): Promise<void> {
  const handle = await open(path, "r+");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function removeTemporaryFolders(root: string): Promise<void> {
  for (const name of await readdir(root)) {
    if (name.startsWith(`.${PREFIX}`) && name.includes(".tmp-"))
      await rm(join(root, name), { recursive: true, force: true });
  }
}

/** Complete checkpoints under `root`, oldest first. */
export async function listCheckpoints(root: string): Promise<{ step: number; folder: string }[]> {
  if (!existsSync(root)) return [];
  const found: { step: number; folder: string }[] = [];
  for (const name of await readdir(root)) {
    const match = /^step-(\d+)$/.exec(name);
    if (!match) continue;
    const folder = join(root, name);
    if (!existsSync(join(folder, MANIFEST))) continue;
    found.push({ step: Number(match[1]), folder });
  }
  return found.sort((a, b) => a.step - b.step);
}

/** The newest complete checkpoint, or undefined. */
export async function latestCheckpoint(
  root: string,
): Promise<{ step: number; folder: string; manifest: CheckpointManifest } | undefined> {
  const all = await listCheckpoints(root);
  for (let i = all.length - 1; i >= 0; i--) {
    try {
      const manifest = JSON.parse(
        await readFile(join(all[i].folder, MANIFEST), "utf8"),
      ) as CheckpointManifest;
      if (manifest.files.every((file) => existsSync(join(all[i].folder, file))))
        return { ...all[i], manifest };
    } catch {
      // An unreadable manifest: fall back to the previous checkpoint.
    }
  }
  return undefined;
}

/** Removes all but the newest `keep` checkpoints. */
export async function pruneCheckpoints(root: string, keep: number): Promise<void> {
  const all = await listCheckpoints(root);
  for (const { folder } of all.slice(0, Math.max(0, all.length - Math.max(1, keep)))) {
    await rm(folder, { recursive: true, force: true });
  }
}

/** The file written last into a complete model folder (`writeModelFolder`). */
export const COMPLETE_MARKER = ".agentrl-complete";

/** Whether `directory` is a model folder written in full by `writeModelFolder` (its marker exists). */
export function isCompleteModelFolder(directory: string): boolean {
  return existsSync(join(directory, "config.json")) && existsSync(join(directory, COMPLETE_MARKER));
}

/**
 * Writes a model folder atomically: `write(temporary)` fills `<directory>.tmp-<pid>`; its files
 * are flushed, the marker is written last, and the folder is renamed to `directory` (an
 * incomplete folder there, from a killed write, is replaced).
 */
export async function writeModelFolder(
  directory: string,
  write: (folder: string) => Promise<void>,
): Promise<void> {
  const temporary = `${directory}.tmp-${process.pid}`;
  // Temporary folders of earlier writes that were killed.
  const parent = dirname(directory);
  await mkdir(parent, { recursive: true });
  for (const name of await readdir(parent)) {
    if (name.startsWith(`${basename(directory)}.tmp-`))
      await rm(join(parent, name), { recursive: true, force: true });
  }
  await mkdir(temporary, { recursive: true });
  await write(temporary);
  const files = (await readdir(temporary, { recursive: true, withFileTypes: true })).filter(
    (entry) => entry.isFile(),
  );
  for (const entry of files)
    await syncFile(
      join(entry.parentPath ?? (entry as unknown as { path: string }).path, entry.name),
    );
  await writeFileDurably(join(temporary, COMPLETE_MARKER), new Date().toISOString());
  await syncDirectory(temporary);
  await rm(directory, { recursive: true, force: true });
  await rename(temporary, directory);
}

/**
 * Drops the lines of a metrics file (JSON lines with a `step`) after `step`, and a torn last
 * line: on resume from the checkpoint of `step`, the steps after it are run (and logged) again.
 */
export async function trimMetrics(path: string, step: number): Promise<void> {
  if (!existsSync(path)) return;
  const kept: string[] = [];
  for (const line of (await readFile(path, "utf8")).split("\n")) {
    if (!line.trim()) continue;
    try {
      const record = JSON.parse(line) as { step?: unknown };
      if (typeof record.step !== "number" || record.step <= step) kept.push(line);
    } catch {
      // A line torn by the kill.
    }
  }
  const temporary = `${path}.tmp-${process.pid}`;
  await writeFileDurably(temporary, kept.map((line) => `${line}\n`).join(""));
  await rename(temporary, path);
}

/** Writes a JSON file durably (for small state files inside a checkpoint). */
export async function writeJson(path: string, value: unknown): Promise<void> {
  await writeFile(path, JSON.stringify(value, null, 2));
}
