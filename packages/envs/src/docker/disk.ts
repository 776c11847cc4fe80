/**
 * Disk limits of a container: a capped writable layer when the engine supports one, else a
 * read-only root with tmpfs folders filled with the image's content.
 */
import { chmodSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, posix } from "node:path";
import type Docker from "dockerode";
import { ContainerError } from "./errors.js";

/**
 * A hard limit on the bytes a container may write, in one of two forms:
 * - `writable-layer`: the engine caps the container's writable layer (`--storage-opt size`);
 *   the whole root stays writable. Needs overlay2 on xfs mounted with `pquota`.
 * - `read-only-root`: the root filesystem is read-only, and each folder in `writable` is a
 *   tmpfs of `bytes` (held in the container's memory, so also bounded by its memory limit),
 *   filled at start with the image's content of that folder.
 * `auto` (default) takes `writable-layer` when the engine supports it, else `read-only-root`.
 * Never unlimited: a form the engine refuses fails the start (`ContainerError`).
 */
export interface DiskLimit {
  bytes: number;
  mode?: "auto" | "writable-layer" | "read-only-root";
  /** Writable folders under a read-only root. Default `WRITABLE_FOLDERS`. */
  writable?: string[];
}

/**
 * Folders writable under a read-only root: where AgentBench OS tasks and their agents write
 * (home folders, /etc for users and config, /var for logs and web roots, /tmp, /usr/local/bin
 * for scripts). Writes elsewhere (/usr, /lib, a new top-level folder) fail with EROFS.
 */
export const WRITABLE_FOLDERS = [
  "/etc",
  "/var",
  "/var/tmp",
  "/tmp",
  "/run",
  "/root",
  "/home",
  "/opt",
  "/srv",
  "/mnt",
  "/media",
  "/usr/local",
];
/** Files Docker itself mounts into /etc: never overwritten by the folder's content. */
export const ENGINE_FILES = ["etc/hostname", "etc/hosts", "etc/resolv.conf"];

/** Engine settings of a disk limit. */
export interface DiskSettings {
  readOnlyRoot: boolean;
  tmpfs?: Record<string, string>;
  storageOpt?: Record<string, string>;
  /** Content to extract into the tmpfs folders once the container runs. */
  seed?: FolderArchive[];
  /**
   * A host folder holding the seed's archives as files (`0.tar`, `1.tar`, ... in the order of
   * `seed`), made once per image for a local engine: mounted read-only into each container, its
   * tar reads them there instead of receiving 7.6 MB through the container's command stream.
   */
  seedFolder?: string;
}

/** Where a container sees `DiskSettings.seedFolder` (read-only; a hidden entry of the tmpfs /run). */
export const SEED_MOUNT = "/run/.agentrl-seed";

/** Turns a `DiskLimit` into engine settings, remembering what the engine supports and each image's folders. */
export class DiskLimits {
  private layerLimits: Promise<boolean> | undefined;
  private readonly seeds = new Map<string, Promise<FolderArchive[]>>();
  private readonly seedFolders = new Map<string, string>();
  /** False once the engine refused a seed folder's mount (an engine on another host): seeds travel through the command stream. */
  seedFoldersWork = true;

  constructor(
    private readonly docker: Docker,
    private readonly labels: () => Record<string, string>,
  ) {}

  /**
   * Bytes the engine counts in a new container's layer before it writes anything: btrfs
   * limits a container's subvolume by all it references, the image's files included, so the
   * image's size is added to the budget; overlay2 (xfs project quotas) counts the upper layer
   * alone (0).
   */
  private async layerBase(image: string): Promise<number> {
    this.driver ??= this.docker.info().then((info: { Driver?: string }) => info.Driver ?? "");
    if ((await this.driver) !== "btrfs") return 0;
    return (await this.docker.getImage(image).inspect()).Size;
  }

  private driver: Promise<string> | undefined;

  /** Whether a container of `image` with `limit` gets a capped writable layer (a writable root), not the read-only root. */
  async writableRoot(image: string, limit: DiskLimit): Promise<boolean> {
    if ((limit.mode ?? "auto") === "read-only-root") return false;
    this.layerLimits ??= supportsLayerLimit(this.docker, image, this.labels());
    return this.layerLimits;
  }

