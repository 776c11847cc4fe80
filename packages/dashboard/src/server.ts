/**
 * The dashboard's HTTP server: the page and its assets (from this package and from npm
 * packages, nothing from a CDN), a JSON API over the run folders, server-sent events for
 * live updates, and a view of an environment controller's workers and sessions.
 *
 *   GET /                                   the page
 *   GET /api/runs                           run summaries (status, step, ETA)
 *   GET /api/runs/<name>/metrics            metrics.jsonl as an array
 *   GET /api/runs/<name>/config             config.yaml (text and parsed)
 *   GET /api/runs/<name>/trajectories       recorded steps: step, batch size, episodes' task/status/reward
 *   GET /api/runs/<name>/trajectories/<s>   the episodes recorded at step s
 *   GET /api/runs/<name>/evaluations        results.json and evaluations/*.json
 *   GET /api/environments                   the controller's workers, live and finished sessions, errors
 *   GET /api/events                         SSE: `metrics` {run, lines}, `trajectories` {run, steps}, `runs` [summaries]
 *
 * Bound to 127.0.0.1 by default; any other address requires a token, sent as
 * `Authorization: Bearer <token>` or `?token=` (the page passes it on, EventSource cannot set headers).
 */
import { AgentRLError } from "@agentrl/spec";
import http from "node:http";
import { timingSafeEqual } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  FileFollower,
  METRICS_FILE,
  findRuns,
  readConfig,
  readEvaluations,
  readMetrics,
  readTrajectorySteps,
  runFolder,
  runName,
  summarizeRun,
  type RunSummary,
} from "./runs.js";

export interface DashboardOptions {
  /** Folder of runs (or one run folder). */
  runs: string;
  /** Port; 0 picks a free one. Default 8265. */
  port?: number;
  /** Address to bind. Default 127.0.0.1; any other needs `token`. */
  host?: string;
  /** Token every request must carry. Required off loopback. */
  token?: string;
  /** Base URL of an environment controller (e.g. http://127.0.0.1:5020) for the Environments tab. */
  controllerUrl?: string;
  /** Bearer token of that controller. */
  controllerToken?: string;
  /** How often files and the controller are polled for live updates, ms. Default 1,000. */
  pollMs?: number;
}

export const DEFAULT_DASHBOARD_PORT = 8265;

/** Thrown for options that cannot work (e.g. a public address without a token). */
export class DashboardConfigError extends AgentRLError {}

export function isLoopbackHost(host: string): boolean {
  return (
    host === "127.0.0.1" ||
    host === "::1" ||
    host === "localhost" ||
    /^127\.\d+\.\d+\.\d+$/.test(host)
  );
}

const PUBLIC = join(dirname(fileURLToPath(import.meta.url)), "..", "public");
const require = createRequire(import.meta.url);
const UPLOT = dirname(require.resolve("uplot/dist/uPlot.iife.min.js"));

/** Static files: URL path → [file, content type]. */
const ASSETS: Record<string, [string, string]> = {
  "/": [join(PUBLIC, "index.html"), "text/html; charset=utf-8"],
  "/app.js": [join(PUBLIC, "app.js"), "text/javascript; charset=utf-8"],
  "/app.css": [join(PUBLIC, "app.css"), "text/css; charset=utf-8"],
  "/vendor/uPlot.iife.min.js": [join(UPLOT, "uPlot.iife.min.js"), "text/javascript; charset=utf-8"],
  "/vendor/uPlot.min.css": [join(UPLOT, "uPlot.min.css"), "text/css; charset=utf-8"],
};

class HttpError extends AgentRLError {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

interface SessionRow {
  id: string;
  name: string;
  index: number;
  worker_id: number;
  start: number;
  last_update: number;
  busy?: boolean;
  ended?: number;
}

/** What the Environments tab shows; finished sessions are those seen running and then gone. */
class ControllerWatch {
  private readonly finished: SessionRow[] = [];
  private live = new Map<string, SessionRow>();
  private readonly errors: { time: string; message: string }[] = [];

