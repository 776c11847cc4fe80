/**
 * Controller hardening (issue 16, part 4): 1,000 generated malformed requests over every
 * route of both protocols, to the controller and to an HTTP worker → no 5xx, the server
 * keeps answering, and a real session still plays afterwards. Also the slow-client limits:
 * a body that trickles in is cut off (408), and a body over the cap is refused before it
 * has all been sent.
 */
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import net from "node:net";
import type { CurriculumTaskFamily } from "../types.js";
import { createTaskFamily } from "../registry.js";
import { Controller } from "./controller.js";
import { TaskWorker, serveWorker, type WorkerServer } from "./worker.js";
import { HttpEnvironmentClient } from "./client.js";
import { createFuzzer, sendRaw, type FuzzAnswer } from "./fuzz.js";
import { closeServer, createJsonServer, listen } from "./http.js";

const MAX_BODY_BYTES = 256 * 1024;

describe("controller hardening", () => {
  let family: CurriculumTaskFamily;
  let remoteFamily: CurriculumTaskFamily;
  let worker: TaskWorker;
  let workerServer: WorkerServer;
  let controller: Controller;
  let url: string;
  let client: HttpEnvironmentClient;

  before(async () => {
    family = await createTaskFamily("kg");
    remoteFamily = await createTaskFamily("kg");
    controller = new Controller({
      port: 0,
      maxBodyBytes: MAX_BODY_BYTES,
      requestTimeoutMs: 1_000,
      headersTimeoutMs: 1_000,
      idleTimeoutMs: 60_000,
    });
    worker = new TaskWorker(family, { concurrency: 64 });
    controller.addLocalWorker(worker);
    url = await controller.listen();
    workerServer = await serveWorker(new TaskWorker(remoteFamily, { concurrency: 64 }), {
      controllerUrl: url,
      token: controller.token,
      heartbeatIntervalMs: 500,
      log: () => undefined,
    });
    client = new HttpEnvironmentClient({ url, token: controller.token });
  });

  after(async () => {
    await client.close();
    await controller.close();
    await workerServer.close();
    await worker.close();
  });

  test("1,000 malformed requests over every route of both protocols: no 5xx, the server keeps serving", async (t) => {
    // A few real sessions, so that fuzzed requests also hit live session ids.
    const live: string[] = [];
    for (let i = 0; i < 3; i++)
      live.push((await client.startSample("kg", family.indices("test")[i])).sessionId);
    const workerBase = workerServer.address.replace(/\/api$/, "");
    const next = createFuzzer(19_16, {
      token: controller.token,
      task: "kg",
      tool: "get_relations",
      sessionIds: () => [...live, ...Object.keys(controller.listSessions())],
      maxBodyBytes: MAX_BODY_BYTES,
    });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
    const counts = new Map<string, number>();
    const failures: string[] = [];
    const total = 1_000;
    for (let sent = 0; sent < total; sent += 8) {
      const batch = Array.from({ length: Math.min(8, total - sent) }, () => next());
      const answers: FuzzAnswer[] = await Promise.all(
        batch.map((request) =>
          sendRaw(request.target === "controller" ? url : workerBase, request, agent),
        ),
      );
      answers.forEach((answer, position) => {
        const request = batch[position];
        counts.set(String(answer), (counts.get(String(answer)) ?? 0) + 1);
        const allowedToClose = request.kind === "oversized body" || request.kind === "deep nesting";
        if (answer === "closed" ? !allowedToClose : answer >= 500)
          failures.push(
            `${request.kind}: ${request.method} ${request.path.slice(0, 80)} → ${answer}`,
          );
      });
    }
    agent.destroy();
    t.diagnostic(`answers by status: ${JSON.stringify(Object.fromEntries(counts))}`);
    assert.deepEqual(failures, [], `answers: ${JSON.stringify(Object.fromEntries(counts))}`);
    assert.ok(
      (counts.get("400") ?? 0) > 100 && (counts.get("200") ?? 0) > 10,
      `a mix of refusals and accepted requests: ${JSON.stringify(Object.fromEntries(counts))}`,
    );

    // Still serving: a new session plays; then every session (fuzzed ones too) is cancelled.
    const { sessionId } = await client.startSample("kg-std", family.indices("test")[0]);
    const reply = await client.interact(sessionId, { role: "assistant", content: "no tool call" });
    assert.equal(reply.status, "running");
    await client.cancelAll();
    assert.deepEqual(controller.listSessions(), {});
  });

  test("a body that trickles in is cut off with 408; a body over the cap gets 413 before it is all sent", async () => {
    const port = Number(new URL(url).port);
    const slow = await new Promise<string>((resolve) => {
      const socket = net.connect(port, "127.0.0.1", () => {
        socket.write(
          `POST /api/start_sample HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${controller.token}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"na`,
        );
      });
      let text = "";
      socket.on("data", (data: Buffer) => (text += data));
      socket.on("close", () => resolve(text));
      socket.on("error", () => resolve(text));
    });
    assert.match(slow, /^HTTP\/1\.1 408/);

    // Declares 64 MiB and sends only the first chunk: the answer comes without the rest.
    const early = await new Promise<string>((resolve) => {
      const socket = net.connect(port, "127.0.0.1", () => {
        socket.write(
          `POST /api/start_sample HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${controller.token}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n`,
        );
        const chunk = Buffer.alloc(MAX_BODY_BYTES + 1024, 0x20);
        socket.write(`${chunk.length.toString(16)}\r\n`);
        socket.write(chunk);
        socket.write("\r\n");
      });
      let text = "";
      socket.on("data", (data: Buffer) => {
        text += data;
        if (text.includes("\r\n\r\n")) socket.destroy();
      });
      socket.on("close", () => resolve(text));
      socket.on("error", () => resolve(text));
    });
    assert.match(early, /^HTTP\/1\.1 413/);
    assert.equal((await client.getIndices("kg")).length > 0, true, "still serving");

    // The limit is on receiving the request, not on answering it: a route may take longer.
    const slowRoute = createJsonServer({
      routes: {
        "POST /slow": async () => {
          await new Promise((resolve) => setTimeout(resolve, 2_500));
          return { body: { ok: true } };
        },
      },
      requestTimeoutMs: 1_000,
      headersTimeoutMs: 1_000,
    });
    const slowPort = await listen(slowRoute, 0, "127.0.0.1");
    const answered = await fetch(`http://127.0.0.1:${slowPort}/slow`, {
      method: "POST",
      body: "{}",
    });
    assert.deepEqual([answered.status, await answered.json()], [200, { ok: true }]);
    await closeServer(slowRoute);
  });

  test("the connection cap: sockets beyond it are refused, the server answers again once they close", async () => {
    const capped = new Controller({ port: 0, maxConnections: 4 });
    const cappedUrl = await capped.listen();
    const port = Number(new URL(cappedUrl).port);
    const sockets = await Promise.all(
      Array.from(
        { length: 4 },
        () =>
          new Promise<net.Socket>((resolve) => {
            const socket: net.Socket = net.connect(port, "127.0.0.1", () => resolve(socket));
          }),
      ),
    );
    try {
      const refused = await new Promise<string>((resolve) => {
        const socket: net.Socket = net.connect(port, "127.0.0.1", () =>
          socket.write(
            `GET /api/list_workers HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${capped.token}\r\n\r\n`,
          ),
        );
        let text = "";
        socket.on("data", (data: Buffer) => (text += data));
        socket.on("close", () => resolve(text));
        socket.on("error", () => resolve(text));
      });
      assert.equal(refused, "", "the fifth connection is closed without an answer");
    } finally {
      for (const socket of sockets) socket.destroy();
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
    const response = await fetch(`${cappedUrl}/api/list_workers`, {
      headers: { authorization: `Bearer ${capped.token}` },
    });
    assert.equal(response.status, 200);
    await capped.close();
  });
});
