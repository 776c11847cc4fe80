/**
 * `agentrl dashboard`: the live web dashboard of a folder of runs (see packages/dashboard and
 * docs/dashboard.md). `agentrl train --dashboard` starts the same server beside its run.
 */
import type { Command } from "commander";
import { tokenFromEnvironment } from "@agentrl/envs";
import { numberOption } from "../options.js";
import { DEFAULT_DASHBOARD_PORT, startDashboard, type DashboardServer } from "@agentrl/dashboard";

export interface DashboardCommandOptions {
  runs: string;
  port: number;
  host: string;
  /** Required off loopback; also env AGENTRL_DASHBOARD_TOKEN. */
  token?: string;
  controller?: string;
  controllerToken?: string;
}

/** Commander parser of a port number. */
export const parsePort = numberOption("--port", { integer: true, minimum: 0, maximum: 65_535 });

/** Starts the dashboard and prints where it is. */
export async function openDashboard(
  options: DashboardCommandOptions,
  print: (line: string) => void = (line) => console.error(line),
): Promise<DashboardServer> {
  const token = options.token ?? process.env.AGENTRL_DASHBOARD_TOKEN;
  const server = await startDashboard({
    runs: options.runs,
    port: options.port,
    host: options.host,
    token,
    controllerUrl: options.controller,
    controllerToken: options.controllerToken ?? tokenFromEnvironment(),
  });
  print(
    `agentrl dashboard: ${server.url}${token ? `?token=${token}` : ""} (runs in ${options.runs})`,
  );
  return server;
}

export function registerDashboardCommand(program: Command): void {
  program
    .command("dashboard")
    .description(
      "serve a live web dashboard of training runs: curves, environment workers, trajectories, evaluations",
    )
    .option("--runs <dir>", "folder of runs (or one run folder)", "runs")
    .option(
      "--port <n>",
      "port to listen on (0 = any free port)",
      parsePort,
      DEFAULT_DASHBOARD_PORT,
    )
    .option("--host <address>", "address to bind; anything but loopback needs --token", "127.0.0.1")
    .option(
      "--token <token>",
      "require this token (?token= or 'Authorization: Bearer'); env AGENTRL_DASHBOARD_TOKEN",
    )
    .option(
      "--controller <url>",
      "environment controller to show workers and sessions of, e.g. http://127.0.0.1:5020",
    )
    .option(
      "--controller-token <token>",
      "bearer token of that controller (default: env AGENTRL_TOKEN, else the token file env serve wrote)",
    )
    .addHelpText(
      "after",
      "\nExamples:\n  agentrl dashboard                               # every run under runs/, at http://127.0.0.1:8265/\n  agentrl dashboard --runs runs/default --controller http://127.0.0.1:5020\n  agentrl train --dashboard                       # a run with its dashboard beside it",
    )
    .action(async (options: DashboardCommandOptions) => {
      const server = await openDashboard(options);
      await new Promise<void>((resolve) => {
        const stop = () => void server.close().then(resolve, resolve);
        process.once("SIGINT", stop);
        process.once("SIGTERM", stop);
      });
    });
}
