import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { crc32c, TensorBoardWriter, readTensorBoardScalars, JsonlWriter } from "./logging.js";
import { lineChartSvg } from "../run/plot.js";

test("crc32c matches the Castagnoli check value", () => {
  assert.equal(crc32c(new TextEncoder().encode("123456789")), 0xe3069283);
});

test("TensorBoard event files round-trip scalars", () => {
  const folder = mkdtempSync(join(tmpdir(), "agentrl-tb-"));
  const writer = new TensorBoardWriter(folder);
  writer.scalars(1, { "reward/kg": 0.25, loss: 1.5, skipped: NaN });
  writer.scalars(2, { "reward/kg": 0.5 });
  writer.close();
  const [file] = readdirSync(folder);
  assert.match(file, /^events\.out\.tfevents\./);
  const scalars = readTensorBoardScalars(readFileSync(join(folder, file)));
  assert.deepEqual(scalars, [
    { step: 1, tag: "reward/kg", value: 0.25 },
    { step: 1, tag: "loss", value: 1.5 },
    { step: 2, tag: "reward/kg", value: 0.5 },
  ]);
});

test("JSONL metrics and the SVG plot", () => {
  const folder = mkdtempSync(join(tmpdir(), "agentrl-log-"));
  const jsonl = new JsonlWriter(join(folder, "metrics.jsonl"));
  jsonl.write({ step: 1, reward: 0.1 });
  jsonl.write({ step: 2, reward: 0.2 });
  const lines = readFileSync(jsonl.path, "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  assert.deepEqual(
    lines.map((l) => l.reward),
    [0.1, 0.2],
  );
  const svg = lineChartSvg(
    [
      {
        name: "kg <test>",
        points: [
          { x: 0, y: 0.1 },
          { x: 10, y: 0.6 },
        ],
      },
    ],
    { title: "success", xLabel: "step", yLabel: "success" },
  );
  assert.match(svg, /^<svg/);
  assert.match(svg, /kg &lt;test&gt;/);
  assert.equal((svg.match(/<circle/g) ?? []).length, 2);
});
