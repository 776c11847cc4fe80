import { test } from "node:test";
import assert from "node:assert/strict";
import { PhaseProgress, formatPerTask, formatSeconds } from "./progress.js";

/** A stream that collects what is written (not a TTY: plain lines). */
function collector(): { stream: NodeJS.WriteStream; lines: string[] } {
  const lines: string[] = [];
  const stream = {
    isTTY: false,
    write: (text: string) => (lines.push(text.trimEnd()), true),
  } as unknown as NodeJS.WriteStream;
  return { stream, lines };
}

test("plain progress lines carry the phase, the count, an ETA and the status; a resumed phase paces from its first value", async () => {
  const { stream, lines } = collector();
  const progress = new PhaseProgress("RL", 10, "step", { stream });
  progress.update(4, "first");
  await new Promise((resolve) => setTimeout(resolve, 50));
  progress.update(5, `success ${formatPerTask({ kg: 0.5, webshop: 0.25 })}`);
  progress.stop();
  assert.equal(lines.length, 2);
  assert.equal(lines[0], "RL: step 4/10 | ETA ? | first");
  const match = /^RL: step 5\/10 \| ETA (\d+)s \| success kg 0\.50 webshop 0\.25$/.exec(lines[1]);
  assert.ok(match, lines[1]);
  assert.ok(Number(match[1]) <= 2, "5 steps left at ~50 ms per step");
});

test("plain progress respects the minimum interval but always prints the last update", () => {
  const { stream, lines } = collector();
  const progress = new PhaseProgress("eval", 3, "episode", { stream, minimumIntervalMs: 60_000 });
  progress.update(1);
  progress.update(2);
  progress.update(3);
  assert.deepEqual(
    lines.map((l) => l.split(" |")[0]),
    ["eval: episode 1/3", "eval: episode 3/3"],
  );
});

test("formatSeconds", () => {
  assert.equal(formatSeconds(8.4), "8s");
  assert.equal(formatSeconds(75), "1m15s");
  assert.equal(formatSeconds(-3), "0s");
});
