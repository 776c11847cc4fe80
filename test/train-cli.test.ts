/**
 * End to end: the `agentrl` CLI as a child process (from the TypeScript sources), on a tiny
 * model and two pure-TypeScript task families. `train` on a 2-step config leaves a
 * resumable checkpoint; `--resume` to 3 steps continues at step 3; `eval` on the saved
 * model prints per-task success (and valid JSON); a bad config fails with exit code 1 and a
 * message naming the key and the file; `ablation` writes the four runs' tables side by side.
 * Also: docs/config.md matches the schema.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import {
  existsSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { CONFIG_DOCS_PATH, renderConfigDocs } from "../scripts/generate-config-docs.ts";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const MAIN = join(ROOT, "packages", "cli", "src", "main.ts");

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `agentrl ...args` from the sources; resolves with the exit code and the output. */
function agentrl(args: string[], timeoutMs = 240_000): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["--conditions=source", "--import", "tsx", MAIN, ...args],
      {
        cwd: ROOT,
        timeout: timeoutMs,
        maxBuffer: 16 * 1024 * 1024,
        env: { ...process.env, AGENTRL_DEBUG: "" },
      },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** A tiny but complete run: test-size model, two families, 2 warm-start steps, 2 RL steps. */
const TINY_CONFIG = `
model:
  preset: test
  vocabSize: 2048
tasks:
  - name: alfworld
  - name: webshop
warmStart:
  steps: 2
  batchEpisodes: 2
rl:
  mode: sync
  steps: 2
  batchGroups: 2
  groupSize: 2
  learningRate: 0.001
crossPolicy:
  staleProbability: 0.25
  refreshEvery: 1
rollout:
  concurrency: 4
  maxTurns: 2
  maxNewTokensPerTurn: 12
evaluation:
  every: 1
  limit: 2
  finalLimit: 2
  concurrency: 4
  beforeWarmStart: false
checkpoint:
  every: 1
  keep: 5
`;

