/**
 * A queueing model of a scaled-out run (SIMULATED, not measured): throughput versus the number
 * of inference servers and Docker hosts, with service times taken from measurements on this
 * machine. A discrete-event simulation of a closed loop of EPISODES episodes in flight:
 *
 *   episode start → controller → Docker host (container start)
 *   then TURNS times: inference server (GENERATED tokens, continuous batching)
 *                     → controller → Docker host (one command in the container)
 *
 * - An inference server decodes all its sequences in one step of STEP_MS(b) = a + c·b ms for a
 *   batch of b (at most MAX_BATCH); a turn joins at the next step; turns go to the server with
 *   the fewest sequences (as the remote rollout backend balances).
 * - A Docker host is a FIFO queue with HOST_CORES servers; an episode's container stays on the
 *   host the engine set gave it (fewest episodes).
 * - The controller is one FIFO server (one event loop).
 *   npm run bench -- scale
 */
import { readdirSync, readFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import Docker from "dockerode";
import { DockerRuntime, IMAGES, isDockerAvailable } from "@agentrl/envs";
import { imageHash } from "@agentrl/envs/internal";
import type { BenchResult } from "./types.js";

export interface ModelParameters {
  /** Episodes in flight (the rollout's concurrency). */
  episodes: number;
  servers: number;
  hosts: number;
  /** Assistant turns per episode. */
  turns: number;
  /** Tokens generated per turn. */
  generated: number;
  /** Decode step time a + c·b in ms for batch b. */
  stepMs: { a: number; c: number };
  maxBatch: number;
  /** Cores of a Docker host (commands run in parallel up to this). */
  hostCores: number;
  /** Host time of one command in a container, ms. */
  commandMs: number;
  /** Host time of one container start, ms. */
  containerStartMs: number;
  /** Controller time per request, ms. */
  controllerMs: number;
  /** Simulated seconds (after a warm-up of a fifth of it). */
  seconds: number;
}

export interface ModelResult {
  tokensPerSecond: number;
  episodesPerSecond: number;
  /** Busy fraction of the average inference server / Docker host core / controller. */
  serverBusy: number;
  hostBusy: number;
  controllerBusy: number;
  meanBatch: number;
}

/** A min-heap of timed events. */
class Events {
  private readonly heap: Array<{ at: number; run: () => void }> = [];
  push(at: number, run: () => void): void {
    const heap = this.heap;
    heap.push({ at, run });
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (heap[parent].at <= heap[i].at) break;
      [heap[parent], heap[i]] = [heap[i], heap[parent]];
      i = parent;
    }
  }
  pop(): { at: number; run: () => void } | undefined {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop();
    if (heap.length && last) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const left = 2 * i + 1;
        const right = left + 1;
        let smallest = i;
        if (left < heap.length && heap[left].at < heap[smallest].at) smallest = left;
        if (right < heap.length && heap[right].at < heap[smallest].at) smallest = right;
        if (smallest === i) break;
        [heap[smallest], heap[i]] = [heap[i], heap[smallest]];
        i = smallest;
      }
    }
    return top;
  }
}

/** A FIFO queue with `servers` parallel servers; records busy time after `countFrom`. */
class Station {
  private free: number;
  private readonly waiting: Array<{ ms: number; done: () => void }> = [];
  busyMs = 0;
  constructor(
    private readonly events: Events,
    private readonly clock: { now: number; countFrom: number },
    readonly servers: number,
  ) {
    this.free = servers;
  }
  submit(ms: number, done: () => void): void {
    this.waiting.push({ ms, done });
    this.next();
  }
  private next(): void {
    while (this.free > 0 && this.waiting.length) {
      const job = this.waiting.shift()!;
      this.free -= 1;
      const start = this.clock.now;
      this.events.push(start + job.ms, () => {
        this.busyMs += Math.max(0, this.clock.now - Math.max(start, this.clock.countFrom));
        this.free += 1;
        job.done();
        this.next();
      });
    }
  }
}

/** A continuous-batching inference server. */
class Server {
  private readonly joining: Array<{ left: number; done: () => void }> = [];
  private active: Array<{ left: number; done: () => void }> = [];
  private stepping = false;
  busyMs = 0;
  batchSum = 0;
  steps = 0;
  constructor(
    private readonly events: Events,
    private readonly clock: { now: number; countFrom: number },
    private readonly p: ModelParameters,
  ) {}
  get load(): number {
    return this.joining.length + this.active.length;
  }
  submit(tokens: number, done: () => void): void {
    this.joining.push({ left: tokens, done });
    if (!this.stepping) this.step();
  }
  private step(): void {
    while (this.active.length < this.p.maxBatch && this.joining.length)
      this.active.push(this.joining.shift()!);
    if (this.active.length === 0) {
      this.stepping = false;
      return;
    }
    this.stepping = true;
    const ms = this.p.stepMs.a + this.p.stepMs.c * this.active.length;
    const start = this.clock.now;
    this.events.push(start + ms, () => {
      if (start >= this.clock.countFrom) {
        this.busyMs += ms;
        this.batchSum += this.active.length;
        this.steps += 1;
      }
      const still: typeof this.active = [];
      for (const sequence of this.active) {
        sequence.left -= 1;
        if (sequence.left <= 0) sequence.done();
        else still.push(sequence);
      }
      this.active = still;
      this.step();
    });
  }
}

