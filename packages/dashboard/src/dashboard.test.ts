/**
 * The dashboard: run-folder reading, the API and its token, and the page itself in headless
 * Chromium (Debian's `chromium`, driven by playwright-core) on a finished run, a live run
 * (a child process appending metrics and trajectories while the page is open) and a real
 * controller with an in-process worker. Screenshots go to docs/images/ when
 * AGENTRL_DASHBOARD_SCREENSHOTS=1 (for docs/dashboard.md), else to a temporary folder.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  Controller,
  FunctionCallSession,
  TaskWorker,
  type TaskFamily,
  type ToolReply,
  type ToolSpec,
} from "@agentrl/envs";
import type { ChatTokenizer, Trajectory, TrajectoryGroup } from "@agentrl/rollout";
import { recordStep } from "@agentrl/trainer";
import { FileFollower, findRuns, summarizeRun } from "./runs.js";
import { DashboardConfigError, startDashboard } from "./server.js";

const CHROMIUM = "/usr/bin/chromium";
const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const HOSTILE = `<img src=x onerror="document.body.dataset.pwned='yes'">`;

/** One character per token. */
const tokenizer: ChatTokenizer = {
  encode: (text) => [...text].map((c) => c.codePointAt(0)!),
  decode: (ids) => String.fromCodePoint(...ids),
  applyChatTemplate: () => "",
};

/** An episode of two turns: a tool call (versions `version`, one token from `version - 1`), an observation, then an answer. */
function trajectory(
  task: string,
  groupId: string,
  member: number,
  reward: number,
  version: number,
): Trajectory {
  const parts: { text: string; kind: "prompt" | "generated" | "environment"; version?: number }[] =
    [
      {
        text: `<|im_start|>user\nFind the capital of France. ${HOSTILE}<|im_end|>\n`,
        kind: "prompt",
      },
      {
        text: `I will look it up.\n<tool_call>\n{"name": "search", "arguments": {"query": "capital of France ${member}"}}\n</tool_call>`,
        kind: "generated",
        version,
      },
      {
        text: `<|im_start|>tool\nParis is the capital. ${HOSTILE}<|im_end|>\n`,
        kind: "environment",
      },
      {
        text: member % 2 ? "The answer is Paris." : `Maybe Lyon? ${HOSTILE}`,
        kind: "generated",
        version,
      },
    ];
  const tokens: number[] = [];
  const mask: number[] = [];
  const versions: number[] = [];
  const logprobs: number[] = [];
  const spans: [number, number][] = [];
  for (const part of parts) {
    const start = tokens.length;
    const ids = tokenizer.encode(part.text);
    ids.forEach((id, i) => {
      tokens.push(id);
      mask.push(part.kind === "generated" ? 1 : 0);
      versions.push(part.kind === "generated" ? (i === 0 ? version - 1 : version) : -1);
      logprobs.push(part.kind === "generated" ? -((i * 7919) % 23) / 10 : 0);
    });
    spans.push([start, tokens.length]);
  }
  const turn = (
    generated: [number, number],
    environment: [number, number],
    promptLength: number,
  ) => ({
    promptLength,
    generated,
    environment,
    policy: "current" as const,
    minVersion: version - 1,
    maxVersion: version,
    finishReason: "stop" as const,
    templateFallback: false,
  });
  return {
    task,
    index: 3,
    groupId,
    member,
    tokens: Int32Array.from(tokens),
    lossMask: Uint8Array.from(mask),
    logprobs: Float32Array.from(logprobs),
    versions: Int32Array.from(versions),
    policyIds: new Int8Array(tokens.length),
    reward,
    environmentReward: reward,
    status: reward > 0 ? "completed" : "task limit reached",
    endCause: reward > 0 ? "verdict" : "agent",
    masked: false,
    turns: [
      turn(spans[1], spans[2], spans[0][1]),
      turn(spans[3], [tokens.length, tokens.length], spans[2][1]),
    ],
    minVersion: version - 1,
    maxVersion: version,
    metrics: {},
    weight: 1,
  };
}

