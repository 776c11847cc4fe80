/**
 * The JSON requester (undici): a URL's `user:password@` becomes Basic auth that a token-guarded
 * server accepts, a header given wins, a URL it cannot send to is a 502 ConnectionError, and a
 * peer that closed the connection under a request is answered by one retry on a new one.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { ConnectionError, JsonRequester, closeServer, createJsonServer, listen } from "./http.js";

test("a URL's credentials are sent as Basic auth; a given authorization header wins", async () => {
  const server = createJsonServer({
    token: "secret",
    routes: { "POST /echo": (request) => ({ body: { got: request.body } }) },
  });
  const port = await listen(server, 0, "127.0.0.1");
  const requester = new JsonRequester();
  try {
    const withCredentials = await requester.request(`http://agent:secret@127.0.0.1:${port}/echo`, {
      method: "POST",
      body: { a: 1 },
      timeoutMs: 5_000,
    });
    assert.equal(withCredentials.status, 200);
    assert.deepEqual(withCredentials.body, { got: { a: 1 } });
    const overridden = await requester.request(`http://agent:secret@127.0.0.1:${port}/echo`, {
      method: "POST",
      body: {},
      headers: { authorization: "Bearer wrong" },
      timeoutMs: 5_000,
    });
    assert.equal(overridden.status, 401);
  } finally {
    requester.close();
    await closeServer(server);
  }
});

test("a URL that is not http(s) fails with a 502 ConnectionError naming it", async () => {
  const requester = new JsonRequester();
  try {
    await assert.rejects(
      requester.request("ftp://127.0.0.1/x", { method: "GET", timeoutMs: 1_000 }),
      (error: unknown) =>
        error instanceof ConnectionError &&
        error.status === 502 &&
        error.message.includes("ftp://127.0.0.1/x"),
    );
  } finally {
    requester.close();
  }
});

test("a connection closed under the first request is retried once on a new one", async () => {
  let connections = 0;
  // The first connection is cut as soon as the request arrives; the second gets an answer.
  const peer = createServer((socket) => {
    connections += 1;
    const cut = connections === 1;
    socket.once("data", () => {
      if (cut) return void socket.destroy();
      const body = JSON.stringify({ ok: true });
      socket.end(
        `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`,
      );
    });
  });
  await new Promise<void>((resolve) => peer.listen(0, "127.0.0.1", resolve));
  const { port } = peer.address() as { port: number };
  const requester = new JsonRequester();
  try {
    const answer = await requester.request(`http://127.0.0.1:${port}/x`, {
      method: "POST",
      body: {},
      timeoutMs: 5_000,
    });
    assert.equal(answer.status, 200);
    assert.deepEqual(answer.body, { ok: true });
    assert.equal(connections, 2);
  } finally {
    requester.close();
    await new Promise((resolve) => peer.close(resolve));
  }
});
