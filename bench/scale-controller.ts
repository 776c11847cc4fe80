/**
 * The controller at AgentRL's scale: 10,000 sessions open at once through the real HTTP
 * controller (packages/envs/src/server) to in-process workers with an instant task.
 *
 * The controller and its workers run in a child process (as `agentrl env serve` does); this
 * process is the load: it opens SESSIONS sessions over HTTP, then, with all of them open,
 * runs `interact` with IN_FLIGHT calls in flight at a time (each call loop owns its own
 * sessions, so no session is ever called twice at once) for PHASE_MS, and finally sends one
 * turn to every session at once (a burst of 10,000). Two load models per in-flight level:
 *   - closed loop, no think time: each of the N callers sends its next call the moment the last
 *     one answers (the most calls/s the pair of processes can carry; by Little's law the round
 *     trip is then N / calls per second, whatever the controller does);
 *   - agent sessions: N sessions each alternate one call with an agent turn (decoding) whose
 *     duration is drawn from an exponential distribution with mean THINK_MS (seeded) — what
 *     N agents in flight send. Figures:
 *   - round-trip latency of one interact seen by the client (p50/p99), per in-flight level;
 *   - the controller's own time per interact (inside the child, `Controller.interact`, the
 *     in-process worker's instant task included);
 *   - memory per session: the child's heap after a full GC with every session open, minus
 *     before, divided by SESSIONS (controller entry + worker entry + the task's session);
 *   - errors: failed requests and unexpected statuses;
 *   - CPU shares: cores used by the controller process and by this load process in each phase.
 *   npm run bench -- scale
 *   AGENTRL_SCALE_ENVS=/path/to/envs/src/index.ts   (controller and client from another copy of @agentrl/envs: A B runs)
 *   AGENTRL_SCALE_TRACE=/tmp/trace   (per-call timestamps of both processes and their GC pauses in the agent phase: /tmp/trace.load.json, /tmp/trace.controller.json)
 *   AGENTRL_SCALE_CHILD_FLAGS="--trace-gc"   (extra node flags of the controller process)
 *   AGENTRL_SCALE_PROFILE=/tmp/prof node --conditions=source --import tsx bench/scale-controller.ts   (CPU profile of the controller process)
 */
import { fork, type ChildProcess } from "node:child_process";
import { cpus, loadavg } from "node:os";
import { writeFileSync } from "node:fs";
import { performance, monitorEventLoopDelay, PerformanceObserver } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import * as defaultEnvs from "@agentrl/envs";
import { TURN, instantFamily, percentile } from "./envs.js";
import { seededUniform } from "./latency.js";
import type { BenchResult } from "./types.js";

/** Sessions open at once. */
const SESSIONS = Number(process.env.AGENTRL_SCALE_SESSIONS ?? 10_000);
/** In-process workers behind the controller (sessions are spread over them by free slots). */
const WORKERS = 4;
/** The controller and client under test: this checkout's, or another copy's (A B runs). */
const { Controller, HttpEnvironmentClient, TaskWorker } = (
  process.env.AGENTRL_SCALE_ENVS ? await import(process.env.AGENTRL_SCALE_ENVS) : defaultEnvs
) as typeof defaultEnvs;
/** Calls in flight at a time in each measured phase. */
const IN_FLIGHT = [1, 16, 128];
/** Sessions of the agent-session phases. */
const AGENT_SESSIONS = [128];
/** Mean agent turn (decoding) between two calls of one session in the agent-session phases, ms. */
const THINK_MS = Number(process.env.AGENTRL_SCALE_THINK_MS ?? 100);
/** How long each in-flight level runs, in ms. */
const PHASE_MS = 4_000;
/** Sessions started at once while opening them. */
const START_BATCH = 250;
/** HTTP connections of the load client. */
const CLIENT_SOCKETS = 256;
const CHILD_FLAG = "--scale-controller-child";
/**
 * The load generator runs in a process of its own too: inside `npm run bench` it would carry
 * the heap of the benchmarks run before it (tfjs, models), whose scavenges were 15-20 ms there.
 */
