/**
 * Executes the notebooks (notebooks/*.ipynb) headless with the tslab kernel through
 * scripts/run-notebooks.sh, and checks what they printed and drew. Skips, saying why, when
 * Jupyter or the tslab kernel is missing (`bash scripts/setup.sh` installs both; CI has them).
 */
import { describe, test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const SCRIPT = join(root, "scripts", "run-notebooks.sh");
/** run-notebooks.sh's exit code for "a prerequisite is missing". */
const MISSING_PREREQUISITE = 77;

interface Output {
  output_type: "stream" | "display_data" | "execute_result" | "error";
  name?: "stdout" | "stderr";
  text?: string | string[];
  data?: Record<string, string | string[]>;
}
interface Cell {
  cell_type: "code" | "markdown" | "raw";
  source: string | string[];
  outputs?: Output[];
}
interface Notebook {
  cells: Cell[];
  metadata: { kernelspec?: { name?: string } };
}

const joined = (value: string | string[] | undefined): string =>
  Array.isArray(value) ? value.join("") : (value ?? "");

/** Runs the script on `notebooks`; returns its exit code, its output and the output folder. */
function runNotebooks(
  notebooks: string[],
  environment: Record<string, string> = {},
): { code: number; log: string; outputDirectory: string } {
  const outputDirectory = mkdtempSync(join(tmpdir(), "agentrl-notebooks-test-"));
  const result = spawnSync("bash", [SCRIPT, ...notebooks], {
    cwd: root,
    encoding: "utf8",
    env: { ...process.env, NOTEBOOK_OUTPUT_DIR: outputDirectory, ...environment },
    timeout: 20 * 60_000,
  });
  return { code: result.status ?? -1, log: `${result.stdout}${result.stderr}`, outputDirectory };
}

/** Skips the test (with the script's reason) when Jupyter or tslab is missing; true if skipped. */
function skippedForMissingPrerequisite(
  t: TestContext,
  run: { code: number; log: string },
): boolean {
  if (run.code !== MISSING_PREREQUISITE) return false;
  t.skip(`notebooks not run: ${run.log.trim().split("\n").pop()}`);
  return true;
}

/** All text a notebook's code cells printed (stdout and stderr), and its outputs in order. */
function readExecuted(path: string): { notebook: Notebook; text: string; outputs: Output[] } {
  const notebook = JSON.parse(readFileSync(path, "utf8")) as Notebook;
  const outputs = notebook.cells.flatMap((cell) => cell.outputs ?? []);
  const text = outputs.map((output) => joined(output.text)).join("");
  return { notebook, text, outputs };
}

/** Checks shared by every notebook: tslab kernel, every code cell ran and printed, no error anywhere. */
function assertCleanRun(name: string, executed: ReturnType<typeof readExecuted>): void {
  assert.equal(executed.notebook.metadata.kernelspec?.name, "tslab", `${name}: kernel`);
  const codeCells = executed.notebook.cells.filter((cell) => cell.cell_type === "code");
  assert.ok(codeCells.length >= 5, `${name}: ${codeCells.length} code cells`);
  codeCells.forEach((cell, index) => {
    assert.ok(
      (cell.outputs ?? []).length > 0,
      `${name}: code cell ${index} has no output:\n${joined(cell.source).slice(0, 200)}`,
    );
  });
  assert.deepEqual(
    executed.outputs.filter((output) => output.output_type === "error"),
    [],
    `${name}: error outputs`,
  );
  const stderr = executed.outputs
    .filter((output) => output.name === "stderr")
    .map((output) => joined(output.text))
    .join("");
  assert.doesNotMatch(
    stderr,
    /Error|evalmachine|unexpected error/,
    `${name}: stderr shows an error:\n${stderr}`,
  );
  const svgs = executed.outputs
    .filter((output) => output.data?.["image/svg+xml"])
    .map((output) => joined(output.data!["image/svg+xml"]));
  assert.equal(svgs.length, 2, `${name}: two charts`);
  for (const svg of svgs)
    assert.match(
      svg,
      /^<svg[\s\S]*<path d="M[\d.]+,[\d.]+ L[\s\S]*<\/svg>$/,
      `${name}: a chart with a line`,
    );
}

describe("notebooks (tslab, headless)", { timeout: 25 * 60_000 }, () => {
  test("the runner exits 77 (skip) and says what to install when Jupyter is missing", () => {
    const run = runNotebooks(["notebooks/quickstart.ipynb"], {
      NOTEBOOK_PYTHON: "/nonexistent/python3",
    });
    assert.equal(run.code, MISSING_PREREQUISITE, run.log);
    assert.match(run.log, /missing: Python's nbclient .*; run 'bash scripts\/setup\.sh'/);
  });

  test("the runner fails on a type error and on a throwing cell, and names the failing cell", (t) => {
    const folder = mkdtempSync(join(tmpdir(), "agentrl-bad-notebooks-"));
    const notebook = (cells: string[]) => ({
      cells: cells.map((source) => ({
        cell_type: "code",
        execution_count: null,
        metadata: {},
        outputs: [],
        source,
      })),
      metadata: {
        kernelspec: { name: "tslab", display_name: "TypeScript", language: "typescript" },
      },
      nbformat: 4,
      nbformat_minor: 4,
    });
    writeFileSync(
      join(folder, "type-error.ipynb"),
      JSON.stringify(notebook(['console.log("first")', 'const count: number = "three";'])),
    );
    writeFileSync(
      join(folder, "throws.ipynb"),
      JSON.stringify(
        notebook([
          'console.log("first")',
          'throw new Error("boom from a cell")',
          'console.log("never printed")',
        ]),
      ),
    );
    const run = runNotebooks([join(folder, "type-error.ipynb"), join(folder, "throws.ipynb")]);
    if (skippedForMissingPrerequisite(t, run)) return;
    assert.equal(run.code, 1, run.log);
    assert.match(run.log, /type-error\.ipynb: FAILED/);
    assert.match(run.log, /not assignable to type 'number'/);
    assert.match(run.log, /throws\.ipynb: FAILED/);
    assert.match(run.log, /boom from a cell/);
    const written = readExecuted(join(run.outputDirectory, "throws.ipynb"));
    assert.match(written.text, /first/);
    assert.doesNotMatch(written.text, /never printed/);
  });

  test("the kernel preload: a socket's receive during its pending bind waits for the bind (zeromq alone throws EBUSY)", () => {
    const script = `
      const { dirname } = require("node:path");
      if (process.argv[1] === "mended") require(${JSON.stringify(join(root, "scripts", "tslab-zeromq-binds.cjs"))});
      const zmq = require(require.resolve("zeromq", { paths: [dirname(require.resolve("tslab/package.json"))] }));
      (async () => {
        const router = new zmq.Router();
        const bound = router.bind("tcp://127.0.0.1:0");
        let received;
        try { received = router.receive(); } catch (error) { console.log("threw " + error.code); router.close(); return; }
        await bound;
        const dealer = new zmq.Dealer();
        dealer.connect(router.lastEndpoint);
        await dealer.send("hello");
        const [, body] = await received;
        console.log("received " + body);
        router.close(); dealer.close();
      })();`;
    const run = (mode: string) =>
      spawnSync(process.execPath, ["-e", script, mode], {
        cwd: root,
        encoding: "utf8",
        timeout: 30_000,
      });
    const plain = run("plain");
    assert.equal(plain.stdout.trim(), "threw EBUSY", `${plain.stdout}${plain.stderr}`);
    const mended = run("mended");
    assert.equal(mended.stdout.trim(), "received hello", `${mended.stdout}${mended.stderr}`);
  });

  test("a kernel that never answers is retried once, then fails the notebook", (t) => {
    // A kernel spec named tslab, first on JUPYTER_PATH, whose process exits at once: no cell starts.
    const jupyterPath = mkdtempSync(join(tmpdir(), "agentrl-dead-kernel-"));
    mkdirSync(join(jupyterPath, "kernels", "tslab"), { recursive: true });
    writeFileSync(
      join(jupyterPath, "kernels", "tslab", "kernel.json"),
      JSON.stringify({
        argv: ["/bin/sh", "-c", "exit 3", "{connection_file}"],
        display_name: "dead",
        language: "typescript",
      }),
    );
    const run = runNotebooks(["notebooks/quickstart.ipynb"], { JUPYTER_PATH: jupyterPath });
    if (skippedForMissingPrerequisite(t, run)) return;
    assert.equal(run.code, 1, run.log);
    assert.equal(
      run.log.match(/the kernel did not start, or tslab saw files change under it; retrying once/g)
        ?.length,
      1,
      run.log,
    );
    assert.match(run.log, /quickstart\.ipynb: FAILED/);
  });

  test("quickstart and your-own-task run to the end: expert, model, supervised and RL steps, charts", (t) => {
    const run = runNotebooks(["notebooks/quickstart.ipynb", "notebooks/your-own-task.ipynb"]);
    if (skippedForMissingPrerequisite(t, run)) return;
    assert.equal(run.code, 0, run.log);

    const quickstart = readExecuted(join(run.outputDirectory, "quickstart.ipynb"));
    assertCleanRun("quickstart", quickstart);
    assert.match(
      quickstart.text,
      /\[assistant\] → take_action\(/,
      "the expert's tool call is shown",
    );
    assert.match(
      quickstart.text,
      /status completed, reward 1, turns 1/,
      "the expert solves its episode",
    );
    const losses =
      /loss per assistant token: ([\d. →]+)/.exec(quickstart.text)?.[1].split(" → ").map(Number) ??
      [];
    assert.ok(losses.length >= 2 && losses.every(Number.isFinite), `supervised losses: ${losses}`);
    assert.ok(losses.at(-1)! < losses[0], `the supervised loss goes down: ${losses}`);
    assert.match(quickstart.text, /RL step 1: reward -?[\d.]+/);
    assert.match(quickstart.text, /policy version \d+ after \d+ RL steps/);

    const ownTask = readExecuted(join(run.outputDirectory, "your-own-task.ipynb"));
    assertCleanRun("your-own-task", ownTask);
    for (const difficulty of [0, 1, 2]) {
      assert.match(
        ownTask.text,
        new RegExp(
          `difficulty ${difficulty}: expert success 1\\.00 in ${difficulty + 2}\\.0 turns; wrong agent 0\\.00`,
        ),
      );
    }
    assert.match(ownTask.text, /\[tool\] Correct\./);
    assert.match(ownTask.text, /RL step 1: reward -?[\d.]+/);
  });

  test("train-your-agent runs to the end: an AI SDK agent trained unmodified through the gateway", (t) => {
    const run = runNotebooks(["notebooks/train-your-agent.ipynb"]);
    if (skippedForMissingPrerequisite(t, run)) return;
    assert.equal(run.code, 0, run.log);
    const executed = readExecuted(join(run.outputDirectory, "train-your-agent.ipynb"));
    assert.equal(executed.notebook.metadata.kernelspec?.name, "tslab");
    assert.deepEqual(
      executed.outputs.filter((output) => output.output_type === "error"),
      [],
    );
    assert.match(
      executed.text,
      /an episode: \d+ model calls, tools [\w, ]*; answer .*; reward -?[\d.]+/,
    );
    assert.match(executed.text, /step 1: reward -?[\d.]+, success [\d.]+/);
    assert.match(executed.text, /policy version \d+ after 2 steps/);
    // Every step that trained: the trainer's scoring equals the sampler's log-probs.
    const ratios = [...executed.text.matchAll(/importance ratios \[([\d.]+), ([\d.]+)\]/g)];
    assert.equal(ratios.length, 2, executed.text);
    for (const [, low, high] of ratios)
      if (Number(high) > 0)
        assert.ok(
          Math.abs(Number(low) - 1) < 0.01 && Math.abs(Number(high) - 1) < 0.01,
          `ratios [${low}, ${high}]`,
        );
    const svgs = executed.outputs.filter((output) => output.data?.["image/svg+xml"]);
    assert.equal(svgs.length, 1, "the reward chart");
  });
});