function stepRecord(step: number): string {
  const groups: TrajectoryGroup[] = ["alpha", "beta"].map((task, g) => ({
    groupId: `${task}-${step}`,
    task,
    index: 3,
    minVersion: step - 1,
    maxVersion: step,
    trajectories: [0, 1, 2].map((member) =>
      trajectory(task, `${task}-${step}`, member, member === g ? 1 : 0, step),
    ),
  }));
  return `${JSON.stringify(recordStep(step, groups, tokenizer, { episodesPerStep: 6 }))}\n`;
}

/** A metrics line as the trainer writes it; `pace` scales the success and reward curves (to tell runs apart). */
function metricsLine(step: number, pace = 1): string {
  return `${JSON.stringify({
    step,
    version: step,
    time: new Date().toISOString(),
    reward: 0.1 * step * pace,
    success: 0.05 * step * pace,
    "success/alpha": (0.1 * step) % 1,
    "success/beta": 0.03 * step,
    "reward/alpha": 0.1 * step,
    "reward/beta": 0.05 * step,
    "train/loss": 1 / step,
    "train/kl": 0.001 * step,
    "train/entropy": 2 - 0.01 * step,
    "train/clipFraction": 0.02,
    staleness: step % 2,
    "rollout/stale_turns": 3,
    "rollout/external_turns": 0,
    "throughput/train_tokens_per_second": 900 + step,
    "throughput/rollout_tokens_per_second": 400,
    "time/wait": 1,
    "time/train": 2,
    "time/sync": 0.1,
    "time/step": 3.1,
    ...(step % 2 === 0
      ? { "eval/success/alpha": 0.2 + 0.01 * step, "eval/success/beta": 0.1 }
      : {}),
  })}\n`;
}

/** runs/finished (3 steps, results) and runs/live (appended to by a child process). */
function makeRuns(): { root: string; live: string } {
  const root = mkdtempSync(join(tmpdir(), "agentrl-dashboard-"));
  const finished = join(root, "finished");
  const live = join(root, "live");
  for (const [folder, steps] of [
    [finished, 3],
    [live, 100],
  ] as const) {
    mkdirSync(folder, { recursive: true });
    writeFileSync(
      join(folder, "config.yaml"),
      `rl:\n  steps: ${steps}\n  batchGroups: 2\ntasks:\n  - name: alpha\n  - name: beta\n`,
    );
  }
  for (let step = 1; step <= 3; step++) {
    appendFileSync(join(finished, "metrics.jsonl"), metricsLine(step));
    appendFileSync(join(finished, "trajectories.jsonl"), stepRecord(step));
  }
  const table = (a: number, b: number) => ({
    alpha: {
      task: "alpha",
      instances: 10,
      episodes: 10,
      success: a,
      passAtK: a,
      meanReward: a,
      meanTurns: 2,
    },
    beta: {
      task: "beta",
      instances: 10,
      episodes: 10,
      success: b,
      passAtK: b,
      meanReward: b,
      meanTurns: 3,
    },
  });
  writeFileSync(
    join(finished, "results.json"),
    JSON.stringify({
      steps: 3,
      before: table(0.1, 0.2),
      warmStart: table(0.5, 0.4),
      final: table(0.7, 0.45),
    }),
  );
  for (let step = 1; step <= 4; step++) {
    appendFileSync(join(live, "metrics.jsonl"), metricsLine(step, 1.4));
    appendFileSync(join(live, "trajectories.jsonl"), stepRecord(step));
  }
  return { root, live };
}

/** A process that appends one step (metrics and trajectories) to the live run every 400 ms, from step 5. */
function startAppender(live: string): ChildProcess {
  const pending = join(mkdtempSync(join(tmpdir(), "agentrl-dashboard-pending-")), "lines.json");
  writeFileSync(
    pending,
    JSON.stringify(
      Array.from({ length: 40 }, (_, i) => [metricsLine(5 + i, 1.4), stepRecord(5 + i)]),
    ),
  );
  const script = `
    const fs = require("node:fs"); const lines = JSON.parse(fs.readFileSync(${JSON.stringify(pending)}, "utf8")); let i = 0;
    setInterval(() => { if (i >= lines.length) process.exit(0);
      fs.appendFileSync(${JSON.stringify(join(live, "metrics.jsonl"))}, lines[i][0]);
      fs.appendFileSync(${JSON.stringify(join(live, "trajectories.jsonl"))}, lines[i][1]); i++; }, 400);`;
  return spawn(process.execPath, ["-e", script], { stdio: "ignore" });
}

