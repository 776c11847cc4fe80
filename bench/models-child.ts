/**
 * One model of `npm run bench -- models`, in its own process (so its peak RSS is its own):
 * serves the folder given as argv[2], then measures load time, prefill and decode tokens/s at
 * n = 1 and 8 on the served model, answers chat requests through the HTTP server (one, then
 * eight at once), and prints one JSON line with the figures.
 */
import { readFileSync } from "node:fs";
import { basename, resolve } from "node:path";
import { startModelServer } from "@agentrl/rollout";
import type { KVSequence } from "@agentrl/policy";

const directory = process.argv[2];
const prefillTokens = Number(process.argv[3] ?? 128);
const decodeSteps = Number(process.argv[4] ?? 16);

const peakRss = () =>
  Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"))![1]) * 1024;
const seconds = (start: number) => (performance.now() - start) / 1000;

const loadStart = performance.now();
const running = await startModelServer({
  model: directory,
  port: 0,
  weightsKey: "bench-models-key",
  temperature: 1,
  maxTokens: 16,
});
const loadSeconds = seconds(loadStart);
const rssAfterLoad = peakRss();
const model = running.policy.model;
const usable = model.vocabularyLimit;
let state = 12345;
const randomToken = () => {
  state = (Math.imul(state, 1103515245) + 12345) >>> 0;
  return 300 + (state % (usable - 300));
};
const argmax = (logits: Float32Array) => {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
  return best;
};

const speed: Record<string, { prefill: number; decode: number }> = {};
for (const n of [1, 8]) {
  const sequences: KVSequence[] = Array.from({ length: n }, () => model.createSequence());
  const prompts = sequences.map(() => Array.from({ length: prefillTokens }, randomToken));
  let start = performance.now();
  let logits = model.prefillBatch(sequences, prompts);
  const prefill = (n * prefillTokens) / seconds(start);
  start = performance.now();
  for (let step = 0; step < decodeSteps; step++)
    logits = model.decodeStep(sequences, logits.map(argmax));
  const decode = (n * decodeSteps) / seconds(start);
  for (const sequence of sequences) sequence.dispose();
  speed[`n${n}`] = { prefill, decode };
}

const chat = async () => {
  const response = await fetch(`${running.address.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: basename(resolve(directory)),
      messages: [{ role: "user", content: "Which tools do you have?" }],
      max_tokens: 16,
      temperature: 1,
    }),
  });
  const body = (await response.json()) as {
    usage?: { completion_tokens?: number };
    error?: unknown;
  };
  if (response.status !== 200)
    throw new Error(`chat request: HTTP ${response.status} ${JSON.stringify(body).slice(0, 300)}`);
  return body.usage?.completion_tokens ?? 0;
};
let start = performance.now();
const oneTokens = await chat();
const oneSeconds = seconds(start);
start = performance.now();
const eightTokens = (await Promise.all(Array.from({ length: 8 }, chat))).reduce((a, b) => a + b, 0);
const eightSeconds = seconds(start);
const result = {
  parameters: model.parameterCount,
  vocabulary: model.config.vocabSize,
  usableVocabulary: usable,
  loadSeconds,
  rssAfterLoad,
  speed,
  chat: { oneTokens, oneSeconds, eightTokens, eightSeconds },
  peakRss: peakRss(),
};
await running.close(1000);
console.log(`RESULT ${JSON.stringify(result)}`);
process.exit(0);
