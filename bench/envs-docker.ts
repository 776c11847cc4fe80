/**
 * Docker-backed tasks: how long a session takes to start and a tool call takes to return.
 *   - OS session start, cold (container started on demand) and warm (taken from the pool);
 *   - OS `bash_action` round trip (`echo hi` through the stateful shell wrapper);
 *   - DB session start (fresh database + sample table on the shared MariaDB) and
 *     `execute_sql` round trip.
 * Medians and 90th percentiles over a few dozen runs, one at a time, on the real data.
 *   npm run bench -- envs
 */
import { performance } from "node:perf_hooks";
import {
  createTaskFamily,
  isDockerAvailable,
  type AssistantMessage,
  type TaskSession,
} from "@agentrl/envs";
import { hasAgentBenchData } from "@agentrl/envs/internal";
import type { BenchResult } from "./types.js";

const RUNS = 20;

function call(name: string, args: Record<string, unknown>): AssistantMessage {
  return {
    role: "assistant",
    content: null,
    tool_calls: [
      { id: "c", type: "function", function: { name, arguments: JSON.stringify(args) } },
    ],
  };
}

function summary(samples: number[]): { median: number; p90: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    median: sorted[Math.floor(sorted.length / 2)],
    p90: sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.9))],
  };
}

async function timed<T>(work: () => Promise<T>): Promise<[T, number]> {
  const started = performance.now();
  const value = await work();
  return [value, performance.now() - started];
}

async function measureOs(warmPool: number): Promise<{ start: number[]; command: number[] }> {
  const family = await createTaskFamily("os", { warmPool });
  const start: number[] = [];
  const command: number[] = [];
  try {
    const index = family.indicesAt("train", 0)[0];
    if (warmPool > 0) await (family as unknown as { warmUp(): Promise<void> }).warmUp();
    for (let run = 0; run < RUNS; run += 1) {
      if (warmPool > 0) await (family as unknown as { warmUp(): Promise<void> }).warmUp();
      const [session, startMs] = await timed(
        () => family.startSession(index) as Promise<TaskSession>,
      );
      start.push(startMs);
      for (let turn = 0; turn < 3; turn += 1) {
        const [, commandMs] = await timed(() =>
          session.interact(call("bash_action", { script: "echo hi" })),
        );
        command.push(commandMs);
      }
      await session.cancel();
    }
  } finally {
    await family.close?.();
  }
  return { start, command };
}

async function measureDb(): Promise<{ start: number[]; command: number[]; serverMs: number }> {
  const family = await createTaskFamily("db", {});
  const start: number[] = [];
  const command: number[] = [];
  let serverMs = 0;
  try {
    const index = family.indices("train")[0];
    [, serverMs] = await timed(async () => (await family.startSession(index)).cancel());
    for (let run = 0; run < RUNS; run += 1) {
      const [session, startMs] = await timed(() => family.startSession(index));
      start.push(startMs);
      for (let turn = 0; turn < 5; turn += 1) {
        const [, commandMs] = await timed(() =>
          session.interact(
            call("execute_sql", { query: "SELECT COUNT(*) FROM information_schema.tables" }),
          ),
        );
        command.push(commandMs);
      }
      await session.cancel();
    }
  } finally {
    await family.close?.();
  }
  return { start, command, serverMs };
}

export async function run(): Promise<BenchResult> {
  const name = "envs-docker";
  if (!(await isDockerAvailable()))
    return {
      name,
      markdown:
        "### Docker tasks\n\nSkipped: no Docker engine answers (bash scripts/start-dockerd.sh).",
    };
  if (!hasAgentBenchData("os_interaction") || !hasAgentBenchData("dbbench")) {
    return {
      name,
      markdown: "### Docker tasks\n\nSkipped: no AgentBench data in ../shared/data/agentbench.",
    };
  }
  const cold = await measureOs(0);
  const warm = await measureOs(2);
  const db = await measureDb();
  const row = (label: string, values: number[]) => {
    const { median, p90 } = summary(values);
    return `| ${label} | ${median.toFixed(0)} | ${p90.toFixed(0)} | ${values.length} |`;
  };
  const markdown = [
    "### Docker tasks (OS, DB)",
    "",
    `Sessions one at a time on the real AgentBench samples; times in ms. The shared MariaDB server took ${(db.serverMs / 1000).toFixed(1)} s to start (first DB session).`,
    "",
    "| measurement | median | p90 | runs |",
    "|---|---|---|---|",
    row("OS session start, cold (docker create + start, init script)", cold.start),
    row("OS session start, warm pool of 2", warm.start),
    row("OS bash_action round trip (`echo hi`)", [...cold.command, ...warm.command]),
    row("DB session start (new database + table)", db.start),
    row("DB execute_sql round trip", db.command),
  ].join("\n");
  return { name, markdown };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log((await run()).markdown);
}
