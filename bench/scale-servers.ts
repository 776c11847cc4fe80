/**
 * Rollout over inference servers: generated tokens/s of the rollout with 1 and 2
 * `agentrl serve` processes on this machine (the `tiny` preset, random weights; echo tasks
 * with no environment latency; 16 episodes at once, 32 tokens per turn at most), through
 * the rollout's RemoteEngine (token-in/token-out over HTTP).
 *   npm run bench -- scale
 */
import { cpus } from "node:os";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PolicyPool, RemoteEngine, RolloutScheduler, TrajectoryBuffer } from "@agentrl/rollout";
import { InProcessEnvironmentClient } from "@agentrl/envs";
import { echoFamily, testPolicy, testTokenizer } from "../packages/rollout/src/testing/fixtures.js";
import { startServeProcess } from "../test/serve-process.js";
import type { BenchResult } from "./types.js";

const SECONDS = Number(process.env.AGENTRL_BENCH_SECONDS ?? 20);
const CONCURRENCY = 16;

async function measure(
  urls: string[],
  tokenizer: ReturnType<typeof testTokenizer>,
): Promise<{ tokensPerSecond: number; episodes: number }> {
  const engine = await RemoteEngine.connect({ servers: urls, temperature: 0.8, log: () => {} });
  const scheduler = new RolloutScheduler({
    client: new InProcessEnvironmentClient([
      echoFamily({ size: 64, maxTurnsNeeded: 4, maxTurns: 8 }),
    ]),
    tokenizer,
    pool: new PolicyPool({ current: engine }),
    buffer: new TrajectoryBuffer({ capacityGroups: 1_000_000 }),
    tasks: [{ name: "echo" }],
    groupSize: 8,
    maxConcurrentEpisodes: CONCURRENCY,
    seed: 1,
    episode: { maxNewTokensPerTurn: 32, maxTurns: 8 },
  });
  const done = scheduler.start();
  await new Promise((resolve) => setTimeout(resolve, 5000));
  const before = engine.stats().generatedTokens;
  const episodesBefore = scheduler.snapshot().episodes;
  const began = performance.now();
  await new Promise((resolve) => setTimeout(resolve, SECONDS * 1000));
  const tokens = engine.stats().generatedTokens - before;
  const seconds = (performance.now() - began) / 1000;
  const episodes = scheduler.snapshot().episodes - episodesBefore;
  await scheduler.stop();
  await done;
  engine.close();
  return { tokensPerSecond: tokens / seconds, episodes };
}

export async function run(): Promise<BenchResult> {
  const root = mkdtempSync(join(tmpdir(), "agentrl-bench-scale-"));
  const tokenizer = testTokenizer(512, { chatTemplate: "compact" });
  const policy = await testPolicy({ preset: "tiny", tokenizer });
  await policy.save(join(root, "model"));
  policy.dispose();
  const servers = [
    await startServeProcess(join(root, "model"), ["--max-batch", "16", "--quiet"]),
    await startServeProcess(join(root, "model"), ["--max-batch", "16", "--quiet"]),
  ];
  try {
    const one = await measure([servers[0].url], tokenizer);
    const two = await measure(
      servers.map((server) => server.url),
      tokenizer,
    );
    const markdown = [
      `### Rollout over inference servers (\`agentrl serve\` processes on this machine: ${cpus().length} cores, shared)`,
      "",
      `tiny preset, random weights; ${CONCURRENCY} echo episodes at once, ≤ 32 tokens per turn; ${SECONDS} s each, through RemoteEngine (token-in/out over HTTP).`,
      "",
      "| servers | rollout tokens/s | episodes |",
      "|---|---|---|",
      `| 1 | ${one.tokensPerSecond.toFixed(0)} | ${one.episodes} |`,
      `| 2 | ${two.tokensPerSecond.toFixed(0)} | ${two.episodes} |`,
      "",
      "All processes share the same 2 cores (and the machine is shared with other jobs): a second server here splits the episodes into two smaller decode batches on the same cores, so it cannot add throughput; on separate machines each server brings its own cores.",
    ].join("\n");
    return { name: "scale-servers", markdown };
  } finally {
    for (const server of servers) server.child.kill("SIGKILL");
    rmSync(root, { recursive: true, force: true });
  }
}
