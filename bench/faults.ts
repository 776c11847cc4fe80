/**
 * The fault soak: N OS sessions through the real controller (HTTP, a local TaskWorker, the
 * OS family on Docker), a share of them hit by a fault, and the sandbox probes.
 *
 * Faults (taking turns among the faulted sessions), and the status the session must end with:
 *   - `container-kill`: `docker kill` between two commands          → task error
 *   - `kill-mid-command`: `docker kill` while a command runs          → task error
 *   - `rm`: `docker rm -f` between two commands                       → task error
 *   - `pause`: `docker pause` between two commands                    → task error
 *   - `slow-turn`: a command that outlives the interaction time limit → task error
 *   - `abandoned`: the client never comes back                        → cancelled by the idle timeout
 *     (checked: after the soak, the controller reports each abandoned session `cancelled`)
 * A session without a fault runs `cat /root/n` and answers: completed with reward 1.
 * Reported: hung sessions (an interaction that did not return), leaked containers (this
 * run's containers left once every session ended), wrong statuses, and time.
 *
 * Probes, each measured through a real session (contained = the sandbox held, by the
 * measured figures): OS disk filler, fork bomb, memory bomb, `kill -9 -1`, network attempt;
 * DB cross-session read and drop, file write, shutdown.
 *
 *   npm run bench -- faults                     1,000 sessions, 10 % faults
 *   AGENTRL_SOAK_SESSIONS=200 AGENTRL_SOAK_FAULT_RATE=0.1 AGENTRL_SOAK_CONCURRENCY=8 npm run bench -- faults
 */