export function simulate(p: ModelParameters): ModelResult {
  const events = new Events();
  const totalMs = p.seconds * 1000;
  const clock = { now: 0, countFrom: totalMs / 5 };
  const servers = Array.from({ length: p.servers }, () => new Server(events, clock, p));
  const hosts = Array.from({ length: p.hosts }, () => ({
    station: new Station(events, clock, p.hostCores),
    episodes: 0,
  }));
  const controller = new Station(events, clock, 1);
  let tokens = 0;
  let episodesDone = 0;

  const startEpisode = (): void => {
    const host = hosts.reduce((best, candidate) =>
      candidate.episodes < best.episodes ? candidate : best,
    );
    host.episodes += 1;
    let turnsLeft = p.turns;
    const turn = (): void => {
      const server = servers.reduce((best, candidate) =>
        candidate.load < best.load ? candidate : best,
      );
      server.submit(p.generated, () => {
        if (clock.now >= clock.countFrom) tokens += p.generated;
        controller.submit(p.controllerMs, () =>
          host.station.submit(p.commandMs, () => {
            turnsLeft -= 1;
            if (turnsLeft > 0) return turn();
            host.episodes -= 1;
            if (clock.now >= clock.countFrom) episodesDone += 1;
            startEpisode();
          }),
        );
      });
    };
    controller.submit(p.controllerMs, () => host.station.submit(p.containerStartMs, turn));
  };
  for (let i = 0; i < p.episodes; i += 1) startEpisode();
  for (let event = events.pop(); event && event.at <= totalMs; event = events.pop()) {
    clock.now = event.at;
    event.run();
  }
  const measuredMs = totalMs - clock.countFrom;
  const steps = servers.reduce((n, s) => n + s.steps, 0);
  return {
    tokensPerSecond: (tokens / measuredMs) * 1000,
    episodesPerSecond: (episodesDone / measuredMs) * 1000,
    serverBusy: servers.reduce((n, s) => n + s.busyMs, 0) / (measuredMs * p.servers),
    hostBusy:
      hosts.reduce((n, h) => n + h.station.busyMs, 0) / (measuredMs * p.hosts * p.hostCores),
    controllerBusy: controller.busyMs / measuredMs,
    meanBatch: steps ? servers.reduce((n, s) => n + s.batchSum, 0) / steps : 0,
  };
}

/**
 * Service times of this machine (2 cores; see docs/benchmarks.md): decode step of the tiny
 * preset on wasm 0.7 ms at batch 1, 3.7 ms at 16, 9.0 ms at 44 (the "rollout" section) → a + c·b
 * with a = 0.5, c = 0.19; controller ≈ 0.1 ms per interact (the "scale" section: the controller
 * process's CPU per call, 0.07-0.11 ms); an OS command (`docker exec` of `echo hi`)
 * costs the host 255 ms of CPU (dockerd 74, containerd 40, shim + runc 141; 316 ms wall) and a
 * container start 630 ms (dockerd + containerd), measured here from /proc over 40 execs on a
 * loaded machine (`run` measures them again when a local engine is there). Hosts are taken with 16 cores (a common cloud node; the per-core cost is
 * what was measured).
 */
export const MEASURED: Omit<ModelParameters, "episodes" | "servers" | "hosts" | "seconds"> = {
  turns: 4,
  generated: 32,
  stepMs: { a: 0.5, c: 0.19 },
  maxBatch: 64,
  hostCores: 16,
  commandMs: 255,
  containerStartMs: 630,
  controllerMs: 0.1,
};

const SERVERS = [1, 2, 4, 8];
const HOSTS = [1, 2, 4, 8];
/** Episodes in flight per inference server (each server's batch can fill to ~this). */
const EPISODES_PER_SERVER = 128;

/** Clock ticks per second of /proc/<pid>/stat times (USER_HZ; 100 on Linux). */
const TICKS_PER_SECOND = 100;

/** CPU time (own + reaped children) of a process from /proc, in ms; 0 when it is gone. */
function processCpuMs(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return (
      ((Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) * 1000) /
      TICKS_PER_SECOND
    );
  } catch {
    return 0;
  }
}

