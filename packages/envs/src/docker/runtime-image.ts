/**
 * The runtime image (`agentrl/runtime`): what every service of `deploy/` runs (trainer,
 * inference servers, controller, env workers), built here with no image registry, like the
 * task images:
 *
 *   debootstrap rootfs (environments/runtime/packages.txt)  ← cached by package-list hash
 *   + this machine's node binary and the Docker CLI (the docker.io package's client)
 *   + the repository's build: every package's published files (`files` of its package.json:
 *     dist, bin, public) and the production node_modules (`npm ls --omit=dev`), the
 *     environments/ folder (so `agentrl env build` works inside), models/ and the AgentBench
 *     data (at /opt/shared/data/agentbench, where the default data path finds it)
 *
 * The image's `agentrl.hash` label is a SHA-256 over all of those inputs but node_modules'
 * contents (the lockfile stands for them), so an unchanged build is skipped in well under a
 * second, and any change to the build, the lockfile, node or the Docker CLI rebuilds it.
 */
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  copyFileSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
  mkdirSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import Docker from "dockerode";
import {
  HASH_LABEL,
  ImageBuildError,
  defaultEnvironmentsDir,
  ensureRootfs,
  followDockerStream,
  hashFolder,
  imageHash,
  type BuildImagesOptions,
  type BuildResult,
} from "./images.js";
import { resolveAgentBenchDir } from "./agentbench.js";

export const RUNTIME_IMAGE = { name: "runtime", tag: "agentrl/runtime:latest" } as const;

/** Top-level entries of the repository the image carries under /opt/agentrl (beside the packages' published files). */
const REPOSITORY_ENTRIES = ["package.json", "package-lock.json", "environments", "models"];

export interface RuntimeImageInputs {
  repository: string;
  /** Paths relative to the repository, files or folders (tar recurses into folders). */
  entries: string[];
  /** The node binary and the Docker CLI copied in. */
  node: string;
  dockerCli: string;
  /** The AgentBench data folder, when this machine has it. */
  agentBenchData?: string;
  hash: string;
}

/** The Docker CLI to copy in: the docker.io package's client, else the `docker` on PATH. */
export function dockerCliPath(): string {
  if (existsSync("/usr/bin/docker")) return "/usr/bin/docker";
  const found = spawnSync("sh", ["-c", "command -v docker"], { encoding: "utf8" }).stdout.trim();
  if (!found)
    throw new ImageBuildError("no Docker CLI on this machine (apt-get install docker.io)");
  return found;
}

function hashFile(hash: ReturnType<typeof createHash>, path: string): void {
  hash.update(readFileSync(path));
}

/** Every file under `folder` (sorted), relative to `root`. */
function filesUnder(root: string, folder: string): string[] {
  const path = join(root, folder);
  if (!existsSync(path)) return [];
  if (statSync(path).isFile()) return [folder];
  return readdirSync(path)
    .sort()
    .flatMap((name) => filesUnder(root, join(folder, name)));
}

/** The production dependencies' folders (relative), as `npm ls --omit=dev` lists them. */
function productionModules(repository: string): string[] {
  const listed = spawnSync("npm", ["ls", "--omit=dev", "--all", "--parseable"], {
    cwd: repository,
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
  });
  if (listed.error) throw new ImageBuildError(`npm ls failed: ${listed.error.message}`);
  const folders = listed.stdout
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line.includes("node_modules"))
    .map((line) => relative(repository, line))
    .filter((path) => !path.startsWith(".."));
  if (folders.length === 0)
    throw new ImageBuildError(
      `npm ls --omit=dev listed no dependency in ${repository}: run npm ci first`,
    );
  // A folder inside another listed one is already in the archive.
  const sorted = [...new Set(folders)].sort();
  return sorted.filter(
    (folder, position) =>
      !sorted.slice(0, position).some((outer) => folder.startsWith(`${outer}/`)),
  );
}

/** What the runtime image is made of, and its content hash. Throws when the build is missing (`npm run build`). */
export function runtimeImageInputs(
  repository = dirname(defaultEnvironmentsDir()),
): RuntimeImageInputs {
  const entries: string[] = REPOSITORY_ENTRIES.filter((entry) =>
    existsSync(join(repository, entry)),
  );
  const hashed: string[] = entries.flatMap((entry) => filesUnder(repository, entry));
  for (const name of readdirSync(join(repository, "packages")).sort()) {
    const manifestPath = join(repository, "packages", name, "package.json");
    if (!existsSync(manifestPath)) continue;
    const manifest = JSON.parse(readFileSync(manifestPath, "utf8")) as { files?: string[] };
    if (!existsSync(join(repository, "packages", name, "dist")))
      throw new ImageBuildError(`packages/${name} is not built (npm run build)`);
    const published = ["package.json", ...(manifest.files ?? ["dist"])]
      .map((file) => join("packages", name, file))
      .filter((path) => existsSync(join(repository, path)));
    entries.push(...published);
    hashed.push(
      ...published
        .flatMap((path) => filesUnder(repository, path))
        .filter((path) => !path.endsWith(".tsbuildinfo")),
    );
  }
  const modules = productionModules(repository);
  entries.push(...modules);
  const node = process.execPath;
  const dockerCli = dockerCliPath();
  let agentBenchData: string | undefined;
  try {
    agentBenchData = dirname(resolveAgentBenchDir("os_interaction"));
  } catch {
    agentBenchData = undefined;
  }
  const hash = createHash("sha256");
  hash.update(`environment ${hashFolder(join(repository, "environments", RUNTIME_IMAGE.name))}\n`);
  for (const path of hashed) {
    hash.update(`${path}\n`);
    hashFile(hash, join(repository, path));
  }
  hash.update(`modules ${modules.join(",")}\nnode ${process.version}\n`);
  hashFile(hash, node);
  hashFile(hash, dockerCli);
  if (agentBenchData)
    for (const path of filesUnder(agentBenchData, ".")) {
      hash.update(`data ${path}\n`);
      hashFile(hash, join(agentBenchData, path));
    }
  return { repository, entries, node, dockerCli, agentBenchData, hash: hash.digest("hex") };
}

