import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { DashboardConfigError } from "@agentrl/dashboard";
import { openDashboard, parsePort, registerDashboardCommand } from "./dashboard.js";

test("agentrl dashboard: registered with help, ports checked, a token required off loopback", async () => {
  const program = new Command();
  registerDashboardCommand(program);
  const command = program.commands.find((c) => c.name() === "dashboard");
  assert.ok(command);
  assert.match(command.helpInformation(), /--runs <dir>[\s\S]*--port <n>[\s\S]*--controller <url>/);
  assert.equal(parsePort("0"), 0);
  assert.throws(() => parsePort("70000"), /--port must be an integer/);
  const runs = mkdtempSync(join(tmpdir(), "agentrl-dashboard-cli-"));
  await assert.rejects(
    openDashboard({ runs, port: 0, host: "0.0.0.0" }, () => undefined),
    DashboardConfigError,
  );
  const lines: string[] = [];
  const server = await openDashboard({ runs, port: 0, host: "127.0.0.1" }, (line) =>
    lines.push(line),
  );
  try {
    assert.match(lines[0], /^agentrl dashboard: http:\/\/127\.0\.0\.1:\d+\//);
    assert.deepEqual(await (await fetch(`${server.url}api/runs`)).json(), []);
  } finally {
    await server.close();
  }
});
