/**
 * Hostile input at volume: 10,000 generated malformed requests and tool calls (fuzzed JSON
 * shapes over every route of both protocols, bad JSON and UTF-8, deep nesting, oversized
 * bodies, wrong methods and tokens, hostile tool-call arguments on live sessions) against a
 * controller with an in-process KG worker and an HTTP KG worker, 8 in flight. Counts the
 * answers by status (a 5xx or a dropped connection on a normal-sized request is a failure),
 * the time, and the controller process's memory before and after.
 *   npm run bench -- malformed
 */
import http from "node:http";
import { performance } from "node:perf_hooks";
import {
  Controller,
  HttpEnvironmentClient,
  TaskWorker,
  createTaskFamily,
  serveWorker,
} from "@agentrl/envs";
import { createFuzzer, sendRaw, type FuzzAnswer } from "../packages/envs/src/server/fuzz.js";
import type { BenchResult } from "./types.js";

/** Requests to send. */
const REQUESTS = 10_000;
/** Requests in flight at once. */
const IN_FLIGHT = 8;
/** Body cap of the controller under test, in bytes. */
const MAX_BODY_BYTES = 256 * 1024;

export async function run(): Promise<BenchResult> {
  const family = await createTaskFamily("kg");
  const remoteFamily = await createTaskFamily("kg");
  const controller = new Controller({ port: 0, maxBodyBytes: MAX_BODY_BYTES });
  const worker = new TaskWorker(family, { concurrency: 256 });
  controller.addLocalWorker(worker);
  const url = await controller.listen();
  const workerServer = await serveWorker(new TaskWorker(remoteFamily, { concurrency: 256 }), {
    controllerUrl: url,
    token: controller.token,
    log: () => undefined,
  });
  const client = new HttpEnvironmentClient({ url, token: controller.token });
  const live: string[] = [];
  for (let i = 0; i < 8; i++)
    live.push((await client.startSample("kg", family.indices("test")[i])).sessionId);
  const next = createFuzzer(10_000, {
    token: controller.token,
    task: "kg",
    tool: "get_relations",
    sessionIds: () => live,
    maxBodyBytes: MAX_BODY_BYTES,
  });
  const agent = new http.Agent({ keepAlive: true, maxSockets: IN_FLIGHT });
  const workerBase = workerServer.address.replace(/\/api$/, "");
  const counts = new Map<string, number>();
  const kinds = new Map<string, number>();
  let toolCalls = 0;
  let failures = 0;
  const rssBefore = process.memoryUsage().rss;
  const began = performance.now();
  for (let sent = 0; sent < REQUESTS; sent += IN_FLIGHT) {
    const batch = Array.from({ length: Math.min(IN_FLIGHT, REQUESTS - sent) }, () => next());
    const answers: FuzzAnswer[] = await Promise.all(
      batch.map((request) =>
        sendRaw(request.target === "controller" ? url : workerBase, request, agent),
      ),
    );
    answers.forEach((answer, position) => {
      const request = batch[position];
      counts.set(String(answer), (counts.get(String(answer)) ?? 0) + 1);
      kinds.set(request.kind, (kinds.get(request.kind) ?? 0) + 1);
      if (request.path.endsWith("/interact")) toolCalls += 1;
      if (
        answer === "closed"
          ? request.kind !== "oversized body" && request.kind !== "deep nesting"
          : answer >= 500
      )
        failures += 1;
    });
  }
  const seconds = (performance.now() - began) / 1000;
  const rssAfter = process.memoryUsage().rss;
  const stillServing = (await client.getIndices("kg-std")).length > 0;
  const cancelled = await client.cancelAll();
  agent.destroy();
  await client.close();
  await controller.close();
  await workerServer.close();
  await worker.close();

  const statusRow = [...counts]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([status, n]) => `${status}: ${n}`)
    .join(", ");
  const kindRow = [...kinds]
    .sort(([, a], [, b]) => b - a)
    .map(([kind, n]) => `${kind} ${n}`)
    .join(", ");
  const markdown = [
    "### Malformed requests and tool calls (controller hardening)",
    "",
    `${REQUESTS.toLocaleString("en")} generated requests (seed 10000; ${toolCalls.toLocaleString("en")} of them \`interact\` calls, with fuzzed tool calls, on 8 live KG sessions or unknown ones), ${IN_FLIGHT} in flight, to a controller (body cap ${MAX_BODY_BYTES / 1024} KiB) and an HTTP worker in one process.`,
    "",
    "| requests | 5xx or dropped (failures) | answers by status | time (s) | requests/s | RSS before → after (MiB) | serving after |",
    "|---|---|---|---|---|---|---|",
    `| ${REQUESTS.toLocaleString("en")} | ${failures} | ${statusRow} | ${seconds.toFixed(1)} | ${(REQUESTS / seconds).toFixed(0)} | ${(rssBefore / 2 ** 20).toFixed(0)} → ${(rssAfter / 2 ** 20).toFixed(0)} | ${stillServing ? "yes" : "NO"} (${cancelled} fuzz-started sessions cancelled) |`,
    "",
    `Kinds: ${kindRow}. \`closed\` counts oversized bodies the server cut off after its 413 (the client was still sending).`,
  ].join("\n");
  return { name: "malformed", markdown };
}

const invokedDirectly =
  process.argv[1] && import.meta.url.endsWith(process.argv[1].replace(/\\/g, "/"));
if (invokedDirectly) console.log((await run()).markdown);
