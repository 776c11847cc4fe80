/**
 * The token by default (issue 16, part 4): a controller without one generates one, also on
 * loopback; a heartbeat without it registers nothing; `env serve`'s token file is written
 * once (mode 600) and read back by workers and clients.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Controller } from "./controller.js";
import { serverToken, tokenFromEnvironment } from "./token.js";

test("a controller without a token generates one and refuses requests and heartbeats without it", async () => {
  const controller = new Controller({ port: 0 });
  const other = new Controller({ port: 0 });
  assert.ok(controller.token.length >= 32);
  assert.notEqual(controller.token, other.token);
  const url = await controller.listen();
  try {
    const beat = {
      name: "fake",
      address: "http://127.0.0.1:9/api",
      concurrency: 4,
      indices: [0, 1],
    };
    const refused = await fetch(`${url}/api/receive_heartbeat`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(beat),
    });
    assert.equal(refused.status, 401);
    assert.deepEqual(controller.listWorkers(), {}, "no fake worker registered");
    const accepted = await fetch(`${url}/api/receive_heartbeat`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${controller.token}` },
      body: JSON.stringify(beat),
    });
    assert.equal(accepted.status, 200);
    assert.deepEqual(Object.keys(controller.listWorkers()), ["fake"]);
  } finally {
    await controller.close();
  }
});

test("serverToken: --token, AGENTRL_TOKEN, the file, else a new one written to the file (mode 600); clients read it back", () => {
  const folder = mkdtempSync(join(tmpdir(), "agentrl-token-"));
  const saved = process.env.AGENTRL_TOKEN;
  delete process.env.AGENTRL_TOKEN;
  try {
    const file = join(folder, "sub", "controller-token");
    assert.equal(tokenFromEnvironment(file), undefined, "no file, no token");
    const created = serverToken(undefined, file);
    assert.equal(created.created, true);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    const again = serverToken(undefined, file);
    assert.deepEqual(
      [again.token, again.created],
      [created.token, false],
      "a restart keeps the token",
    );
    assert.equal(tokenFromEnvironment(file), created.token, "workers and clients read the file");
    assert.equal(serverToken("given", file).token, "given");
    process.env.AGENTRL_TOKEN = "from-env";
    assert.equal(serverToken(undefined, file).token, "from-env");
    assert.equal(tokenFromEnvironment(file), "from-env");
    delete process.env.AGENTRL_TOKEN;
    writeFileSync(file, "  \n");
    assert.throws(() => serverToken(undefined, file), /empty/);
  } finally {
    if (saved === undefined) delete process.env.AGENTRL_TOKEN;
    else process.env.AGENTRL_TOKEN = saved;
    rmSync(folder, { recursive: true, force: true });
  }
});
