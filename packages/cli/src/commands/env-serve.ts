/**
 * The work of `agentrl env serve` and `agentrl env worker` (their flags are in env.ts): task
 * families behind a controller with one in-process worker each, or one family's worker that
 * registers with a remote controller; OS/DB sessions optionally on many Docker engines.
 */
import {
  Controller,
  DEFAULT_CONTROLLER_PORT,
  TaskWorker,
  createTaskFamily,
  createTaskFamilyOnEngines,
  openFamilies,
  serveWorker,
} from "@agentrl/envs";
import { createOrExplain, familyOptions } from "@agentrl/trainer/internal";
import { EnvCommandError, type FamilyFactory, type Printer } from "@agentrl/trainer";

const print: Printer = (line) => console.log(line);

/** Options of the commands that run OS/DB sessions on many Docker engines. */
export interface DockerHostOptions {
  /** Docker engines (unix://, tcp://, ssh:// URLs, each with optional `?slots=N`); none = the local engine. */
  dockerHost?: string[];
  /** TLS folder (ca.pem, cert.pem, key.pem) of tcp:// engines. Default DOCKER_CERT_PATH. */
  dockerCertPath?: string;
}

/** The family factory of a command: over the `--docker-host` engines when there are any. */
function onEngines(
  createFamily: FamilyFactory,
  options: DockerHostOptions & { concurrency?: number },
  log: Printer,
): FamilyFactory {
  const hosts = options.dockerHost ?? [];
  if (hosts.length === 0) return createFamily;
  const engines = {
    hosts,
    certPath: options.dockerCertPath,
    slotsPerEngine: options.concurrency ?? 16,
    log,
  };
  return (name, familyOptions) =>
    createTaskFamilyOnEngines(name, familyOptions, engines, createFamily);
}

// ── env serve ───────────────────────────────────────────────────────────────

export interface EnvServeOptions extends DockerHostOptions {
  /** Task family names to serve, e.g. `["os", "db"]`. */
  tasks: string[];
  /** Default 127.0.0.1; any other address requires `token`. */
  host?: string;
  /** Default 5020; 0 picks a free port. */
  port?: number;
  /** Bearer token for every request. Default: a generated one (the command: AGENTRL_TOKEN, else the token file, else a new one written to it). */
  token?: string;
  /** Sessions per task at once. Default 16. */
  concurrency?: number;
  /** Idle session expiry in seconds. Default 300. */
  idleTimeout?: number;
  /** Time limit of one interaction in seconds. Default 240. */
  interactionTimeout?: number;
  /** A remote worker silent this long is dead, in seconds. Default 11. */
  heartbeatTimeout?: number;
  seed?: number;
  data?: string;
}

export interface RunningServer {
  url: string;
  controller: Controller;
  close(): Promise<void>;
}

/** Creates the families, one in-process worker each, and a controller in front of them. */
export async function startEnvServer(
  options: EnvServeOptions,
  createFamily: FamilyFactory = createTaskFamily,
): Promise<RunningServer> {
  if (options.tasks.length === 0) throw new EnvCommandError("no tasks given; e.g. --tasks os,db");
  const idleTimeoutMs = (options.idleTimeout ?? 300) * 1000;
  const interactionTimeoutMs = (options.interactionTimeout ?? 240) * 1000;
  const factory = onEngines(createFamily, options, print);
  const { families, failures } = await openFamilies(
    options.tasks,
    familyOptions(options),
    (name, given) => createOrExplain(factory, name, given),
  );
  if (failures.length) {
    await Promise.all(families.map((family) => family.close?.()));
    throw new EnvCommandError(failures.map(({ error }) => error.message).join("\n"));
  }
  const controller = new Controller({
    host: options.host,
    port: options.port ?? DEFAULT_CONTROLLER_PORT,
    token: options.token,
    idleTimeoutMs,
    interactionTimeoutMs,
    heartbeatTimeoutMs: (options.heartbeatTimeout ?? 11) * 1000,
  });
  // The controller expires idle sessions; the workers' own expiry is a later safety net.
  const workers = families.map(
    (family) =>
      new TaskWorker(family, {
        concurrency: options.concurrency ?? 16,
        idleTimeoutMs: idleTimeoutMs + 60_000,
        interactionTimeoutMs,
      }),
  );
  for (const worker of workers) controller.addLocalWorker(worker);
  let url: string;
  try {
    url = await controller.listen();
  } catch (error) {
    await Promise.all(workers.map((worker) => worker.close()));
    await Promise.all(families.map((family) => family.close?.()));
    throw new EnvCommandError(
      `controller could not listen on ${options.host ?? "127.0.0.1"}:${options.port ?? DEFAULT_CONTROLLER_PORT}: ${(error as Error).message}`,
    );
  }
  return {
    url,
    controller,
    async close() {
      await controller.close();
      await Promise.all(workers.map((worker) => worker.close()));
      await Promise.all(families.map((family) => family.close?.()));
    },
  };
}

// ── env worker ──────────────────────────────────────────────────────────────

export interface EnvWorkerOptions extends DockerHostOptions {
  /** Controller base URL. */
  controller: string;
  /** Task family name. */
  task: string;
  host?: string;
  /** Port to bind. Default 0 (a free one). */
  port?: number;
  /** URL the controller should call (ending in /api). Default http://<host>:<port>/api. */
  address?: string;
  /** Sessions at once. Default 16. */
  concurrency?: number;
  token?: string;
  /** Heartbeat interval in seconds. Default 8. */
  heartbeat?: number;
  seed?: number;
  data?: string;
}

/** Creates the family and a worker serving it that registers with the controller. */
export async function startEnvWorker(
  options: EnvWorkerOptions,
  createFamily: FamilyFactory = createTaskFamily,
  log: Printer = print,
) {
  const family = await createOrExplain(
    onEngines(createFamily, options, log),
    options.task,
    familyOptions(options),
  );
  const worker = new TaskWorker(family, { concurrency: options.concurrency ?? 16 });
  try {
    const server = await serveWorker(worker, {
      host: options.host,
      port: options.port ?? 0,
      token: options.token,
      controllerUrl: options.controller,
      advertisedAddress: options.address,
      heartbeatIntervalMs: (options.heartbeat ?? 8) * 1000,
      log,
    });
    return {
      address: server.address,
      async close() {
        await server.close();
        await family.close?.();
      },
    };
  } catch (error) {
    await worker.close();
    await family.close?.();
    throw new EnvCommandError(
      `worker of task ${options.task} could not start: ${(error as Error).message}`,
    );
  }
}