function metricSteps(runDirectory: string): number[] {
  return readFileSync(join(runDirectory, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((line) => (JSON.parse(line) as { step: number }).step);
}

describe("agentrl train / eval (CLI end to end)", () => {
  const folder = mkdtempSync(join(tmpdir(), "agentrl-train-cli-"));
  const configFile = join(folder, "tiny.yaml");
  writeFileSync(configFile, TINY_CONFIG);
  const runDirectory = join(folder, "run");

  test("train on a 2-step config writes the run folder and a resumable checkpoint; --resume to 3 steps continues at step 3", async () => {
    const first = await agentrl(["train", "--config", configFile, "--run-dir", runDirectory]);
    assert.equal(first.code, 0, first.stderr + first.stdout);
    for (const file of [
      "config.yaml",
      "metrics.jsonl",
      "results.md",
      "results.json",
      "success-train.svg",
      "success-test.svg",
    ]) {
      assert.ok(existsSync(join(runDirectory, file)), `${file} in the run folder`);
    }
    assert.ok(readdirSync(join(runDirectory, "tensorboard")).length > 0, "TensorBoard events");
    assert.ok(
      existsSync(join(runDirectory, "checkpoints", "step-000002", "policy", "model.safetensors")),
    );
    assert.ok(
      existsSync(join(runDirectory, "warmstart", "model", "model.safetensors")),
      "the warm-started model",
    );
    assert.deepEqual(metricSteps(runDirectory), [1, 2]);
    const [atStep1, atStep2] = readFileSync(join(runDirectory, "metrics.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, number>);
    assert.ok(
      "eval/success/alfworld" in atStep1 && "eval/success/webshop" in atStep1,
      "the periodic evaluation at step 1",
    );
    assert.ok(
      !("eval/success/alfworld" in atStep2),
      "none at the last step: the final evaluation measures that policy",
    );
    const testPlot = readFileSync(join(runDirectory, "success-test.svg"), "utf8");
    assert.match(testPlot, /last point: final evaluation, 2 a task/);
    assert.equal(
      testPlot.match(/<path d="M[\d.]+,[\d.]+ L[\d.]+,[\d.]+"/g)?.length,
      2,
      "a line per task: step 1's evaluation to the final one",
    );
    assert.match(
      readFileSync(join(runDirectory, "success-train.svg"), "utf8"),
      /^<svg[\s\S]*alfworld[\s\S]*<\/svg>$/,
    );
    assert.match(first.stdout, /\| task \| after warm start \| after RL \(step 2\) \|/);
    assert.match(first.stdout, /\| alfworld \| \d+\.\d% \| \d+\.\d% \|/);
    assert.match(readFileSync(join(runDirectory, "config.yaml"), "utf8"), /steps: 2/);

    const second = await agentrl([
      "train",
      "--config",
      configFile,
      "--run-dir",
      runDirectory,
      "--resume",
      "--set",
      "rl.steps=3",
    ]);
    assert.equal(second.code, 0, second.stderr + second.stdout);
    assert.match(second.stdout, /resuming RL from .*step-000002 \(step 2\)/);
    assert.match(second.stdout, /warm start: already done in this run folder/);
    assert.deepEqual(metricSteps(runDirectory), [1, 2, 3]);
    assert.ok(
      existsSync(join(runDirectory, "checkpoints", "step-000003", "policy", "model.safetensors")),
    );
    assert.match(second.stdout, /after RL \(step 3\)/);
  });

  test("a plain script with @agentrl/trainer alone runs the same experiment: the same resolved configuration and the same results files", async () => {
    const cliResults = join(runDirectory, "results.json");
    if (!existsSync(cliResults)) return assert.fail("the train test did not leave results.json");
    const scriptDirectory = join(folder, "script-run");
    const script = join(folder, "run-experiment.mjs");
    // A script outside the repository sees the packages as a user's project would: through node_modules.
    if (!existsSync(join(folder, "node_modules")))
      symlinkSync(join(ROOT, "node_modules"), join(folder, "node_modules"));
    writeFileSync(
      script,
      [
        'import { loadConfig, runExperiment } from "@agentrl/trainer";',
        "const [file, directory] = process.argv.slice(2);",
        "const config = await loadConfig({ file, set: [`run.directory=${directory}`] });",
        "const result = await runExperiment({ config });",
        "console.log(JSON.stringify({ steps: result.steps, final: result.tables.final }));",
      ].join("\n"),
    );
    const run = await new Promise<Run>((resolve) => {
      execFile(
        process.execPath,
        ["--conditions=source", "--import", "tsx", script, configFile, scriptDirectory],
        { cwd: ROOT, timeout: 240_000, maxBuffer: 16 * 1024 * 1024 },
        (error, stdout, stderr) => {
          resolve({
            code: error ? (typeof error.code === "number" ? error.code : 1) : 0,
            stdout,
            stderr,
          });
        },
      );
    });
    assert.equal(run.code, 0, run.stderr + run.stdout);
    const printed = JSON.parse(run.stdout.trim().split("\n").at(-1)!) as {
      steps: number;
      final: Record<string, { success: number }>;
    };
    assert.equal(printed.steps, 2);
    assert.deepEqual(Object.keys(printed.final).sort(), ["alfworld", "webshop"]);
    // `agentrl train` resolves the same file to the same configuration (its run folder aside) ...
    const withoutFolder = (text: string) =>
      text
        .replace(/^ {2}directory: .*$/m, "")
        .replace(/^ {2}resume: .*$/m, "")
        .replace(/^ {2}steps: \d+$/gm, "");
    assert.equal(
      withoutFolder(readFileSync(join(scriptDirectory, "config.yaml"), "utf8")),
      withoutFolder(readFileSync(join(runDirectory, "config.yaml"), "utf8")),
    );
    // ... and writes results of the same shape (the CLI's run was resumed to step 3).
    const shape = (value: unknown): unknown =>
      value && typeof value === "object"
        ? Object.fromEntries(
            Object.entries(value)
              .sort()
              .map(([key, inner]) => [key, shape(inner)]),
          )
        : typeof value;
    const scriptResults = JSON.parse(
      readFileSync(join(scriptDirectory, "results.json"), "utf8"),
    ) as unknown;
    assert.deepEqual(shape(scriptResults), shape(JSON.parse(readFileSync(cliResults, "utf8"))));
    assert.match(
      readFileSync(join(scriptDirectory, "results.md"), "utf8"),
      /\| task \| after warm start \| after RL \(step 2\) \|/,
    );
    for (const file of ["metrics.jsonl", "success-train.svg", "checkpoints"])
      assert.ok(existsSync(join(scriptDirectory, file)), file);
  });

  test("ablation: four runs side by side, greedy and sampled tables, hand-written notes kept", async () => {
    const out = join(folder, "results.md");
    writeFileSync(
      out,
      "# old\n\n<!-- notes: kept when the ablation is run again -->\nMy reading of the last run.\n",
    );
    const run = await agentrl(
      [
        "ablation",
        "--config",
        configFile,
        "--run-dir",
        join(folder, "ablation"),
        "--out",
        out,
        "--set",
        "rl.steps=1",
        "--set",
        "evaluation.every=0",
      ],
      600_000,
    );
    assert.equal(run.code, 0, run.stderr + run.stdout);
    const text = readFileSync(out, "utf8");
    assert.match(
      text,
      /\| task \| after warm start \| TAN \+ cross-policy \| cross-policy only \| TAN only \| neither \|/,
    );
    assert.match(text, /At the rollout temperature \(0\.8\)/);
    assert.equal(
      text.match(/^\| alfworld \| \d+\.\d% \| \d+\.\d% \| \d+\.\d% \| \d+\.\d% \| \d+\.\d% \|$/gm)
        ?.length,
      2,
      "a greedy and a sampled row",
    );
    assert.ok(
      text.endsWith(
        "<!-- notes: kept when the ablation is run again -->\nMy reading of the last run.\n",
      ),
      text,
    );
    assert.ok(!text.includes("# old"));
    for (const variant of ["full", "no-tan", "no-cross", "neither"])
      assert.ok(existsSync(join(folder, "ablation", variant, "results.json")), variant);
    const results = JSON.parse(
      readFileSync(join(folder, "ablation", "neither", "results.json"), "utf8"),
    ) as { sampled?: { temperature: number; final?: Record<string, unknown> } };
    assert.equal(results.sampled?.temperature, 0.8);
    assert.ok(results.sampled?.final?.alfworld, "the sampled evaluation of the final model");
  });

  test("ablation with --variant and --seeds: one run per arm and seed, mean ± sd cells; --resume reads finished runs back", async () => {
    const out = join(folder, "results-seeds.md");
    const parent = join(folder, "ablation-seeds");
    const args = [
      "ablation",
      "--config",
      configFile,
      "--run-dir",
      parent,
      "--out",
      out,
      "--set",
      "rl.steps=1",
      "--set",
      "evaluation.every=0",
      "--set",
      "evaluation.sampled=false",
    ];
    const arms = [
      "--variant",
      "base:",
      "--variant",
      "greedy-rollout: rl.temperature=0.5 crossPolicy.staleProbability=0",
      "--seeds",
      "3,4",
      "--title",
      "Two arms",
    ];
    const run = await agentrl([...args, ...arms], 600_000);
    assert.equal(run.code, 0, run.stderr + run.stdout);
    const text = readFileSync(out, "utf8");
    assert.match(text, /^# Two arms$/m);
    assert.match(text, /seeds 3, 4: mean ± sample sd/);
    assert.match(
      text,
      /greedy-rollout \(`rl\.temperature=0\.5` `crossPolicy\.staleProbability=0`\)/,
    );
    assert.match(text, /^\| task \| after warm start \| base \| greedy-rollout \|$/m);
    // Two seeds: every cell is mean ± sd (± 0.0 when the seeds agree).
    assert.match(
      text,
      /^\| alfworld \| \d+\.\d ± \d+\.\d% \| \d+\.\d ± \d+\.\d% \| \d+\.\d ± \d+\.\d% \|$/m,
    );
    for (const folderName of ["base-3", "base-4", "greedy-rollout-3", "greedy-rollout-4"])
      assert.ok(existsSync(join(parent, folderName, "results.json")), folderName);
    const config = (name: string) => readFileSync(join(parent, name, "config.yaml"), "utf8");
    assert.match(config("greedy-rollout-4"), /seed: 4/);
    assert.match(config("greedy-rollout-4"), /temperature: 0\.5/);
    assert.match(config("base-3"), /seed: 3/);
    const stepsBefore = metricSteps(join(parent, "base-3"));
    const again = await agentrl([...args, ...arms, "--resume"], 600_000);
    assert.equal(again.code, 0, again.stderr + again.stdout);
    assert.deepEqual(
      metricSteps(join(parent, "base-3")),
      stepsBefore,
      "a finished run is not trained again",
    );
    assert.equal(readFileSync(out, "utf8"), text);
    const bad = await agentrl(["ablation", "--variant", "no colon here"]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /--variant must be "NAME: key=value \.\.\."/);
  });

  test("eval on the saved model prints success per task, and valid JSON with --json", async () => {
    const model = join(runDirectory, "checkpoints", "step-000003", "policy");
    if (!existsSync(model)) return assert.fail("the train test did not leave a model");
    const args = [
      "eval",
      "--model",
      model,
      "--tasks",
      "alfworld,webshop",
      "--limit",
      "2",
      "--max-turns",
      "2",
      "--max-new-tokens",
      "8",
      "--concurrency",
      "4",
    ];
    const text = await agentrl(args);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /^task\s+instances\s+success\s+pass@1\s+reward\s+turns$/m);
    assert.match(text.stdout, /^alfworld\s+2\s+\d+\.\d%/m);
    assert.match(text.stdout, /^webshop\s+2\s+\d+\.\d%/m);

    const json = await agentrl([...args, "--samples", "2", "--temperature", "1", "--json"]);
    assert.equal(json.code, 0, json.stderr);
    const parsed = JSON.parse(json.stdout) as {
      samples: number;
      tasks: Record<
        string,
        {
          instances: number;
          episodes: number;
          success: number;
          passAtK: number;
          meanReward: number;
        }
      >;
    };
    assert.equal(parsed.samples, 2);
    assert.deepEqual(Object.keys(parsed.tasks).sort(), ["alfworld", "webshop"]);
    for (const result of Object.values(parsed.tasks)) {
      assert.equal(result.instances, 2);
      assert.equal(result.episodes, 4);
      assert.ok(
        result.success >= 0 && result.success <= 1 && result.passAtK >= result.success - 1e-9,
      );
      assert.ok(Number.isFinite(result.meanReward));
    }
  });

  test("a config with an unknown key or a wrong type fails with exit code 1, naming the key and the file", async () => {
    const unknown = join(folder, "unknown.yaml");
    writeFileSync(unknown, "rl:\n  steps: 2\n  learningRat: 0.1\n");
    const first = await agentrl(["train", "--config", unknown, "--run-dir", join(folder, "never")]);
    assert.equal(first.code, 1);
    assert.match(first.stderr, /ConfigError: invalid configuration in .*unknown\.yaml/);
    assert.match(first.stderr, /unknown key "rl\.learningRat"/);

    const wrong = join(folder, "wrong.yaml");
    writeFileSync(wrong, "tasks:\n  - name: kg\n    weight: heavy\n");
    const second = await agentrl(["train", "--config", wrong, "--run-dir", join(folder, "never")]);
    assert.equal(second.code, 1);
    assert.ok(second.stderr.includes(wrong), second.stderr);
    assert.match(second.stderr, /tasks\[0\]\.weight: .*expected number/);
    assert.ok(!existsSync(join(folder, "never")), "nothing was started");
  });
});

test("SIGINT stops an async run after a checkpoint at the step reached; --resume would continue from it", async () => {
  const folder = mkdtempSync(join(tmpdir(), "agentrl-train-sigint-"));
  const configFile = join(folder, "long.yaml");
  writeFileSync(
    configFile,
    TINY_CONFIG.replace("mode: sync", "mode: async")
      .replace("steps: 2\n  batchGroups", "steps: 200\n  batchGroups")
      .replace("warmStart:\n  steps: 2", "warmStart:\n  enabled: false\n  steps: 2")
      .replace("every: 2\n  limit", "every: 0\n  limit")
      .replace("checkpoint:\n  every: 1", "checkpoint:\n  every: 50"),
  );
  const runDirectory = join(folder, "run");
  const child = spawn(
    process.execPath,
    [
      "--conditions=source",
      "--import",
      "tsx",
      MAIN,
      "train",
      "--config",
      configFile,
      "--run-dir",
      runDirectory,
    ],
    { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] },
  );
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => (stdout += chunk));
  const interrupted = new Promise<void>((resolve) => {
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
      if (/RL: step [1-9]\d*\/200/.test(stderr) && !child.killed) {
        child.kill("SIGINT");
        resolve();
      }
    });
  });
  const timer = setTimeout(() => child.kill("SIGKILL"), 180_000);
  const code = await new Promise<number | null>((resolve) =>
    child.on("exit", (exitCode) => resolve(exitCode)),
  );
  clearTimeout(timer);
  await Promise.race([interrupted, Promise.resolve()]);
  assert.equal(code, 0, stderr + stdout);
  assert.match(stdout, /SIGINT: stopping after the current step/);
  const stopped = /stopped at RL step (\d+) with a checkpoint/.exec(stdout);
  assert.ok(stopped, stdout);
  const step = Number(stopped[1]);
  assert.ok(step >= 1 && step < 200);
  assert.ok(
    existsSync(
      join(
        runDirectory,
        "checkpoints",
        `step-${String(step).padStart(6, "0")}`,
        "policy",
        "model.safetensors",
      ),
    ),
    "a checkpoint at the step reached, though checkpoint.every is 50",
  );
  assert.equal(metricSteps(runDirectory).at(-1), step);
});

test("docs/config.md is generated from the current schema (run scripts/generate-config-docs.ts)", () => {
  assert.equal(readFileSync(CONFIG_DOCS_PATH, "utf8"), renderConfigDocs());
});

test("every examples/*.yaml is a valid configuration", async () => {
  const { loadConfig } = await import("../packages/trainer/src/run/config.ts");
  const examples = readdirSync(join(ROOT, "examples")).filter((name) => name.endsWith(".yaml"));
  assert.ok(
    examples.includes("ablation.yaml") && examples.includes("five-tasks.yaml"),
    examples.join(", "),
  );
  for (const name of examples) {
    const config = await loadConfig({ file: join(ROOT, "examples", name) });
    assert.ok(config.tasks.length > 0, name);
  }
});