/** Polls `condition` (from node: the page's CSP forbids evaluating strings) until it holds, up to 20 s. */
async function until(condition: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

const SEARCH: ToolSpec = {
  type: "function",
  function: {
    name: "search",
    description: "Search.",
    parameters: { type: "object", properties: { query: { type: "string" } }, required: ["query"] },
  },
};
class SearchSession extends FunctionCallSession {
  constructor() {
    super(
      { messages: [{ role: "user", content: "Find the capital of France." }], tools: [SEARCH] },
      { maxTurns: 3 },
    );
  }
  protected async callTool(): Promise<ToolReply> {
    return { content: "Paris", outcome: { reward: 1, status: "completed" } };
  }
}
const family: TaskFamily = {
  name: "alpha",
  indices: (split) => (split === "train" ? [0, 1, 2] : [3]),
  startSession: async () => new SearchSession(),
};

test("findRuns, summarizeRun and FileFollower read run folders, live and finished", async () => {
  const { root, live } = makeRuns();
  assert.deepEqual(
    findRuns(root).map((f) => f.slice(root.length + 1)),
    ["finished", "live"],
  );
  assert.deepEqual(findRuns(live), [live], "a run folder given directly is the only run");
  const [finished, running] = await Promise.all(findRuns(root).map((f) => summarizeRun(root, f)));
  assert.equal(finished.status, "finished");
  assert.equal(finished.step, 3);
  assert.deepEqual(finished.tasks, ["alpha", "beta"]);
  assert.equal(running.status, "running");
  assert.equal(running.totalSteps, 100);
  assert.ok(
    Math.abs(running.etaSeconds! - 96 * 3.1) < 1e-6,
    `ETA from the recent step times: ${running.etaSeconds}`,
  );
  const stale = await summarizeRun(root, live, Date.now() + 10 * 60_000);
  assert.equal(stale.status, "stopped");

  const file = join(root, "follow.jsonl");
  const follower = new FileFollower(file);
  assert.deepEqual(await follower.poll(), []);
  appendFileSync(file, '{"a":1}\n{"b":');
  assert.deepEqual(await follower.poll(), ['{"a":1}'], "a torn last line waits");
  appendFileSync(file, "2}\n");
  assert.deepEqual(await follower.poll(), ['{"b":2}']);
  writeFileSync(file, '{"c":3}\n');
  assert.deepEqual(
    await follower.poll(),
    ['{"c":3}'],
    "a file that shrank is read again from its start",
  );
});

test("the API answers runs, metrics and trajectories; a token is required off loopback and checked when set", async () => {
  const { root } = makeRuns();
  await assert.rejects(
    startDashboard({ runs: root, host: "0.0.0.0", port: 0 }),
    DashboardConfigError,
  );
  const server = await startDashboard({ runs: root, port: 0, token: "s3cret" });
  try {
    assert.equal((await fetch(`${server.url}api/runs`)).status, 401);
    assert.equal((await fetch(`${server.url}api/runs?token=wrong`)).status, 401);
    const runs = (await (
      await fetch(`${server.url}api/runs`, { headers: { authorization: "Bearer s3cret" } })
    ).json()) as { name: string }[];
    assert.deepEqual(
      runs.map((r) => r.name),
      ["finished", "live"],
    );
    const get = async (path: string) =>
      fetch(`${server.url}${path}${path.includes("?") ? "&" : "?"}token=s3cret`);
    const metrics = (await (await get("api/runs/finished/metrics")).json()) as { step: number }[];
    assert.deepEqual(
      metrics.map((m) => m.step),
      [1, 2, 3],
    );
    const steps = (await (await get("api/runs/finished/trajectories")).json()) as {
      step: number;
      recorded: number;
    }[];
    assert.deepEqual(
      steps.map((s) => [s.step, s.recorded]),
      [
        [1, 6],
        [2, 6],
        [3, 6],
      ],
    );
    const step = (await (await get("api/runs/finished/trajectories/2")).json()) as {
      episodes: { turns: { toolCalls: unknown[] }[] }[];
    };
    assert.deepEqual(step.episodes[0].turns[0].toolCalls, [
      { name: "search", arguments: { query: "capital of France 0" } },
    ]);
    assert.equal(
      (await get("api/runs/..%2F..%2Fetc/metrics")).status,
      404,
      "only run folders under the root are served",
    );
    assert.equal((await get("api/runs/finished/trajectories/99")).status, 404);
    assert.match(
      await (await get("vendor/uPlot.iife.min.js")).text(),
      /uPlot/,
      "uPlot is served from node_modules",
    );
  } finally {
    await server.close();
  }
});

test(
  "the page in headless Chromium: runs, a chart with points, a live update, an episode with coloured tokens, the workers' table",
  { timeout: 120_000 },
  async (t) => {
    if (!existsSync(CHROMIUM)) {
      t.skip(
        `${CHROMIUM} is missing: install Debian's chromium (scripts/setup.sh does, as root) to run the dashboard's browser test`,
      );
      return;
    }
    const { chromium } = await import("playwright-core");
    const { root, live } = makeRuns();
    const controller = new Controller({ port: 0, token: "controller-token" });
    controller.addLocalWorker(new TaskWorker(family, { concurrency: 4 }));
    const controllerUrl = await controller.listen();
    await controller.startSample("alpha", 0); // one live session
    const server = await startDashboard({
      runs: root,
      port: 0,
      controllerUrl,
      controllerToken: "controller-token",
      pollMs: 250,
    });
    const screenshots =
      process.env.AGENTRL_DASHBOARD_SCREENSHOTS === "1"
        ? join(REPO, "docs", "images")
        : mkdtempSync(join(tmpdir(), "agentrl-dashboard-shots-"));
    mkdirSync(screenshots, { recursive: true });
    // A fresh profile (playwright passes it as --user-data-dir).
    const browser = await chromium.launchPersistentContext(
      mkdtempSync(join(tmpdir(), "agentrl-chromium-")),
      {
        executablePath: CHROMIUM,
        args: [
          "--headless",
          "--no-sandbox",
          "--disable-gpu",
          "--disable-quic",
          "--no-first-run",
          "--disable-background-networking",
          "--disable-component-update",
          "--disable-sync",
        ],
        viewport: { width: 1280, height: 860 },
      },
    );
    let appender: ChildProcess | undefined;
    try {
      const page = await browser.newPage();
      const errors: string[] = [];
      page.on("pageerror", (error) => errors.push(error.message));
      const outside: string[] = [];
      page.on("request", (request) => {
        if (!request.url().startsWith(server.url)) outside.push(request.url());
      });
      await page.goto(server.url);

      // Runs list.
      await page.waitForSelector("#runs-table tr[data-run='finished']");
      const rows = await page.$$eval("#runs-table tbody tr", (trs) =>
        trs.map((tr) => tr.textContent ?? ""),
      );
      assert.equal(rows.length, 2);
      assert.match(
        rows.find((r) => r.includes("finished") && r.includes("3 / 3")) ?? "",
        /finished/,
      );
      assert.match(rows.find((r) => r.includes("live")) ?? "", /running.*4 \/ 100/);
      await page.click("#runs-table tr[data-run='finished'] input[type=checkbox]");
      await page.click("#runs-table tr[data-run='live'] input[type=checkbox]");
      await page.waitForSelector("[data-chart='success by run'] canvas");
      await page.screenshot({ path: join(screenshots, "dashboard-runs.png") });

      // Curves of the live run: a chart with the run's points, then a live update.
      await page.selectOption("#run-select", "live");
      await page.click("#tabs button[data-tab='curves']");
      await page.waitForSelector("[data-chart='Success per task (train batches)'] canvas");
      const points = async () =>
        Number(await page.$eval("#curves-steps", (node) => node.textContent));
      assert.equal(await points(), 4, "the chart holds the run's 4 steps");
      const legend = await page.$$eval(
        "[data-chart='Success per task (train batches)'] .u-legend .u-series",
        (s) => s.map((x) => x.textContent ?? ""),
      );
      assert.ok(
        legend.some((l) => l.includes("alpha")) && legend.some((l) => l.includes("beta")),
        `per-task series: ${legend.join(" | ")}`,
      );
      appender = startAppender(live);
      await until(async () => (await points()) >= 6, "a live update");
      assert.ok(
        (await points()) >= 6,
        "metric lines appended by another process reached the open page",
      );
      await page.screenshot({ path: join(screenshots, "dashboard-curves.png"), fullPage: false });

      // Trajectories: open an episode of the finished run.
      await page.selectOption("#run-select", "finished");
      await page.click("#tabs button[data-tab='trajectories']");
      await page.waitForSelector("#episode-list .episode-row");
      await page.click("#episode-list .episode-row[data-episode='1']");
      await page.waitForSelector("#episode-detail .turn");
      assert.equal(
        await page.$$eval("#episode-detail .turn", (turns) => turns.length),
        2,
        "both turns shown",
      );
      const toolCall = await page.$eval(
        "#episode-detail .toolcall",
        (node) => node.textContent ?? "",
      );
      assert.match(toolCall, /search[\s\S]*capital of France 1/);
      const colours = await page.$$eval("#episode-detail .tok", (tokens) => [
        ...new Set(
          tokens.map((t) => `${t.getAttribute("data-version")} ${t.getAttribute("style")}`),
        ),
      ]);
      const versions = new Set(colours.map((c) => c.split(" ")[0]));
      assert.deepEqual([...versions].sort(), ["2", "3"], "tokens carry their policy versions");
      assert.equal(
        new Set(colours.map((c) => c.slice(c.indexOf(" ")))).size,
        2,
        "two versions, two colours",
      );
      const observation = await page.$eval(
        "#episode-detail .observation",
        (node) => node.textContent ?? "",
      );
      assert.ok(observation.includes("Paris is the capital"));
      const detail = await page.$eval("#episode-detail", (node) => node.textContent ?? "");
      assert.ok(detail.includes(HOSTILE), "hostile model text is shown as text");
      assert.equal(
        await page.$$eval("#episode-detail img", (images) => images.length),
        0,
        "…and never becomes markup",
      );
      assert.equal(await page.$eval("body", (body) => body.getAttribute("data-pwned")), null);
      await page.screenshot({ path: join(screenshots, "dashboard-episode.png") });
      // Colour by log-prob, filter by status, search.
      await page.selectOption("#color-by", "logprob");
      await page.waitForSelector("#episode-detail .tok");
      const logprobColours = await page.$$eval(
        "#episode-detail .tok",
        (tokens) => new Set(tokens.map((t) => t.getAttribute("style"))).size,
      );
      assert.ok(logprobColours > 2, `log-prob colours vary (${logprobColours})`);
      await page.fill("#trajectory-search", "Lyon");
      await page.press("#trajectory-search", "Enter");
      await until(
        async () => (await page.$$("#episode-list .episode-row")).length === 4,
        "the search to keep the 4 episodes that say Lyon",
      );

      // Environments: the real controller's worker and its live session.
      await page.click("#tabs button[data-tab='environments']");
      await page.waitForSelector("#workers-table tbody tr");
      const worker = await page.$eval("#workers-table tbody tr", (tr) => tr.textContent ?? "");
      assert.match(worker, /alpha.*alive/);
      assert.match(
        await page.$eval("#tab-environments", (n) => n.textContent ?? ""),
        /Live sessions \(1\)/,
      );
      await page.screenshot({ path: join(screenshots, "dashboard-environments.png") });

      // Evaluations: the before/after table.
      await page.click("#tabs button[data-tab='evaluations']");
      await page.waitForSelector(".evaluation-table");
      assert.match(
        await page.$eval(".evaluation-table", (n) => n.textContent ?? ""),
        /alpha.*10\.0%.*50\.0%.*70\.0%/,
      );

      assert.deepEqual(errors, [], "no script errors");
      assert.deepEqual(outside, [], "no request leaves the dashboard (assets are local)");
    } finally {
      appender?.kill();
      await browser.close();
      await server.close();
      await controller.close();
    }
  },
);
