import { test } from "node:test";
import assert from "node:assert/strict";
import { FaultInjectingClient, InjectedFaultError } from "./faults.js";
import { FaultyClient, echoFamily } from "./testing/fixtures.js";

test("FaultInjectingClient kills a seeded share of sessions at their first interaction, and no others", async () => {
  const inner = new FaultyClient([echoFamily()]);
  const client = new FaultInjectingClient(inner, { sessionShare: 0.25, seed: 1 });
  const message = { role: "assistant" as const, content: "hi" };
  let failed = 0;
  for (let i = 0; i < 200; i++) {
    const { sessionId } = await client.startSample("echo", i % 16);
    const doomed = client.killed.has(sessionId);
    try {
      await client.interact(sessionId, message);
      assert.ok(!doomed, "a drawn session must fail");
    } catch (error) {
      assert.ok(doomed && error instanceof InjectedFaultError, String(error));
      failed += 1;
    }
    await client.cancel(sessionId);
  }
  assert.equal(failed, client.kills);
  assert.ok(failed > 30 && failed < 70, `${failed} of 200 killed at share 0.25`);
  assert.equal(client.killed.size, 0, "cancelled sessions are forgotten");
  assert.throws(
    () => new FaultInjectingClient(inner, { sessionShare: 1.5 }),
    /sessionShare must lie in \[0, 1\]/,
  );
  await client.close();
});
