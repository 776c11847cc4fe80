/**
 * The task images on other engines: `docker save` from one engine piped into `docker load` on
 * another, over the two APIs (`agentrl env build --docker-host`).
 */
import Docker from "dockerode";
import { DockerUnavailableError, isDockerAvailable } from "./runtime.js";
import { ImageBuildError, imageHash } from "./images.js";
import { parseDockerHost } from "./hosts.js";

/** What `copyImage` did. */
export interface ImageCopy {
  tag: string;
  /** True when the target already had the image with the same content hash. */
  skipped: boolean;
  seconds: number;
}

/**
 * Copies image `tag` from one engine to another (`docker save | docker load` over the two
 * APIs), unless the target has it with the same content hash label already.
 */
export async function copyImage(from: Docker, to: Docker, tag: string): Promise<ImageCopy> {
  const started = Date.now();
  const hash = await imageHash(from, tag);
  if (hash === undefined)
    throw new ImageBuildError(
      `${tag} is not on the source engine: build it first (agentrl env build)`,
    );
  if ((await imageHash(to, tag)) === hash)
    return { tag, skipped: true, seconds: (Date.now() - started) / 1000 };
  const archive = (await from.getImage(tag).get()) as NodeJS.ReadableStream;
  const progress = (await to.loadImage(archive)) as NodeJS.ReadableStream;
  await new Promise<void>((resolve, reject) => {
    let output = "";
    progress.on("data", (chunk: Buffer) => {
      output += chunk.toString("utf8");
    });
    progress.on("end", () =>
      /"error"/.test(output)
        ? reject(new ImageBuildError(`loading ${tag} failed: ${output.slice(0, 500)}`))
        : resolve(),
    );
    progress.on("error", reject);
    archive.on("error", reject);
  });
  if ((await imageHash(to, tag)) !== hash)
    throw new ImageBuildError(`${tag} was loaded but the target engine does not show it`);
  return { tag, skipped: false, seconds: (Date.now() - started) / 1000 };
}

/**
 * Copies images `tags` from the local engine (or DOCKER_HOST) to the engine at `url`; throws
 * `DockerUnavailableError` when that engine does not answer.
 */
export async function copyImagesToHost(
  url: string,
  tags: string[],
  options: { certPath?: string; source?: Docker } = {},
): Promise<ImageCopy[]> {
  const spec = parseDockerHost(url, { certPath: options.certPath });
  const target = new Docker(spec.options);
  if (!(await isDockerAvailable(target)))
    throw new DockerUnavailableError(`the Docker engine at ${spec.label} does not answer`);
  const copies: ImageCopy[] = [];
  for (const tag of tags) copies.push(await copyImage(options.source ?? new Docker(), target, tag));
  return copies;
}