import { cpus, loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import Docker from "dockerode";
import {
  Random,
  Controller,
  DockerRuntime,
  EnvironmentApiError,
  HttpEnvironmentClient,
  IMAGES,
  TaskWorker,
  isDockerAvailable,
  type AssistantMessage,
  type InteractResult,
} from "@agentrl/envs";
import { RUN_LABEL, imageHash } from "@agentrl/envs/internal";
import { findQuotaEngine, quotaRuntime } from "../packages/envs/src/docker/quota-engine.js";
import {
  createTaskFamily as createOsFamily,
  type OsSample,
  type OsTaskFamily,
} from "../packages/envs/src/os/index.js";
import {
  createTaskFamily as createDbFamily,
  type DbSession,
} from "../packages/envs/src/db/index.js";
import type { DbSample } from "../packages/envs/src/db/data.js";
import type { BenchResult } from "./types.js";

export const FAULTS = [
  "container-kill",
  "kill-mid-command",
  "rm",
  "pause",
  "slow-turn",
  "abandoned",
] as const;
export type Fault = (typeof FAULTS)[number];

export interface SoakOptions {
  /** Sessions to run. Default 1,000. */
  sessions?: number;
  /** Share of sessions hit by a fault. Default 0.1. */
  faultRate?: number;
  /** Sessions at once. Default 8. */
  concurrency?: number;
  /** Seed of the fault draw. Default 1. */
  seed?: number;
  /** Seconds an interaction (and a start) may take before the controller ends it (the slow turn exceeds it). Default 60. */
  interactionSeconds?: number;
  /** Seconds without a request before the controller cancels a session (abandoned sessions). Default 5. */
  idleSeconds?: number;
  /** Seconds the soak waits for one interaction before counting the session as hung. Default `interactionSeconds` + 60. */
  hungSeconds?: number;
}

export interface SoakReport {
  sessions: number;
  faulted: Record<Fault, number>;
  completed: number;
  /** Starts the controller ended at its time limit with a 504 (a loaded machine): no session, no container. */
  startTimeouts: number;
  hung: number;
  wrongStatus: Array<{ fault: Fault | "none"; status: string }>;
  /** Faults the engine did not apply (e.g. `docker pause` refused): the session is not judged, the reason is kept. */
  notApplied: Array<{ fault: Fault; reason: string }>;
  leakedContainers: number;
  seconds: number;
}

const TOKEN = "agentrl-soak";
const SAMPLE: OsSample = {
  index: 0,
  split: "test",
  description: "What number is in /root/n?",
  image: "default",
  init: [{ language: "bash", code: "echo 5 > /root/n" }],
  match: { answer: "5", strip: true },
  labels: [],
  extraFolders: [],
  extraFiles: [],
};

function bash(script: string): AssistantMessage {
  return {
    role: "assistant",
    content: null,
    tool_calls: [
      {
        id: "c",
        type: "function",
        function: { name: "bash_action", arguments: JSON.stringify({ script }) },
      },
    ],
  };
}
function answer(value: string): AssistantMessage {
  return {
    role: "assistant",
    content: null,
    tool_calls: [
      {
        id: "c",
        type: "function",
        function: { name: "answer_action", arguments: JSON.stringify({ answer: value }) },
      },
    ],
  };
}

/** A seeded uniform generator in [0, 1) (envs' mulberry32). */
function random(seed: number): () => number {
  const generator = new Random(seed);
  return () => generator.next();
}

class Hung extends Error {}

function within<T>(promise: Promise<T>, seconds: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Hung()), seconds * 1000);
    }),
  ]).finally(() => clearTimeout(timer));
}

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs the soak; `docker` must answer and `agentrl/os` exist. */
export async function soak(options: SoakOptions = {}): Promise<SoakReport> {
  const sessions = options.sessions ?? 1000;
  const faultRate = options.faultRate ?? 0.1;
  const concurrency = options.concurrency ?? 8;
  const interactionSeconds = options.interactionSeconds ?? 60;
  const idleSeconds = options.idleSeconds ?? 5;
  const hungSeconds = options.hungSeconds ?? interactionSeconds + 60;
  const draw = random(options.seed ?? 1);
  // Which sessions are faulted is drawn; the faults take turns, so each kind is hit about equally often.
  let faultsDrawn = 0;
  const plan: Array<Fault | "none"> = Array.from({ length: sessions }, () =>
    draw() < faultRate ? FAULTS[faultsDrawn++ % FAULTS.length] : "none",
  );

  const docker = new Docker();
  const runtime = await DockerRuntime.connect();
  // A command may outlive the interaction limit, so that a slow turn is ended by the controller.
  const family = await createOsFamily({
    runtime,
    samples: [SAMPLE],
    maxSessions: concurrency * 2,
    commandSeconds: interactionSeconds + 30,
  });
  const controller = new Controller({
    port: 0,
    token: TOKEN,
    idleTimeoutMs: idleSeconds * 1000,
    interactionTimeoutMs: interactionSeconds * 1000,
    // Abandoned sessions' statuses are read after the whole soak (30 min and more at its
    // defaults): the controller must remember them that long (its default, 10 min, had
    // dropped 14 of 18 by then: 404 unknown session).
    finishedRetentionMs: 24 * 3600 * 1000,
  });
  const worker = new TaskWorker(family, {
    concurrency: concurrency * 2,
    idleTimeoutMs: idleSeconds * 1000 + 60_000,
    interactionTimeoutMs: interactionSeconds * 1000,
  });
  controller.addLocalWorker(worker);
  const url = await controller.listen();
  const client = new HttpEnvironmentClient({ url, token: TOKEN });

  const abandoned: string[] = [];
  const report: SoakReport = {
    sessions,
    faulted: Object.fromEntries(FAULTS.map((fault) => [fault, 0])) as Record<Fault, number>,
    completed: 0,
    startTimeouts: 0,
    hung: 0,
    wrongStatus: [],
    notApplied: [],
    leakedContainers: 0,
    seconds: 0,
  };
  const began = performance.now();

  const one = async (fault: Fault | "none"): Promise<void> => {
    if (fault !== "none") report.faulted[fault] += 1;
    let result: InteractResult | undefined;
    try {
      let sessionId: string;
      try {
        ({ sessionId } = await within(client.startSample("os", 0), hungSeconds));
      } catch (error) {
        if (error instanceof EnvironmentApiError && error.status === 504) {
          report.startTimeouts += 1;
          return;
        }
        throw error;
      }
      if (fault === "abandoned") {
        abandoned.push(sessionId); // the controller's idle timeout must end it: checked after the soak
        return;
      }
      // The container's hostname is its short id: the fault knows whom to hit. A fault the
      // engine refuses (or an id that is not one) is kept apart with its reason, not swallowed:
      // a session whose fault never landed would otherwise end well and count as a wrong status.
      const first = await within(client.interact(sessionId, bash("hostname")), hungSeconds);
      const hostname = String(first.messages[0]?.content ?? "").trim();
      const container = docker.getContainer(hostname);
      const apply = async (action: () => Promise<unknown>): Promise<boolean> => {
        if (fault === "none" || fault === "slow-turn") return true;
        try {
          if (!/^[0-9a-f]{12}$/.test(hostname))
            throw new Error(
              `the first command printed ${JSON.stringify(hostname.slice(0, 80))}, not a container id`,
            );
          await action();
          return true;
        } catch (error) {
          report.notApplied.push({ fault, reason: (error as Error).message.slice(0, 160) });
          return false;
        }
      };
      let applied = true;
      if (fault === "container-kill") applied = await apply(() => container.kill());
      if (fault === "rm") applied = await apply(() => container.remove({ force: true }));
      if (fault === "pause")
        applied = await apply(async () => {
          await container.pause();
          const state = (await container.inspect()).State;
          if (!state.Paused)
            throw new Error(`docker pause returned but the container is ${state.Status}`);
        });
      if (fault === "kill-mid-command") applied = await apply(() => container.inspect());
      if (!applied) {
        await client.cancel(sessionId).catch(() => {});
        return;
      }
      if (fault === "kill-mid-command") {
        const running = client.interact(sessionId, bash("sleep 20; echo late"));
        await delay(700);
        const killed = await container.kill().then(
          () => true,
          (error: Error) => {
            report.notApplied.push({ fault, reason: error.message.slice(0, 160) });
            return false;
          },
        );
        result = await within(running, hungSeconds);
        if (!killed) return;
      } else if (fault === "slow-turn") {
        result = await within(
          client.interact(sessionId, bash(`sleep ${interactionSeconds + 20}`)),
          hungSeconds,
        );
      } else {
        result = await within(client.interact(sessionId, bash("cat /root/n")), hungSeconds);
        if (!result.finish)
          result = await within(
            client.interact(sessionId, answer(String(result.messages[0]?.content ?? "").trim())),
            hungSeconds,
          );
      }
      // A fault that hit between the command's end and its reply shows at the next command.
      if (fault !== "none" && !result.finish)
        result = await within(client.interact(sessionId, bash("echo again")), hungSeconds);
      if (fault === "pause") await container.unpause().catch(() => {});
    } catch (error) {
      if (error instanceof Hung) {
        report.hung += 1;
        return;
      }
      report.wrongStatus.push({
        fault,
        status: `error: ${(error as Error).message.slice(0, 120)}`,
      });
      return;
    }
    const expected = fault === "none" ? "completed" : "task error";
    if (result?.status !== expected || (fault === "none" && result.reward !== 1))
      report.wrongStatus.push({ fault, status: `${result?.status} (reward ${result?.reward})` });
    else if (fault === "none") report.completed += 1;
  };

  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < plan.length) await one(plan[next++]);
    }),
  );
  // Abandoned sessions end at the idle timeout (checked every few seconds).
  const deadline = Date.now() + (idleSeconds + 30) * 1000;
  const live = async () =>
    (
      await docker.listContainers({
        all: true,
        filters: { label: [`${RUN_LABEL}=${runtime.runId}`] },
      })
    ).length;
  while ((await live()) > 0 && Date.now() < deadline) await delay(500);
  report.leakedContainers = await live();
  // Each abandoned session must have ended `cancelled` (the controller keeps ended sessions' results).
  for (const sessionId of abandoned) {
    try {
      const ended = await within(client.interact(sessionId, bash("echo back")), hungSeconds);
      if (ended.status !== "cancelled")
        report.wrongStatus.push({
          fault: "abandoned",
          status: `${ended.status} (reward ${ended.reward})`,
        });
    } catch (error) {
      report.wrongStatus.push({
        fault: "abandoned",
        status: `error: ${(error as Error).message.slice(0, 120)}`,
      });
    }
  }
  report.seconds = (performance.now() - began) / 1000;
  await controller.close();
  await worker.close();
  await family.close();
  await runtime.close();
  return report;
}

