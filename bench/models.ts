/**
 * `npm run bench -- models`: random Hugging Face folders of real models' exact shapes
 * (`agentrl model init --shape`, BF16, under runs/bench-models/, made once), each served in
 * its own process (bench/models-child.ts): load time, peak RSS, prefill and decode tokens/s
 * at n = 1 and 8, and chat requests answered through the HTTP server.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { BenchResult } from "./types.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const SHAPES = ["smollm2-135m", "qwen2.5-0.5b"];
const node = ["--conditions=source", "--import", "tsx"];

interface ChildResult {
  parameters: number;
  vocabulary: number;
  usableVocabulary: number;
  loadSeconds: number;
  rssAfterLoad: number;
  speed: Record<string, { prefill: number; decode: number }>;
  chat: { oneTokens: number; oneSeconds: number; eightTokens: number; eightSeconds: number };
  peakRss: number;
}

export async function run(): Promise<BenchResult> {
  const rows: string[] = [];
  for (const shape of SHAPES) {
    const directory = join(root, "runs", "bench-models", shape);
    if (!existsSync(join(directory, "model.safetensors"))) {
      const made = spawnSync(
        process.execPath,
        [
          ...node,
          join(root, "packages/cli/src/main.ts"),
          "model",
          "init",
          "--shape",
          shape,
          "--out",
          directory,
        ],
        { cwd: root, stdio: "inherit" },
      );
      if (made.status !== 0) throw new Error(`model init --shape ${shape} failed`);
    }
    const child = spawnSync(
      process.execPath,
      [...node, join(root, "bench/models-child.ts"), directory, "128", "16"],
      {
        cwd: root,
        encoding: "utf8",
        maxBuffer: 1 << 26,
        env: { ...process.env, AGENTRL_BACKEND: process.env.AGENTRL_BACKEND ?? "wasm" },
      },
    );
    const line = child.stdout.split("\n").find((l) => l.startsWith("RESULT "));
    if (child.status !== 0 || !line)
      throw new Error(
        `${shape}: serving failed (exit ${child.status}): ${child.stderr.slice(-2000)}`,
      );
    const r = JSON.parse(line.slice(7)) as ChildResult;
    const gib = (bytes: number) => (bytes / 2 ** 30).toFixed(2);
    rows.push(
      `| ${shape} | ${(r.parameters / 1e6).toFixed(0)}M | ${r.vocabulary.toLocaleString("en-US")} (${r.usableVocabulary.toLocaleString("en-US")} usable) | ${r.loadSeconds.toFixed(1)} | ${gib(r.rssAfterLoad)} / ${gib(r.peakRss)} | ` +
        `${r.speed.n1.prefill.toFixed(1)} / ${r.speed.n8.prefill.toFixed(1)} | ${r.speed.n1.decode.toFixed(2)} / ${r.speed.n8.decode.toFixed(2)} | ` +
        `${r.chat.oneTokens} tokens in ${r.chat.oneSeconds.toFixed(1)} s; 8 at once: ${r.chat.eightTokens} tokens in ${r.chat.eightSeconds.toFixed(1)} s |`,
    );
  }
  const markdown = [
    "Random BF16 folders of real models' exact shapes (`agentrl model init --shape`), each served (`startModelServer`, wasm backend, one thread) in its own process. " +
      "Prefill: 128-token prompts, one or eight sequences in one batch; decode: 16 greedy steps of 1 or 8 sequences. Chat: `/v1/chat/completions`, max_tokens 16, temperature 1, one request then eight at once (all HTTP 200). " +
      "Peak RSS is the process's high-water mark after loading / at the end. The machine is shared by other jobs: figures are noisy.",
    "",
    "| shape | parameters | vocabulary | load (s) | peak RSS after load / at end (GiB) | prefill tokens/s n=1 / n=8 | decode tokens/s n=1 / n=8 | chat requests |",
    "|---|---|---|---|---|---|---|---|",
    ...rows,
  ].join("\n");
  return { name: "models", markdown };
}
