/** Request bodies of the server, read with a size limit. */
import type { IncomingMessage } from "node:http";
import { ApiError } from "./schema.js";

/** Reads a whole body; 413 beyond `maxBytes`. */
export async function readBody(request: IncomingMessage, maxBytes: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const part of request) {
    size += (part as Buffer).length;
    if (size > maxBytes)
      throw new ApiError(
        413,
        `the request body exceeds ${maxBytes} bytes`,
        "invalid_request_error",
        null,
        "body_too_large",
      );
    parts.push(part as Buffer);
  }
  return Buffer.concat(parts);
}

/** Reads and parses a JSON body; 413 beyond `maxBytes`, 400 when it is not JSON. */
export async function readJsonBody(request: IncomingMessage, maxBytes: number): Promise<unknown> {
  const text = (await readBody(request, maxBytes)).toString("utf8");
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ApiError(
      400,
      `the request body is not valid JSON (${(error as Error).message})`,
      "invalid_request_error",
      null,
      "invalid_json",
    );
  }
}