  /** Engine settings of a disk limit; throws `ContainerError` for a form the engine cannot enforce. */
  async settings(image: string, limit: DiskLimit): Promise<DiskSettings> {
    if (!(Number.isSafeInteger(limit.bytes) && limit.bytes > 0))
      throw new ContainerError(`disk limit must be a positive number of bytes, got ${limit.bytes}`);
    const mode = limit.mode ?? "auto";
    if (mode !== "read-only-root") {
      this.layerLimits ??= supportsLayerLimit(this.docker, image, this.labels());
      if (await this.layerLimits)
        return {
          readOnlyRoot: false,
          storageOpt: { size: String(limit.bytes + (await this.layerBase(image))) },
        };
      if (mode === "writable-layer") {
        throw new ContainerError(
          "this Docker engine cannot limit a container's writable layer (--storage-opt size needs overlay2 on xfs with pquota); use the read-only-root disk limit",
        );
      }
    }
    const folders = limit.writable ?? WRITABLE_FOLDERS;
    const tmpfs: Record<string, string> = {};
    for (const folder of folders)
      tmpfs[folder] =
        `rw,exec,nodev,size=${limit.bytes},mode=${folder.endsWith("tmp") ? "1777" : "0755"}`;
    let seed = this.seeds.get(image);
    if (!seed) {
      seed = imageFolders(this.docker, image, folders, this.labels());
      this.seeds.set(image, seed);
      seed.catch(() => this.seeds.delete(image));
    }
    const archives = await seed;
    return {
      readOnlyRoot: true,
      tmpfs,
      seed: archives,
      seedFolder: this.seedFoldersWork ? this.seedFolder(image, archives) : undefined,
    };
  }

  /** The host folder of `image`'s seed files (written once, removed at exit); undefined when it cannot be written. */
  private seedFolder(image: string, archives: FolderArchive[]): string | undefined {
    const known = this.seedFolders.get(image);
    if (known) return known;
    try {
      const folder = mkdtempSync(join(tmpdir(), "agentrl-seed-"));
      chmodSync(folder, 0o755); // readable by a container's tar whatever its user
      archives.forEach(({ archive }, index) => {
        writeFileSync(join(folder, `${index}.tar.part`), archive, { mode: 0o644 });
        renameSync(join(folder, `${index}.tar.part`), join(folder, `${index}.tar`));
      });
      this.seedFolders.set(image, folder);
      seedFoldersToRemove.add(folder);
      if (!exitHookInstalled) {
        exitHookInstalled = true;
        process.once("exit", () => {
          for (const path of seedFoldersToRemove) rmSync(path, { recursive: true, force: true });
        });
      }
      return folder;
    } catch {
      return undefined;
    }
  }
}

const seedFoldersToRemove = new Set<string>();
let exitHookInstalled = false;

/**
 * Whether the engine caps a container's writable layer (`--storage-opt size`): it refuses
 * the option at create time on overlay2 over anything but xfs with pquota.
 */
async function supportsLayerLimit(
  docker: Docker,
  image: string,
  labels: Record<string, string>,
): Promise<boolean> {
  try {
    const probe = await docker.createContainer({
      Image: image,
      Cmd: ["true"],
      Labels: labels,
      HostConfig: { StorageOpt: { size: "1G" }, NetworkMode: "none" },
    });
    await probe.remove({ force: true, v: true }).catch(() => {});
    return true;
  } catch {
    return false;
  }
}

/**
 * Tar streams of image folders that share a parent folder, concatenated (extract with `tar -x -i`
 * in `parent`): made once per image, every container of the image gets them raw through its
 * command stream (OS image: 7.6 MB). Not compressed: a gzip in every container cost more CPU
 * (~45 ms a container) than the engine's copy of the larger stream.
 */
export interface FolderArchive {
  parent: string;
  archive: Buffer;
}

/** The image's content of `folders`, one archive per parent folder (an archive's entries start with the folder's base name). */
async function imageFolders(
  docker: Docker,
  image: string,
  folders: string[],
  labels: Record<string, string>,
): Promise<FolderArchive[]> {
  const container = await docker.createContainer({
    Image: image,
    Cmd: ["true"],
    Labels: labels,
    HostConfig: { NetworkMode: "none" },
  });
  try {
    const parts = new Map<string, Buffer[]>();
    // A nested folder (/var/tmp in /var) is in its parent's archive already.
    for (const folder of folders.filter(
      (folder) => !folders.some((other) => other !== folder && folder.startsWith(`${other}/`)),
    )) {
      const stream = await container.getArchive({ path: folder }).catch(() => undefined);
      if (!stream) continue; // not in the image: an empty folder
      const chunks: Buffer[] = [];
      for await (const chunk of stream as AsyncIterable<Buffer>) chunks.push(chunk);
      const parent = posix.dirname(folder);
      parts.set(parent, [...(parts.get(parent) ?? []), Buffer.concat(chunks)]);
    }
    return [...parts].map(([parent, archives]) => ({
      parent,
      archive: Buffer.concat(archives),
    }));
  } finally {
    await container.remove({ force: true, v: true }).catch(() => {});
  }
}