/** Pids of the processes whose command line starts with `prefix` (and contains `containing`). */
function pidsOf(prefix: string, containing = ""): number[] {
  return readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        const command = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ");
        return (
          (command.startsWith(prefix) || command.includes(`/${prefix}`)) &&
          command.includes(containing)
        );
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** Executions of `echo hi` measured. */
const EXEC_RUNS = 40;

/**
 * The local Docker host's CPU per OS command (`docker exec` through the runtime: dockerd +
 * containerd + the container's shim and the runc processes it reaps) and per container start
 * (dockerd + containerd), from /proc; undefined without a local engine and agentrl/os. Other
 * work on the same engine during the measurement counts too.
 */
async function measureDockerCosts(): Promise<
  { commandMs: number; commandWallMs: number; containerStartMs: number } | undefined
> {
  if (!(await isDockerAvailable()) || (await imageHash(new Docker(), IMAGES.os.tag)) === undefined)
    return undefined;
  const engine = [...pidsOf("dockerd"), ...pidsOf("containerd ")].filter(
    (pid) => !readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("--host"),
  );
  if (engine.length === 0) return undefined;
  const runtime = await DockerRuntime.connect();
  try {
    const engineCpu = () => engine.reduce((total, pid) => total + processCpuMs(pid), 0);
    const beforeStart = engineCpu();
    const id = await runtime.start({
      image: IMAGES.os.tag,
      labels: { "agentrl.bench": "scale-model" },
    });
    const containerStartMs = engineCpu() - beforeStart;
    const shims = pidsOf("containerd-shim", id);
    const cpu = () => engineCpu() + shims.reduce((total, pid) => total + processCpuMs(pid), 0);
    await runtime.exec(id, ["true"]);
    const before = cpu();
    const began = performance.now();
    for (let i = 0; i < EXEC_RUNS; i += 1)
      await runtime.exec(id, ["bash", "-c", "echo hi"], { timeoutSeconds: 10 });
    return {
      commandMs: (cpu() - before) / EXEC_RUNS,
      commandWallMs: (performance.now() - began) / EXEC_RUNS,
      containerStartMs,
    };
  } finally {
    await runtime.close();
  }
}

export async function run(): Promise<BenchResult> {
  const docker = await measureDockerCosts();
  const parameters = {
    ...MEASURED,
    ...(docker
      ? {
          commandMs: Math.round(docker.commandMs),
          containerStartMs: Math.round(docker.containerStartMs),
        }
      : {}),
  };
  const rows: string[] = [];
  for (const servers of SERVERS) {
    for (const hosts of HOSTS) {
      const result = simulate({
        ...parameters,
        episodes: EPISODES_PER_SERVER * servers,
        servers,
        hosts,
        seconds: 60,
      });
      const pct = (x: number) => `${Math.round(x * 100)} %`;
      const bound =
        result.hostBusy > 0.9
          ? "Docker hosts"
          : result.serverBusy > 0.9
            ? "inference"
            : result.controllerBusy > 0.9
              ? "controller"
              : "latency";
      rows.push(
        `| ${servers} | ${hosts} | ${EPISODES_PER_SERVER * servers} | ${Math.round(result.tokensPerSecond).toLocaleString("en")} | ${result.episodesPerSecond.toFixed(1)} | ${result.meanBatch.toFixed(1)} | ${pct(result.serverBusy)} | ${pct(result.hostBusy)} | ${pct(result.controllerBusy)} | ${bound} |`,
      );
    }
  }
  const m = parameters;
  const dockerLine = docker
    ? `Docker costs measured now on the local engine (${EXEC_RUNS} execs of \`echo hi\`, ${docker.commandWallMs.toFixed(0)} ms wall each; load average ${loadavg()[0].toFixed(1)} on ${cpus().length} cores).`
    : "No local Docker engine with agentrl/os: Docker costs are the defaults in bench/scale-model.ts (measured 2026-11-25 on this machine).";
  const markdown = [
    "### Scale-out model: throughput vs inference servers and Docker hosts (simulated)",
    "",
    dockerLine,
    "",
    `**Simulated** (bench/scale-model.ts, a discrete-event queueing model, 60 s per cell), with service times measured on this machine: decode step ${m.stepMs.a} + ${m.stepMs.c}·batch ms`,
    `(tiny preset, wasm, one core per server), measured, ${m.generated} tokens per turn, ${m.turns} turns per episode, controller ${m.controllerMs} ms per interact, per OS command ${m.commandMs} ms and per container start`,
    `${m.containerStartMs} ms of a Docker host's CPU (measured on this machine), hosts of ${m.hostCores} cores. ${EPISODES_PER_SERVER} episodes in flight per server. "Bound by": the resource above 90 % busy.`,
    "",
    "| inference servers | Docker hosts | episodes in flight | tokens/s | episodes/s | mean decode batch | server busy | host cores busy | controller busy | bound by |",
    "|---|---|---|---|---|---|---|---|---|---|",
    ...rows,
    "",
    "Episodes/s near 0 with many episodes on one host: their container starts alone keep the host busy for most of the simulated minute (tokens still flow).",
  ].join("\n");
  return { name: "scale", markdown };
}

const invokedDirectly =
  process.argv[1] && import.meta.url.endsWith(process.argv[1].replace(/\\/g, "/"));
if (invokedDirectly) console.log((await run()).markdown);
