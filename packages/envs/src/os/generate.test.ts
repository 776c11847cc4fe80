import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateOsSample, generateOsSamples, OS_GENERATED_OFFSET } from "./generate.js";
import { answersExample, isAnswerGraded, newTopLevelFolders, osDifficulty } from "./data.js";
import { osSamples } from "./index.js";
import type { OsSample } from "./data.js";

/** AgentBench's data, where the project's setup puts it. */
const AGENTBENCH = join(import.meta.dirname, "../../../../../shared/data/agentbench");

test("generated OS tasks: a constant cannot win (the most frequent of 2,000 answers is under 5 %; AgentBench's held-out `3` is 22 %)", () => {
  const samples = generateOsSamples(2000, 0);
  const counts = new Map<string, number>();
  for (const sample of samples)
    counts.set(sample.expectedAnswer!, (counts.get(sample.expectedAnswer!) ?? 0) + 1);
  const [top, topCount] = [...counts].sort((a, b) => b[1] - a[1])[0];
  assert.ok(topCount / samples.length < 0.05, `answer ${top} is ${topCount} of 2000`);
  assert.ok((counts.get("3") ?? 0) / samples.length < 0.05);
  assert.ok(counts.size > 300, `${counts.size} distinct answers`);
  // Every kind is drawn; within a kind the answer still varies (no kind is won by a constant).
  const kinds = new Map<string, Map<string, number>>();
  for (const sample of samples) {
    const answers = kinds.get(sample.labels[1]) ?? new Map<string, number>();
    kinds.set(sample.labels[1], answers);
    answers.set(sample.expectedAnswer!, (answers.get(sample.expectedAnswer!) ?? 0) + 1);
  }
  assert.equal(kinds.size, 23);
  for (const [kind, answers] of kinds) {
    const total = [...answers.values()].reduce((sum, count) => sum + count, 0);
    assert.ok(total > 15, `${kind}: ${total}`);
    assert.ok(Math.max(...answers.values()) / total < 0.25, `${kind}: ${[...answers]}`);
  }
  // Names, not only numbers, are answers.
  assert.ok(samples.filter((s) => !/^\d+$/.test(s.expectedAnswer!)).length > 250);
});

/** The ten application words of the first generator, which a model trained on it wrote into AgentBench's questions (docs/warmstart.md, run R1). */
const FIRST_GENERATOR_WORDS =
  /\b(nginx|billing|indexer|mailer|scheduler|gateway|backup|crawler|ledger|reports)\b/;

