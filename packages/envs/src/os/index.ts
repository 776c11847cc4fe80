/**
 * The OS task (AgentBench OS interaction): the agent works in a bash shell of its own Docker
 * container for at most 8 turns, and either answers a question or changes the system and
 * says it is finished.
 *
 * Semantics of the original: the sample's init scripts run first (a failure is a task error),
 * then its background `start` program; `bash_action` runs a script (30 s limit, output cut to
 * 800 characters); `answer_action` / `finish_action` end the episode and grade it — by
 * `match` (exact after strip, or regex search) or by the check scripts run in the container:
 * the first gets the answer, each next one also the outputs of those before it, `null` stands
 * for the example solution; all must exit 0. `finish_action` grades with the answer "None",
 * as the original passed Python's `str(None)`.
 */
import { AgentRLError } from "@agentrl/spec";
import type { TaskFamilyOptions } from "../types.js";
import { FunctionCallSession, truncateOutput, type ToolReply } from "../session.js";
import type {
  AssistantMessage,
  CurriculumTaskFamily,
  Expert,
  Message,
  Split,
  StartResult,
  ToolSpec,
} from "../types.js";
import { EnvironmentError } from "../types.js";
import { IMAGES } from "../docker/images.js";
import { TaskDataError } from "../docker/agentbench.js";
import { WarmPool } from "../docker/pool.js";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  DockerRuntime,
  HOST_DIR_LABEL,
  RUN_LABEL,
  SandboxEndedError,
  WRITABLE_FOLDERS,
  type Capability,
  type ContainerSpec,
} from "../docker/runtime.js";
import { Slots } from "../docker/slots.js";
import { FailedSession } from "../docker/failed-session.js";
import {
  answersExample,
  isAnswerGraded,
  loadOsSamples,
  osDifficulty,
  type OsSample,
} from "./data.js";
import { gradeOs, runScript } from "./reward.js";
import { answerSourceMetrics, SeenOutputs } from "./reading.js";
import { generateOsSamples, type OsGeneratedPlaces } from "./generate.js";

export { gradeOs } from "./reward.js";
export { answerSourceMetrics, SeenOutputs } from "./reading.js";
export {
  generateOsSample,
  generateOsSamples,
  OS_GENERATED_OFFSET,
  OS_GENERATED_TEST_OFFSET,
  type OsGeneratedPlaces,
} from "./generate.js";

export {
  loadOsSamples,
  isHeldOut,
  osDifficulty,
  answersExample,
  isAnswerGraded,
  type OsSample,
  type Script,
} from "./data.js";

export const OS_MAX_TURNS = 8;
/** Seconds a bash_action may run (the original's per-command limit). */
export const OS_COMMAND_SECONDS = 30;
/**
 * The working folder of init scripts, the start program, the agent's shell and the check
 * scripts under a read-only root. The original ran them in `/`, as this does when the engine
 * caps the writable layer (a writable root); under a read-only root `/` is not writable, so
 * samples that create files "in the current directory" get a writable folder of their own.
 */
export const OS_WORKING_FOLDER = "/workspace";
/** Bytes an OS container may write by default (see `OsFamilyOptions.diskBytes`). */
export const OS_DISK_BYTES = 512 * 1024 ** 2;

export const OS_SYSTEM_PROMPT = `You are an assistant that will act like a person, I will play the role of linux (ubuntu) operating system. Your goal is to implement the operations required by me or answer to the question proposed by me. For each of your turn, you should first think what you should do, and then call exactly one of the three tools: bash_action, finish_action or answer_action.

1. If you think you should execute some bash code, call bash_action with the script.
2. If you think you have finished the task, call finish_action.
3. If you think you have got the answer to the question, call answer_action with the answer alone.

If the output is too long, I will truncate it. The truncated output is not complete. You have to deal with the truncating problem by yourself. Attention, your bash code should not contain any input operation. Once again, you should call only exactly one tool in each turn.`;

