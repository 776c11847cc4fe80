/**
 * The little HTTP layer the controller, the workers and the HTTP client share: a `node:http`
 * server with JSON bodies with a size limit, bearer tokens, a router that turns every
 * failure into a JSON error response (so a bad request never crashes a server), and a
 * keep-alive JSON requester (undici) with per-request time limits.
 */
import http from "node:http";
import { timingSafeEqual } from "node:crypto";
import type { AddressInfo } from "node:net";
import { Agent, type Dispatcher } from "undici";
import { EnvironmentApiError } from "./protocol.js";

/** Largest accepted request body, in bytes (default 8 MiB). */
export const DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024;

/** Deepest nesting of arrays and objects accepted in a JSON body (deeper → 400). */
export const MAX_JSON_DEPTH = 64;

/** Time a client has to send the request headers, in ms. */
export const DEFAULT_HEADERS_TIMEOUT_MS = 20_000;

/** Time a client has to send a whole request (headers and body), in ms. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;

/** Most sockets open at once; further connections are dropped by node until one closes. */
export const DEFAULT_MAX_CONNECTIONS = 4_096;

/** A parsed request handed to a route. */
export interface RouteRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: http.IncomingHttpHeaders;
  /** The parsed JSON body; `undefined` when there was none. */
  body: unknown;
}

/** What a route returns: a JSON body and, optionally, response headers. */
export interface RouteResponse {
  body: unknown;
  headers?: Record<string, string>;
  status?: number;
}

export type RouteHandler = (request: RouteRequest) => Promise<RouteResponse> | RouteResponse;

export interface JsonServerOptions {
  /** `"METHOD /path"` → handler, e.g. `"POST /api/interact"`. */
  routes: Record<string, RouteHandler>;
  /** When set, every request must carry `Authorization: Bearer <token>` (else 401). */
  token?: string;
  /** Largest accepted body in bytes. Default 8 MiB. */
  maxBodyBytes?: number;
  /** Time to receive the headers, in ms. Default 20,000. */
  headersTimeoutMs?: number;
  /** Time to receive the whole request, in ms (not the time to answer it). Default 60,000. */
  requestTimeoutMs?: number;
  /** Most open sockets. Default 4,096. */
  maxConnections?: number;
}

/** True for the loopback addresses a server may bind without a token. */
export function isLoopbackHost(host: string): boolean {
  return (
    host === "127.0.0.1" ||
    host === "::1" ||
    host === "localhost" ||
    /^127\.\d+\.\d+\.\d+$/.test(host)
  );
}

/** Compares two secrets in constant time. */
function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * Whether a request carries the token: `Authorization: Bearer <token>`, or HTTP Basic auth
 * with the token as password (what Python's `requests` sends from a `~/.netrc` entry, so an
 * unmodified AgentBench client can authenticate).
 */
export function hasValidToken(headers: http.IncomingHttpHeaders, token: string): boolean {
  const header = headers.authorization;
  if (typeof header !== "string") return false;
  if (header.startsWith("Bearer ")) return sameSecret(header.slice("Bearer ".length), token);
  if (header.startsWith("Basic ")) {
    const decoded = Buffer.from(header.slice("Basic ".length), "base64").toString("utf8");
    const colon = decoded.indexOf(":");
    return colon >= 0 && sameSecret(decoded.slice(colon + 1), token);
  }
  return false;
}

/** The path prefix that carries the token in the URL, for clients that cannot send headers: `/t/<token>/…`. */
export const TOKEN_PATH_PREFIX = "/t/";

/**
 * Splits `/t/<token>/rest` into the token and `/rest` (AgentBench's client takes only a base
 * address, e.g. `http://127.0.0.1:5020/t/<token>/v0.2/api`); other paths come back unchanged.
 */
export function tokenInPath(pathname: string): { token?: string; path: string } {
  if (!pathname.startsWith(TOKEN_PATH_PREFIX)) return { path: pathname };
  const end = pathname.indexOf("/", TOKEN_PATH_PREFIX.length);
  if (end < 0) return { path: pathname };
  try {
    return {
      token: decodeURIComponent(pathname.slice(TOKEN_PATH_PREFIX.length, end)),
      path: pathname.slice(end),
    };
  } catch {
    return { path: pathname }; // not valid percent-encoding: no token (401)
  }
}

