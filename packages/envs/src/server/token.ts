/**
 * Bearer tokens of the controller, its workers and clients. A controller always has one
 * (also on loopback): given, or read from a token file, or generated and written to it, so
 * that workers and clients on the same machine find it without being told.
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { ServerConfigError } from "./protocol.js";

/** Where `env serve` keeps the token it generated: `AGENTRL_TOKEN_FILE`, else `~/.agentrl/controller-token`. */
export function defaultTokenFile(): string {
  return process.env.AGENTRL_TOKEN_FILE || join(homedir(), ".agentrl", "controller-token");
}

/** A new random token (32 URL-safe characters). */
export function generateToken(): string {
  return randomBytes(24).toString("base64url");
}

/** The token in `path` (trimmed), or undefined when there is no such file. Throws on an empty file. */
export function readTokenFile(path: string): string | undefined {
  if (!existsSync(path)) return undefined;
  const token = readFileSync(path, "utf8").trim();
  if (!token) throw new ServerConfigError(`the token file ${path} is empty`);
  return token;
}

/** Writes `token` to `path`, readable by this user only. */
export function writeTokenFile(path: string, token: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  writeFileSync(path, `${token}\n`, { mode: 0o600 });
}

/** The token a client or worker uses when none is given: `AGENTRL_TOKEN`, else the token file, else none. */
export function tokenFromEnvironment(tokenFile: string = defaultTokenFile()): string | undefined {
  return process.env.AGENTRL_TOKEN || readTokenFile(tokenFile);
}

/**
 * The token a controller serves with: `given`, else `AGENTRL_TOKEN`, else the one in
 * `tokenFile`, else a new one written to `tokenFile`. `created` says whether it is new.
 */
export function serverToken(
  given: string | undefined,
  tokenFile: string = defaultTokenFile(),
): { token: string; source: string; created: boolean } {
  if (given) return { token: given, source: "--token", created: false };
  if (process.env.AGENTRL_TOKEN)
    return { token: process.env.AGENTRL_TOKEN, source: "AGENTRL_TOKEN", created: false };
  const stored = readTokenFile(tokenFile);
  if (stored) return { token: stored, source: tokenFile, created: false };
  const token = generateToken();
  writeTokenFile(tokenFile, token);
  return { token, source: tokenFile, created: true };
}