/**
 * Builds `agentrl/runtime` (skipped when an image with the same content hash exists). Needs
 * root for debootstrap the first time (the rootfs is cached by its package list).
 */
export async function buildRuntimeImage(
  options: Pick<
    BuildImagesOptions,
    "force" | "debCacheDir" | "mirror" | "onProgress" | "docker"
  > = {},
): Promise<BuildResult> {
  const started = Date.now();
  const docker = options.docker ?? new Docker();
  const report = (step: string, message: string) =>
    options.onProgress?.({ image: RUNTIME_IMAGE.name, step, message });
  const inputs = runtimeImageInputs();
  report(
    "check",
    `content hash ${inputs.hash.slice(0, 12)} (${inputs.entries.length} entries, node ${process.version}, ${inputs.dockerCli})`,
  );
  if (!options.force && (await imageHash(docker, RUNTIME_IMAGE.tag)) === inputs.hash) {
    report("skipped", `${RUNTIME_IMAGE.tag} is up to date`);
    return {
      image: RUNTIME_IMAGE.name,
      tag: RUNTIME_IMAGE.tag,
      hash: inputs.hash,
      skipped: true,
      seconds: (Date.now() - started) / 1000,
    };
  }
  const folder = join(inputs.repository, "environments", RUNTIME_IMAGE.name);
  const rootfsTag = await ensureRootfs(docker, RUNTIME_IMAGE, folder, options, report);
  // The context: Dockerfile and the two binaries from a staging folder, the repository under app/, the data under shared/.
  const staging = mkdtempSync(join(tmpdir(), "agentrl-runtime-"));
  try {
    mkdirSync(join(staging, ".runtime"));
    const own = readdirSync(folder).filter(
      (name) => name !== "packages.txt" && statSync(join(folder, name)).isFile(),
    );
    for (const name of own) copyFileSync(join(folder, name), join(staging, name));
    copyFileSync(inputs.node, join(staging, ".runtime", "node"));
    copyFileSync(inputs.dockerCli, join(staging, ".runtime", "docker"));
    mkdirSync(join(staging, "shared", "data"), { recursive: true });
    writeFileSync(
      join(staging, "shared", "README"),
      inputs.agentBenchData
        ? "AgentBench data copied in at build time\n"
        : "no AgentBench data on the building machine\n",
    );
    const list = join(staging, "entries.txt");
    writeFileSync(list, inputs.entries.join("\n") + "\n");
    const tarArguments = [
      "-c",
      "--numeric-owner",
      "-C",
      staging,
      ...own,
      ".runtime",
      "shared/README",
    ];
    if (inputs.agentBenchData)
      tarArguments.push(
        "--transform",
        `s,^${inputs.agentBenchData.replace(/^\//, "").replace(/[.[\]*^$\\]/g, "\\$&")},shared/data/agentbench,S`,
        "-C",
        "/",
        inputs.agentBenchData.replace(/^\//, ""),
      );
    tarArguments.push(
      "--transform",
      "s,^\\(packages\\|node_modules\\|environments\\|models\\|package\\.json\\|package-lock\\.json\\),app/\\1,S",
      "-C",
      inputs.repository,
      "-T",
      list,
    );
    report("build", `docker build ${RUNTIME_IMAGE.tag} FROM ${rootfsTag}`);
    const tar = spawn("tar", tarArguments, { stdio: ["ignore", "pipe", "pipe"] });
    let tarErrors = "";
    tar.stderr.on(
      "data",
      (chunk: Buffer) => (tarErrors = (tarErrors + chunk.toString("utf8")).slice(-2000)),
    );
    const tarExit = new Promise<number>((resolve) => tar.on("close", (code) => resolve(code ?? 1)));
    const stream = await docker.buildImage(tar.stdout as unknown as NodeJS.ReadableStream, {
      t: RUNTIME_IMAGE.tag,
      buildargs: { ROOTFS: rootfsTag },
      labels: { [HASH_LABEL]: inputs.hash, agentrl: "1" },
      rm: true,
      forcerm: true,
      networkmode: "none",
    });
    await followDockerStream(docker, stream, (line) => report("build", line));
    if ((await tarExit) !== 0)
      throw new ImageBuildError(`tar of the build context failed: ${tarErrors}`);
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  if ((await imageHash(docker, RUNTIME_IMAGE.tag)) !== inputs.hash)
    throw new ImageBuildError(
      `docker build of ${RUNTIME_IMAGE.tag} finished but the image is missing`,
    );
  report("done", `${RUNTIME_IMAGE.tag} built`);
  return {
    image: RUNTIME_IMAGE.name,
    tag: RUNTIME_IMAGE.tag,
    hash: inputs.hash,
    skipped: false,
    seconds: (Date.now() - started) / 1000,
  };
}
