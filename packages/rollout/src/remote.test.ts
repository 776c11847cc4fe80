/**
 * RemoteEngine against hung peers (servers that accept a connection and never answer): every
 * wait ends at its deadline with an InferenceServerError naming the server, the route and the
 * deadline; nothing hangs. (The remote engine against real `agentrl serve` servers is in
 * test/serve-fleet.test.ts.)
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type ServerResponse,
} from "node:http";
import {
  createServer as createTcpServer,
  type AddressInfo,
  type Server,
  type Socket,
} from "node:net";
import { spawn } from "node:child_process";
import { AgentRLError } from "@agentrl/spec";
import { InferenceServerError, RemoteEngine } from "./remote.js";

/** Listens on a free loopback port; `close()` also drops the connections it holds open. */
async function listening(server: Server): Promise<{ url: string; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
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

/** An HTTP server that answers GET /health and hangs on the routes in `hang` (reads the request, never answers). */
async function partlyHungServer(hang: string[]) {
  const requests: string[] = [];
  const server = createHttpServer((request: IncomingMessage, response: ServerResponse) => {
    requests.push(`${request.method} ${request.url}`);
    request.resume();
    if (hang.some((path) => request.url?.endsWith(path))) return;
    if (request.url === "/health")
      return void response
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ status: "ok", model: "m", engine: { version: 0 } }));
    response
      .writeHead(404, { "content-type": "application/json" })
      .end(JSON.stringify({ error: { message: "no route" } }));
  });
  return { requests, ...(await listening(server)) };
}

async function rejectsWithin<T>(
  promise: Promise<T>,
  limitMs: number,
): Promise<InferenceServerError> {
  const began = Date.now();
  const error = await promise.then(
    () => assert.fail("expected a rejection"),
    (error: unknown) => error,
  );
  assert.ok(
    Date.now() - began < limitMs,
    `rejected after ${Date.now() - began} ms, limit ${limitMs}`,
  );
  assert.ok(error instanceof InferenceServerError, `an InferenceServerError, got ${String(error)}`);
  assert.ok(error instanceof AgentRLError);
  return error;
}

test("connect: a server that accepts and never answers GET /health fails at healthTimeoutMs, naming it and the deadline", async () => {
  const silent = await listening(createTcpServer(() => {}));
  try {
    const error = await rejectsWithin(
      RemoteEngine.connect({ servers: [silent.url], healthTimeoutMs: 300, log: () => {} }),
      5_000,
    );
    assert.match(
      error.message,
      new RegExp(`${silent.url}/v1: no answer within 300 ms \\(healthTimeoutMs\\)`),
    );
  } finally {
    await silent.close();
  }
});

test("a turn on a server that never answers fails at requestTimeoutMs, names the server and the deadline, and marks it down", async () => {
  const hung = await partlyHungServer(["/chat/completions"]);
  const lines: string[] = [];
  const engine = await RemoteEngine.connect({
    servers: [hung.url],
    requestTimeoutMs: 400,
    retryAfterMs: 60_000,
    unavailableTimeoutMs: 200,
    log: (line) => lines.push(line),
  });
  try {
    const error = await rejectsWithin(
      engine.generate({ promptTokens: [1, 2, 3], maxNewTokens: 4 }),
      5_000,
    );
    assert.match(
      error.message,
      /\/v1\/chat\/completions: no answer within 400 ms \(requestTimeoutMs\)/,
    );
    assert.equal(error.server, `${hung.url}/v1`);
    assert.equal(error.deadlineMs, 400);
    assert.equal(engine.serverStates()[0].up, false);
    assert.ok(
      lines.some((line) => line.includes("is down") && line.includes("400 ms")),
      lines.join("\n"),
    );
    // With the only server down, the next turn fails too (after unavailableTimeoutMs), not hangs.
    const next = await rejectsWithin(
      engine.generate({ promptTokens: [1], maxNewTokens: 1 }),
      5_000,
    );
    assert.match(next.message, /no live inference server for 200 ms/);
  } finally {
    engine.close();
    await hung.close();
  }
});

test("a weight push no server answers fails at pushTimeoutMs with the server and the deadline named", async () => {
  const hung = await partlyHungServer(["/weights"]);
  const engine = await RemoteEngine.connect({
    servers: [hung.url],
    pushTimeoutMs: 300,
    retryAfterMs: 60_000,
    weightsKey: "k",
    log: () => {},
  });
  try {
    const weights = {
      version: 1,
      tensors: [{ name: "w", shape: [1], data: Float32Array.from([1]) }],
    };
    const error = await rejectsWithin(engine.updateWeights(weights, 1), 5_000);
    assert.match(
      error.message,
      /weights of version 1 reached no server: .*\/v1\/weights: no answer within 300 ms \(pushTimeoutMs\)/,
    );
    assert.equal(error.deadlineMs, 300);
    assert.equal(engine.version, 0, "the version is not advanced by a push that reached no server");
    assert.ok(hung.requests.includes("POST /v1/weights"));
  } finally {
    engine.close();
    await hung.close();
  }
});