export interface ProbeResult {
  probe: string;
  contained: boolean;
  detail: string;
}

/** The sandbox probes, each through a real session. */
export async function probes(): Promise<ProbeResult[]> {
  const results: ProbeResult[] = [];
  const disk = 64 * 1024 ** 2;
  const os: OsTaskFamily = await createOsFamily({
    samples: [SAMPLE],
    diskBytes: disk,
    memoryBytes: 512 * 1024 ** 2,
    commandSeconds: 30,
  });
  const run = async (script: string) => {
    const session = await os.startSession(0);
    const reply = await session.interact(bash(script));
    await session.cancel();
    return String(reply.messages[0]?.content ?? "");
  };
  /** Plays `scripts` then answers, through one session; returns the episode's end and the highest process count seen. */
  const episode = async (scripts: string[]) => {
    const session = await os.startSession(0);
    const id = (session as { containerId?: string }).containerId!;
    let pids = 0;
    let result: InteractResult | undefined;
    for (const script of scripts) {
      result = await session.interact(bash(script));
      const stats = (await new Docker()
        .getContainer(id)
        .stats({ stream: false })
        .catch(() => undefined)) as { pids_stats?: { current?: number } } | undefined;
      pids = Math.max(pids, stats?.pids_stats?.current ?? 0);
      if (result.finish) break;
    }
    if (!result?.finish) result = await session.interact(answer("wrong"));
    const gone = await new Docker()
      .getContainer(id)
      .inspect()
      .then(
        () => false,
        () => true,
      );
    return {
      status: result.status,
      reward: result.reward,
      sandboxEnded: result.metrics?.sandboxEnded ?? 0,
      pids,
      gone,
      output: String(result.messages[0]?.content ?? ""),
    };
  };
  try {
    const fill = await run(
      "for d in /tmp /root /home /var/tmp /etc; do head -c 1G /dev/zero > $d/fill 2>&1; done; du -scb /tmp/fill /root/fill /home/fill /var/tmp/fill /etc/fill | tail -1",
    );
    const written = Number(/(\d+)\s+total/.exec(fill)?.[1] ?? NaN);
    const writableRoot = await os.runtime.writableRoot(IMAGES.os.tag, { bytes: disk });
    const budget = writableRoot ? disk + 16 * 1024 ** 2 : 5 * disk;
    results.push({
      probe: writableRoot
        ? "OS disk filler (1 GiB into 5 folders, one budget of 64 MiB + 16 MiB margin)"
        : "OS disk filler (1 GiB into 5 folders, read-only root: 64 MiB tmpfs each)",
      contained: written <= budget,
      detail: `${(written / 1024 ** 2).toFixed(0)} MiB written; ${/No space left|File size limit/.test(fill) ? "ENOSPC / SIGXFSZ" : "no error seen"}`,
    });
    const bomb = await episode([
      "bomb() { bomb | bomb & }; bomb; sleep 3; echo returned",
      "echo alive",
    ]);
    const bombNext = await run("echo fine");
    results.push({
      probe: "OS fork bomb",
      contained:
        bomb.pids > 0 &&
        bomb.pids <= 256 &&
        bomb.status !== "task error" &&
        bomb.reward === 0 &&
        bomb.gone &&
        bombNext.trim() === "fine",
      detail: `at most ${bomb.pids} processes seen (limit 256); episode ${bomb.status}, reward ${bomb.reward}${bomb.sandboxEnded ? " (sandbox ended by the agent)" : ""}; container ${bomb.gone ? "removed with its session" : "**left**"}; next session ${bombNext.trim() === "fine" ? "runs" : "**fails**"}`,
    });
    const memory = await episode([
      "python3 -c 'x = bytearray(1) * (2 * 1024 ** 3); print(len(x))'; echo exit=$?",
    ]);
    results.push({
      probe: "OS memory bomb (2 GiB, limit 512 MiB)",
      contained: !memory.output.includes("2147483648") && memory.status !== "task error",
      detail: `episode ${memory.status}, reward ${memory.reward}`,
    });
    const killAll = await episode(["kill -9 -1", "echo after"]);
    results.push({
      probe: "OS `kill -9 -1` (the agent ends its own sandbox)",
      contained:
        killAll.status === "completed" &&
        killAll.reward === 0 &&
        killAll.sandboxEnded === 1 &&
        killAll.gone,
      detail: `episode ${killAll.status}, reward ${killAll.reward}, sandboxEnded ${killAll.sandboxEnded} (an agent failure, not a masked task error)`,
    });
    const network = await run(
      "echo routes=$(tail -n +2 /proc/net/route | wc -l); ls /sys/class/net | tr '\\n' ' '",
    );
    results.push({
      probe: "OS network attempt",
      contained: /routes=0/.test(network) && !/eth/.test(network),
      detail: network.trim().replace(/\s+/g, " "),
    });
  } finally {
    await os.close();
  }
  // The writable root's one budget per container, on the engine that caps writable layers.
  const quota = await findQuotaEngine();
  if ("missing" in quota) {
    results.push({
      probe: "OS disk filler, writable root (all paths, one budget)",
      contained: false,
      detail: `not run: ${quota.missing}`,
    });
  } else {
    const runtime = quotaRuntime(quota);
    const budgetFamily = await createOsFamily({
      runtime,
      samples: [SAMPLE],
      diskBytes: disk,
      memoryBytes: 512 * 1024 ** 2,
      commandSeconds: 30,
    });
    try {
      const session = await budgetFamily.startSession(0);
      const paths = ["/fill", "/usr/fill", "/tmp/fill", "/root/fill", "/home/fill", "/etc/fill"];
      const reply = await session.interact(
        bash(
          `for f in ${paths.join(" ")}; do (head -c 1G /dev/zero > $f 2>/dev/null &); done; sleep 1; wait; sleep 4; sync; du -scb ${paths.join(" ")} 2>/dev/null | tail -1`,
        ),
      );
      await session.cancel();
      const written = Number(
        /(\d+)\s+total/.exec(String(reply.messages[0]?.content ?? ""))?.[1] ?? NaN,
      );
      results.push({
        probe:
          "OS disk filler, writable root (6 writers at once, 1 GiB each; one budget of 64 MiB + 16 MiB margin)",
        contained: written <= disk + 16 * 1024 ** 2,
        detail: `${(written / 1024 ** 2).toFixed(0)} MiB written in total, on ${quota.host ?? "the first engine"}`,
      });
    } finally {
      await budgetFamily.close();
      await runtime.close();
    }
  }
  const table: DbSample = {
    index: 0,
    split: "test",
    description: "How many secrets?",
    type: "counting",
    addDescription: "",
    evidence: "",
    label: ["2"],
    tables: [
      {
        table_name: "secrets",
        table_info: { columns: [{ name: "value", type: "TEXT" }], rows: [["a"], ["b"]] },
      },
    ],
  };
  const db = await createDbFamily({ samples: [table] });
  try {
    const victim = (await db.startSession(0)) as DbSession;
    const attacker = (await db.startSession(0)) as DbSession;
    const read = await attacker.execute(`SELECT * FROM \`${victim.database}\`.secrets`);
    const drop = await attacker.execute(`DROP DATABASE \`${victim.database}\``);
    const file = await attacker.execute("SELECT 'x' INTO OUTFILE '/tmp/agentrl-owned'");
    const shutdown = await attacker.execute("SHUTDOWN");
    const intact = await victim.execute("SELECT COUNT(*) FROM secrets");
    results.push({
      probe: "DB cross-session read and drop",
      contained: /^(1142|1044) /.test(read) && /^1044 /.test(drop) && intact === "[(2,)]",
      detail: `${read.slice(0, 5)}/${drop.slice(0, 5)}; victim's table ${intact}`,
    });
    results.push({
      probe: "DB file write (INTO OUTFILE)",
      contained: /^(1045|1227|1290) /.test(file),
      detail: file.slice(0, 70),
    });
    results.push({
      probe: "DB shutdown",
      contained: /^(1227|1045) /.test(shutdown) && intact === "[(2,)]",
      detail: shutdown.slice(0, 70),
    });
    // One session fills its space (16 MiB by default) by doubling inserts; the other writes on.
    await attacker.execute("CREATE TABLE big (x LONGTEXT)");
    await attacker.execute("INSERT INTO big VALUES (REPEAT('a', 500000))");
    let fillError = "";
    for (let doubling = 0; doubling < 12 && !fillError; doubling += 1) {
      const result = await attacker.execute("INSERT INTO big SELECT * FROM big");
      if (result !== "[]") fillError = result;
    }
    const held = await victim.execute(
      `SELECT COALESCE(SUM(DATA_LENGTH), 0) FROM information_schema.TABLES WHERE TABLE_SCHEMA = '${attacker.database}'`,
    );
    const victimWrite = await victim.execute("INSERT INTO secrets VALUES (REPEAT('c', 50000))");
    const victimCount = await victim.execute("SELECT COUNT(*) FROM secrets");
    results.push({
      probe: "DB space filler (one session's space, 16 MiB)",
      contained: fillError !== "" && victimWrite === "[]" && victimCount === "[(3,)]",
      detail: `filler stopped by: ${fillError.slice(0, 60) || "nothing"}, holding ${held.replace(/[^0-9]/g, "")} bytes of data; the other session's insert ${victimWrite === "[]" ? "succeeded" : victimWrite.slice(0, 40)}`,
    });
  } finally {
    await db.close();
  }
  return results;
}

