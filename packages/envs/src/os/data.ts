/**
 * AgentBench OS-interaction samples: loading, validation (zod) and normalisation.
 *
 * Files (in `<data>/os_interaction/`): `training.json` (1,000 samples, split `train`) and
 * `dev.json` (26 samples, split `test`). By default two in five training.json samples (index
 * mod 5 < 2, see `isHeldOut`) are held out into the test split as well: dev.json alone has 19
 * samples at difficulty 0, too few to measure a change of 10 points (one sample is 5.3). Scripts referred to by file name live in
 * `scripts/1/` for training.json (scripts/1..7 differ only in debug prints) and
 * `scripts/dev/` for dev.json. Sample indices: training.json i → i, dev.json j → 1000 + j.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { resolveAgentBenchDir, TaskDataError } from "../docker/agentbench.js";
import type { Split } from "../types.js";

/** Languages of AgentBench scripts; `c` and `c++` are compiled in the container (gcc / g++) and run. */
export type ScriptLanguage = "bash" | "python" | "c" | "c++";
const LANGUAGES: ScriptLanguage[] = ["bash", "python", "c", "c++"];

/** A script to run in the container. */
export interface Script {
  language: ScriptLanguage;
  code: string;
}

export interface OsSample {
  index: number;
  split: Split;
  description: string;
  /**
   * The AgentBench image the sample asks for: `create.local` (`default`, `packages`, …) or
   * `create.image`; `default` when it names none. See `OsFamilyOptions.images`.
   */
  image: string;
  /** Run in order before the agent acts (`bash -c` / `python3 -c`); a failure is a task error. */
  init: Script[];
  /** A background program started before the agent acts (its output discarded). */
  start?: Script;
  /** Graded by answer match: exact (after strip when `strip`) or regex search. */
  match?: { answer?: string; regex?: string; strip: boolean };
  /**
   * Graded by scripts run in the container: each gets the agent's answer and the outputs of
   * the scripts before it as arguments; `null` stands for the example solution. All must exit 0.
   */
  check?: Array<Script | null>;
  /** A working solution (bash), given for check-graded samples. */
  example?: Script;
  labels: string[];
  /**
   * Top-level folders the sample writes to that are not among the sandbox's writable folders
   * (`WRITABLE_FOLDERS`), e.g. `/assignment`: they get a tmpfs of their own.
   */
  extraFolders: string[];
  /** Files the sample writes directly in a read-only image folder (e.g. `/usr/stock.log`): each is bound to a file of its own. */
  extraFiles: string[];
  /** The answer the example prints, when known without running it (generated tasks, generate.ts). */
  expectedAnswer?: string;
  /**
   * A plausible first command that fails (generated tasks whose folder is the working folder's:
   * the example with the folder written under `~/`). A recovering expert runs it first, untrained
   * on, then the example (`OsFamilyOptions.generatedRecovery`).
   */
  mistake?: Script;
}

const scriptObject = z.union([
  z.string(),
  z.object({
    language: z.string().optional(),
    file: z.string().optional(),
    code: z.string().optional(),
  }),
]);

const rawSample = z.object({
  description: z.string(),
  create: z.unknown().optional(),
  start: scriptObject.optional(),
  evaluation: z.object({
    match: z
      .union([
        z.string(),
        z.object({
          answer: z.string().optional(),
          regex: z.string().optional(),
          strip: z.boolean().optional(),
        }),
      ])
      .optional(),
    check: z.union([z.array(scriptObject.nullable()), scriptObject]).optional(),
    example: scriptObject.optional(),
  }),
  labels: z.array(z.string()).optional(),
});

type RawScript = z.infer<typeof scriptObject>;

export const TRAIN_FILE = "training.json";
export const TEST_FILE = "dev.json";
/** Index offset of dev.json samples. */
export const TEST_OFFSET = 1000;

function loadScript(raw: RawScript, scriptDir: string): Script {
  if (typeof raw === "string") return { language: "bash", code: raw };
  const language = (raw.language ?? "bash") as ScriptLanguage;
  if (!LANGUAGES.includes(language))
    throw new TaskDataError(`unsupported script language "${language}"`);
  if (raw.file !== undefined)
    return { language, code: readFileSync(join(scriptDir, raw.file), "utf8") };
  if (raw.code !== undefined) return { language, code: raw.code };
  throw new TaskDataError("a script object needs `file` or `code`");
}

