/**
 * Docker host URLs (`--docker-host`): a local socket, a remote engine over TCP with TLS, or
 * over SSH, parsed into dockerode options, the `docker` CLI's environment and the engine's slots.
 */
import { AgentRLError } from "@agentrl/spec";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type Docker from "dockerode";

/** A Docker host URL that cannot be used (bad scheme, missing TLS files). */
export class DockerHostError extends AgentRLError {}

/** One Docker engine's address, parsed from a URL. */
export interface DockerHostSpec {
  /** The URL as shown in logs (without its query). */
  label: string;
  /** dockerode connection options. */
  options: Docker.DockerOptions;
  /** True for a unix socket (the engine runs on this machine: host folders can be bind-mounted). */
  local: boolean;
  /** Sessions this engine takes at once (`?slots=N`). Default: set by the engine set. */
  slots?: number;
  /** Environment for the `docker` CLI on this engine (`DOCKER_HOST`, TLS variables). */
  cliEnv: Record<string, string>;
}

/**
 * Parses a Docker host URL, as the Docker CLI's `-H`:
 *   unix:///var/run/docker.sock   (or a bare path)   a local socket
 *   tcp://host:2376               TLS with ca.pem, cert.pem, key.pem from `certPath`
 *                                 (or `?cert-path=DIR`, or DOCKER_CERT_PATH); port 2376
 *                                 without certificates is refused, other ports without
 *                                 certificates speak plain HTTP (only for loopback or a
 *                                 trusted network)
 *   ssh://user@host[:22]          over SSH (dockerode's ssh protocol; keys from SSH_AUTH_SOCK,
 *                                 or `?identity=FILE`); the remote user must reach the socket
 * Every form takes `?slots=N`: sessions this engine runs at once.
 */
export function parseDockerHost(url: string, defaults: { certPath?: string } = {}): DockerHostSpec {
  const text = url.trim();
  if (!text) throw new DockerHostError("empty Docker host URL");
  const withScheme = text.startsWith("/") ? `unix://${text}` : text;
  let parsed: URL;
  try {
    parsed = new URL(withScheme);
  } catch {
    throw new DockerHostError(
      `"${url}" is not a Docker host URL; use unix:///var/run/docker.sock, tcp://host:2376 or ssh://user@host`,
    );
  }
  const query = parsed.searchParams;
  const slotsText = query.get("slots");
  let slots: number | undefined;
  if (slotsText !== null) {
    slots = Number(slotsText);
    if (!Number.isInteger(slots) || slots < 1)
      throw new DockerHostError(`slots of ${url} must be an integer ≥ 1, got "${slotsText}"`);
  }
  const label = withScheme.split("?")[0];
  switch (parsed.protocol) {
    case "unix:": {
      const socketPath = decodeURIComponent(parsed.pathname);
      if (!socketPath) throw new DockerHostError(`${url} names no socket path`);
      return {
        label,
        options: { socketPath },
        local: true,
        slots,
        cliEnv: { DOCKER_HOST: `unix://${socketPath}` },
      };
    }
    case "tcp:":
    case "http:":
    case "https:": {
      if (!parsed.hostname) throw new DockerHostError(`${url} names no host`);
      const port = Number(parsed.port || (parsed.protocol === "http:" ? 2375 : 2376));
      const certPath =
        query.get("cert-path") ?? defaults.certPath ?? (process.env.DOCKER_CERT_PATH || undefined);
      const tcp = `tcp://${parsed.hostname.includes(":") ? `[${parsed.hostname}]` : parsed.hostname}:${port}`;
      if (!certPath) {
        if (port === 2376 || parsed.protocol === "https:")
          throw new DockerHostError(
            `${label} is a TLS port: give the folder with ca.pem, cert.pem and key.pem (--docker-cert-path DIR, ?cert-path=DIR or DOCKER_CERT_PATH)`,
          );
        return {
          label,
          options: { host: parsed.hostname, port, protocol: "http" },
          local: false,
          slots,
          cliEnv: { DOCKER_HOST: tcp },
        };
      }
      const read = (name: string): Buffer => {
        try {
          return readFileSync(join(certPath, name));
        } catch (error) {
          throw new DockerHostError(
            `TLS file ${join(certPath, name)} of ${label} cannot be read: ${(error as Error).message}`,
          );
        }
      };
      return {
        label,
        options: {
          host: parsed.hostname,
          port,
          protocol: "https",
          ca: read("ca.pem"),
          cert: read("cert.pem"),
          key: read("key.pem"),
        },
        local: false,
        slots,
        cliEnv: { DOCKER_HOST: tcp, DOCKER_TLS_VERIFY: "1", DOCKER_CERT_PATH: certPath },
      };
    }
    case "ssh:": {
      if (!parsed.hostname) throw new DockerHostError(`${url} names no host`);
      const identity = query.get("identity");
      let privateKey: Buffer | undefined;
      if (identity) {
        try {
          privateKey = readFileSync(identity);
        } catch (error) {
          throw new DockerHostError(
            `SSH identity ${identity} of ${label} cannot be read: ${(error as Error).message}`,
          );
        }
      }
      const sshOptions = {
        agent: process.env.SSH_AUTH_SOCK,
        ...(privateKey ? { privateKey } : {}),
      };
      const userAt = parsed.username ? `${decodeURIComponent(parsed.username)}@` : "";
      return {
        label,
        options: {
          protocol: "ssh",
          host: parsed.hostname,
          port: Number(parsed.port || 22),
          username: decodeURIComponent(parsed.username) || undefined,
          sshOptions,
        } as Docker.DockerOptions,
        local: false,
        slots,
        cliEnv: {
          DOCKER_HOST: `ssh://${userAt}${parsed.hostname}${parsed.port ? `:${parsed.port}` : ""}`,
        },
      };
    }
    default:
      throw new DockerHostError(
        `unsupported Docker host scheme "${parsed.protocol}" in ${url}; use unix://, tcp:// or ssh://`,
      );
  }
}
