/**
 * The body of `POST /v1/weights`: a new policy version for the server's engine.
 *
 *   content-type application/octet-stream   one safetensors file (F32, F16 or BF16), HF names;
 *                                           version from the header `x-agentrl-policy-version`,
 *                                           else `__metadata__.version`, else served + 1
 *   content-type application/json           {path: "<model or checkpoint folder>"} or
 *                                           {url: "<base URL of a folder, or a .safetensors file>"},
 *                                           optional `version` (default: served + 1)
 *
 * A checkpoint folder of `agentrl train` holds the policy in `policy/`; either form works.
 *
 * A path or URL is read only from the locations the server allows (`--weights-from`: folders,
 * and URL prefixes `http(s)://host[:port]/path/`); with none allowed, JSON pulls are refused
 * (403 `weights_source_refused`). A path is checked after resolving `..` and symbolic links; a
 * URL is fetched without following redirects, within `pullTimeoutMs`.
 */
import type { IncomingMessage } from "node:http";
import { access, realpath } from "node:fs/promises";
import { realpathSync } from "node:fs";
import { join, resolve, sep } from "node:path";
import { z } from "zod";
import {
  SafetensorsError,
  parseSafetensors,
  readSafetensorsDirectory,
  type ExportedWeights,
  type NamedWeight,
} from "@agentrl/policy";
import { POLICY_VERSION_HEADER } from "../remote.js";
import { ApiError } from "./schema.js";
import { readBody } from "./body.js";

const PullSchema = z.strictObject({
  path: z.string().min(1).optional(),
  url: z.url().optional(),
  version: z.number().int().nonnegative().optional(),
});

/** Where JSON pulls may read weights from: folders (real paths) and URL prefixes. */
export interface WeightSources {
  folders: string[];
  urls: URL[];
}

/** `--weights-from` entries → folders (resolved, symbolic links followed) and URL prefixes. */
export function parseWeightSources(entries: readonly string[]): WeightSources {
  const sources: WeightSources = { folders: [], urls: [] };
  for (const entry of entries) {
    if (/^https?:\/\//i.test(entry)) {
      const url = new URL(entry);
      if (url.search || url.hash)
        throw new RangeError(`a weights URL prefix has no query or fragment: ${entry}`);
      sources.urls.push(url);
    } else {
      const folder = resolve(entry);
      let real = folder;
      try {
        real = realpathSync(folder);
      } catch {
        // Not there yet: kept as written (a path is checked again once it exists).
      }
      sources.folders.push(real);
    }
  }
  return sources;
}

function inside(path: string, folder: string): boolean {
  return path === folder || path.startsWith(folder.endsWith(sep) ? folder : folder + sep);
}

function refused(message: string, param: "path" | "url"): ApiError {
  return new ApiError(403, message, "invalid_request_error", param, "weights_source_refused");
}

/** Throws 403 unless `path` (and, once it exists, its real path) lies in an allowed folder. */
async function checkPath(path: string, sources: WeightSources): Promise<void> {
  if (sources.folders.length === 0)
    throw refused(
      "this server reads no weights from paths (start it with --weights-from <folder>)",
      "path",
    );
  const absolute = resolve(path);
  const allowed = (candidate: string) =>
    sources.folders.some((folder) => inside(candidate, folder));
  if (!allowed(absolute))
    throw refused(
      `${path} is outside the folders weights may be read from (--weights-from)`,
      "path",
    );
  const real = await realpath(absolute).catch(() => undefined);
  if (real !== undefined && !allowed(real))
    throw refused(
      `${path} leads outside the folders weights may be read from (--weights-from)`,
      "path",
    );
}

/** Throws 403 unless `url` lies below an allowed URL prefix (same origin, path below the prefix's). */
function checkUrl(url: string, sources: WeightSources): void {
  if (sources.urls.length === 0)
    throw refused(
      "this server fetches no weights from URLs (start it with --weights-from <url-prefix>)",
      "url",
    );
  const target = new URL(url);
  const allowed = sources.urls.some((prefix) => {
    if (target.origin !== prefix.origin || target.username || target.password) return false;
    const base =
      prefix.pathname.endsWith("/") || prefix.pathname.endsWith(".safetensors")
        ? prefix.pathname
        : `${prefix.pathname}/`;
    return target.pathname === prefix.pathname || target.pathname.startsWith(base);
  });
  if (!allowed)
    throw refused(
      `${target.origin}${target.pathname} is outside the URL prefixes weights may be fetched from (--weights-from)`,
      "url",
    );
}

function invalid(message: string, param: string | null = null): ApiError {
  return new ApiError(400, message, "invalid_request_error", param, "invalid_value");
}

/** `__metadata__.version` of a safetensors file, when it holds an integer. */
export function safetensorsVersion(bytes: Uint8Array): number | undefined {
  if (bytes.byteLength < 8) return undefined;
  const length = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true));
  try {
    const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + length))) as {
      __metadata__?: { version?: unknown };
    };
    const version = Number(header.__metadata__?.version);
    return Number.isInteger(version) && version >= 0 ? version : undefined;
  } catch {
    return undefined;
  }
}

