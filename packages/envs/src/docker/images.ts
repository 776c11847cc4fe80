/**
 * The project's Docker images, built locally with no image registry: a Debian bookworm rootfs
 * made by `debootstrap --variant=minbase --include=<packages>` (packages come from the Debian
 * mirror in /etc/apt/sources.list*), imported with `docker import`, then finished by a
 * Dockerfile whose steps need no network.
 *
 * Every image carries the label `agentrl.hash`: a SHA-256 over its folder in `environments/`
 * (package list, Dockerfile, files). A build is skipped when an image with the same hash
 * exists, and the rootfs image is cached under a tag made of the package-list hash, so a
 * second run is instant and a Dockerfile-only change skips debootstrap.
 */
import { AgentRLError } from "@agentrl/spec";
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import Docker from "dockerode";
import { isDockerAvailable } from "./runtime.js";

export class ImageBuildError extends AgentRLError {}

/** One image the project builds: `environments/<name>/` holds its packages.txt and Dockerfile. */
export interface ImageSpec {
  /** Short name: `os` or `db`. */
  name: string;
  /** Full tag of the finished image, e.g. `agentrl/os:latest`. */
  tag: string;
}

export const IMAGES: Record<"os" | "db", ImageSpec> = {
  os: { name: "os", tag: "agentrl/os:latest" },
  db: { name: "db", tag: "agentrl/db:latest" },
};

export const HASH_LABEL = "agentrl.hash";
const DEBIAN_SUITE = "bookworm";
const DEFAULT_MIRROR = "http://deb.debian.org/debian";

/** A step of a build, for progress display. */
export interface BuildProgress {
  image: string;
  /** `check`, `debootstrap`, `import`, `build`, `done`, `skipped`. */
  step: string;
  message: string;
}

export interface BuildImagesOptions {
  /** Names of the images to build. Default: all (`os`, `db`). */
  names?: string[];
  /** Folder holding one sub-folder per image. Default: `environments/` of this repository. */
  environmentsDir?: string;
  /** Rebuild even when an image with the same content hash exists. Default false. */
  force?: boolean;
  /** Where debootstrap keeps downloaded .deb files between runs. Default `/var/cache/agentrl/debs`. */
  debCacheDir?: string;
  /** Debian mirror. Default: the first Debian URI in /etc/apt/sources.list*, else deb.debian.org. */
  mirror?: string;
  /** Called at every step and for each line debootstrap prints. */
  onProgress?: (event: BuildProgress) => void;
  /** A dockerode client. Default: the local engine. */
  docker?: Docker;
}

export interface BuildResult {
  image: string;
  tag: string;
  hash: string;
  /** True when an image with this hash existed and nothing was built. */
  skipped: boolean;
  seconds: number;
}

/** The repository's `environments/` folder (works from `src/` and from `dist/`). */
export function defaultEnvironmentsDir(): string {
  let folder = dirname(fileURLToPath(import.meta.url));
  for (let depth = 0; depth < 6; depth += 1) {
    const candidate = join(folder, "environments");
    if (existsSync(join(candidate, "os", "Dockerfile"))) return candidate;
    folder = dirname(folder);
  }
  return resolve(process.cwd(), "environments");
}

/** SHA-256 (hex) over every file of a folder, names and contents, in sorted order. */
export function hashFolder(folder: string, only?: (name: string) => boolean): string {
  const hash = createHash("sha256");
  hash.update(`suite=${DEBIAN_SUITE}\n`);
  for (const name of readdirSync(folder).sort()) {
    const path = join(folder, name);
    if (!statSync(path).isFile() || (only && !only(name))) continue;
    hash.update(`${name}\n`);
    hash.update(readFileSync(path));
  }
  return hash.digest("hex");
}

