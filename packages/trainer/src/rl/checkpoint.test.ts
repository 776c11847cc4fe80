import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync, readdirSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import {
  writeCheckpoint,
  latestCheckpoint,
  listCheckpoints,
  checkpointName,
  isCompleteModelFolder,
  trimMetrics,
  writeModelFolder,
} from "./checkpoint.js";

test("write, list, latest and prune", async () => {
  const root = mkdtempSync(join(tmpdir(), "agentrl-ckpt-"));
  for (const step of [1, 2, 3, 4]) {
    await writeCheckpoint(
      root,
      step,
      async (folder) => writeFileSync(join(folder, "state.json"), JSON.stringify({ step })),
      { keep: 2 },
    );
  }
  assert.deepEqual(
    (await listCheckpoints(root)).map((c) => c.step),
    [3, 4],
  );
  const latest = await latestCheckpoint(root);
  assert.equal(latest?.step, 4);
  assert.deepEqual(JSON.parse(readFileSync(join(latest!.folder, "state.json"), "utf8")), {
    step: 4,
  });
  assert.deepEqual(latest?.manifest.files, ["state.json"]);
});

test("a process SIGKILLed in the middle of a checkpoint write leaves the previous one intact", async () => {
  const root = mkdtempSync(join(tmpdir(), "agentrl-ckpt-kill-"));
  await writeCheckpoint(root, 1, async (folder) =>
    writeFileSync(join(folder, "weights.bin"), Buffer.alloc(1024, 1)),
  );
  const script = `
    import { writeCheckpoint } from ${JSON.stringify(fileURLToPath(new URL("./checkpoint.ts", import.meta.url)))};
    import { writeFileSync } from "node:fs";
    import { join } from "node:path";
    await writeCheckpoint(${JSON.stringify(root)}, 2, async (folder) => {
      writeFileSync(join(folder, "weights.bin"), Buffer.alloc(1 << 20, 2));
      process.stdout.write("writing\\n");
      await new Promise((resolve) => setTimeout(resolve, 60_000));
    });`;
  const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout.on("data", (chunk: Buffer) => {
      if (chunk.toString().includes("writing")) resolve();
    });
    child.on("exit", () => reject(new Error("child ended before writing")));
  });
  child.kill("SIGKILL");
  await new Promise((resolve) => child.on("exit", resolve));
  assert.ok(
    readdirSync(root).some((name) => name.includes(".tmp-")),
    "the half-written folder is there",
  );
  const latest = await latestCheckpoint(root);
  assert.equal(latest?.step, 1);
  assert.equal(readFileSync(join(latest!.folder, "weights.bin"))[0], 1);
  // The next write cleans the leftover.
  await writeCheckpoint(root, 3, async (folder) =>
    writeFileSync(join(folder, "weights.bin"), Buffer.alloc(8, 3)),
  );
  assert.ok(!readdirSync(root).some((name) => name.includes(".tmp-")));
  assert.ok(existsSync(join(root, checkpointName(3))));
});

test("a model folder counts only when written in full: a failed write leaves nothing accepted, a rewrite replaces it", async () => {
  const root = mkdtempSync(join(tmpdir(), "agentrl-model-folder-"));
  const model = join(root, "initial-model");
  await assert.rejects(
    writeModelFolder(model, async (folder) => {
      writeFileSync(join(folder, "config.json"), "{}");
      throw new Error("killed half-way");
    }),
  );
  assert.equal(isCompleteModelFolder(model), false);
  // A folder with config.json but no marker (an old-style, interrupted write) is not accepted either.
  writeFileSync(join(root, "config.json"), "{}");
  assert.equal(isCompleteModelFolder(root), false);
  await writeModelFolder(model, async (folder) =>
    writeFileSync(join(folder, "config.json"), JSON.stringify({ hidden_size: 8 })),
  );
  assert.equal(isCompleteModelFolder(model), true);
  assert.deepEqual(JSON.parse(readFileSync(join(model, "config.json"), "utf8")), {
    hidden_size: 8,
  });
  assert.deepEqual(
    readdirSync(root).filter((name) => name.includes(".tmp-")),
    [],
    "the failed write's temporary folder is gone after the next write",
  );
});

test("trimMetrics keeps the steps up to the checkpoint's and drops a torn last line", async () => {
  const root = mkdtempSync(join(tmpdir(), "agentrl-metrics-"));
  const path = join(root, "metrics.jsonl");
  writeFileSync(
    path,
    [1, 2, 3, 4].map((step) => JSON.stringify({ step, loss: step / 10 })).join("\n") +
      "\n" +
      '{"note": "no step"}\n{"step": 5, "lo',
  );
  await trimMetrics(path, 2);
  assert.deepEqual(
    readFileSync(path, "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line)),
    [{ step: 1, loss: 0.1 }, { step: 2, loss: 0.2 }, { note: "no step" }],
  );
});
