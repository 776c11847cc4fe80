/**
 * `agentrl env …`: serve task families behind the controller, run a worker (their work in
 * env-serve.ts), check a family's expert (`runEnvCheck` of @agentrl/trainer), watch a demo
 * episode (and `env build`, from env-build.ts).
 *
 * Each command's work is an exported function taking a `createFamily` (the task registry by
 * default), so tests can run it on their own small families.
 */
import { InvalidArgumentError, type Command } from "commander";
import { numberOption } from "../options.js";
import {
  DEFAULT_CONTROLLER_PORT,
  createTaskFamily,
  defaultTokenFile,
  serverToken,
  tokenFromEnvironment,
  playEpisode,
  type EpisodeRecord,
  type Message,
  type Split,
} from "@agentrl/envs";
import { createOrExplain, familyOptions } from "@agentrl/trainer/internal";
import {
  EnvCommandError,
  runEnvCheck,
  type CheckReport,
  type CheckRow,
  type EnvCheckOptions,
  type FamilyFactory,
  type Printer,
} from "@agentrl/trainer";
import { registerEnvBuildCommand } from "./env-build.js";
import {
  startEnvServer,
  startEnvWorker,
  type EnvServeOptions,
  type EnvWorkerOptions,
} from "./env-serve.js";

export type { CheckReport, CheckRow, EnvCheckOptions, FamilyFactory, Printer };
export { constantAnswerAgent, EnvCommandError, runEnvCheck } from "@agentrl/trainer";
export {
  type DockerHostOptions,
  type EnvServeOptions,
  type EnvWorkerOptions,
  type RunningServer,
  startEnvServer,
  startEnvWorker,
} from "./env-serve.js";

const print: Printer = (line) => console.log(line);

function splitOption(value: string): Split {
  if (value !== "train" && value !== "test")
    throw new InvalidArgumentError(`split must be "train" or "test", got "${value}"`);
  return value;
}

function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

// ── env demo ────────────────────────────────────────────────────────────────

export interface EnvDemoOptions {
  task: string;
  /** Sample index. Default: the first test index. */
  index?: number;
  seed?: number;
  data?: string;
}

/** Renders a conversation for a terminal: one block per message, tool calls spelled out. */
export function formatConversation(messages: Message[]): string {
  const blocks = messages.map((message) => {
    switch (message.role) {
      case "system":
      case "user":
        return `── ${message.role} ──\n${message.content}`;
      case "assistant": {
        const calls = (message.tool_calls ?? []).map(
          (c) => `→ ${c.function.name}(${c.function.arguments})`,
        );
        return `── assistant ──\n${[message.content ?? "", ...calls].filter((line) => line !== "").join("\n")}`;
      }
      case "tool":
        return `── tool result${message.name ? ` (${message.name})` : ""} ──\n${message.content}`;
    }
  });
  return blocks.join("\n\n");
}

/** Plays one episode with the expert and prints it. */
export async function runEnvDemo(
  options: EnvDemoOptions,
  createFamily: FamilyFactory = createTaskFamily,
  out: Printer = print,
): Promise<EpisodeRecord> {
  const family = await createOrExplain(createFamily, options.task, familyOptions(options));
  try {
    const index = options.index ?? family.indices("test")[0] ?? family.indices("train")[0];
    if (index === undefined) throw new EnvCommandError(`task ${options.task} has no samples`);
    const record = await playEpisode(family, index, family.expert(index));
    out(
      `task ${options.task}, sample ${index}; tools: ${record.tools.map((t) => t.function.name).join(", ")}`,
    );
    out("");
    out(formatConversation(record.messages));
    out("");
    out(
      `status: ${record.status}   reward: ${record.reward}   turns: ${record.turns}${Object.keys(record.metrics).length ? `   metrics: ${JSON.stringify(record.metrics)}` : ""}`,
    );
    return record;
  } finally {
    await family.close?.();
  }
}

// ── wiring ──────────────────────────────────────────────────────────────────

/** Resolves when the process is asked to stop (Ctrl-C, SIGTERM). */
function untilStopped(): Promise<string> {
  return new Promise((resolve) => {
    process.once("SIGINT", () => resolve("SIGINT"));
    process.once("SIGTERM", () => resolve("SIGTERM"));
  });
}

/** A worker's token: --token, else AGENTRL_TOKEN, else the token file `env serve` wrote; else an error that says how to get one. */
function workerToken(option: string | undefined, tokenFile: string | undefined): string {
  const file = tokenFile ?? defaultTokenFile();
  const token = option ?? tokenFromEnvironment(file);
  if (!token)
    throw new EnvCommandError(
      `no token: pass the controller's --token, set AGENTRL_TOKEN, or give --token-file (env serve on this machine writes ${defaultTokenFile()})`,
    );
  return token;
}