/** The package names of a packages.txt (comments and blank lines dropped). */
export function readPackageList(path: string): string[] {
  return readFileSync(path, "utf8")
    .split("\n")
    .map((line) => line.replace(/#.*/, "").trim())
    .filter((line) => line.length > 0);
}

/** The Debian mirror configured for apt on this machine. */
export function debianMirror(): string {
  const files = ["/etc/apt/sources.list"];
  if (existsSync("/etc/apt/sources.list.d")) {
    for (const name of readdirSync("/etc/apt/sources.list.d"))
      files.push(join("/etc/apt/sources.list.d", name));
  }
  for (const file of files) {
    if (!existsSync(file)) continue;
    const text = readFileSync(file, "utf8");
    const deb822 = text.match(/^URIs:\s*(\S+\/debian)\s*$/m);
    if (deb822) return deb822[1];
    const oneLine = text.match(/^deb\s+(?:\[[^\]]*\]\s+)?(\S+\/debian)\s+bookworm\b/m);
    if (oneLine) return oneLine[1];
  }
  return DEFAULT_MIRROR;
}

/** The label hash of a local image, or undefined when it does not exist. */
export async function imageHash(docker: Docker, tag: string): Promise<string | undefined> {
  try {
    const info = await docker.getImage(tag).inspect();
    return info.Config?.Labels?.[HASH_LABEL] ?? "";
  } catch {
    return undefined;
  }
}

/**
 * Why containers of one of the project's images cannot start on `docker`, or false when they
 * can: no engine answers, or the image was never built (any content hash will do). The reason
 * names the command that fixes it; tests skip with it.
 */
export async function imageUnavailable(
  name: keyof typeof IMAGES,
  docker: Docker = new Docker(),
): Promise<string | false> {
  if (!(await isDockerAvailable(docker)))
    return "no Docker engine answers (bash scripts/start-dockerd.sh)";
  if ((await imageHash(docker, IMAGES[name].tag)) === undefined)
    return `image ${IMAGES[name].tag} missing (agentrl env build)`;
  return false;
}

/** Whether every named image exists with its current content hash. */
export async function imagesUpToDate(
  docker: Docker = new Docker(),
  names: string[] = Object.keys(IMAGES),
  environmentsDir = defaultEnvironmentsDir(),
): Promise<boolean> {
  for (const name of names) {
    const spec = IMAGES[name as keyof typeof IMAGES];
    if (!spec) return false;
    if ((await imageHash(docker, spec.tag)) !== hashFolder(join(environmentsDir, name)))
      return false;
  }
  return true;
}

/** Builds the project's images; skips those whose content hash is unchanged. */
export async function buildImages(options: BuildImagesOptions = {}): Promise<BuildResult[]> {
  const docker = options.docker ?? new Docker();
  const names = options.names ?? Object.keys(IMAGES);
  const results: BuildResult[] = [];
  for (const name of names) {
    const spec = IMAGES[name as keyof typeof IMAGES];
    if (!spec)
      throw new ImageBuildError(
        `unknown image "${name}"; known: ${Object.keys(IMAGES).join(", ")}`,
      );
    results.push(await buildImage(docker, spec, options));
  }
  return results;
}

async function buildImage(
  docker: Docker,
  spec: ImageSpec,
  options: BuildImagesOptions,
): Promise<BuildResult> {
  const started = Date.now();
  const report = (step: string, message: string) =>
    options.onProgress?.({ image: spec.name, step, message });
  const folder = join(options.environmentsDir ?? defaultEnvironmentsDir(), spec.name);
  if (!existsSync(join(folder, "Dockerfile")))
    throw new ImageBuildError(`no Dockerfile in ${folder}`);
  const hash = hashFolder(folder);
  report("check", `content hash ${hash.slice(0, 12)}`);
  if (!options.force && (await imageHash(docker, spec.tag)) === hash) {
    report("skipped", `${spec.tag} is up to date`);
    return {
      image: spec.name,
      tag: spec.tag,
      hash,
      skipped: true,
      seconds: (Date.now() - started) / 1000,
    };
  }
  const rootfsTag = await ensureRootfs(docker, spec, folder, options, report);
  report("build", `docker build ${spec.tag} FROM ${rootfsTag}`);
  const context = readdirSync(folder).filter((name) => statSync(join(folder, name)).isFile());
  const stream = await docker.buildImage(
    { context: folder, src: context },
    {
      t: spec.tag,
      buildargs: { ROOTFS: rootfsTag },
      labels: { [HASH_LABEL]: hash, agentrl: "1" },
      rm: true,
      forcerm: true,
      networkmode: "none",
    },
  );
  await followDockerStream(docker, stream, (line) => report("build", line));
  if ((await imageHash(docker, spec.tag)) !== hash)
    throw new ImageBuildError(`docker build of ${spec.tag} finished but the image is missing`);
  report("done", `${spec.tag} built`);
  return {
    image: spec.name,
    tag: spec.tag,
    hash,
    skipped: false,
    seconds: (Date.now() - started) / 1000,
  };
}

/** Makes (or reuses) the imported debootstrap rootfs of an image; returns its tag. */
export async function ensureRootfs(
  docker: Docker,
  spec: ImageSpec,
  folder: string,
  options: Pick<BuildImagesOptions, "debCacheDir" | "mirror">,
  report: (step: string, message: string) => void,
): Promise<string> {
  const packages = readPackageList(join(folder, "packages.txt"));
  const packagesHash = createHash("sha256")
    .update(`${DEBIAN_SUITE}\n${packages.join("\n")}`)
    .digest("hex")
    .slice(0, 16);
  const rootfsTag = `agentrl/${spec.name}-rootfs:${packagesHash}`;
  if ((await imageHash(docker, rootfsTag)) !== undefined) {
    report("debootstrap", `reusing ${rootfsTag}`);
    return rootfsTag;
  }
  if (process.getuid?.() !== 0)
    throw new ImageBuildError(
      "building a rootfs with debootstrap needs root (sudo agentrl env build)",
    );
  const work = mkdtempSync(join(tmpdir(), `agentrl-rootfs-${spec.name}-`));
  const target = join(work, "rootfs");
  try {
    const cacheDir = options.debCacheDir ?? "/var/cache/agentrl/debs";
    await run("mkdir", ["-p", cacheDir], () => {});
    const mirror = options.mirror ?? debianMirror();
    report(
      "debootstrap",
      `debootstrap ${DEBIAN_SUITE} from ${mirror} with ${packages.length} packages`,
    );
    await run(
      "debootstrap",
      [
        "--variant=minbase",
        `--cache-dir=${cacheDir}`,
        `--include=${packages.join(",")}`,
        DEBIAN_SUITE,
        target,
        mirror,
      ],
      (line) => report("debootstrap", line),
    );
    // Smaller image: no package lists, no downloaded archives, no docs.
    for (const path of [
      "var/lib/apt/lists",
      "var/cache/apt/archives",
      "usr/share/doc",
      "usr/share/man",
    ]) {
      rmSync(join(target, path), { recursive: true, force: true });
    }
    report("import", `docker import → ${rootfsTag}`);
    const tar = spawn("tar", ["--numeric-owner", "-C", target, "-c", "."], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    const [repo, tag] = rootfsTag.split(":");
    const imported = await docker.importImage(
      tar.stdout as unknown as string,
      { repo, tag, changes: [`LABEL ${HASH_LABEL}=${packagesHash}`] } as object,
    );
    await followDockerStream(docker, imported as NodeJS.ReadableStream, () => {});
    if ((await imageHash(docker, rootfsTag)) === undefined)
      throw new ImageBuildError(`docker import of ${rootfsTag} failed`);
    return rootfsTag;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** Runs a command, forwarding its output lines; rejects on a non-zero exit. */
function run(command: string, args: string[], onLine: (line: string) => void): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
    let tail = "";
    const forward = (chunk: Buffer) => {
      const text = chunk.toString("utf8");
      tail = (tail + text).slice(-2000);
      for (const line of text.split("\n")) if (line.trim()) onLine(line.trim());
    };
    child.stdout.on("data", forward);
    child.stderr.on("data", forward);
    child.on("error", (error) =>
      reject(
        new ImageBuildError(
          `${command} could not start: ${error.message} (apt-get install ${command})`,
        ),
      ),
    );
    child.on("close", (code) => {
      if (code === 0) resolvePromise();
      else reject(new ImageBuildError(`${command} exited with ${code}:\n${tail}`));
    });
  });
}

/** Waits for a Docker JSON progress stream to end; rejects on an error entry. */
export function followDockerStream(
  docker: Docker,
  stream: NodeJS.ReadableStream,
  onLine: (line: string) => void,
): Promise<void> {
  return new Promise((resolvePromise, reject) => {
    docker.modem.followProgress(
      stream,
      (error: Error | null, output: Array<{ error?: string }>) => {
        if (error) return reject(new ImageBuildError(error.message));
        const failed = output.find((entry) => entry.error);
        if (failed) return reject(new ImageBuildError(failed.error));
        resolvePromise();
      },
      (event: { stream?: string; status?: string }) => {
        const text = (event.stream ?? event.status ?? "").trim();
        if (text) onLine(text);
      },
    );
  });
}
