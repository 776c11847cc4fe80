/**
 * `agentrl env build`: builds the Docker images of the OS and DB tasks locally (debootstrap
 * rootfs → docker import → docker build), showing progress. Idempotent: an image whose
 * content hash label matches `environments/<name>/` is skipped in well under a second.
 */
import { AgentRLError } from "@agentrl/spec";
import type { Command } from "commander";
import {
  buildImages,
  buildRuntimeImage,
  copyImagesToHost,
  isDockerAvailable,
  IMAGES,
  RUNTIME_IMAGE,
  type BuildProgress,
  type BuildResult,
} from "@agentrl/envs";

export class EnvBuildError extends AgentRLError {}

export interface EnvBuildOptions {
  /** Image names (`os`, `db`, `runtime`). Default: the task images (`os`, `db`). */
  images?: string[];
  /** Rebuild even when up to date. Default false. */
  force?: boolean;
  /** Debian mirror for debootstrap. Default: the one apt uses. */
  mirror?: string;
  /** Print every debootstrap / docker line, not just one status line per step. Default false. */
  verbose?: boolean;
  /** Other Docker engines (unix://, tcp://, ssh:// URLs) that get the images too, copied from the local engine. */
  dockerHost?: string[];
  /** TLS folder of tcp:// engines. Default DOCKER_CERT_PATH. */
  dockerCertPath?: string;
}

/** Builds the images; prints progress with `out`. */
export async function runEnvBuild(
  options: EnvBuildOptions,
  out: (line: string) => void = (line) => console.log(line),
): Promise<BuildResult[]> {
  if (!(await isDockerAvailable())) {
    throw new EnvBuildError(
      "no Docker engine answers; start one with `bash scripts/start-dockerd.sh` (or run `bash scripts/setup.sh`)",
    );
  }
  const names = options.images?.length ? options.images : Object.keys(IMAGES);
  const counters = new Map<string, number>();
  const onProgress = (event: BuildProgress) => {
    if (options.verbose) return out(`[${event.image}] ${event.step}: ${event.message}`);
    if (event.step === "debootstrap" && event.message.startsWith("I: ")) {
      const count = (counters.get(event.image) ?? 0) + 1;
      counters.set(event.image, count);
      if (count % 100 === 0)
        out(`[${event.image}] debootstrap: ${count} steps (${event.message.slice(3, 80)})`);
      return;
    }
    if (event.step === "build" && !event.message.startsWith("Step ")) return;
    out(`[${event.image}] ${event.step}: ${event.message}`);
  };
  const unknown = names.filter(
    (name) => name !== RUNTIME_IMAGE.name && !Object.hasOwn(IMAGES, name),
  );
  if (unknown.length)
    throw new EnvBuildError(
      `unknown image ${unknown.join(", ")}; known: ${[...Object.keys(IMAGES), RUNTIME_IMAGE.name].join(", ")}`,
    );
  const taskImages = names.filter((name) => name !== RUNTIME_IMAGE.name);
  const results = taskImages.length
    ? await buildImages({
        names: taskImages,
        force: options.force,
        mirror: options.mirror,
        onProgress,
      })
    : [];
  if (names.includes(RUNTIME_IMAGE.name))
    results.push(
      await buildRuntimeImage({ force: options.force, mirror: options.mirror, onProgress }),
    );
  for (const result of results) {
    out(
      `${result.tag}: ${result.skipped ? "up to date" : "built"} (hash ${result.hash.slice(0, 12)}, ${result.seconds.toFixed(1)} s)`,
    );
  }
  for (const host of options.dockerHost ?? []) {
    const copies = await copyImagesToHost(
      host,
      results.map((result) => result.tag),
      { certPath: options.dockerCertPath },
    );
    for (const copy of copies)
      out(
        `${copy.tag} on ${host}: ${copy.skipped ? "up to date" : `loaded (${copy.seconds.toFixed(1)} s)`}`,
      );
  }
  return results;
}

/** Adds `env build` (Docker images) to the `env` command group. */
export function registerEnvBuildCommand(env: Command): void {
  env
    .command("build")
    .description(
      "build the Docker images of the OS and DB tasks (and, with --image runtime, the runtime image deploy/ runs) locally (debootstrap + docker import); skips images that are up to date",
    )
    .option(
      "--image <name...>",
      `images to build (${[...Object.keys(IMAGES), RUNTIME_IMAGE.name].join(", ")}); default the task images ${Object.keys(IMAGES).join(", ")}`,
    )
    .option("--force", "rebuild even when an image with the same content hash exists", false)
    .option("--mirror <url>", "Debian mirror for debootstrap (default: the one apt uses)")
    .option("--verbose", "print every build line", false)
    .option(
      "--docker-host <url>",
      "also load the images into this Docker engine (repeatable; unix://, tcp://, ssh://), copied from the local one",
      (value: string, previous: string[] | undefined) => [...(previous ?? []), value],
    )
    .option(
      "--docker-cert-path <dir>",
      "TLS folder (ca.pem, cert.pem, key.pem) of tcp:// Docker hosts (env DOCKER_CERT_PATH)",
    )
    .addHelpText(
      "after",
      "\nExamples:\n  agentrl env build\n  agentrl env build --image db --force\n  agentrl env build --image runtime        # agentrl/runtime: the CLI, node, the Docker CLI (deploy/swarm, deploy/kubernetes)\n  agentrl env build --docker-host unix:///run/agentrl-dockerd2/docker.sock --docker-host ssh://agent@10.0.0.8",
    )
    .action(
      async (options: {
        image?: string[];
        force: boolean;
        mirror?: string;
        verbose: boolean;
        dockerHost?: string[];
        dockerCertPath?: string;
      }) => {
        try {
          await runEnvBuild({
            images: options.image,
            force: options.force,
            mirror: options.mirror,
            verbose: options.verbose,
            dockerHost: options.dockerHost,
            dockerCertPath: options.dockerCertPath,
          });
        } catch (error) {
          console.error(`env build failed: ${(error as Error).message}`);
          process.exitCode = 1;
        }
      },
    );
}
