/**
 * Malformed requests for the controller and its workers, generated from a seed: fuzzed JSON
 * shapes over every route of both protocols (FC under `/api`, AgentBench v0.2 under
 * `/v0.2/api`), bad JSON, bad UTF-8, deep nesting, oversized bodies, wrong methods, unknown
 * routes, missing or wrong tokens, hostile tool-call arguments. The hardening test sends
 * 1,000 of them (no answer may be a 5xx); `npm run bench -- controller` sends 10,000.
 */
import http from "node:http";
import { Random } from "../random.js";

/** One request to send: where, how, and the raw bytes of its body. */
export interface FuzzRequest {
  /** `controller` or `worker`: which server it goes to. */
  target: "controller" | "worker";
  method: string;
  /** Path and query, e.g. `/api/get_indices?name=kg`. */
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
  /** A short name of what was fuzzed, for reports. */
  kind: string;
}

/** What the fuzzer needs to know about the servers under test. */
export interface FuzzTargets {
  token: string;
  /** A task name the controller serves (e.g. `kg`). */
  task: string;
  /** One tool name of that task (e.g. `get_relations`). */
  tool: string;
  /** Session ids that may exist (FC strings); their numbers serve as v0.2 ids. */
  sessionIds: () => string[];
  /** Largest body the servers accept, in bytes. */
  maxBodyBytes: number;
}

const CONTROLLER_ROUTES: [string, string][] = [
  ["POST", "/api/start_sample"],
  ["POST", "/api/interact"],
  ["POST", "/api/cancel"],
  ["POST", "/api/cancel_all"],
  ["GET", "/api/list_workers"],
  ["GET", "/api/list_sessions"],
  ["GET", "/api/get_indices"],
  ["POST", "/api/receive_heartbeat"],
  ["POST", "/v0.2/api/start_sample"],
  ["POST", "/v0.2/api/interact"],
  ["POST", "/v0.2/api/cancel"],
  ["POST", "/v0.2/api/cancel_all"],
  ["POST", "/v0.2/api/calculate_overall"],
  ["GET", "/v0.2/api/list_workers"],
  ["GET", "/v0.2/api/list_sessions"],
  ["GET", "/v0.2/api/get_indices"],
];

const WORKER_ROUTES: [string, string][] = [
  ["POST", "/api/start_sample"],
  ["POST", "/api/interact"],
  ["POST", "/api/cancel"],
  ["GET", "/api/get_sessions"],
  ["GET", "/api/worker_status"],
  ["GET", "/api/get_indices"],
];