function normalise(
  raw: z.infer<typeof rawSample>,
  index: number,
  split: Split,
  scriptDir: string,
): OsSample {
  const sample: OsSample = {
    index,
    split,
    description: raw.description,
    image: "default",
    init: [],
    labels: raw.labels ?? [],
    extraFolders: [],
    extraFiles: [],
  };
  // AgentBench's forms of `create`: absent; an object with `local` or `image` and `init` (one
  // script or a list; a script is a string, or an object with `code` or a `file` under the
  // script folder); anything else (e.g. a list) counts as absent, as the original reads it.
  const create = raw.create;
  if (create && typeof create === "object" && !Array.isArray(create)) {
    const { local, image, init } = create as { local?: unknown; image?: unknown; init?: unknown };
    if (typeof image === "string") sample.image = image;
    else if (typeof local === "string") sample.image = local;
    const list = Array.isArray(init) ? init : [init];
    sample.init = list
      .filter((item) => item !== null && item !== undefined)
      .map((item) => loadScript(scriptObject.parse(item), scriptDir));
  }
  if (raw.start !== undefined) sample.start = loadScript(raw.start, scriptDir);
  const evaluation = raw.evaluation;
  if (evaluation.match !== undefined) {
    sample.match =
      typeof evaluation.match === "string"
        ? { answer: evaluation.match, strip: true }
        : {
            answer: evaluation.match.answer,
            regex: evaluation.match.regex,
            strip: evaluation.match.strip ?? false,
          };
  } else if (evaluation.check !== undefined) {
    const list = Array.isArray(evaluation.check) ? evaluation.check : [evaluation.check];
    sample.check = list.map((item) => (item === null ? null : loadScript(item, scriptDir)));
    if (evaluation.example !== undefined)
      sample.example = loadScript(evaluation.example, scriptDir);
    if (sample.check.includes(null) && !sample.example)
      throw new TaskDataError(`sample ${index} checks against an example it does not give`);
  } else {
    throw new TaskDataError(`sample ${index} has neither evaluation.match nor evaluation.check`);
  }
  const text = [
    sample.description,
    ...sample.init,
    sample.start,
    sample.example,
    ...(sample.check ?? []),
  ]
    .map((item) => (typeof item === "string" ? item : (item?.code ?? "")))
    .join("\n");
  sample.extraFolders = newTopLevelFolders(text);
  sample.extraFiles = readOnlyFilesWritten(text);
  return sample;
}

/** Top-level folders of the image (they exist; writes there other than the writable folders fail). */
const IMAGE_TOP_LEVEL = new Set([
  "bin",
  "boot",
  "dev",
  "etc",
  "home",
  "lib",
  "lib64",
  "media",
  "mnt",
  "opt",
  "proc",
  "root",
  "run",
  "sbin",
  "srv",
  "sys",
  "tmp",
  "usr",
  "var",
]);

/**
 * Folders at the top of the file system that `text` creates or writes into (`mkdir /x`,
 * `> /x/file`, `cd /x`, `touch /x/file`, …) and the image does not have.
 */
