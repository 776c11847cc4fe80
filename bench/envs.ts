/**
 * Controller overhead: latency and throughput of `interact` at 1, 100 and 1,000 concurrent
 * sessions against an instant task (one no-op tool), through
 *   - the HTTP controller with an HTTP worker (two hops of HTTP),
 *   - the HTTP controller with an in-process worker (`env serve`),
 *   - the in-process client (no HTTP at all).
 * Client, controller and worker share one Node process (one event loop, 2 cores), so the
 * figures are the whole CPU cost of a call on this machine, not network latency.
 *   npm run bench -- envs
 */
import { performance } from "node:perf_hooks";
import { loadavg } from "node:os";
import {
  Controller,
  FunctionCallSession,
  HttpEnvironmentClient,
  InProcessEnvironmentClient,
  TaskWorker,
  serveWorker,
  type AssistantMessage,
  type EnvironmentClient,
  type TaskFamily,
  type ToolReply,
} from "@agentrl/envs";
import type { BenchResult } from "./types.js";

/** Concurrent sessions to measure at. */
const CONCURRENCY = [1, 100, 1000];
/** How long each measurement runs, in ms. */
const DURATION_MS = 2000;

/** A session whose one tool does nothing: the controller's cost alone (also used by bench/scale-controller.ts). */
export class InstantSession extends FunctionCallSession {
  constructor() {
    super(
      {
        messages: [{ role: "user", content: "Call noop forever." }],
        tools: [
          {
            type: "function",
            function: {
              name: "noop",
              description: "Does nothing.",
              parameters: { type: "object", properties: { note: { type: "string" } } },
            },
          },
        ],
      },
      { maxTurns: 1e9 },
    );
  }
  protected async callTool(): Promise<ToolReply> {
    return { content: "ok" };
  }
}

export function instantFamily(): TaskFamily {
  const indices = Array.from({ length: 10 }, (_, i) => i);
  return {
    name: "instant",
    indices: (split) => (split === "train" ? indices : []),
    startSession: async () => new InstantSession(),
  };
}

export const TURN: AssistantMessage = {
  role: "assistant",
  content: null,
  tool_calls: [
    { id: "c", type: "function", function: { name: "noop", arguments: '{"note":"hi"}' } },
  ],
};

interface Measurement {
  setup: string;
  sessions: number;
  calls: number;
  callsPerSecond: number;
  meanMs: number;
  p50Ms: number;
  p99Ms: number;
  /** CPU time of the whole process (client + controller + worker) per call, in ms: robust to other load. */
  cpuMsPerCall: number;
}

export function percentile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}

/** Starts `sessions` sessions, then has each call `interact` back to back for DURATION_MS. */
async function measure(
  setup: string,
  client: EnvironmentClient,
  sessions: number,
): Promise<Measurement> {
  const ids: string[] = [];
  for (let started = 0; started < sessions; started += 100) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(100, sessions - started) }, (_, i) =>
        client.startSample("instant", (started + i) % 10),
      ),
    );
    ids.push(...batch.map((s) => s.sessionId));
  }
  const latencies: number[] = [];
  const cpuBefore = process.cpuUsage();
  const began = performance.now();
  const deadline = began + DURATION_MS;
  await Promise.all(
    ids.map(async (id) => {
      while (performance.now() < deadline) {
        const t0 = performance.now();
        const result = await client.interact(id, TURN);
        latencies.push(performance.now() - t0);
        if (result.finish) throw new Error(`session ${id} ended unexpectedly: ${result.status}`);
      }
    }),
  );
  const elapsed = performance.now() - began;
  const cpu = process.cpuUsage(cpuBefore);
  await Promise.all(ids.map((id) => client.cancel(id)));
  latencies.sort((a, b) => a - b);
  return {
    setup,
    sessions,
    calls: latencies.length,
    callsPerSecond: (latencies.length / elapsed) * 1000,
    meanMs: latencies.reduce((a, b) => a + b, 0) / latencies.length,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
    cpuMsPerCall: (cpu.user + cpu.system) / 1000 / latencies.length,
  };
}

async function withHttpWorker(run: (client: EnvironmentClient) => Promise<void>): Promise<void> {
  const controller = new Controller({ port: 0 });
  const url = await controller.listen();
  const worker = await serveWorker(new TaskWorker(instantFamily(), { concurrency: 2000 }), {
    controllerUrl: url,
    token: controller.token,
    log: () => undefined,
  });
  const client = new HttpEnvironmentClient({ url, token: controller.token });
  try {
    await run(client);
  } finally {
    await client.close();
    await worker.close();
    await controller.close();
  }
}

async function withLocalWorker(run: (client: EnvironmentClient) => Promise<void>): Promise<void> {
  const controller = new Controller({ port: 0 });
  const worker = new TaskWorker(instantFamily(), { concurrency: 2000 });
  controller.addLocalWorker(worker);
  const client = new HttpEnvironmentClient({
    url: await controller.listen(),
    token: controller.token,
  });
  try {
    await run(client);
  } finally {
    await client.close();
    await controller.close();
    await worker.close();
  }
}

async function withInProcess(run: (client: EnvironmentClient) => Promise<void>): Promise<void> {
  const client = new InProcessEnvironmentClient([instantFamily()], { concurrency: 2000 });
  try {
    await run(client);
  } finally {
    await client.close();
  }
}

export async function run(): Promise<BenchResult> {
  const setups: [string, (run: (client: EnvironmentClient) => Promise<void>) => Promise<void>][] = [
    ["HTTP controller → HTTP worker", withHttpWorker],
    ["HTTP controller → in-process worker", withLocalWorker],
    ["in-process client", withInProcess],
  ];
  const rows: Measurement[] = [];
  const loadBefore = loadavg()[0];
  for (const [name, setup] of setups) {
    await setup(async (client) => {
      for (const sessions of CONCURRENCY) rows.push(await measure(name, client, sessions));
    });
  }
  const format = (n: number, digits: number) => n.toFixed(digits);
  const markdown = [
    "### Controller `interact` overhead (instant task)",
    "",
    `Each cell: N sessions calling \`interact\` back to back for ${DURATION_MS / 1000} s; client, controller and worker in one process.`,
    `Load average (1 min) of the machine when it ran: ${loadBefore.toFixed(1)} before, ${loadavg()[0].toFixed(1)} after, on 2 cores — latency and`,
    "throughput shrink with other work on the machine; CPU per call (the process's own CPU time / calls) is the steadier figure.",
    "",
    "| setup | concurrent sessions | calls | calls/s | mean latency (ms) | p50 (ms) | p99 (ms) | CPU per call (ms) |",
    "|---|---|---|---|---|---|---|---|",
    ...rows.map(
      (r) =>
        `| ${r.setup} | ${r.sessions} | ${r.calls} | ${format(r.callsPerSecond, 0)} | ${format(r.meanMs, 2)} | ${format(r.p50Ms, 2)} | ${format(r.p99Ms, 2)} | ${format(r.cpuMsPerCall, 3)} |`,
    ),
  ].join("\n");
  return { name: "envs", markdown };
}

const invokedDirectly =
  process.argv[1] && import.meta.url.endsWith(process.argv[1].replace(/\\/g, "/"));
if (invokedDirectly) console.log((await run()).markdown);
