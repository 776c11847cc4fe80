/**
 * The weights key of `agentrl serve`: the bearer token `GET|POST /v1/weights` need, always
 * (also on loopback), apart from the API key of the chat routes. Given (`--weights-key` or
 * env `AGENTRL_SERVE_KEY`), or read from a key file, or generated and written to it (mode
 * 0600, like the controller's token), so that a trainer on the same machine finds it
 * without being told (`RemoteEngine` reads the same file).
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { AgentRLError } from "@agentrl/spec";

/** A server configuration that is refused (e.g. a public address without an API key, an empty key file). */
export class ServeConfigError extends AgentRLError {}

/** Where the weights key is kept: `AGENTRL_SERVE_KEY_FILE`, else `~/.agentrl/serve-key`. */
export function defaultServeKeyFile(): string {
  return process.env.AGENTRL_SERVE_KEY_FILE || join(homedir(), ".agentrl", "serve-key");
}

/**
 * The key in `path` (trimmed), or undefined when there is no such file. Throws on a file that
 * stays empty for ~1 s: a server creating the file writes it a moment later (two servers
 * starting at once: the second read it empty and refused to start, test/serve-fleet).
 */
export function readServeKeyFile(path: string = defaultServeKeyFile()): string | undefined {
  if (!existsSync(path)) return undefined;
  for (let attempt = 0; attempt < 100; attempt++) {
    const key = readFileSync(path, "utf8").trim();
    if (key) return key;
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
  }
  throw new ServeConfigError(`the weights key file ${path} is empty`);
}

/** The weights key a client sends when none is given: `AGENTRL_SERVE_KEY`, else the key file, else none. */
export function serveKeyFromEnvironment(path: string = defaultServeKeyFile()): string | undefined {
  return process.env.AGENTRL_SERVE_KEY || readServeKeyFile(path);
}

/**
 * The weights key a server uses: `given`, else `AGENTRL_SERVE_KEY`, else the one in `path`,
 * else a new one written to `path` (created exclusively: two servers starting at once on one
 * machine end with the same key). `created` says whether it is new.
 */
export function serverWeightsKey(
  given: string | undefined,
  path: string = defaultServeKeyFile(),
): { key: string; source: string; created: boolean } {
  if (given) return { key: given, source: "--weights-key", created: false };
  if (process.env.AGENTRL_SERVE_KEY)
    return { key: process.env.AGENTRL_SERVE_KEY, source: "AGENTRL_SERVE_KEY", created: false };
  const stored = readServeKeyFile(path);
  if (stored) return { key: stored, source: path, created: false };
  const key = randomBytes(24).toString("base64url");
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  try {
    writeFileSync(path, `${key}\n`, { mode: 0o600, flag: "wx" });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    // Another server created it a moment ago: its key (read once written, at most ~1 s).
    return { key: readServeKeyFile(path)!, source: path, created: false };
  }
  return { key, source: path, created: true };
}