export async function run(): Promise<BenchResult> {
  const docker = new Docker();
  if (
    !(await isDockerAvailable(docker)) ||
    (await imageHash(docker, IMAGES.os.tag)) === undefined
  ) {
    return {
      name: "faults",
      markdown: "## Fault soak\n\nSkipped: no Docker engine or no agentrl/os image.",
    };
  }
  const options: SoakOptions = {
    sessions: Number(process.env.AGENTRL_SOAK_SESSIONS ?? 1000),
    faultRate: Number(process.env.AGENTRL_SOAK_FAULT_RATE ?? 0.1),
    concurrency: Number(process.env.AGENTRL_SOAK_CONCURRENCY ?? 8),
  };
  const loadBefore = loadavg();
  const report = await soak(options);
  const loadAfter = loadavg();
  const found = await probes().catch((error: Error): ProbeResult[] => [
    { probe: "probes", contained: false, detail: `the probes failed: ${error.message}` },
  ]);
  const faulted = Object.values(report.faulted).reduce((a, b) => a + b, 0);
  const lines = [
    `\`npm run bench -- faults\` (AGENTRL_SOAK_SESSIONS=${report.sessions}, fault rate ${options.faultRate}, ${options.concurrency} at once): OS sessions through the real controller (HTTP, token), a local worker and the OS family on Docker (read-only root, 512 MiB disk, one container per session). Load average (1/5/15 min) at the start ${loadBefore.map((value) => value.toFixed(1)).join(" / ")}, at the end ${loadAfter.map((value) => value.toFixed(1)).join(" / ")} (${cpus().length} cores, shared with other work).`,
    "",
    "| sessions | faulted | completed (reward 1) | start timed out (504) | hung | wrong status | fault not applied | leaked containers | time | sessions/s |",
    "|---|---|---|---|---|---|---|---|---|---|",
    `| ${report.sessions} | ${faulted} (${FAULTS.map((fault) => `${fault} ${report.faulted[fault]}`).join(", ")}) | ${report.completed} | ${report.startTimeouts} | ${report.hung} | ${report.wrongStatus.length} | ${report.notApplied.length} | ${report.leakedContainers} | ${report.seconds.toFixed(0)} s | ${(report.sessions / report.seconds).toFixed(2)} |`,
    "",
    ...(report.wrongStatus.length
      ? [
          "Wrong statuses: " +
            report.wrongStatus
              .slice(0, 10)
              .map((entry) => `${entry.fault} → ${entry.status}`)
              .join("; "),
          "",
        ]
      : []),
    ...(report.notApplied.length
      ? [
          "Faults the engine did not apply (sessions not judged): " +
            report.notApplied
              .slice(0, 10)
              .map((entry) => `${entry.fault}: ${entry.reason}`)
              .join("; "),
          "",
        ]
      : []),
    "A start the controller ended at its time limit (504) is counted apart: the client gets a clear error, no session or container is left (the machine was loaded). Every faulted session but the abandoned ones must end with `task error`; abandoned ones are cancelled by the controller's idle timeout and their containers removed (counted under leaked containers if not).",
    "",
    "Sandbox probes:",
    "",
    "| probe | contained | detail |",
    "|---|---|---|",
    ...found.map(
      (probe) =>
        `| ${probe.probe} | ${probe.contained ? "yes" : "**no**"} | ${probe.detail.replace(/\s+/g, " ").trim().replace(/\|/g, "\\|")} |`,
    ),
  ];
  return { name: "faults", markdown: lines.join("\n") };
}