test("of two servers, a hung one is marked down at the push deadline and the other gets the weights", async () => {
  const hung = await partlyHungServer(["/weights"]);
  const pushed: string[] = [];
  const good = await listening(
    createHttpServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        if (request.url === "/health")
          return void response
            .writeHead(200)
            .end(JSON.stringify({ model: "m", engine: { version: 0 } }));
        pushed.push(
          `${request.headers.authorization} ${request.headers["x-agentrl-policy-version"]}`,
        );
        response
          .writeHead(200)
          .end(JSON.stringify({ version: Number(request.headers["x-agentrl-policy-version"]) }));
      });
    }),
  );
  const engine = await RemoteEngine.connect({
    servers: [hung.url, good.url],
    pushTimeoutMs: 300,
    retryAfterMs: 60_000,
    weightsKey: "the-weights-key",
    apiKey: "chat-key",
    log: () => {},
  });
  try {
    await engine.updateWeights(
      { version: 2, tensors: [{ name: "w", shape: [1], data: Float32Array.from([1]) }] },
      2,
    );
    assert.equal(engine.version, 2);
    assert.deepEqual(
      pushed,
      ["Bearer the-weights-key 2"],
      "the push carries the weights key, not the API key",
    );
    assert.deepEqual(
      engine.serverStates().map((state) => state.up),
      [false, true],
    );
  } finally {
    engine.close();
    await hung.close();
    await good.close();
  }
});

/** A server in its own process (its event loop runs while this one is blocked): answers health, turns and cache releases 100 ms after each request; `requests()` lists what it received. */
async function serverProcess(): Promise<{
  url: string;
  requests: () => Promise<string[]>;
  close: () => void;
}> {
  const script = `
    const received = [];
    const server = require("node:http").createServer((request, response) => {
      request.resume();
      request.on("end", () => {
        received.push(request.method + " " + request.url);
        const send = (body) => response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
        if (request.url === "/requests") return send(received);
        setTimeout(() => {
        if (request.url === "/health") return send({ status: "ok", model: "m", engine: { version: 0 } });
        if (request.url === "/v1/cache/release") return send({ released: 1 });
        send({ choices: [{ index: 0, finish_reason: "stop", token_ids: [7], token_logprobs: [-0.5], token_versions: [0] }] });
        }, 100);
      });
    });
    server.listen(0, "127.0.0.1", () => console.log(server.address().port));`;
  const child = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise<string>((resolve, reject) => {
    child.stdout!.once("data", (data: Buffer) => resolve(data.toString().trim()));
    child.once("exit", (code) => reject(new Error(`the server process exited with ${code}`)));
  });
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    requests: async () => (await (await fetch(`${url}/requests`)).json()) as string[],
    close: () => void child.kill("SIGKILL"),
  };
}

/** Blocks this process's event loop for `milliseconds` (as a learner step on the main thread does). */
function blockEventLoop(milliseconds: number): void {
  const end = performance.now() + milliseconds;
  while (performance.now() < end);
}

test("deadlines count live time: a server that answers in 100 ms is not failed (nor marked down) because this process's event loop was blocked past the deadline meanwhile", async () => {
  const server = await serverProcess();
  try {
    // A probe in flight when this process blocks for 4 deadlines; its answer arrives during the block.
    const connecting = RemoteEngine.connect({
      servers: [server.url],
      healthTimeoutMs: 300,
      log: () => {},
    });
    await new Promise((resolve) => setTimeout(resolve, 30));
    blockEventLoop(1_200);
    const engine = await connecting;
    const lines: string[] = [];
    const watched = await RemoteEngine.connect({
      servers: [server.url],
      healthTimeoutMs: 300,
      requestTimeoutMs: 300,
      retryAfterMs: 60_000,
      log: (line) => lines.push(line),
    });
    try {
      // A turn and a cache release in flight when this process blocks (the fleet test's failure:
      // "/cache/release: no answer within 5000 ms" after a 17 s learner step on the main thread).
      const turn = watched.generate({ promptTokens: [1, 2], maxNewTokens: 1, cacheKey: "a" });
      await new Promise((resolve) => setTimeout(resolve, 30));
      watched.releaseCache("a");
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setTimeout(resolve, 30));
      blockEventLoop(1_200);
      const result = await turn;
      assert.deepEqual(result.tokens, [7]);
      const turn2 = watched.generate({ promptTokens: [1, 2, 7, 3], maxNewTokens: 1 });
      blockEventLoop(1_200); // before the request is even written
      assert.deepEqual((await turn2).tokens, [7]);
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.deepEqual(
        watched.serverStates().map((state) => state.up),
        [true],
        `the server stays up (${lines.join("; ")})`,
      );
      assert.deepEqual(lines, [], "no server was reported down");
      const received = await server.requests();
      assert.ok(received.includes("POST /v1/cache/release"), received.join(", "));
    } finally {
      engine.close();
      watched.close();
    }
  } finally {
    server.close();
  }
});