const LOAD_FLAG = "--scale-controller-load";
/** When set, per-call timestamps of both processes and their GC pauses are written to this file prefix (`.load.json`, `.controller.json`). */
const TRACE = process.env.AGENTRL_SCALE_TRACE;

/** Epoch time in ms with sub-ms resolution (both processes read the same clock). */
const now = () => performance.timeOrigin + performance.now();

/** perf_hooks' flag of a GC that `gc()` asked for. */
const GC_FORCED = 4;

/** GC pauses of this process: totals since the last reset, and (when tracing) each pause. */
class GcPauses {
  count = 0;
  totalMs = 0;
  maxMs = 0;
  events: Array<[start: number, durationMs: number, kind: number]> = [];
  constructor() {
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        // node puts a GC's kind and flags in `detail` (not in @types/node's PerformanceEntry).
        const detail = (entry as { detail?: { kind?: number; flags?: number } }).detail;
        // A full GC the bench forces itself (memory figures, between phases) is not a pause of the load.
        if ((detail?.flags ?? 0) & GC_FORCED) continue;
        this.count += 1;
        this.totalMs += entry.duration;
        this.maxMs = Math.max(this.maxMs, entry.duration);
        if (TRACE)
          this.events.push([
            performance.timeOrigin + entry.startTime,
            entry.duration,
            detail?.kind ?? 0,
          ]);
      }
    }).observe({ entryTypes: ["gc"] });
  }
  take(): { count: number; totalMs: number; maxMs: number } {
    const totals = { count: this.count, totalMs: this.totalMs, maxMs: this.maxMs };
    this.count = 0;
    this.totalMs = 0;
    this.maxMs = 0;
    return totals;
  }
}

interface ChildStats {
  heapBeforeBytes: number;
  heapAfterBytes: number;
  rssAfterBytes: number;
  /** `Controller.interact` durations since the last reset, in ms. */
  interactMs: number[];
  eventLoopP99Ms: number;
  /** CPU time of the controller process since the last reset, in ms. */
  cpuMs: number;
  gc: { count: number; totalMs: number; maxMs: number };
}

/** One interact as the controller process saw it: session, request received, reply written (epoch ms). */
type ControllerCall = [session: string, received: number, answered: number];

type ChildMessage =
  | { type: "listening"; url: string }
  | { type: "stats"; stats: ChildStats }
  | { type: "recorded"; calls: ControllerCall[] };

// ── the child: controller + in-process workers ───────────────────────────────

