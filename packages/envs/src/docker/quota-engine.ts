/**
 * The Docker engine that caps each container's writable layer (one on-disk write budget per
 * container, the whole root writable, as the original's): the first engine when its data root
 * has quotas (AGENTRL_QUOTA_DATA_ROOT=1 in scripts/start-dockerd.sh), else a second engine on
 * a btrfs data root with quotas, started by `scripts/start-second-dockerd.sh --quota` (which
 * scripts/setup.sh runs as root; its socket: AGENTRL_QUOTA_DOCKER_HOST, default
 * unix:///var/lib/agentrl-dockerd-quota/docker.sock). The writable-budget tests use it, and
 * say why they skip when there is none.
 */
import Docker from "dockerode";
import { IMAGES, imageHash } from "./images.js";
import { DockerRuntime, isDockerAvailable } from "./runtime.js";

export const QUOTA_DOCKER_HOST =
  process.env.AGENTRL_QUOTA_DOCKER_HOST ?? "unix:///var/lib/agentrl-dockerd-quota/docker.sock";

/** An engine that caps writable layers and has `image`, or why there is none. */
export type QuotaEngine = { docker: Docker; host: string | undefined } | { missing: string };

/** Finds the engine for the writable-budget cases (see the module's comment). */
export async function findQuotaEngine(image = IMAGES.os.tag): Promise<QuotaEngine> {
  const first = new Docker();
  if ((await isDockerAvailable(first)) && (await capsLayers(first, image)))
    return { docker: first, host: undefined };
  if (!QUOTA_DOCKER_HOST.startsWith("unix://"))
    return {
      missing: `AGENTRL_QUOTA_DOCKER_HOST must be a unix:// socket, got ${QUOTA_DOCKER_HOST}`,
    };
  const second = new Docker({ socketPath: QUOTA_DOCKER_HOST.slice("unix://".length) });
  if (!(await isDockerAvailable(second)))
    return {
      missing: `no engine caps a container's writable layer: the first engine's data root has no quotas, and no quota engine answers at ${QUOTA_DOCKER_HOST} (as root: bash scripts/start-second-dockerd.sh --quota, which scripts/setup.sh runs; it needs btrfs-progs, a loop device and btrfs in the kernel)`,
    };
  if ((await imageHash(second, image)) === undefined)
    return {
      missing: `image ${image} missing on the quota engine at ${QUOTA_DOCKER_HOST} (bash scripts/start-second-dockerd.sh --quota copies it from the first engine)`,
    };
  if (!(await capsLayers(second, image)))
    return {
      missing: `the quota engine at ${QUOTA_DOCKER_HOST} cannot cap a container's writable layer (its data root is not btrfs with quotas)`,
    };
  return { docker: second, host: QUOTA_DOCKER_HOST };
}

async function capsLayers(docker: Docker, image: string): Promise<boolean> {
  if ((await imageHash(docker, image)) === undefined) return false;
  const runtime = new DockerRuntime({ docker, reapSeconds: 0 });
  try {
    return await runtime.writableRoot(image, { bytes: 1 });
  } finally {
    await runtime.close();
  }
}

/** A runtime on the quota engine (its `docker` CLI pointed at it for removal at exit). */
export function quotaRuntime(engine: { docker: Docker; host: string | undefined }): DockerRuntime {
  return new DockerRuntime({
    docker: engine.docker,
    ...(engine.host ? { cliEnv: { DOCKER_HOST: engine.host } } : {}),
  });
}