const DOCKER_HOST_FLAG = "--docker-host <url>";
const DOCKER_HOST_HELP =
  "Docker engine for OS/DB sessions, repeatable: unix:///path, tcp://host:2376 (TLS, see --docker-cert-path), ssh://user@host; " +
  "append ?slots=N for its sessions at once (default --concurrency). Sessions go to the engine with the most free slots; " +
  "a dead engine's sessions end with task error and it is retried with backoff. Default: the local engine";

export function registerEnvCommands(program: Command): void {
  const env = program
    .command("env")
    .description(
      "task environments: serve them, run workers, check and demo their experts, build their images",
    );

  env
    .command("serve")
    .description(
      "start a controller with one in-process worker per task (AgentRL-compatible HTTP API under /api)",
    )
    .requiredOption(
      "--tasks <names>",
      "comma-separated task families, e.g. os,db",
      (value: string) =>
        value
          .split(",")
          .map((s) => s.trim())
          .filter(Boolean),
    )
    .option(
      "--host <address>",
      "address to bind (every request needs the token, on loopback too)",
      "127.0.0.1",
    )
    .option(
      "--port <port>",
      "port to bind",
      numberOption("port", { integer: true, minimum: 0 }),
      DEFAULT_CONTROLLER_PORT,
    )
    .option(
      "--token <token>",
      "bearer token required on every request (env AGENTRL_TOKEN); default: the one in --token-file, else a new one written there",
    )
    .option(
      "--token-file <path>",
      "file holding the token (read if it exists, else written with a new one)",
      defaultTokenFile(),
    )
    .option(
      "--concurrency <n>",
      "sessions per task at once",
      numberOption("concurrency", { integer: true, minimum: 1 }),
      16,
    )
    .option(
      "--idle-timeout <seconds>",
      "cancel sessions idle this long",
      numberOption("idle timeout", { minimum: 0, exclusiveMinimum: true }),
      300,
    )
    .option(
      "--interaction-timeout <seconds>",
      "end a session whose interaction takes this long (task error)",
      numberOption("interaction timeout", { minimum: 0, exclusiveMinimum: true }),
      240,
    )
    .option(
      "--heartbeat-timeout <seconds>",
      "declare a remote worker dead after this long without a heartbeat",
      numberOption("heartbeat timeout", { minimum: 0, exclusiveMinimum: true }),
      11,
    )
    .option(
      "--seed <n>",
      "seed of generated tasks",
      numberOption("seed", { integer: true, minimum: 0 }),
    )
    .option("--data <dir>", "AgentBench data folder (OS, DB)")
    .option(DOCKER_HOST_FLAG, DOCKER_HOST_HELP, collect)
    .option(
      "--docker-cert-path <dir>",
      "TLS folder (ca.pem, cert.pem, key.pem) of tcp:// Docker hosts (env DOCKER_CERT_PATH)",
    )
    .addHelpText(
      "after",
      "\nExamples:\n  agentrl env serve --tasks kg,alfworld\n  agentrl env serve --tasks os,db --port 5020 --concurrency 32\n  AGENTRL_TOKEN=secret agentrl env serve --tasks webshop --host 0.0.0.0\n\nWithout --token or AGENTRL_TOKEN the token is read from --token-file, or generated, written there\nand printed; env worker and the HTTP client on this machine read the same file.",
    )
    .action(async (options: EnvServeOptions & { tokenFile: string }) => {
      const { token, source, created } = serverToken(options.token, options.tokenFile);
      const server = await startEnvServer({ ...options, token });
      print(
        `controller listening on ${server.url}/api (AgentBench v0.2 clients: ${server.url}/t/<token>/v0.2/api) — tasks: ${options.tasks.join(", ")}`,
      );
      print(
        created
          ? `token (new, written to ${source}): ${token}`
          : `token from ${source} (send Authorization: Bearer <token>)`,
      );
      print("Ctrl-C to stop.");
      const signal = await untilStopped();
      print(`${signal}: cancelling sessions and stopping…`);
      await server.close();
    });

  env
    .command("worker")
    .description(
      "serve one task family as a worker that registers and heart-beats with a controller",
    )
    .requiredOption("--controller <url>", "controller base URL, e.g. http://127.0.0.1:5020")
    .requiredOption("--task <name>", "task family to serve")
    .option(
      "--host <address>",
      "address to bind; anything but loopback requires --token",
      "127.0.0.1",
    )
    .option(
      "--port <port>",
      "port to bind (0 = any free port)",
      numberOption("port", { integer: true, minimum: 0 }),
      0,
    )
    .option(
      "--address <url>",
      "URL the controller should call this worker at (ending in /api); default http://<host>:<port>/api",
    )
    .option(
      "--concurrency <n>",
      "sessions at once",
      numberOption("concurrency", { integer: true, minimum: 1 }),
      16,
    )
    .option(
      "--token <token>",
      "the controller's bearer token (env AGENTRL_TOKEN); default: read from --token-file",
    )
    .option(
      "--token-file <path>",
      "file holding the controller's token (env serve writes it)",
      defaultTokenFile(),
    )
    .option(
      "--heartbeat <seconds>",
      "seconds between heartbeats",
      numberOption("heartbeat", { minimum: 0, exclusiveMinimum: true }),
      8,
    )
    .option(
      "--seed <n>",
      "seed of generated tasks",
      numberOption("seed", { integer: true, minimum: 0 }),
    )
    .option("--data <dir>", "AgentBench data folder (OS, DB)")
    .option(DOCKER_HOST_FLAG, DOCKER_HOST_HELP, collect)
    .option(
      "--docker-cert-path <dir>",
      "TLS folder (ca.pem, cert.pem, key.pem) of tcp:// Docker hosts (env DOCKER_CERT_PATH)",
    )
    .addHelpText(
      "after",
      "\nExamples:\n  agentrl env worker --controller http://127.0.0.1:5020 --task os --concurrency 8\n  agentrl env worker --controller http://127.0.0.1:5020 --task os --concurrency 48 --docker-host unix:///var/run/docker.sock --docker-host 'tcp://10.0.0.8:2376?slots=32' --docker-cert-path ~/.docker/certs\n  agentrl env worker --controller http://10.0.0.5:5020 --task db --host 0.0.0.0 --address http://10.0.0.7:5031/api --port 5031 --token secret",
    )
    .action(async (options: EnvWorkerOptions & { tokenFile: string }) => {
      const worker = await startEnvWorker({
        ...options,
        token: workerToken(options.token, options.tokenFile),
      });
      print(
        `worker of task ${options.task} at ${worker.address}, registered with ${options.controller}`,
      );
      const signal = await untilStopped();
      print(`${signal}: cancelling sessions and stopping…`);
      await worker.close();
    });

  env
    .command("check")
    .description(
      "play a family's expert over each difficulty: success rate and episode length (and --wrong: the wrong agent must score 0)",
    )
    .requiredOption("--task <name>", "task family")
    .option("--split <split>", "train or test", splitOption, "test")
    .option(
      "--limit <n>",
      "samples per difficulty (0 = all)",
      numberOption("limit", { integer: true, minimum: 0 }),
      20,
    )
    .option(
      "--difficulty <d>",
      "only this difficulty",
      numberOption("difficulty", { integer: true, minimum: 0 }),
    )
    .option(
      "--wrong",
      "also run the deliberately wrong agent and count episodes that scored 0",
      false,
    )
    .option(
      "--constant-answer <text>",
      "also run an agent that runs nothing and answers this text at once: the split's floor for guessing (families with an answer tool: os, db)",
    )
    .option(
      "--concurrency <n>",
      "episodes at once",
      numberOption("concurrency", { integer: true, minimum: 1 }),
      8,
    )
    .option(
      "--seed <n>",
      "seed of generated tasks",
      numberOption("seed", { integer: true, minimum: 0 }),
    )
    .option("--data <dir>", "AgentBench data folder (OS, DB)")
    .addHelpText(
      "after",
      "\nExamples:\n  agentrl env check --task kg\n  agentrl env check --task alfworld --difficulty 0 --limit 50 --wrong\n  agentrl env check --task db --split train --limit 0 --data ../shared/data/agentbench\n  agentrl env check --task os --difficulty 0 --limit 200 --constant-answer 3",
    )
    .action(async (options: EnvCheckOptions) => {
      await runEnvCheck(options);
    });

  env
    .command("demo")
    .description("play one episode with the expert and print the conversation")
    .requiredOption("--task <name>", "task family")
    .option(
      "--index <i>",
      "sample index (default: the first test sample)",
      numberOption("index", { integer: true, minimum: 0 }),
    )
    .option(
      "--seed <n>",
      "seed of generated tasks",
      numberOption("seed", { integer: true, minimum: 0 }),
    )
    .option("--data <dir>", "AgentBench data folder (OS, DB)")
    .addHelpText(
      "after",
      "\nExamples:\n  agentrl env demo --task webshop\n  agentrl env demo --task os --index 3",
    )
    .action(async (options: EnvDemoOptions) => {
      await runEnvDemo(options);
    });

  registerEnvBuildCommand(env);
}