export function newTopLevelFolders(text: string): string[] {
  const found = new Set<string>();
  for (const match of text.matchAll(
    /(?:>>?|mkdir(?:\s+-p)?|touch|cd|tee(?:\s+-a)?|cp\s+(?:-\w+\s+)*\S+|mv\s+\S+)\s+["']?\/([\w.-]+)\//g,
  )) {
    if (!IMAGE_TOP_LEVEL.has(match[1])) found.add(`/${match[1]}`);
  }
  for (const match of text.matchAll(
    /(?:mkdir(?:\s+-p)?|cd)\s+["']?\/([\w.-]+)(?=["'\s;&|)]|$)/gm,
  )) {
    if (!IMAGE_TOP_LEVEL.has(match[1])) found.add(`/${match[1]}`);
  }
  return [...found].sort();
}

/** Files directly in a read-only image folder (/usr, /lib, /bin, …) that `text` writes with `>` or `>>`. */
export function readOnlyFilesWritten(text: string): string[] {
  const found = new Set<string>();
  for (const match of text.matchAll(
    />>?\s*["']?(\/(?:usr|lib|lib64|bin|sbin|boot|srv)\/[\w.-]+)(?=["'\s;&|)]|$)/gm,
  ))
    found.add(match[1]);
  return [...found].sort();
}

/** Reads a problem file as AgentBench does: a JSON list, one JSON object, or JSON lines (`.jsonl`). */
function readProblemFile(path: string): unknown {
  const text = readFileSync(path, "utf8");
  if (path.endsWith(".jsonl"))
    return text
      .split("\n")
      .filter((line) => line.trim())
      .map((line) => JSON.parse(line) as unknown);
  const parsed = JSON.parse(text) as unknown;
  return Array.isArray(parsed) ? parsed : [parsed];
}

function loadFile(
  folder: string,
  file: string,
  scriptDir: string,
  split: Split,
  offset: number,
): OsSample[] {
  const path = join(folder, file);
  let parsed: unknown;
  try {
    parsed = readProblemFile(path);
  } catch (error) {
    throw new TaskDataError(`cannot read ${path}: ${(error as Error).message}`);
  }
  const list = z.array(rawSample).safeParse(parsed);
  if (!list.success)
    throw new TaskDataError(
      `${path} is not a list of OS samples: ${list.error.message.slice(0, 500)}`,
    );
  return list.data.map((raw, position) => normalise(raw, offset + position, split, scriptDir));
}

/** Whether training.json sample `index` is held out for testing (2 in 5: index mod 5 < 2). */
export function isHeldOut(index: number): boolean {
  return index < TEST_OFFSET && index % 5 < 2;
}

/**
 * All OS samples, from `dataDir` (the AgentBench folder) or the default: dev.json first (split
 * `test`), then training.json, whose held-out samples (`isHeldOut`) are in split `test` too
 * unless `holdOut` is false (then the test split is dev.json alone, as in AgentBench).
 */
export function loadOsSamples(dataDir?: string, holdOut = true): OsSample[] {
  const folder = resolveAgentBenchDir("os_interaction", dataDir);
  const training = loadFile(folder, TRAIN_FILE, join(folder, "scripts", "1"), "train", 0);
  if (holdOut) for (const sample of training) if (isHeldOut(sample.index)) sample.split = "test";
  return [
    ...loadFile(folder, TEST_FILE, join(folder, "scripts", "dev"), "test", TEST_OFFSET),
    ...training,
  ];
}

/**
 * AgentBench OS samples no answer can solve, in the original as here: their check script
 * cannot parse their own example's output (so the expert, and every agent, scores 0). Gold
 * replays report them apart; `os.test.ts` shows #1008's on a real container. (#540 and #683
 * fail the expert's replay only: their example changes the files it counts, so the check's
 * re-run of it counts otherwise; an agent that leaves the files alone can pass.)
 */
export const UNSOLVABLE_OS_SAMPLES: Readonly<Record<number, string>> = {
  252: "the example prints two counts (files, then folders: `0\n1`), which integer-match.py cannot read as one integer (int() raises ValueError)",
  1008: "`du -sh /home` prints a size under 10 units with a decimal (`8.0K` on the original's overlay root, `4.0K` on a tmpfs), and size-match.py parses it with int('8.0'), which raises ValueError, for any answer",
};

/** Whether the sample is graded against the example's output (the agent must answer a value). */
export function answersExample(sample: OsSample): boolean {
  return sample.check?.includes(null) ?? false;
}

/** Whether the sample is graded on the agent's answer (a match, or checks against the example's output), not on the container's state. */
export function isAnswerGraded(sample: OsSample): boolean {
  return sample.match !== undefined || answersExample(sample);
}

/**
 * Difficulty levels, from the sample alone:
 * - 0: the answer is the output of a one-line example (one bash call, then answer);
 * - 1: the answer is the output of a multi-line example script;
 * - 2: graded on the container's state or by exact match (change the system, then finish;
 *      or observe a background program).
 */
export function osDifficulty(sample: OsSample): number {
  if (answersExample(sample) && sample.example)
    return sample.example.code.trim().includes("\n") ? 1 : 0;
  return 2;
}