test("generated OS tasks look like AgentBench's: home-folder paths named in words, the folder of the command copied from the question, no invented system paths", () => {
  const samples = generateOsSamples(2000, 0);
  const inHome = samples.filter((s) => /home directory|~\//.test(s.description)).length;
  assert.ok(inHome / samples.length > 0.75, `${inHome} of 2000 speak of the home directory`);
  const folders = new Set<string>();
  const uses = new Map<string, number>();
  for (const sample of samples) {
    const { description } = sample;
    const example = sample.example!.code;
    assert.doesNotMatch(description, FIRST_GENERATOR_WORDS);
    assert.doesNotMatch(example, FIRST_GENERATOR_WORDS);
    // Paths only where AgentBench's questions put files: the home folder, /home/student, /var/logs.
    for (const path of example.match(/(?<![\w.~])\/[\w./*-]+/g) ?? [])
      assert.match(path, /^\/(home\/student|var\/logs)(\/|$)/, `${path} in ${example}`);
    // The file or folder the command reads is named in the question: a row teaches copying it.
    for (const [, name] of example.matchAll(/(?:~|\/home\/student|\/var\/logs)\/([\w.-]+)/g)) {
      assert.ok(description.includes(name), `${name} of ${example} not in: ${description}`);
      folders.add(name);
      uses.set(name, (uses.get(name) ?? 0) + 1);
    }
  }
  // Many names, none common, so that the command's folder must be read rather than recalled.
  assert.ok(folders.size > 600, `${folders.size} distinct folder and file names`);
  const [top, count] = [...uses].sort((a, b) => b[1] - a[1])[0];
  const named = [...uses.values()].reduce((a, b) => a + b, 0);
  assert.ok(count / named < 0.03, `${top}: ${count} of ${named} named paths`);
});

test("generated OS tasks: difficulty 0 answer tasks graded against the example's output, deterministic per (seed, instance), other worlds differ", () => {
  const samples = generateOsSamples(200, 0);
  assert.deepEqual(
    samples.map((s) => s.index),
    samples.map((_, k) => OS_GENERATED_OFFSET + k),
  );
  for (const sample of samples) {
    assert.equal(sample.split, "train");
    assert.equal(osDifficulty(sample), 0, sample.example!.code);
    assert.equal(answersExample(sample), true);
    assert.equal(isAnswerGraded(sample), true);
    assert.ok(sample.description.length > 20);
  }
  assert.deepEqual(generateOsSample(17, 0), samples[17]);
  assert.notDeepEqual(generateOsSample(17, 1), samples[17]);
  const test = generateOsSamples(50, 0, "test");
  assert.equal(test[0].split, "test");
  assert.notDeepEqual(test[0].init, samples[0].init);
});

/** Runs a sample's init then its example in local bash, every absolute task folder, the home folder (`~`) and the working folder moved under `root`: what the example prints. */
function replayLocally(
  code: { init: string; example: string },
  root: string,
  options: { anyExit?: boolean } = {},
): string {
  const relocate = (script: string) =>
    script.replace(/(^|[\s>'"])\/(root|home|opt|srv|var|etc|tmp)(?=[/\s'"]|$)/gm, `$1${root}/$2`);
  mkdirSync(join(root, "root"), { recursive: true });
  const result = spawnSync(
    "bash",
    [
      "--norc",
      "--noprofile",
      "-c",
      `set -e\n${relocate(code.init)}\nset +e\n${relocate(code.example)}`,
    ],
    {
      encoding: "utf8",
      // The working folder is the task's root, as `/` is the container's: relative folders land there.
      cwd: root,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", LC_ALL: "C", HOME: join(root, "root") },
    },
  );
  if (!options.anyExit) assert.equal(result.status, 0, result.stderr);
  return result.stdout.trim();
}

/** Why the local replays cannot run here, if they cannot: they need GNU bash, find and touch -d. */
const REPLAY_SKIP =
  spawnSync("bash", ["-c", "touch -d '3 days ago' /dev/null 2>/dev/null; find --version"])
    .status === 0
    ? false
    : "needs GNU bash, find and touch -d";

/**
 * Replays every sample in local bash (replayLocally), each under a temporary folder of its own:
 * its example prints its expected answer, or (`mistakes`) its mistake does not.
 */
function assertReplaysLocally(
  samples: readonly OsSample[],
  options: { mistakes?: boolean } = {},
): void {
  const root = mkdtempSync(join(tmpdir(), "agentrl-os-generated-"));
  try {
    for (const sample of samples) {
      const script = (options.mistakes ? sample.mistake : sample.example)!.code;
      const printed = replayLocally(
        { init: sample.init[0].code, example: script },
        join(root, String(sample.index)),
        { anyExit: options.mistakes },
      );
      const detail = `${sample.labels[1]}: ${script}`;
      if (options.mistakes) assert.notEqual(printed, sample.expectedAnswer, detail);
      else assert.equal(printed, sample.expectedAnswer, `${detail} for ${sample.description}`);
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

test(
  "generated OS tasks: the example prints the expected answer (init and example replayed in local bash under a temporary folder, 230 instances)",
  { skip: REPLAY_SKIP },
  () => assertReplaysLocally(generateOsSamples(230, 3)),
);

test("generated OS tasks with generatedPlaces `stated`: home, absolute and working-folder paths, each written in the command as the question states it; `home` draws the same tasks as before", () => {
  const samples = generateOsSamples(2000, 0, "train", "stated");
  assert.deepEqual(generateOsSamples(300, 0, "train", "home"), generateOsSamples(300, 0));
  let home = 0;
  let absolute = 0;
  let relative = 0;
  for (const { description, example, init, extraFolders, mistake } of samples) {
    const code = example!.code;
    assert.doesNotMatch(code, FIRST_GENERATOR_WORDS);
    // Only folders writable under a read-only root (the samples ask for no tmpfs of their own).
    assert.deepEqual(newTopLevelFolders(`${init[0].code}\n${code}`), extraFolders, code);
    for (const path of code.match(/(?<![\w.~])\/[\w./*-]+/g) ?? []) {
      if (path.startsWith("/dev/")) continue;
      assert.match(path, /^\/(home\/student|var\/logs|var\/data|tmp|opt)\//, `${path} in ${code}`);
      // The absolute folder is written as the question states it.
      const folder = /^\/(home\/student|var\/logs|var\/data|tmp|opt)\/[\w.-]+/.exec(path)![0];
      assert.ok(description.includes(folder), `${folder} of ${code} not in: ${description}`);
    }
    if (/~\//.test(code)) {
      home += 1;
      assert.equal(mistake, undefined, code);
    } else if (/(?<![\w.~])\/(home\/student|var\/logs|var\/data|tmp|opt)\//.test(code)) {
      absolute += 1;
      assert.equal(mistake, undefined, code);
    } else {
      // A folder of the working folder: named with no place, written relative.
      const folder = /(?:\s|^)(?:cd )?([a-z][\w-]*)\//.exec(code)?.[1];
      if (folder === undefined) continue; // a task on one file of the home folder, not a folder
      relative += 1;
      assert.ok(description.includes(folder), `${folder} of ${code} not in: ${description}`);
      assert.doesNotMatch(description, /home (directory|folder)/, description);
      // The mistake a home-trained model makes: the same command with the folder under `~/`.
      assert.equal(mistake?.code.replaceAll(`~/${folder}`, folder), code, mistake?.code);
      assert.ok(mistake.code.includes(`~/${folder}`), mistake.code);
    }
  }
  // Folder kinds draw home 40 %, absolute 35 %, working folder 25 %; the home-file kinds add to home.
  assert.ok(
    absolute > 300 && relative > 200,
    `home ${home}, absolute ${absolute}, relative ${relative}`,
  );
  assert.ok(home > absolute, `home ${home}, absolute ${absolute}`);
});

test(
  "generated OS tasks with generatedPlaces `stated`: the example prints the expected answer (replayed in local bash, the working folder a temporary one, 150 instances)",
  { skip: REPLAY_SKIP },
  () => assertReplaysLocally(generateOsSamples(150, 4, "train", "stated")),
);

test(
  "generated OS tasks with generatedPlaces `stated`: a mistake (the working folder's folder written under `~/`) does not print the answer (replayed in local bash)",
  { skip: REPLAY_SKIP },
  () => {
    const samples = generateOsSamples(150, 4, "train", "stated").filter((s) => s.mistake);
    assert.ok(samples.length > 20, `${samples.length} samples with a mistake`);
    assertReplaysLocally(samples, { mistakes: true });
  },
);

test("osSamples: AgentBench's samples, then generatedSize training and generatedTestSize test instances of world `seed`", (t) => {
  if (!existsSync(join(AGENTBENCH, "os_interaction"))) {
    t.skip(`needs AgentBench's data in ${AGENTBENCH}`);
    return;
  }
  const agentBench = osSamples({ dataDir: AGENTBENCH });
  assert.equal(agentBench.filter((s) => s.labels.includes("generated")).length, 0, "default 0");
  const samples = osSamples({
    dataDir: AGENTBENCH,
    generatedSize: 40,
    generatedTestSize: 5,
    seed: 2,
  });
  assert.equal(samples.length, agentBench.length + 45);
  const generated = samples.filter((s) => s.labels.includes("generated"));
  assert.deepEqual(generated.slice(0, 40), generateOsSamples(40, 2));
  assert.deepEqual(generated.slice(40), generateOsSamples(5, 2, "test"));
  const stated = osSamples({
    dataDir: AGENTBENCH,
    generatedSize: 40,
    generatedPlaces: "stated",
    seed: 2,
  });
  assert.deepEqual(
    stated.filter((s) => s.labels.includes("generated")),
    generateOsSamples(40, 2, "train", "stated"),
  );
  assert.throws(
    () => osSamples({ dataDir: AGENTBENCH, generatedPlaces: "cwd" as never }),
    /generatedPlaces must be "home" or "stated", got "cwd"/,
  );
  // AgentBench's own split when not held out: every training.json sample trains.
  const own = osSamples({ dataDir: AGENTBENCH, holdOut: false });
  assert.ok(
    own.filter((s) => s.split === "train").length >
      agentBench.filter((s) => s.split === "train").length,
  );
});
