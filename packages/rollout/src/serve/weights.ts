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
 */
import type { IncomingMessage } from "node:http";
import { access } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { SafetensorsError, parseSafetensors, readSafetensorsDirectory, type ExportedWeights, type NamedWeight } from "@agentrl/policy";
import { POLICY_VERSION_HEADER } from "../remote.js";
import { ApiError } from "./schema.js";
import { readBody } from "./body.js";


const PullSchema = z.strictObject({
  path: z.string().min(1).optional(),
  url: z.url().optional(),
  version: z.number().int().nonnegative().optional(),
});

function invalid(message: string, param: string | null = null): ApiError {
  return new ApiError(400, message, "invalid_request_error", param, "invalid_value");
}

/** `__metadata__.version` of a safetensors file, when it holds an integer. */
export function safetensorsVersion(bytes: Uint8Array): number | undefined {
  if (bytes.byteLength < 8) return undefined;
  const length = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true));
  try {
    const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + length))) as { __metadata__?: { version?: unknown } };
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
export async function readWeightsRequest(request: IncomingMessage, options: { maxBytes: number; currentVersion: number }): Promise<ExportedWeights> {
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
    if (!parsed.success) throw invalid(parsed.error.issues[0].message, parsed.error.issues[0].path.map(String).join(".") || null);
    const { path, url, version } = parsed.data;
    if ((path === undefined) === (url === undefined)) throw invalid("send either path or url", "path");
    const tensors = path !== undefined ? await readFolder(path) : await fetchWeights(url!, options.maxBytes);
    return { version: version ?? options.currentVersion + 1, tensors };
  }
  if (type !== "application/octet-stream") throw invalid(`content-type must be application/octet-stream (safetensors) or application/json, got "${type}"`);
  const bytes = await readBody(request, options.maxBytes);
  const header = request.headers[POLICY_VERSION_HEADER];
  const given = header === undefined ? undefined : Number(header);
  if (given !== undefined && !(Number.isInteger(given) && given >= 0)) throw invalid(`${POLICY_VERSION_HEADER} must be a non-negative integer, got "${header}"`);
  const version = given ?? safetensorsVersion(bytes) ?? options.currentVersion + 1;
  return { version, tensors: tensorsOf(bytes, "body") };
}

async function readFolder(path: string): Promise<NamedWeight[]> {
  const nested = join(path, "policy");
  const folder = await access(join(nested, "config.json")).then(() => nested, () => path);
  try {
    return [...(await readSafetensorsDirectory(folder)).values()];
  } catch (error) {
    if (error instanceof SafetensorsError) throw new ApiError(404, error.message, "not_found_error", "path", "weights_not_found");
    if ((error as NodeJS.ErrnoException).code === "ENOENT") throw new ApiError(404, `${path}: no such folder`, "not_found_error", "path", "weights_not_found");
    throw error;
  }
}

async function fetchWeights(url: string, maxBytes: number): Promise<NamedWeight[]> {
  const target = url.endsWith(".safetensors") ? url : `${url.replace(/\/+$/, "")}/model.safetensors`;
  let response: Response;
  try {
    response = await fetch(target);
  } catch (error) {
    throw new ApiError(404, `${target}: ${(error as Error).message}`, "not_found_error", "url", "weights_not_found");
  }
  if (!response.ok) throw new ApiError(404, `${target}: HTTP ${response.status}`, "not_found_error", "url", "weights_not_found");
  const bytes = new Uint8Array(await response.arrayBuffer());
  if (bytes.byteLength > maxBytes) throw new ApiError(413, `${target} exceeds ${maxBytes} bytes`, "invalid_request_error", "url", "body_too_large");
  return tensorsOf(bytes, target);
}