  constructor(
    private readonly url: string,
    private readonly token?: string,
  ) {}

  private async get(path: string): Promise<unknown> {
    const response = await fetch(`${this.url.replace(/\/$/, "")}${path}`, {
      headers: this.token ? { authorization: `Bearer ${this.token}` } : {},
      signal: AbortSignal.timeout(5000),
    });
    if (!response.ok)
      throw new Error(`${path}: HTTP ${response.status} ${(await response.text()).slice(0, 200)}`);
    return response.json();
  }

  async snapshot(): Promise<Record<string, unknown>> {
    try {
      const [workers, sessions] = await Promise.all([
        this.get("/api/list_workers"),
        this.get("/api/list_sessions"),
      ]);
      const now = Date.now() / 1000;
      const current = new Map(
        Object.entries(sessions as Record<string, Omit<SessionRow, "id">>).map(([id, s]) => [
          id,
          { id, ...s },
        ]),
      );
      for (const [id, row] of this.live)
        if (!current.has(id)) this.finished.unshift({ ...row, ended: now });
      this.finished.splice(200);
      this.live = current;
      return {
        url: this.url,
        workers,
        sessions: [...current.values()],
        finished: this.finished,
        errors: this.errors,
      };
    } catch (error) {
      this.errors.unshift({ time: new Date().toISOString(), message: (error as Error).message });
      this.errors.splice(50);
      return {
        url: this.url,
        workers: {},
        sessions: [],
        finished: this.finished,
        errors: this.errors,
      };
    }
  }
}

export interface DashboardServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

function sendJson(response: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "cache-control": "no-store",
  });
  response.end(text);
}