function collectGarbage(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

/** The controller's bearer token (parent and child share it). */
const TOKEN = "scale-controller-bench";

async function child(): Promise<void> {
  const controller = new Controller({ port: 0, token: TOKEN, idleTimeoutMs: 3_600_000 });
  for (let i = 0; i < WORKERS; i += 1)
    controller.addLocalWorker(
      new TaskWorker(instantFamily(), {
        concurrency: Math.ceil(SESSIONS / WORKERS) + 1,
        idleTimeoutMs: 3_600_000,
      }),
    );
  let interactMs: number[] = [];
  const interact = controller.interact.bind(controller);
  controller.interact = async (sessionId, message) => {
    const began = performance.now();
    try {
      return await interact(sessionId, message);
    } finally {
      interactMs.push(performance.now() - began);
    }
  };
  const url = await controller.listen();
  const gc = new GcPauses();
  // When each interact of the agent phase arrived (its request event) and when its reply was written.
  let calls: ControllerCall[] = [];
  let recording = false;
  const server = (controller as unknown as { server: import("node:http").Server }).server;
  server.prependListener("request", (request, response) => {
    if (!recording || request.url !== "/api/interact") return;
    const received = now();
    const session = String(request.headers["session_id"]);
    response.once("finish", () => calls.push([session, received, now()]));
  });
  const loop = monitorEventLoopDelay({ resolution: 1 });
  loop.enable();
  collectGarbage();
  let heapBeforeBytes = process.memoryUsage().heapUsed;
  let cpuFrom = process.cpuUsage();
  /** Counters from here on (calls' times, CPU, event-loop delay), no GC forced. */
  const resetCounters = () => {
    interactMs = [];
    cpuFrom = process.cpuUsage();
    loop.reset();
  };
  process.on("message", (message: { type: string }) => {
    if (message.type === "baseline") {
      collectGarbage();
      heapBeforeBytes = process.memoryUsage().heapUsed;
      return;
    }
    if (message.type === "stats" || message.type === "memory") {
      // Only the memory figure forces a full GC: after one, V8 spends more CPU a call for
      // seconds (0.38 against 0.29 ms in the controller process, p99 10-20 ms against ~5 ms).
      if (message.type === "memory") collectGarbage();
      const cpu = process.cpuUsage(cpuFrom);
      const stats: ChildStats = {
        heapBeforeBytes,
        heapAfterBytes: process.memoryUsage().heapUsed,
        rssAfterBytes: process.memoryUsage().rss,
        interactMs,
        eventLoopP99Ms: loop.percentile(99) / 1e6,
        cpuMs: (cpu.user + cpu.system) / 1000,
        gc: gc.take(),
      };
      resetCounters();
      process.send!({ type: "stats", stats });
    }
    if (message.type === "reset" || message.type === "record") {
      // The start of a measured window.
      resetCounters();
      gc.take();
      calls = [];
      gc.events = [];
      recording = message.type === "record";
    }
    if (message.type === "recorded") {
      recording = false;
      if (TRACE)
        writeFileSync(`${TRACE}.controller.json`, JSON.stringify({ calls, gc: gc.events }));
      process.send!({ type: "recorded", calls });
      calls = [];
    }
    if (message.type === "stop") void controller.close().then(() => process.exit(0));
  });
  process.send!({ type: "listening", url });
}

// ── the load ─────────────────────────────────────────────────────────────────

/**
 * A full GC of this load process once every session is open, as the controller process gets one
 * for its memory figure (opening 10,000 sessions leaves the load generator's old space full of
 * promoted garbage that would otherwise be collected in the middle of a measured phase). Its
 * pause is not inside any phase; the GCs during a phase are all counted.
 */
const collectLoadGarbage: () => void = (() => {
  setFlagsFromString("--expose-gc");
  return runInNewContext("gc") as () => void;
})();

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Sends `type` to the controller process; resolves with the first message of type `answer`. */
function askFor<T extends ChildMessage["type"]>(
  worker: ChildProcess,
  type: string,
  answer: T,
): Promise<Extract<ChildMessage, { type: T }>> {
  return new Promise((resolve) => {
    const listener = (message: ChildMessage) => {
      if (message.type !== answer) return;
      worker.off("message", listener);
      resolve(message as Extract<ChildMessage, { type: T }>);
    };
    worker.on("message", listener);
    worker.send({ type });
  });
}

/** The controller process's figures since the last time they were asked for. */
const ask = async (worker: ChildProcess, type: string): Promise<ChildStats> =>
  (await askFor(worker, type, "stats")).stats;

/** The interacts the controller process recorded since `record`. */
const recorded = async (worker: ChildProcess): Promise<ControllerCall[]> =>
  (await askFor(worker, "recorded", "recorded")).calls;

/** Mean legs of a set of round trips, in ms. */
interface Legs {
  calls: number;
  roundTrip: number;
  /** Client sends → the controller process gets the request. */
  toController: number;
  /** Request received → reply written (HTTP, JSON, controller, worker, task). */
  inController: number;
  /** Reply written → the client has it (its socket, its event loop). */
  backToClient: number;
}

/**
 * Where the round trips of one phase went: each call's timestamps on both sides (both
 * processes read the same clock), averaged over all calls and over the slowest 1 % (≥ p99).
 */
function splitRoundTrips(
  sent: Array<[string, number, number]>,
  seen: ControllerCall[],
): { all: Legs; slowest: Legs } | undefined {
  // Calls are joined by session: only sessions called once in the phase on both sides (with
  // fewer sessions open than calls, a session is called again and its calls cannot be told apart).
  const once = (sessions: string[]) => {
    const counts = new Map<string, number>();
    for (const session of sessions) counts.set(session, (counts.get(session) ?? 0) + 1);
    return (session: string) => counts.get(session) === 1;
  };
  const sentOnce = once(sent.map(([session]) => session));
  const seenOnce = once(seen.map(([session]) => session));
  const bySession = new Map(
    seen
      .filter(([session]) => seenOnce(session))
      .map(([session, received, answered]) => [session, { received, answered }]),
  );
  const joined = sent.flatMap(([session, began, ended]) => {
    const inside = sentOnce(session) ? bySession.get(session) : undefined;
    return inside ? [{ began, ended, ...inside }] : [];
  });
  if (joined.length === 0) return undefined;
  joined.sort((a, b) => a.ended - a.began - (b.ended - b.began));
  const mean = (rows: typeof joined): Legs => {
    const average = (leg: (row: (typeof joined)[number]) => number) =>
      rows.reduce((sum, row) => sum + leg(row), 0) / rows.length;
    return {
      calls: rows.length,
      roundTrip: average((row) => row.ended - row.began),
      toController: average((row) => row.received - row.began),
      inController: average((row) => row.answered - row.received),
      backToClient: average((row) => row.ended - row.answered),
    };
  };
  return { all: mean(joined), slowest: mean(joined.slice(Math.floor(joined.length * 0.99))) };
}

interface Phase {
  inFlight: number | "all";
  /** Load model: back-to-back calls, or agent sessions with think time. */
  model: "closed" | "agent";
  calls: number;
  errors: number;
  callsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  controllerP50Ms: number;
  controllerP99Ms: number;
  eventLoopP99Ms: number;
  /** Event-loop delay p99 of this load process, in ms. */
  loadEventLoopP99Ms: number;
  /** GC pauses of the controller process and of this load process over the phase. */
  controllerGc: ChildStats["gc"];
  loadGc: ChildStats["gc"];
  /** CPU time of the controller process per call (HTTP, JSON, controller, worker, task), in ms. */
  cpuMsPerCall: number;
  /** Cores the controller process used on average. */
  controllerCores: number;
  /** Cores this load process used on average. */
  loadCores: number;
}

function summarize(
  inFlight: Phase["inFlight"],
  model: Phase["model"],
  latencies: number[],
  errors: number,
  elapsedMs: number,
  stats: ChildStats,
  loadCpuMs: number,
  load: { eventLoopP99Ms: number; gc: ChildStats["gc"] },
): Phase {
  latencies.sort((a, b) => a - b);
  const inside = stats.interactMs.sort((a, b) => a - b);
  return {
    inFlight,
    model,
    calls: latencies.length,
    errors,
    callsPerSecond: (latencies.length / elapsedMs) * 1000,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
    controllerP50Ms: percentile(inside, 0.5),
    controllerP99Ms: percentile(inside, 0.99),
    eventLoopP99Ms: stats.eventLoopP99Ms,
    loadEventLoopP99Ms: load.eventLoopP99Ms,
    controllerGc: stats.gc,
    loadGc: load.gc,
    cpuMsPerCall: stats.cpuMs / Math.max(1, latencies.length),
    controllerCores: stats.cpuMs / elapsedMs,
    loadCores: loadCpuMs / elapsedMs,
  };
}

/** Node flags of the bench's own processes (TypeScript sources through tsx). */
const SOURCE_FLAGS = ["--conditions=source", "--import", "tsx"];

/** Runs the load generator in a fresh process and returns its section. */
export async function run(): Promise<BenchResult> {
  const load = fork(fileURLToPath(import.meta.url), [LOAD_FLAG], {
    execArgv: SOURCE_FLAGS,
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  return new Promise<BenchResult>((resolve, reject) => {
    load.once("message", (result: BenchResult) => resolve(result));
    load.once("exit", (code) =>
      reject(new Error(`the load generator process exited (${code}) without a result`)),
    );
  });
}

/** The load generator: starts the controller process, opens the sessions, runs the phases. */
async function runLoad(): Promise<BenchResult> {
  const file = fileURLToPath(import.meta.url);
  const server = fork(file, [CHILD_FLAG], {
    execArgv: [
      ...SOURCE_FLAGS,
      "--expose-gc",
      ...(process.env.AGENTRL_SCALE_CHILD_FLAGS?.split(" ").filter(Boolean) ?? []),
      ...(process.env.AGENTRL_SCALE_PROFILE
        ? ["--cpu-prof", "--cpu-prof-dir", process.env.AGENTRL_SCALE_PROFILE]
        : []),
    ],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const url = await new Promise<string>((resolve, reject) => {
    server.once("message", (message: ChildMessage) =>
      message.type === "listening" ? resolve(message.url) : reject(new Error("unexpected message")),
    );
    server.once("exit", (code) => reject(new Error(`the controller process exited (${code})`)));
  });
  const client = new HttpEnvironmentClient({
    url,
    token: TOKEN,
    maxSockets: CLIENT_SOCKETS,
    requestTimeoutMs: 60_000,
  });
  const loadBefore = loadavg()[0];
  const loadGc = new GcPauses();
  const loadLoop = monitorEventLoopDelay({ resolution: 1 });
  loadLoop.enable();
  /** This process's event-loop delay and GC pauses since the last call. */
  const loadStats = () => {
    const taken = { eventLoopP99Ms: loadLoop.percentile(99) / 1e6, gc: loadGc.take() };
    loadLoop.reset();
    return taken;
  };
  /** Per-call [session, sent, answered] epoch ms of the traced phase. */
  let traced: Array<[string, number, number]> | undefined;
  /** Where the agent phase's round trips went. */
  let split: ReturnType<typeof splitRoundTrips>;
  let errors = 0;
  const errorSamples = new Set<string>();
  const noteError = (error: unknown) => {
    errors += 1;
    if (errorSamples.size < 3) errorSamples.add((error as Error).message ?? String(error));
  };
  /** One turn of session `id`; its round trip goes to `latencies`, a failure or an ended session to the errors. */
  const timedTurn = async (id: string, latencies: number[]): Promise<void> => {
    const t0 = performance.now();
    try {
      const result = await client.interact(id, TURN);
      const t1 = performance.now();
      latencies.push(t1 - t0);
      traced?.push([id, performance.timeOrigin + t0, performance.timeOrigin + t1]);
      if (result.status !== "running")
        noteError(new Error(`session ${id} ended: ${result.status}`));
    } catch (error) {
      noteError(error);
    }
  };
  try {
    server.send({ type: "baseline" });
    // Open every session.
    const ids: string[] = [];
    const openBegan = performance.now();
    for (let opened = 0; opened < SESSIONS; opened += START_BATCH) {
      const batch = await Promise.allSettled(
        Array.from({ length: Math.min(START_BATCH, SESSIONS - opened) }, (_, i) =>
          client.startSample("instant", (opened + i) % 10),
        ),
      );
      for (const result of batch) {
        if (result.status === "fulfilled") ids.push(result.value.sessionId);
        else noteError(result.reason);
      }
    }
    const openSeconds = (performance.now() - openBegan) / 1000;
    const memory = await ask(server, "memory");
    // A short unmeasured warm-up (JIT) before the phases.
    await Promise.all(ids.slice(0, 2000).map((id) => client.interact(id, TURN).catch(noteError)));
    collectLoadGarbage();
    await ask(server, "stats");
    loadStats();
    const openErrors = errors;

    // Interact with bounded calls in flight, every session open.
    const phases: Phase[] = [];
    const cpuMsSince = (from: NodeJS.CpuUsage) => {
      const used = process.cpuUsage(from);
      return (used.user + used.system) / 1000;
    };
    /**
     * One phase: `inFlight` callers, back to back (`closed`) or each an agent session that
     * decodes for an exponential think time between its calls (`agent`), for PHASE_MS; both
     * processes' figures go to `phases`.
     */
    const runPhase = async (inFlight: number, model: Phase["model"]) => {
      const random = seededUniform(40);
      const think = () => -THINK_MS * Math.log(1 - random());
      const latencies: number[] = [];
      const before = errors;
      server.send({ type: model === "agent" ? "record" : "reset" });
      loadStats();
      loadGc.events = [];
      if (model === "agent") traced = [];
      const cpuFrom = process.cpuUsage();
      const began = performance.now();
      const deadline = began + PHASE_MS;
      await Promise.all(
        Array.from({ length: inFlight }, async (_, loop) => {
          if (model === "agent") await sleep(think()); // sessions are not in step at the start
          for (let k = loop; performance.now() < deadline; k += inFlight) {
            await timedTurn(ids[k % ids.length], latencies);
            if (model === "agent") await sleep(think());
          }
        }),
      );
      const elapsed = performance.now() - began;
      const loadCpu = cpuMsSince(cpuFrom);
      const stats = await ask(server, "stats");
      phases.push(
        summarize(
          inFlight,
          model,
          latencies,
          errors - before,
          elapsed,
          stats,
          loadCpu,
          loadStats(),
        ),
      );
    };
    for (const inFlight of IN_FLIGHT) await runPhase(inFlight, "closed");
    for (const sessions of AGENT_SESSIONS) {
      await runPhase(sessions, "agent");
      split = splitRoundTrips(traced ?? [], await recorded(server));
      if (TRACE)
        writeFileSync(`${TRACE}.load.json`, JSON.stringify({ calls: traced, gc: loadGc.events }));
      traced = undefined;
      loadGc.events = [];
    }

    // One turn to every session at once.
    const burst: number[] = [];
    const beforeBurst = errors;
    const burstBegan = performance.now();
    await Promise.all(ids.map((id) => timedTurn(id, burst)));
    phases.push(
      summarize(
        "all",
        "closed",
        burst,
        errors - beforeBurst,
        performance.now() - burstBegan,
        await ask(server, "stats"),
        Number.NaN,
        loadStats(),
      ),
    );

    // Close every session.
    const closeResults = await Promise.allSettled(ids.map((id) => client.cancel(id)));
    for (const result of closeResults) if (result.status === "rejected") noteError(result.reason);

    const perSession = (memory.heapAfterBytes - memory.heapBeforeBytes) / Math.max(1, ids.length);
    const f = (n: number, digits = 2) => n.toFixed(digits);
    const legsText = (legs: Legs) =>
      `round trip ${f(legs.roundTrip)} = client → controller ${f(legs.toController)} + in the controller process (request in → reply written) ${f(legs.inController)} + reply → client ${f(legs.backToClient)}`;
    const gcText = (gc: ChildStats["gc"]) => `${gc.count}, ${f(gc.totalMs, 1)}, ${f(gc.maxMs, 1)}`;
    const cpu = cpus();
    const markdown = [
      `### Controller at scale: ${SESSIONS.toLocaleString("en")} concurrent sessions (instant task)`,
      "",
      `Measured on this machine: ${cpu.length} cores (${cpu[0]?.model.trim() ?? "unknown CPU"}), shared with other work (load average ${f(loadBefore, 1)} before, ${f(loadavg()[0], 1)} after).`,
      `The controller and ${WORKERS} in-process workers run in one child process (as \`agentrl env serve\`); this process is the HTTP client (${CLIENT_SOCKETS} keep-alive sockets).`,
      `All ${ids.length.toLocaleString("en")} sessions stay open through every phase. Opening them took ${f(openSeconds, 1)} s (${f(ids.length / openSeconds, 0)} starts/s, ${openErrors} errors).`,
      "",
      `- Memory per open session (controller + worker + the task's session, heap after a full GC): **${f(perSession / 1024, 2)} KiB**; child RSS with all open: ${f(memory.rssAfterBytes / 1024 ** 2, 0)} MiB.`,
      `- Errors over the whole run (open, ${phases.reduce((n, p) => n + p.calls, 0).toLocaleString("en")} interacts, cancel): **${errors}**${errorSamples.size ? ` (e.g. ${[...errorSamples].join("; ")})` : ""}.`,
      "",
      "| load | calls | calls/s | client round trip p50 (ms) | p99 (ms) | controller's own time p50 (ms) | p99 (ms) | controller process CPU per call (ms) | controller cores | load generator cores | event-loop delay p99 (ms), controller / load generator | GC pauses (count, total ms, longest ms), controller / load generator | errors |",
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
      ...phases.map(
        (p) =>
          `| ${p.inFlight === "all" ? `all ${ids.length.toLocaleString("en")} at once` : p.model === "closed" ? `${p.inFlight} in flight, back to back` : `${p.inFlight} agent sessions, ${THINK_MS} ms mean turn`} | ${p.calls} | ${f(p.callsPerSecond, 0)} | ${f(p.p50Ms)} | ${f(p.p99Ms)} | ${f(p.controllerP50Ms, 3)} | ${f(p.controllerP99Ms, 3)} | ${f(p.cpuMsPerCall, 3)} | ${f(p.controllerCores)} | ${Number.isNaN(p.loadCores) ? "–" : f(p.loadCores)} | ${f(p.eventLoopP99Ms, 1)} / ${f(p.loadEventLoopP99Ms, 1)} | ${gcText(p.controllerGc)} / ${gcText(p.loadGc)} | ${p.errors} |`,
      ),
      ...(split
        ? [
            "",
            `Where the agent phase's round trips went (mean ms; each call's timestamps in both processes, ${split.all.calls} calls): ${legsText(split.all)}; the slowest 1 % (${split.slowest.calls} calls, ≥ p99): ${legsText(split.slowest)}.`,
          ]
        : []),
      "",
      "The controller's own time is `Controller.interact` measured inside the child (session lookup, relay to the in-process worker, the instant task, bookkeeping); the",
      "round trip adds HTTP and JSON on both sides and the wait for the child's event loop; the CPU per call (the controller process's CPU time / calls) is the figure",
      "that does not grow with other load on the machine. With every open session calling at once the round trip",
      "is queueing (calls/s is the figure there), not per-call overhead. Goal of issue 17: p99 overhead ≤ 5 ms with 0 errors.",
      "",
      `Two load models. *Back to back*: each of N callers sends its next call the moment the last one answers, so the pair of processes runs flat out and, by Little's law,`,
      "the round trip is N / calls per second whatever the controller does (128 in flight at 10 ms needs ≥ 12,800 calls/s). *Agent sessions* (issue 40's",
      `“128 sessions in flight”): each session alternates one call with an agent turn — decoding the next action — drawn from an exponential distribution with mean ${THINK_MS} ms`,
      "(seeded; a real turn of a model decoding tens to hundreds of tokens takes longer, so this is the heavier side of what 128 agents send). Load generator cores:",
      "this process's CPU time over the phase (the HTTP client), beside the controller process's; both share the machine's 2 cores with other work.",
    ].join("\n");
    return { name: "scale", markdown };
  } finally {
    await client.close();
    server.send({ type: "stop" });
    await new Promise((resolve) => {
      const timer = setTimeout(() => {
        server.kill();
        resolve(undefined);
      }, 10_000);
      server.once("exit", () => {
        clearTimeout(timer);
        resolve(undefined);
      });
    });
  }
}

if (process.argv.includes(CHILD_FLAG)) await child();
else if (process.argv.includes(LOAD_FLAG)) {
  const result = await runLoad();
  process.send!(result, () => process.exit(0));
} else {
  const invokedDirectly =
    process.argv[1] && import.meta.url.endsWith(process.argv[1].replace(/\\/g, "/"));
  if (invokedDirectly) console.log((await run()).markdown);
}