/** Builds a generator of malformed (and some well-formed) requests. */
export function createFuzzer(seed: number, targets: FuzzTargets): () => FuzzRequest {
  const generator = new Random(seed); // the same seed gives the same requests
  const random = () => generator.next();
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];
  const chance = (p: number): boolean => random() < p;
  const integer = (max: number): number => Math.floor(random() * max);

  const strings = [
    "",
    "kg",
    "kg-std",
    targets.task,
    "os-std",
    "../../etc/passwd",
    "\u0000",
    "💥".repeat(50),
    "x".repeat(5000),
    "null",
    "1e309",
    "-1",
    "0x10",
    " 3 ",
    "<tool_call>",
  ];
  /** A random JSON value, nested up to `depth`. */
  const value = (depth: number): unknown => {
    const roll = integer(depth > 0 ? 10 : 7);
    switch (roll) {
      case 0:
        return null;
      case 1:
        return chance(0.5);
      case 2:
        return pick([0, -1, 1.5, 2 ** 53 + 1, -1e308, 1e-320, 7]);
      case 3:
      case 4:
        return pick(strings);
      case 5:
        return integer(50);
      case 6:
        return pick([
          "running",
          "normal",
          "cancelled",
          "agent context limit",
          "assistant",
          "user",
          "function",
        ]);
      case 7:
        return Array.from({ length: integer(4) }, () => value(depth - 1));
      default: {
        const keys = [
          "name",
          "index",
          "messages",
          "session_id",
          "agent_response",
          "status",
          "content",
          "role",
          "tool_calls",
          "function",
          "arguments",
          "results",
          "address",
          "concurrency",
          "indices",
          "__proto__",
          "constructor",
        ];
        return Object.fromEntries(
          Array.from({ length: integer(5) }, () => [pick(keys), value(depth - 1)]),
        );
      }
    }
  };
  const nested = (depth: number, open: string, close: string, inner = "1"): string =>
    open.repeat(depth) + inner + close.repeat(depth);
  const sessionId = (): string => {
    const known = targets.sessionIds();
    return known.length && chance(0.7)
      ? pick(known)
      : pick(["nope-1", "", "0", "-1", "x".repeat(300), "1e3"]);
  };
  const sessionNumber = (): unknown => {
    const id = sessionId();
    const number = Number(id.split("-").pop());
    return chance(0.6) && Number.isInteger(number) ? number : value(2);
  };
  const toolArguments = (): unknown =>
    pick<() => unknown>([
      () => value(3),
      () => nested(5_000 + integer(50_000), "[", "]"),
      () => nested(200, '{"a":', "}"),
      () => JSON.parse(nested(60, '{"a":', "}")),
      () => "{not json",
      () => "x".repeat(integer(200_000)),
    ])();
  const assistantTurn = (): unknown => ({
    role: chance(0.9) ? "assistant" : value(1),
    content: chance(0.5) ? null : value(1),
    tool_calls: chance(0.8)
      ? [
          {
            id: value(1),
            type: chance(0.8) ? "function" : value(1),
            function: { name: chance(0.7) ? targets.tool : value(1), arguments: toolArguments() },
          },
        ]
      : value(2),
  });
  /** A body that is almost right for the route, with something wrong (or nothing). */
  const shapedBody = (path: string): unknown => {
    const route = path.replace(/^\/v0\.2/, "");
    const v02 = path.startsWith("/v0.2");
    const base: Record<string, unknown> = (() => {
      switch (route) {
        case "/api/start_sample":
          return {
            name: chance(0.7) ? pick([targets.task, `${targets.task}-std`]) : value(1),
            index: chance(0.6) ? integer(40) : value(2),
            ...(chance(0.2) ? { session_id: sessionId() } : {}),
          };
        case "/api/interact":
          return v02
            ? {
                session_id: sessionNumber(),
                agent_response: chance(0.8)
                  ? {
                      status: pick(["normal", "cancelled", "agent context limit", "bogus"]),
                      content: chance(0.8)
                        ? JSON.stringify({ name: targets.tool, arguments: toolArguments() })
                        : value(2),
                    }
                  : value(2),
              }
            : { messages: chance(0.8) ? [assistantTurn()] : value(2) };
        case "/api/cancel":
          return v02 ? { session_id: sessionNumber() } : {};
        case "/api/calculate_overall":
          return {
            name: chance(0.7) ? targets.task : value(1),
            results: chance(0.7)
              ? Array.from({ length: integer(4) }, () => ({
                  index: value(1),
                  status: pick(["completed", "running", "bogus", "task error"]),
                  result: value(3),
                  history: chance(0.5)
                    ? [{ role: pick(["user", "agent", "x"]), content: value(1) }]
                    : value(2),
                }))
              : value(2),
          };
        case "/api/receive_heartbeat":
          return {
            name: chance(0.5) ? targets.task : value(1),
            address: pick([
              "http://127.0.0.1:9/api",
              "not a url",
              "file:///etc/passwd",
              "http://[::1",
            ]),
            concurrency: value(1),
            indices: chance(0.5) ? [1, 2, 3] : value(2),
          };
        default:
          return value(3) as Record<string, unknown>;
      }
    })();
    if (chance(0.3) && typeof base === "object" && base !== null) {
      const keys = Object.keys(base);
      if (keys.length) (base as Record<string, unknown>)[pick(keys)] = value(3);
    }
    return base;
  };

  return () => {
    const target = chance(0.85) ? "controller" : "worker";
    let [method, path] = pick(target === "controller" ? CONTROLLER_ROUTES : WORKER_ROUTES);
    let kind = "shaped body";
    const headers: Record<string, string> = { "content-type": "application/json" };
    const auth = random();
    if (auth < 0.85) headers.authorization = `Bearer ${targets.token}`;
    else if (auth < 0.9)
      headers.authorization = pick([
        "Bearer wrong",
        "Basic !!!",
        "Bearer ",
        `Basic ${Buffer.from(":" + "x").toString("base64")}`,
      ]);
    else if (auth < 0.95) path = `/t/${encodeURIComponent(targets.token)}${path}`;
    if (chance(0.5)) headers.session_id = sessionId();
    if (chance(0.08)) {
      method = pick(["PUT", "DELETE", "PATCH", "OPTIONS", method === "GET" ? "POST" : "GET"]);
      kind = "wrong method";
    }
    if (chance(0.06)) {
      path = pick([
        "/api/nothing",
        "/",
        "/api",
        "/v0.2",
        "/%zz",
        "/t/%E0%A4%A/api/get_indices",
        `/api/${"a".repeat(4000)}`,
        "/api/start_sample/../list_workers",
        "/t/x",
      ]);
      kind = "unknown route";
    }
    if (path.endsWith("get_indices") && chance(0.8))
      path += `?${new URLSearchParams({ name: pick([targets.task, `${targets.task}-std`, "", "nope", "%zz"]), ...(chance(0.3) ? { split: pick(["train", "test", "dev", ""]) } : {}) })}`;
    if (path.endsWith("cancel_all") && chance(0.5)) path += `?name=${pick([targets.task, "nope"])}`;
    let body: Buffer | undefined;
    const shape = random();
    if (method === "GET" && chance(0.8)) body = undefined;
    else if (shape < 0.55)
      body = Buffer.from(JSON.stringify(shapedBody(path.replace(/^\/t\/[^/]*/, "").split("?")[0])));
    else if (shape < 0.65) {
      body = Buffer.from(JSON.stringify(value(4)));
      kind = "random JSON";
    } else if (shape < 0.73) {
      body = Buffer.from(
        pick([
          '{"name": "kg", "index": ',
          "{{",
          "[1,2",
          '{"a":1}}',
          "nul",
          '"unterminated',
          "{'single': 1}",
          "1 2",
          "\u0000\u0000",
        ]),
      );
      kind = "bad JSON";
    } else if (shape < 0.8) {
      body = Buffer.concat([
        Buffer.from('{"name": "'),
        Buffer.from([0xc3, 0x28, 0xff, 0xfe, 0xed, 0xa0, 0x80]),
        Buffer.from('", "index": 0}'),
      ]);
      kind = "bad UTF-8";
    } else if (shape < 0.88) {
      const depth = 65 + integer(40_000);
      // Mostly where a nested value is parsed deepest: a tool call of a live session.
      if (chance(0.7)) {
        method = "POST";
        path = "/api/interact";
        headers.session_id = sessionId();
      }
      body = Buffer.from(
        chance(0.5)
          ? nested(depth, "[", "]")
          : `{"messages": [{"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "${targets.tool}", "arguments": ${nested(depth, '{"a":', "}")}}}]}]}`,
      );
      kind = "deep nesting";
    } else if (shape < 0.93) {
      body = Buffer.alloc(targets.maxBodyBytes + 1 + integer(targets.maxBodyBytes), 0x20);
      kind = "oversized body";
    } else {
      body = Buffer.from(JSON.stringify(value(2)));
      delete headers["content-type"];
      if (chance(0.5))
        headers["content-type"] = pick([
          "text/plain",
          "application/x-www-form-urlencoded",
          "multipart/form-data; boundary=x",
        ]);
      kind = "wrong content type";
    }
    return { target, method, path, headers, body, kind };
  };
}

/** The status of one answer, or `closed` when the server closed the connection without one (allowed for oversized bodies). */
export type FuzzAnswer = number | "closed";

/** Sends one raw request to `base` (e.g. `http://127.0.0.1:5020`) over `agent`. */
export function sendRaw(
  base: string,
  request: FuzzRequest,
  agent: http.Agent,
  timeoutMs = 30_000,
): Promise<FuzzAnswer> {
  return new Promise((resolve) => {
    const url = new URL(base);
    const outgoing = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: request.method,
        path: request.path,
        agent,
        headers: {
          ...request.headers,
          ...(request.body ? { "content-length": String(request.body.length) } : {}),
        },
        timeout: timeoutMs,
      },
      (response) => {
        response.resume();
        response.on("end", () => resolve(response.statusCode ?? 0));
        response.on("error", () => resolve(response.statusCode ?? "closed"));
      },
    );
    outgoing.on("error", () => resolve("closed"));
    outgoing.on("timeout", () => outgoing.destroy());
    outgoing.end(request.body);
  });
}