function tokenMatches(given: string | undefined, expected: string): boolean {
  if (!given) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Starts the dashboard; resolves once it listens. */
export async function startDashboard(options: DashboardOptions): Promise<DashboardServer> {
  const host = options.host ?? "127.0.0.1";
  const token = options.token;
  if (!isLoopbackHost(host) && !token) {
    throw new DashboardConfigError(
      `binding ${host} (reachable from other machines) needs a token: --token TOKEN or env AGENTRL_DASHBOARD_TOKEN`,
    );
  }
  const root = options.runs;
  const pollMs = options.pollMs ?? 1000;
  const controller = options.controllerUrl
    ? new ControllerWatch(options.controllerUrl, options.controllerToken)
    : undefined;

  // Live updates: followers of each run's files; new runs found later are read from their start.
  const clients = new Set<http.ServerResponse>();
  const followers = new Map<string, { metrics: FileFollower; trajectories: FileFollower }>();
  const follow = async (folder: string, fromEnd: boolean) => {
    const entry = {
      metrics: new FileFollower(join(folder, METRICS_FILE)),
      trajectories: new FileFollower(join(folder, "trajectories.jsonl")),
    };
    followers.set(folder, entry);
    if (fromEnd) {
      await entry.metrics.poll();
      await entry.trajectories.poll();
    }
  };
  for (const folder of findRuns(root)) await follow(folder, true);
  let lastRuns = "";
  const broadcast = (event: string, data: unknown) => {
    const frame = `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
    for (const client of clients) client.write(frame);
  };
  let polling = false;
  const poll = async () => {
    if (polling || clients.size === 0) return;
    polling = true;
    try {
      for (const folder of findRuns(root)) {
        if (!followers.has(folder)) await follow(folder, false);
        const entry = followers.get(folder)!;
        const name = runName(root, folder);
        const lines = (await entry.metrics.poll()).flatMap((line) => {
          try {
            return [JSON.parse(line) as unknown];
          } catch {
            return [];
          }
        });
        if (lines.length) broadcast("metrics", { run: name, lines });
        const steps = (await entry.trajectories.poll()).flatMap((line) => {
          const match = /^\{"step":(\d+)/.exec(line);
          return match ? [Number(match[1])] : [];
        });
        if (steps.length) broadcast("trajectories", { run: name, steps });
      }
      const runs = await summaries();
      const text = JSON.stringify(runs);
      if (text !== lastRuns) {
        lastRuns = text;
        broadcast("runs", runs);
      }
    } catch {
      // a file mid-rotation; the next poll reads it
    } finally {
      polling = false;
    }
  };
  const timer = setInterval(() => void poll(), pollMs);
  timer.unref();
  const heartbeat = setInterval(() => {
    for (const client of clients) client.write(": keep-alive\n\n");
  }, 15_000);
  heartbeat.unref();

  const summaries = async (): Promise<RunSummary[]> =>
    Promise.all(findRuns(root).map((folder) => summarizeRun(root, folder)));
  const folderOf = (name: string) => {
    const folder = runFolder(root, name);
    if (!folder) throw new HttpError(404, `no run "${name}" under ${root}`);
    return folder;
  };

  const handle = async (request: http.IncomingMessage, response: http.ServerResponse) => {
    const url = new URL(request.url ?? "/", "http://dashboard");
    if (token) {
      const header = request.headers.authorization;
      const given =
        typeof header === "string" && header.startsWith("Bearer ")
          ? header.slice(7)
          : (url.searchParams.get("token") ?? undefined);
      if (!tokenMatches(given, token))
        throw new HttpError(401, "missing or wrong token: open the page with ?token=TOKEN");
    }
    if (request.method !== "GET")
      throw new HttpError(405, `${request.method} is not allowed; the dashboard is read-only`);
    const asset = ASSETS[url.pathname];
    if (asset) {
      response.writeHead(200, {
        "content-type": asset[1],
        "cache-control": "no-cache",
        "x-content-type-options": "nosniff",
      });
      response.end(await readFile(asset[0]));
      return;
    }
    if (url.pathname === "/api/events") {
      response.writeHead(200, {
        "content-type": "text/event-stream",
        "cache-control": "no-store",
        connection: "keep-alive",
      });
      response.write(": connected\n\n");
      clients.add(response);
      request.on("close", () => clients.delete(response));
      return;
    }
    if (url.pathname === "/api/runs") return sendJson(response, 200, await summaries());
    if (url.pathname === "/api/environments") {
      return sendJson(
        response,
        200,
        controller
          ? await controller.snapshot()
          : { url: null, workers: {}, sessions: [], finished: [], errors: [] },
      );
    }
    const match = /^\/api\/runs\/(.+)\/(metrics|config|evaluations|trajectories)(?:\/(\d+))?$/.exec(
      url.pathname,
    );
    if (match) {
      const folder = folderOf(decodeURIComponent(match[1]));
      const kind = match[2];
      if (kind === "metrics") return sendJson(response, 200, await readMetrics(folder));
      if (kind === "config") return sendJson(response, 200, (await readConfig(folder)) ?? null);
      if (kind === "evaluations") return sendJson(response, 200, await readEvaluations(folder));
      const steps = await readTrajectorySteps(folder);
      if (match[3] !== undefined) {
        const step = steps.filter((s) => s.step === Number(match[3])).at(-1);
        if (!step) throw new HttpError(404, `no recorded trajectories at step ${match[3]}`);
        return sendJson(response, 200, step);
      }
      return sendJson(
        response,
        200,
        steps.map((s) => ({
          step: s.step,
          time: s.time,
          batchGroups: s.batchGroups,
          batchEpisodes: s.batchEpisodes,
          recorded: s.episodes.length,
        })),
      );
    }
    throw new HttpError(404, `no route ${url.pathname}`);
  };

  const server = http.createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      const status = error instanceof HttpError ? error.status : 500;
      if (!response.headersSent) sendJson(response, status, { error: (error as Error).message });
      else response.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? DEFAULT_DASHBOARD_PORT, host, () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  const shown = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host;
  return {
    url: `http://${shown.includes(":") ? `[${shown}]` : shown}:${port}/`,
    port,
    close: async () => {
      clearInterval(timer);
      clearInterval(heartbeat);
      for (const client of clients) client.end();
      clients.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
    },
  };
}