function tensorsOf(bytes: Uint8Array, source: string): NamedWeight[] {
  try {
    return [...parseSafetensors(bytes, source).values()];
  } catch (error) {
    if (error instanceof SafetensorsError) throw invalid(error.message);
    throw error;
  }
}

/** Reads the request into weights and their version (400 for a bad body, 404 for a missing folder). */
export async function readWeightsRequest(
  request: IncomingMessage,
  options: {
    maxBytes: number;
    currentVersion: number;
    sources: WeightSources;
    pullTimeoutMs: number;
  },
): Promise<ExportedWeights> {
  const type = (request.headers["content-type"] ?? "").split(";")[0].trim();
  if (type === "application/json") {
    let json: unknown;
    try {
      json = JSON.parse((await readBody(request, 1024 * 1024)).toString("utf8"));
    } catch (error) {
      if (error instanceof ApiError) throw error;
      throw invalid(`the request body is not valid JSON (${(error as Error).message})`);
    }
    const parsed = PullSchema.safeParse(json);
    if (!parsed.success)
      throw invalid(
        parsed.error.issues[0].message,
        parsed.error.issues[0].path.map(String).join(".") || null,
      );
    const { path, url, version } = parsed.data;
    if ((path === undefined) === (url === undefined))
      throw invalid("send either path or url", "path");
    if (path !== undefined) await checkPath(path, options.sources);
    else checkUrl(url!, options.sources);
    const tensors =
      path !== undefined
        ? await readFolder(path)
        : await fetchWeights(url!, options.maxBytes, options.pullTimeoutMs);
    return { version: version ?? options.currentVersion + 1, tensors };
  }
  if (type !== "application/octet-stream")
    throw invalid(
      `content-type must be application/octet-stream (safetensors) or application/json, got "${type}"`,
    );
  const bytes = await readBody(request, options.maxBytes);
  const header = request.headers[POLICY_VERSION_HEADER];
  const given = header === undefined ? undefined : Number(header);
  if (given !== undefined && !(Number.isInteger(given) && given >= 0))
    throw invalid(`${POLICY_VERSION_HEADER} must be a non-negative integer, got "${header}"`);
  const version = given ?? safetensorsVersion(bytes) ?? options.currentVersion + 1;
  return { version, tensors: tensorsOf(bytes, "body") };
}

async function readFolder(path: string): Promise<NamedWeight[]> {
  const nested = join(path, "policy");
  const folder = await access(join(nested, "config.json")).then(
    () => nested,
    () => path,
  );
  try {
    return [...(await readSafetensorsDirectory(folder)).values()];
  } catch (error) {
    if (error instanceof SafetensorsError)
      throw new ApiError(404, error.message, "not_found_error", "path", "weights_not_found");
    if ((error as NodeJS.ErrnoException).code === "ENOENT")
      throw new ApiError(
        404,
        `${path}: no such folder`,
        "not_found_error",
        "path",
        "weights_not_found",
      );
    throw error;
  }
}

async function fetchWeights(
  url: string,
  maxBytes: number,
  timeoutMs: number,
): Promise<NamedWeight[]> {
  const target = url.endsWith(".safetensors")
    ? url
    : `${url.replace(/\/+$/, "")}/model.safetensors`;
  const signal = AbortSignal.timeout(timeoutMs);
  const failed = (error: unknown) =>
    signal.aborted
      ? new ApiError(
          504,
          `${target} did not deliver the weights within ${timeoutMs} ms`,
          "server_error",
          "url",
          "weights_pull_timeout",
        )
      : new ApiError(
          404,
          `${target}: ${(error as Error).message}${(error as { cause?: Error }).cause ? ` (${(error as { cause?: Error }).cause!.message})` : ""}`,
          "not_found_error",
          "url",
          "weights_not_found",
        );
  let response: Response;
  let bytes: Uint8Array;
  try {
    // No redirects: a redirect could lead outside the allowed prefixes.
    response = await fetch(target, { signal, redirect: "manual" });
    if (!response.ok)
      throw new ApiError(
        404,
        `${target}: HTTP ${response.status}${response.status >= 300 && response.status < 400 ? " (redirects are not followed)" : ""}`,
        "not_found_error",
        "url",
        "weights_not_found",
      );
    const length = Number(response.headers.get("content-length") ?? NaN);
    if (length > maxBytes)
      throw new ApiError(
        413,
        `${target} exceeds ${maxBytes} bytes`,
        "invalid_request_error",
        "url",
        "body_too_large",
      );
    bytes = new Uint8Array(await response.arrayBuffer());
  } catch (error) {
    if (error instanceof ApiError) throw error;
    throw failed(error);
  }
  if (bytes.byteLength > maxBytes)
    throw new ApiError(
      413,
      `${target} exceeds ${maxBytes} bytes`,
      "invalid_request_error",
      "url",
      "body_too_large",
    );
  return tensorsOf(bytes, target);
}
