/**
 * Every wait on a peer has a deadline: a controller or worker that accepts a connection and
 * never answers fails the call with an AgentRLError naming the peer and the deadline.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type AddressInfo, type Socket } from "node:net";
import { AgentRLError } from "@agentrl/spec";
import { HttpEnvironmentClient } from "./client.js";
import { Controller } from "./controller.js";
import { ConnectionError } from "./http.js";

/** A TCP server that accepts connections and never writes a byte. */
async function silentPeer(): Promise<{ url: string; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => {});
    socket.resume();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function failsAtDeadline(
  call: Promise<unknown>,
  peer: string,
  deadlineMs: number,
): Promise<Error> {
  const began = Date.now();
  const error = (await call.then(
    () => assert.fail("expected a rejection"),
    (error: unknown) => error,
  )) as Error;
  const elapsed = Date.now() - began;
  assert.ok(
    elapsed >= deadlineMs - 20 && elapsed < deadlineMs + 3_000,
    `failed after ${elapsed} ms, deadline ${deadlineMs}`,
  );
  assert.ok(error instanceof AgentRLError, `an AgentRLError, got ${String(error)}`);
  assert.ok(error.message.includes(peer), `names the peer: ${error.message}`);
  assert.ok(error.message.includes(`${deadlineMs} ms`), `names the deadline: ${error.message}`);
  return error;
}

test("a controller that never answers: every client call fails at requestTimeoutMs, naming the controller", async () => {
  const peer = await silentPeer();
  const client = new HttpEnvironmentClient({ url: peer.url, token: "t", requestTimeoutMs: 250 });
  try {
    const calls: Array<[string, () => Promise<unknown>]> = [
      ["start_sample", () => client.startSample("echo", 0)],
      ["interact", () => client.interact("s-1", { role: "assistant", content: "hi" })],
      ["cancel", () => client.cancel("s-1")],
      ["get_indices", () => client.getIndices("echo")],
    ];
    for (const [route, call] of calls) {
      const error = await failsAtDeadline(call(), `${peer.url}/api/${route}`, 250);
      assert.ok(error instanceof ConnectionError);
      assert.equal(error.status, 504);
    }
  } finally {
    await client.close();
    await peer.close();
  }
});

test("a worker that never answers start_sample: the controller answers within its deadline, naming the failure", async () => {
  const peer = await silentPeer();
  const controller = new Controller({ port: 0, interactionTimeoutMs: 200, workerGraceMs: 50 });
  const url = await controller.listen();
  controller.receiveHeartbeat({
    name: "hung",
    address: `${peer.url}/api`,
    concurrency: 2,
    indices: [0],
  });
  const client = new HttpEnvironmentClient({
    url,
    token: controller.token,
    requestTimeoutMs: 10_000,
  });
  try {
    const began = Date.now();
    const error = await client.startSample("hung", 0).then(
      () => assert.fail("expected a rejection"),
      (error: unknown) => error as Error,
    );
    assert.ok(Date.now() - began < 5_000, `answered after ${Date.now() - began} ms`);
    assert.ok(error instanceof AgentRLError);
    assert.match(error.message, /250 ms/, error.message);
  } finally {
    await client.close();
    await controller.close();
    await peer.close();
  }
});