export const OS_TOOLS: ToolSpec[] = [
  {
    type: "function",
    function: {
      name: "bash_action",
      description:
        "Execute a bash script in the Linux container and return its output (stdout and stderr, cut to 800 characters).",
      parameters: {
        type: "object",
        properties: { script: { type: "string", description: "The bash script to execute." } },
        required: ["script"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "finish_action",
      description:
        "Indicate that the task has been finished (for tasks that ask to change the system).",
      parameters: {
        type: "object",
        properties: { thought: { type: "string", description: "Why the task is finished." } },
      },
    },
  },
  {
    type: "function",
    function: {
      name: "answer_action",
      description: "Give the answer to the question; this ends the task.",
      parameters: {
        type: "object",
        properties: { answer: { type: "string", description: "The answer alone, e.g. 220." } },
        required: ["answer"],
      },
    },
  },
];

/**
 * Capabilities an OS container gets back after all are dropped: the task is "root on a
 * Linux box" (add users, chown files, switch users, kill processes), which needs CHOWN,
 * DAC_OVERRIDE, FOWNER, SETUID, SETGID and KILL. Everything else (raw sockets, mknod,
 * chroot, audit, setpcap, …) stays dropped, and no-new-privileges stays on.
 */
export const OS_CAPABILITIES: Capability[] = [
  "CHOWN",
  "DAC_OVERRIDE",
  "FOWNER",
  "SETUID",
  "SETGID",
  "KILL",
  "FSETID",
];

export interface OsFamilyOptions extends TaskFamilyOptions {
  /** A Docker runtime to use (shared with others). Default: a new one on the local engine. */
  runtime?: DockerRuntime;
  /** Image of the containers. Default `agentrl/os:latest`. */
  image?: string;
  /**
   * Our image for each AgentBench image a sample names (`create.local` / `create.image`).
   * Default: every name → `image`. AgentBench's `packages` image is its default image plus
   * npm; ours has no npm (see docs/tasks/os.md), so `packages` samples that need it fail
   * their own scripts, as they would on the default image.
   */
  images?: Record<string, string>;
  /** Started containers kept waiting (warm pool). Default 0. */
  warmPool?: number;
  /** Sessions running at once; more wait for a slot. Default 64. */
  maxSessions?: number;
  /** Memory per container in bytes. Default 1 GiB (the original). */
  memoryBytes?: number;
  /** CPU cores per container. Default 1. */
  cpus?: number;
  /**
   * Bytes a container may write (a hard limit, see `DiskLimit`; on an engine without writable-
   * layer limits the root is read-only and `WRITABLE_FOLDERS` are tmpfs of this size, counted
   * in the container's memory). Also the largest file a process may write (ulimit fsize).
   * Default 512 MiB.
   */
  diskBytes?: number;
  /**
   * Open files per process (ulimit nofile). Default: the engine's own (Docker's default, as
   * AgentBench's containers had; a lower cap such as 4,096 breaks redirects to high descriptors).
   */
  openFiles?: number;
  /** Seconds a bash_action may run. Default 30. */
  commandSeconds?: number;
  /**
   * Hold two in five training.json samples out into the test split (`isHeldOut`), beside
   * dev.json. Default true; false gives AgentBench's split (test = dev.json's 26 samples).
   */
  holdOut?: boolean;
  /** Samples to load instead of reading the data folder and generating (tests). */
  samples?: OsSample[];
  /**
   * Generated training instances (generate.ts: files with random content, answers a constant
   * cannot win, read rows for the expert) added to AgentBench's, on world `seed`. Default 0:
   * the shipped warm start and the default run were trained and measured without them.
   */
  generatedSize?: number;
  /** Generated test instances added after AgentBench's test split (indices from `OS_GENERATED_TEST_OFFSET`). Default 0. */
  generatedTestSize?: number;
  /**
   * Where the generated tasks put their folders (generate.ts, OsGeneratedPlaces): `home` (the
   * default: the tasks the shipped warm starts and the default run trained on) or `stated`
   * (home, absolute and working-folder paths, each written as the question states it).
   */
  generatedPlaces?: OsGeneratedPlaces;
  /**
   * Share of the generated tasks with a `mistake` (folders of the working folder) whose expert
   * recovers: it first runs the mistake (the folder under `~/`, a turn its row does not train
   * on), reads the error, then runs the example. Chosen per index (golden-ratio stride), so the
   * same tasks recover in every stage. Default 0.
   */
  generatedRecovery?: number;
  /** Seconds between two reconciliations of sessions with containers (`reconcile`); 0: never. Default 30. */
  reconcileSeconds?: number;
}

export class OsTaskFamily implements CurriculumTaskFamily {
  readonly name = "os";
  readonly difficulties = [0, 1, 2];
  readonly runtime: DockerRuntime;
  readonly samples: OsSample[];
  private readonly pool: WarmPool;
  private readonly slots: Slots;
  private readonly ownsRuntime: boolean;
  private readonly commandSeconds: number;
  private readonly sessions = new Set<OsSession>();
  private readonly spec: ContainerSpec;
  private readonly images: Record<string, string>;
  /** Host folders holding the files bound into a session's container (see `OsSample.extraFiles`). */
  private readonly hostFolders = new Map<string, string>();
  /** `OsFamilyOptions.generatedRecovery`. */
  private readonly recoveryShare: number;

  constructor(runtime: DockerRuntime, options: OsFamilyOptions = {}, ownsRuntime = false) {
    this.runtime = runtime;
    this.ownsRuntime = ownsRuntime;
    this.recoveryShare = options.generatedRecovery ?? 0;
    if (!(this.recoveryShare >= 0 && this.recoveryShare <= 1))
      throw new TaskDataError(
        `os: generatedRecovery must be a share in [0, 1], got ${JSON.stringify(options.generatedRecovery)}`,
      );
    this.samples = options.samples ?? osSamples(options);
    this.commandSeconds = options.commandSeconds ?? OS_COMMAND_SECONDS;
    const diskBytes = options.diskBytes ?? OS_DISK_BYTES;
    const spec: ContainerSpec = {
      image: options.image ?? IMAGES.os.tag,
      memoryBytes: options.memoryBytes,
      cpus: options.cpus ?? 1,
      pidsLimit: 256,
      disk: { bytes: diskBytes, writable: [...WRITABLE_FOLDERS, OS_WORKING_FOLDER] },
      // No nproc: it counts root's processes on the whole host; pidsLimit bounds the container.
      ulimits: { nofile: options.openFiles, fsize: diskBytes },
      // Commands go through a harness in the container (one login shell, no exec per command).
      harness: true,
      networkMode: "none",
      capabilities: OS_CAPABILITIES,
      labels: { "agentrl.task": "os" },
      namePrefix: "agentrl-os",
    };
    this.spec = spec;
    this.images = options.images ?? {};
    // A container is never reused: the agent may have changed anything in it.
    this.pool = new WarmPool(runtime, spec, { size: options.warmPool ?? 0, maxUses: 1 });
    this.slots = new Slots(options.maxSessions ?? 64);
    const every = options.reconcileSeconds ?? 30;
    if (every > 0) {
      this.reconciler = setInterval(
        () => void this.reconcile().catch(() => undefined),
        every * 1000,
      );
      this.reconciler.unref();
    }
  }

  private readonly reconciler: NodeJS.Timeout | undefined;
  /** Containers between `pool.acquire` and their session (or their removal). */
  private readonly claimed = new Set<string>();

  /**
   * Reconciles live sessions with live containers, in case an event was missed: a session
   * whose container is gone ends with `task error`, and a container of this family that no
   * session, pool or start holds (and older than `minimumAgeSeconds`, so not one being started
   * by the pool right now) is removed.
   */
  async reconcile(
    minimumAgeSeconds = 60,
  ): Promise<{ failedSessions: number; removedContainers: number }> {
    let failedSessions = 0;
    for (const session of [...this.sessions]) {
      if (
        !session.finished &&
        session.sandboxEnded === undefined &&
        !(await this.runtime.isRunning(session.containerId))
      ) {
        failedSessions += 1;
        await session.fail(`the container ${session.containerId.slice(0, 12)} is gone`);
      }
    }
    const held = new Set([
      ...[...this.sessions].map((session) => session.containerId),
      ...this.pool.idleIds,
      ...this.claimed,
    ]);
    const listed = await this.runtime.docker.listContainers({
      all: true,
      filters: { label: [`${RUN_LABEL}=${this.runtime.runId}`, "agentrl.task=os"] },
    });
    let removedContainers = 0;
    for (const info of listed) {
      if (held.has(info.Id) || Date.now() / 1000 - info.Created < minimumAgeSeconds) continue;
      await this.runtime.remove(info.Id);
      removedContainers += 1;
    }
    return { failedSessions, removedContainers };
  }

  /** Sessions holding a container now. */
  get activeSessions(): number {
    return this.slots.inUse;
  }

  indices(split: Split): number[] {
    return this.samples.filter((sample) => sample.split === split).map((sample) => sample.index);
  }

  indicesAt(split: Split, difficulty: number): number[] {
    return this.samples
      .filter((sample) => sample.split === split && osDifficulty(sample) === difficulty)
      .map((sample) => sample.index);
  }

  sample(index: number): OsSample {
    const sample = this.samples.find((candidate) => candidate.index === index);
    if (!sample) throw new EnvironmentError(`os has no sample ${index}`);
    return sample;
  }

  /** Starts containers for the warm pool now (otherwise they start with the first session). */
  async warmUp(): Promise<void> {
    await this.pool.fill();
  }

  /**
   * Starts a session on sample `index` in a new container. A sample whose init script or
   * start program fails gives a session that is already over (`task error`, see
   * `FailedSession`), as the original ended such samples; no Docker engine throws.
   */
  async startSession(index: number): Promise<OsSession | FailedSession> {
    const sample = this.sample(index);
    await this.runtime.reaped;
    const releaseSlot = await this.slots.acquire();
    let containerId: string | undefined;
    try {
      const ownContainer =
        sample.extraFolders.length + sample.extraFiles.length > 0 ||
        this.imageOf(sample) !== this.spec.image;
      containerId = ownContainer
        ? await this.startOwnContainer(sample)
        : (await this.pool.acquire()).containerId;
      this.claimed.add(containerId);
      const workingFolder = await this.workingFolder();
      await prepareContainer(this.runtime, containerId, sample, workingFolder);
      const session = new OsSession(
        this,
        sample,
        containerId,
        this.commandSeconds,
        releaseSlot,
        workingFolder,
      );
      this.sessions.add(session);
      this.claimed.delete(containerId);
      const id = containerId;
      await this.runtime.onDeath(id, (death) => {
        // Ended by its own processes (the agent's commands): the agent's failure, graded at its
        // next call; killed or removed from outside: an infrastructure fault.
        if (death.cause === "own")
          session.sandboxEnded = `the container ${id.slice(0, 12)} ended on its own (exit ${death.exitCode}${death.outOfMemory ? ", out of memory" : ""})`;
        else
          void session.fail(
            `the container ${id.slice(0, 12)} stopped (killed from outside, exit ${death.exitCode})`,
          );
      });
      return session;
    } catch (error) {
      if (containerId) await this.discard(containerId);
      releaseSlot();
      if (error instanceof SampleSetupError)
        return FailedSession.create(openingOf(sample), error.message);
      throw new EnvironmentError(`os sample ${index} could not start: ${(error as Error).message}`);
    }
  }

  /** `/` on a writable root (as the original), `OS_WORKING_FOLDER` under a read-only root. */
  async workingFolder(): Promise<string> {
    return (await this.runtime.writableRoot(this.spec.image, this.spec.disk!))
      ? "/"
      : OS_WORKING_FOLDER;
  }

  /** Our image for the AgentBench image the sample names. */
  private imageOf(sample: OsSample): string {
    return this.images[sample.image] ?? this.spec.image;
  }

  /**
   * A container for a sample with an image of its own or that writes outside the writable folders: its new top-level
   * folders become tmpfs of their own, and each file it writes in a read-only folder is bound
   * to an empty host file (bounded by the fsize ulimit).
   */
  private async startOwnContainer(sample: OsSample): Promise<string> {
    const disk = this.spec.disk!;
    let binds: string[] = [];
    let labels = this.spec.labels;
    let folder: string | undefined;
    if (sample.extraFiles.length > 0) {
      folder = mkdtempSync(join(tmpdir(), "agentrl-os-"));
      binds = sample.extraFiles.map((file, position) => {
        writeFileSync(join(folder!, String(position)), "");
        return `${join(folder!, String(position))}:${file}`;
      });
      labels = { ...labels, [HOST_DIR_LABEL]: folder };
    }
    try {
      const containerId = await this.runtime.start({
        ...this.spec,
        image: this.imageOf(sample),
        labels,
        binds,
        disk: {
          ...disk,
          writable: [...(disk.writable ?? WRITABLE_FOLDERS), ...sample.extraFolders],
        },
      });
      if (folder) this.hostFolders.set(containerId, folder);
      return containerId;
    } catch (error) {
      if (folder) rmSync(folder, { recursive: true, force: true });
      throw error;
    }
  }

  /** Called by a session when it ends. */
  async endSession(session: OsSession, containerId: string): Promise<void> {
    this.sessions.delete(session);
    await this.discard(containerId);
  }

  /** Removes a session's container (never reused) and its host folder. */
  private async discard(containerId: string): Promise<void> {
    this.claimed.delete(containerId);
    await this.pool.release(containerId, { healthy: false });
    const folder = this.hostFolders.get(containerId);
    this.hostFolders.delete(containerId);
    if (folder) rmSync(folder, { recursive: true, force: true });
  }

  expert(index: number): Expert {
    return new OsExpert(this.sample(index), (index * 0.6180339887498949) % 1 < this.recoveryShare);
  }

  wrongExpert(index: number): Expert {
    return new OsWrongExpert(this.sample(index));
  }

  async close(): Promise<void> {
    if (this.reconciler) clearInterval(this.reconciler);
    await Promise.all([...this.sessions].map((session) => session.cancel()));
    await this.pool.close();
    if (this.ownsRuntime) await this.runtime.close();
  }
}

/** The sample's own setup failed (not the machinery). */
class SampleSetupError extends AgentRLError {}

/**
 * As the original: the agent's login shell starts first (its profile and ~/.bashrc run now,
 * once), then the init scripts run each in a fresh `bash -c` / `python3 -c` (their exit codes
 * are ignored, as AgentBench's judge ignores them; a script that outlives its limit is a
 * setup failure), then the `start` program is typed into the agent's shell, so its `cd` and
 * variables are the agent's.
 */
async function prepareContainer(
  runtime: DockerRuntime,
  containerId: string,
  sample: OsSample,
  workingFolder: string,
): Promise<void> {
  await runtime.shellStart(containerId, workingFolder);
  for (const script of sample.init) {
    const result = await runScript(runtime, containerId, script, [], workingFolder, 120);
    if (result.timedOut)
      throw new SampleSetupError(
        `init script of os sample ${sample.index} did not end within 120 s: ${result.output.slice(0, 300)}`,
      );
  }
  if (sample.start) {
    // Typed into the agent's shell whatever its language (as the original); its output is not the agent's.
    const result = await runtime.shell(
      containerId,
      `{\n${sample.start.code}\n} </dev/null >/dev/null 2>&1`,
      { timeoutSeconds: 30 },
    );
    if (result.timedOut)
      throw new SampleSetupError(
        `start program of os sample ${sample.index} did not return within 30 s`,
      );
  }
}

export class OsSession extends FunctionCallSession {
  /** The lines and fields of every command output the agent saw (after truncation). */
  private readonly seen = new SeenOutputs();
  /** Set when the container ended on its own (the agent's commands ended it): the next call ends the episode as a failure. */
  sandboxEnded: string | undefined;

  constructor(
    private readonly family: OsTaskFamily,
    readonly sample: OsSample,
    readonly containerId: string,
    private readonly commandSeconds: number,
    private readonly releaseSlot: () => void,
    private readonly workingFolder: string,
  ) {
    super(openingOf(sample), { maxTurns: OS_MAX_TURNS, maxOutputChars: 800 });
  }

  protected async callTool(name: string, args: Record<string, unknown>): Promise<ToolReply> {
    try {
      return await this.callToolInSandbox(name, args);
    } catch (error) {
      if (!(error instanceof SandboxEndedError)) throw error;
      // The agent's own commands ended its container (killed every process, exhausted its
      // memory): the agent's failure, with the failure reward — not an infrastructure fault.
      this.sandboxEnded ??= error.message;
      return this.sandboxEndedReply();
    }
  }

  private sandboxEndedReply(): ToolReply {
    return {
      content: `The OS stopped: ${this.sandboxEnded}. The task has ended.`,
      outcome: { reward: 0, status: "completed", metrics: { score: 0, sandboxEnded: 1 } },
    };
  }

  private async callToolInSandbox(name: string, args: Record<string, unknown>): Promise<ToolReply> {
    if (this.sandboxEnded !== undefined) return this.sandboxEndedReply();
    if (name === "bash_action") return { content: await this.bash(String(args.script)) };
    const answer = name === "answer_action" ? String(args.answer) : null;
    const correct = await gradeOs(
      this.family.runtime,
      this.containerId,
      this.sample,
      answer,
      this.workingFolder,
    );
    // Where the answer came from (reading.ts): answerGraded 0 for a task graded on the
    // container's state; answerFromOutput 1 when the answer is a line or a field some command
    // printed (what the agent saw), 0 when it is not (a guess: a constant `3` scores 22 %).
    const metrics: Record<string, number> = {
      score: correct ? 1 : 0,
      ...answerSourceMetrics(isAnswerGraded(this.sample), answer, this.seen),
    };
    return {
      content:
        name === "answer_action"
          ? "Your answer has been recorded."
          : "The task has been marked as finished.",
      outcome: { reward: correct ? 1 : 0, status: "completed", metrics },
    };
  }

  private async bash(script: string): Promise<string> {
    const result = await this.family.runtime.shell(this.containerId, script, {
      timeoutSeconds: this.commandSeconds,
      maxOutputChars: 16_384,
    });
    let output = result.output.replace(/\r\n/g, "\n");
    if (result.timedOut)
      output += `\n[the command was stopped after ${this.commandSeconds} seconds]`;
    output = output.length > 0 ? output : "The output of the OS is empty.";
    this.seen.add(truncateOutput(output, this.limits.maxOutputChars), script);
    return output;
  }

  protected override async release(): Promise<void> {
    try {
      await this.family.endSession(this, this.containerId);
    } finally {
      this.releaseSlot();
    }
  }
}

function openingOf(sample: OsSample): StartResult {
  const messages: Message[] = [
    { role: "system", content: OS_SYSTEM_PROMPT },
    {
      role: "user",
      content: `Now, I will start a new problem in a new OS. My problem is:\n\n${sample.description}`,
    },
  ];
  return { messages, tools: OS_TOOLS };
}

function toolCall(name: string, args: Record<string, unknown>, turn: number): AssistantMessage {
  return {
    role: "assistant",
    content: null,
    tool_calls: [
      { id: `call_${turn}`, type: "function", function: { name, arguments: JSON.stringify(args) } },
    ],
  };
}

/** The text of the last tool message (the output of the previous call). */
function lastToolOutput(history: Message[]): string {
  for (let position = history.length - 1; position >= 0; position -= 1) {
    const message = history[position];
    if (message.role === "tool") return message.content;
  }
  return "";
}

function assistantTurns(history: Message[]): number {
  return history.filter((message) => message.role === "assistant").length;
}

/**
 * Replays the sample's own solution: runs `evaluation.example` with bash_action, then answers
 * with its output (samples graded against the example) or finishes (state checks); for
 * match-graded samples it answers the expected answer.
 */
export class OsExpert implements Expert {
  /** `recover`: when the sample has a `mistake`, run it first (untrained on), then the example. */
  constructor(
    private readonly sample: OsSample,
    private readonly recover = false,
  ) {}

  act(history: Message[]): AssistantMessage {
    const turn = assistantTurns(history);
    const { sample } = this;
    if (sample.match) return toolCall("answer_action", { answer: sample.match.answer ?? "" }, turn);
    const mistake = this.recover ? sample.mistake : undefined;
    if (turn === 0 && mistake)
      return { ...toolCall("bash_action", { script: mistake.code }, turn), untrained: true };
    if (turn === (mistake ? 1 : 0) && sample.example)
      return toolCall("bash_action", { script: sample.example.code }, turn);
    if (answersExample(sample)) {
      const output = lastToolOutput(history);
      return toolCall(
        "answer_action",
        { answer: output === "The output of the OS is empty." ? "" : output.trim() },
        turn,
      );
    }
    return toolCall("finish_action", { thought: "The example solution has been applied." }, turn);
  }
}

/** Answers deliberately wrong: a value no sample expects, or finishes without doing anything. */
export class OsWrongExpert implements Expert {
  constructor(private readonly sample: OsSample) {}

  act(history: Message[]): AssistantMessage {
    const turn = assistantTurns(history);
    if (this.sample.match || answersExample(this.sample))
      return toolCall("answer_action", { answer: "-424242 agentrl-wrong-answer" }, turn);
    return toolCall("finish_action", { thought: "Finishing without doing the task." }, turn);
  }
}

/** The family's samples: AgentBench's (held out or not, `holdOut`), then the generated ones of world `seed`. */
export function osSamples(
  options: Pick<
    OsFamilyOptions,
    "dataDir" | "holdOut" | "generatedSize" | "generatedTestSize" | "generatedPlaces" | "seed"
  > = {},
): OsSample[] {
  const places = options.generatedPlaces ?? "home";
  if (places !== "home" && places !== "stated")
    throw new TaskDataError(
      `os: generatedPlaces must be "home" or "stated", got ${JSON.stringify(places)}`,
    );
  return [
    ...loadOsSamples(options.dataDir, options.holdOut ?? true),
    ...generateOsSamples(options.generatedSize ?? 0, options.seed ?? 0, "train", places),
    ...generateOsSamples(options.generatedTestSize ?? 0, options.seed ?? 0, "test", places),
  ];
}

/** The OS task family on the local Docker engine. */
export async function createTaskFamily(options: OsFamilyOptions = {}): Promise<OsTaskFamily> {
  const samples = options.samples ?? osSamples(options);
  const runtime = options.runtime ?? (await DockerRuntime.connect());
  return new OsTaskFamily(runtime, { ...options, samples }, options.runtime === undefined);
}