/** The session id of a request: the `session_id` header (or, leniently, the body field). */
export function sessionIdOf(request: RouteRequest): string {
  const header = request.headers["session_id"] ?? request.headers["session-id"];
  const fromHeader = Array.isArray(header) ? header[0] : header;
  const fromBody =
    typeof request.body === "object" && request.body !== null
      ? (request.body as Record<string, unknown>).session_id
      : undefined;
  const id =
    fromHeader ??
    (typeof fromBody === "string" || typeof fromBody === "number" ? String(fromBody) : undefined);
  if (!id)
    throw new EnvironmentApiError(400, "missing session id: send it in the session_id header");
  return id;
}

/** Creates (but does not start) an HTTP server that answers JSON routes. */
export function createJsonServer(options: JsonServerOptions): http.Server {
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const headersTimeout = options.headersTimeoutMs ?? DEFAULT_HEADERS_TIMEOUT_MS;
  // How often node looks for requests past their time limits (its default, 30 s, would let a limit of 1 s run 31 s).
  const server = http.createServer(
    { connectionsCheckingInterval: Math.min(1_000, headersTimeout) },
    (request, response) => {
      handle(request, response).catch((error) => {
        if ((request as http.IncomingMessage & { closeAfterAnswer?: boolean }).closeAfterAnswer)
          response.setHeader("connection", "close");
        sendError(response, error);
      });
    },
  );
  // Longer than the clients' idle sockets so a reused keep-alive socket is rarely closed under them.
  server.keepAliveTimeout = 65_000;
  // A slow client (headers or body trickling in) is answered 408 and cut off; the time a route
  // takes to answer is not counted (node stops the timer once the body has arrived).
  server.headersTimeout = headersTimeout;
  server.requestTimeout = Math.max(
    options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
    server.headersTimeout,
  );
  server.maxConnections = options.maxConnections ?? DEFAULT_MAX_CONNECTIONS;
  server.maxHeadersCount = 200;
  server.on("clientError", (error: NodeJS.ErrnoException, socket) => {
    const status =
      error.code === "ERR_HTTP_REQUEST_TIMEOUT"
        ? "408 Request Timeout"
        : error.code === "HPE_HEADER_OVERFLOW"
          ? "431 Request Header Fields Too Large"
          : "400 Bad Request";
    if (socket.writable) socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\n\r\n`);
    else socket.destroy();
  });

  async function handle(
    request: http.IncomingMessage,
    response: http.ServerResponse,
  ): Promise<void> {
    let url: { pathname: string; searchParams: URLSearchParams };
    try {
      url = requestTarget(request.url ?? "/");
    } catch {
      discardBody(request, maxBodyBytes);
      throw new EnvironmentApiError(400, "the request target is not a valid path");
    }
    const method = request.method ?? "GET";
    const { token: pathToken, path } = tokenInPath(url.pathname);
    url.pathname = path;
    const authorized =
      options.token === undefined ||
      hasValidToken(request.headers, options.token) ||
      (pathToken !== undefined && sameSecret(pathToken, options.token));
    if (!authorized) {
      discardBody(request, maxBodyBytes);
      throw new EnvironmentApiError(
        401,
        "missing or wrong token (send Authorization: Bearer <token>, or put it in the path: /t/<token>/api/…)",
      );
    }
    const route = options.routes[`${method} ${url.pathname}`];
    if (!route) {
      discardBody(request, maxBodyBytes);
      const allowed = Object.keys(options.routes).filter((key) => key.endsWith(` ${url.pathname}`));
      if (allowed.length)
        throw new EnvironmentApiError(
          405,
          `${method} is not allowed on ${url.pathname}; use ${allowed.map((key) => key.split(" ")[0]).join(" or ")}`,
        );
      throw new EnvironmentApiError(404, `no route ${method} ${url.pathname}`);
    }
    const body = await readJsonBody(request, maxBodyBytes);
    const result = await route({
      method,
      path: url.pathname,
      query: url.searchParams,
      headers: request.headers,
      body,
    });
    sendJson(response, result.status ?? 200, result.body, result.headers);
  }
  return server;
}

/** A request target made only of plain path segments (`/api/interact`): the URL parser would give it back unchanged. */
const PLAIN_PATH = /^(?:\/[A-Za-z0-9_-]+)+$/;

/** The path and query of a request target; plain paths (every call of the protocol) skip the URL parser. */
function requestTarget(target: string): { pathname: string; searchParams: URLSearchParams } {
  if (PLAIN_PATH.test(target)) return { pathname: target, searchParams: new URLSearchParams() };
  return new URL(target, "http://server");
}

/** One strict UTF-8 decoder for every body (decoding a whole buffer keeps no state between calls). */
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Reads and parses a JSON body (empty → `undefined`). 413 as soon as the declared or received
 * size passes `maxBytes` (the rest is not read: the socket is closed after the answer);
 * 400 when the bytes are not UTF-8, not JSON, or nested deeper than `MAX_JSON_DEPTH`.
 */
export async function readJsonBody(
  request: http.IncomingMessage,
  maxBytes: number,
): Promise<unknown> {
  const declared = Number(request.headers["content-length"] ?? 0);
  if (declared > maxBytes)
    throw tooLarge(
      request,
      `request body of ${declared} bytes is larger than the limit of ${maxBytes}`,
    );
  const chunks: Buffer[] = [];
  let size = 0;
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size <= maxBytes) return void chunks.push(chunk);
      request.off("data", onData);
      request.pause();
      reject(tooLarge(request, `request body is larger than the limit of ${maxBytes} bytes`));
    };
    request.on("data", onData);
    request.on("end", resolve);
    request.on("error", (error) =>
      reject(new EnvironmentApiError(400, `request body could not be read: ${error.message}`)),
    );
  });
  let text: string;
  try {
    text = strictUtf8.decode(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
  } catch {
    throw new EnvironmentApiError(400, "request body is not valid UTF-8");
  }
  if (text.trim() === "") return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new EnvironmentApiError(
      400,
      `request body is not valid JSON: ${(error as Error).message}`,
    );
  }
  if (jsonDepth(value, MAX_JSON_DEPTH) > MAX_JSON_DEPTH)
    throw new EnvironmentApiError(
      400,
      `request body is nested deeper than ${MAX_JSON_DEPTH} levels`,
    );
  return value;
}

/** Drops a body the route will not read: small ones are drained (the socket stays reusable), others end with the answer. */
function discardBody(request: http.IncomingMessage, maxBytes: number): void {
  const declared = Number(request.headers["content-length"] ?? 0);
  if (!(declared <= maxBytes) || request.headers["transfer-encoding"] !== undefined) {
    (request as http.IncomingMessage & { closeAfterAnswer?: boolean }).closeAfterAnswer = true;
  }
  request.resume();
}

/** A 413 whose answer closes the connection (the unread rest of the body is dropped with it). */
function tooLarge(request: http.IncomingMessage, message: string): EnvironmentApiError {
  (request as http.IncomingMessage & { closeAfterAnswer?: boolean }).closeAfterAnswer = true;
  return new EnvironmentApiError(413, message);
}

/** Nesting depth of a parsed JSON value, counted without recursion; stops counting past `limit`. */
export function jsonDepth(value: unknown, limit: number): number {
  let deepest = 0;
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length) {
    const [item, depth] = stack.pop()!;
    if (typeof item !== "object" || item === null) continue;
    deepest = Math.max(deepest, depth + 1);
    if (deepest > limit) return deepest;
    for (const child of Array.isArray(item) ? item : Object.values(item))
      stack.push([child, depth + 1]);
  }
  return deepest;
}

export function sendJson(
  response: http.ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  if (response.headersSent) {
    response.end();
    return;
  }
  const text = JSON.stringify(body ?? null);
  response.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    ...headers,
  });
  response.end(text);
}

function sendError(response: http.ServerResponse, error: unknown): void {
  const status = error instanceof EnvironmentApiError ? error.status : 500;
  const message = error instanceof Error ? error.message : String(error);
  sendJson(response, status, { error: message, detail: message });
}

/** Starts `server` on `host:port` (0 = a free port) and resolves with the port it got. */
export function listen(server: http.Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** Closes `server`, ending idle keep-alive sockets so it does not linger. */
export function closeServer(server: http.Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve();
    server.close(() => resolve());
    server.closeIdleConnections();
    setTimeout(() => server.closeAllConnections(), 1_000).unref();
  });
}

/** A JSON response as the requester sees it. */
export interface JsonResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: unknown;
}

export interface JsonRequestOptions {
  method: "GET" | "POST";
  body?: unknown;
  headers?: Record<string, string>;
  /** Time limit in milliseconds: for the answer to begin, and again for each pause inside it (a JSON answer on a live connection comes whole). */
  timeoutMs: number;
}

/** Where a request goes: the origin and path of a URL, and the credentials it spelled. */
interface RequestTarget {
  origin: string;
  path: string;
  /** `Basic …` from a URL's `user:password@` (an `authorization` header given wins). */
  authorization?: string;
}

/** Connection-level failures (the peer is gone), as opposed to HTTP error answers. */
export class ConnectionError extends EnvironmentApiError {}

/** undici's codes for a deadline passed: no answer (headers), or a pause inside the answer's body. */
const DEADLINE_CODES = new Set(["UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT"]);

/**
 * Codes of a connection closed under a request: most likely a kept-alive connection the peer
 * had just closed as the request went out, so the request is sent once more on a new one (a
 * dead peer then answers connection refused).
 */
const RETRIED_CODES = new Set(["UND_ERR_SOCKET", "ECONNRESET"]);

/**
 * Sends JSON requests over keep-alive connections, on undici (`bench/scale-controller.ts`:
 * ~25 % more calls/s than node:http's client where the client is the bottleneck, and fewer GC
 * pauses). A request that fails because its connection was closed under it is sent once more
 * on a new one.
 */
export class JsonRequester {
  private readonly agent: Agent;
  /** Parsed request targets by URL (a client calls a handful of URLs over and over). */
  private readonly targets = new Map<string, RequestTarget>();

  constructor(options: { maxSockets?: number } = {}) {
    const maxSockets = options.maxSockets ?? Infinity;
    // Idle connections are dropped after 30 s, before the servers' 65 s keep-alive timeout
    // closes them under us (the timeout does not affect requests in flight).
    this.agent = new Agent({
      connections: Number.isFinite(maxSockets) ? maxSockets : null,
      keepAliveTimeout: 30_000,
      keepAliveMaxTimeout: 30_000,
    });
  }

  async request(url: string, options: JsonRequestOptions): Promise<JsonResponse> {
    try {
      return await this.once(url, options);
    } catch (error) {
      if (RETRIED_CODES.has((error as { code?: string }).code ?? ""))
        return this.once(url, options);
      throw error;
    }
  }

  private async once(url: string, options: JsonRequestOptions): Promise<JsonResponse> {
    const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
    const headers: Record<string, string> = { accept: "application/json" };
    if (payload !== undefined) headers["content-type"] = "application/json";
    let target: RequestTarget;
    try {
      target = this.target(url);
    } catch (error) {
      throw new ConnectionError(
        502,
        `${options.method} ${url} failed: ${(error as Error).message}`,
      );
    }
    if (target.authorization) headers.authorization = target.authorization;
    if (options.headers) Object.assign(headers, options.headers);
    const failed = (error: unknown, stage: string) => {
      const code = (error as { code?: string }).code;
      if (code && DEADLINE_CODES.has(code))
        return new ConnectionError(
          504,
          `${options.method} ${url} took longer than ${options.timeoutMs} ms`,
        );
      return Object.assign(
        new ConnectionError(
          502,
          `${options.method} ${url} failed${stage}: ${(error as Error).message}`,
        ),
        { code },
      );
    };
    let answer: Dispatcher.ResponseData;
    try {
      // The deadline counts until the answer's headers, and again between its body's chunks.
      answer = await this.agent.request({
        origin: target.origin,
        path: target.path,
        method: options.method,
        headers,
        body: payload,
        headersTimeout: options.timeoutMs,
        bodyTimeout: options.timeoutMs,
      });
    } catch (error) {
      throw failed(error, "");
    }
    let text: string;
    try {
      text = await answer.body.text();
    } catch (error) {
      throw failed(error, " while reading");
    }
    let body: unknown = text;
    try {
      body = text === "" ? undefined : JSON.parse(text);
    } catch {
      // Not JSON: keep the text, the caller reports it.
    }
    return {
      status: answer.statusCode,
      headers: answer.headers as http.IncomingHttpHeaders,
      body,
    };
  }

  /** Origin and path of a URL, parsed once per URL (a client calls a handful of URLs over and over). */
  private target(url: string): RequestTarget {
    const known = this.targets.get(url);
    if (known) return known;
    const parsed = new URL(url);
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
      throw new TypeError(`${parsed.protocol} is not http: or https:`);
    const target: RequestTarget = {
      origin: parsed.origin,
      path: `${parsed.pathname}${parsed.search}`,
    };
    if (parsed.username || parsed.password) {
      const credentials = `${decodeURIComponent(parsed.username)}:${decodeURIComponent(parsed.password)}`;
      target.authorization = `Basic ${Buffer.from(credentials).toString("base64")}`;
    }
    // Bounded: URLs with a query (one per task name, worker...) must not grow it without end.
    if (this.targets.size >= 256) this.targets.clear();
    this.targets.set(url, target);
    return target;
  }

  /** Closes the pooled connections (requests in flight fail). */
  close(): void {
    void this.agent.destroy().catch(() => undefined);
  }
}

/** The error message of a JSON error body (`{error}` / `{detail}`), or the body as text. */
export function errorMessageOf(body: unknown): string {
  if (typeof body === "object" && body !== null) {
    const record = body as Record<string, unknown>;
    const message = record.error ?? record.detail;
    if (typeof message === "string") return message;
    return JSON.stringify(body);
  }
  return String(body ?? "");
}
