/**
 * Copy accuracy vs training minutes for a few architectures (choosing the warm start's preset):
 *   npm run bench -- copy
 *   AGENTRL_BENCH_COPY_STEPS=300 AGENTRL_BENCH_COPY_PRESETS=shipped,wide npm run bench -- copy
 *   AGENTRL_BENCH_COPY_CODE_CASE=shown npm run bench -- copy      (click the code as the page spells it)
 *   AGENTRL_BENCH_COPY_PRESETS=warmstart AGENTRL_BENCH_COPY_LR=5e-4 npm run bench -- copy   (train the shipped model on)
 *   AGENTRL_BENCH_COPY_REPEAT_ROWS=8 npm run bench -- copy    (8 more rows a step of pure repetition)
 *   AGENTRL_BENCH_COPY_ORDER=title-first npm run bench -- copy    (the page lists the title before the code, and
 *     the agent has written the title: is the look-up learnt when it is a forward copy?)
 *   AGENTRL_BENCH_COPY_CODE_ALPHABET=syllables npm run bench -- copy    (codes of 4 lower-case syllables
 *     after `B0`, multi-character tokens like a name's, instead of 8 characters from A-Z0-9)
 *   AGENTRL_BENCH_COPY_PRODUCTS=2 AGENTRL_BENCH_COPY_TITLES=distinct AGENTRL_BENCH_COPY_KINDS=code npm run bench -- copy
 *     (fewer candidates; titles whose last words differ; code rows only: which part of the look-up is hard?)
 *   AGENTRL_BENCH_COPY_CODE_PREFIX=none npm run bench -- copy    (codes without `B0`)
 *   (also AGENTRL_BENCH_COPY_EVERY, AGENTRL_BENCH_COPY_THREADS=1 to leave a core to another job)
 *
 * KG and WebShop fail because the small model cannot copy entity names and product codes
 * from its prompt. This measures exactly that skill, on the shipped tokenizer
 * (models/warmstart: task-text BPE, vocabulary 4096), for fresh models of each preset:
 * - name rows (KG): a question naming an entity and KG's `Entities: [<name>]` line, answered
 *   `get_neighbors("<name>")` (the name tokenizes alike after `[` and after `"`: a plain copy);
 * - code rows (WebShop): a results page of 8 products (ASIN, title, price) and its clickables
 *   (the codes in lower case, as WebShop lists them), then a title, answered with that
 *   product's ASIN in lower case, as the clickables spell it (and as the expert clicks), or with
 *   AGENTRL_BENCH_COPY_CODE_CASE=shown as the page spells it (upper case: a plain copy of the
 *   tokens before the title; the shop matches clicks case-insensitively).
 * Names and codes are random (syllables, `B0` + 8 characters), so nothing can be memorised:
 * only copying scores. Each preset takes `STEPS` supervised steps of `BATCH` rows (loss on
 * the answer only; AdamW lr 2e-3 unless _LR says, cosine; both cores unless _THREADS=1: the
 * learner and its gradient thread),
 * and every `EVERY` steps its exact-match accuracy on 200 held-out rows is measured
 * (teacher-forced argmax at every answer token = greedy decoding's exact match), and the
 * share of answer tokens predicted right.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir, loadavg } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as tf from "@tensorflow/tfjs-core";
import { Policy, type ModelConfig } from "@agentrl/policy";
import { validateConfig } from "@agentrl/policy/internal";
import { Random } from "@agentrl/envs";
import { Learner, type SupervisedRow } from "@agentrl/trainer";
import type { BenchResult } from "./types.js";

const SHIPPED = join(fileURLToPath(new URL("..", import.meta.url)), "models", "warmstart");
const STEPS = Number(process.env.AGENTRL_BENCH_COPY_STEPS ?? 240);
const EVERY = Number(process.env.AGENTRL_BENCH_COPY_EVERY ?? 60);
const BATCH = 16;
const HELD_OUT = 200;
const CODE_CASE = process.env.AGENTRL_BENCH_COPY_CODE_CASE === "shown" ? "shown" : "lower";
/** AdamW's peak learning rate (cosine over STEPS). */
const LEARNING_RATE = Number(process.env.AGENTRL_BENCH_COPY_LR ?? 2e-3);
/** Extra pure-repetition rows a step (trained on, not scored; 0 = none). */
const REPEAT_ROWS = Number(process.env.AGENTRL_BENCH_COPY_REPEAT_ROWS ?? 0);
/**
 * Where the code stands on the results page: `page` as WebShop lists it (`<code> [SEP] <title>`:
 * writing the code for a title is a backward look-up), or `title-first` (`<title> [SEP] <code>`,
 * the prompt ending with the title the agent has written, so the code is what followed it: a
 * forward copy, as an induction head makes one).
 */
const ORDER = process.env.AGENTRL_BENCH_COPY_ORDER === "title-first" ? "title-first" : "page";
/** What a code is made of after `B0`: 8 characters of A-Z0-9 (WebShop's ASINs) or 4 lower-case syllables. */
const CODE_ALPHABET =
  process.env.AGENTRL_BENCH_COPY_CODE_ALPHABET === "syllables" ? "syllables" : "characters";
/** What every code starts with (`B0`, as ASINs do; `none`: nothing, so no fixed token stands between a title and its code's first varying token). */
const CODE_PREFIX = process.env.AGENTRL_BENCH_COPY_CODE_PREFIX === "none" ? "" : "B0";
/** Products on a results page (the look-up's candidates; 8 as WebShop shows). */
const PRODUCTS = Number(process.env.AGENTRL_BENCH_COPY_PRODUCTS ?? 8);
/**
 * How titles are made: `shared` (a random word and one of 8 nouns drawn with replacement, so
 * titles on a page often end alike, as WebShop's do) or `distinct` (the nouns drawn without
 * replacement: the last word alone tells the products apart).
 */
const TITLES = process.env.AGENTRL_BENCH_COPY_TITLES === "distinct" ? "distinct" : "shared";
/** Which rows are trained and scored: both kinds, or code look-ups only (`code`). */
const KINDS: readonly Kind[] =
  process.env.AGENTRL_BENCH_COPY_KINDS === "code" ? ["code"] : ["name", "code"];
/** Gradient threads of the learner (1 leaves a core to another job). */
const THREADS: 1 | 2 = process.env.AGENTRL_BENCH_COPY_THREADS === "1" ? 1 : 2;

/** Architectures compared (the shipped one first); vocabulary and context are the shipped tokenizer's. */
const PRESETS: Record<string, Partial<ModelConfig>> = {
  shipped: {
    hiddenSize: 128,
    intermediateSize: 384,
    numHiddenLayers: 3,
    numAttentionHeads: 4,
    numKeyValueHeads: 2,
    headDim: 32,
  },
  deep: {
    hiddenSize: 128,
    intermediateSize: 384,
    numHiddenLayers: 6,
    numAttentionHeads: 4,
    numKeyValueHeads: 2,
    headDim: 32,
  },
  wide: {
    hiddenSize: 192,
    intermediateSize: 576,
    numHiddenLayers: 4,
    numAttentionHeads: 6,
    numKeyValueHeads: 2,
    headDim: 32,
  },
  /** The shipped width and depth with twice the heads, each half as wide (more look-ups a layer). */
  heads: {
    hiddenSize: 128,
    intermediateSize: 384,
    numHiddenLayers: 3,
    numAttentionHeads: 8,
    numKeyValueHeads: 4,
    headDim: 16,
  },
};

/** A seeded uniform generator in [0, 1) (envs' mulberry32). */
function random(seed: number): () => number {
  const generator = new Random(seed);
  return () => generator.next();
}

const SYLLABLES = [
  "ka",
  "ro",
  "vin",
  "tel",
  "mar",
  "os",
  "fen",
  "lu",
  "dra",
  "bel",
  "ni",
  "sto",
  "qua",
  "rem",
  "ix",
  "zo",
  "har",
  "pel",
  "un",
  "gri",
];
const ALPHANUMERIC = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const NOUNS = [
  "Shampoo",
  "Trail Mix",
  "Protein Bar",
  "Desk Lamp",
  "Headphones",
  "Yoga Mat",
  "Tea Kettle",
  "Backpack",
];

interface CopyRow {
  kind: "name" | "code" | "repeat";
  prompt: string;
  answer: string;
  /** Code rows: the answers naming the page's other products (to find where the choice is made). */
  others?: string[];
}

function makeRow(next: () => number, kind: CopyRow["kind"]): CopyRow {
  const pick = <T>(items: readonly T[]) => items[Math.floor(next() * items.length)];
  const word = () => {
    const w = Array.from({ length: 2 + Math.floor(next() * 2) }, () => pick(SYLLABLES)).join("");
    return w[0].toUpperCase() + w.slice(1);
  };
  if (kind === "repeat") {
    // Pure repetition (training only): random words and codes, then the same again, so that
    // every answer token is a copy (the signal from which induction heads form).
    const items = Array.from({ length: 12 }, () =>
      next() < 0.3
        ? `B0${Array.from({ length: 8 }, () => pick([...ALPHANUMERIC])).join("")}`
        : word(),
    );
    const text = ` ${items.join(" ")}`;
    return { kind, prompt: `Copy:${text}\nAgain:`, answer: text };
  }
  if (kind === "name") {
    const name = `${word()} ${word()}`;
    const relation = pick(["was born in", "plays for", "wrote", "founded"]);
    // As KG's first user message: the question, then "Entities: [...]" (the copy source).
    return {
      kind,
      prompt: `Question: what did ${name} found, and who ${relation} it?\nEntities: [${name}]\n`,
      answer: `get_neighbors("${name}")`,
    };
  }
  if (TITLES === "distinct" && PRODUCTS > NOUNS.length)
    throw new Error(`distinct titles need at most ${NOUNS.length} products`);
  const nouns = [...NOUNS];
  const products = Array.from({ length: PRODUCTS }, () => ({
    code: `${CODE_PREFIX}${CODE_ALPHABET === "syllables" ? Array.from({ length: 4 }, () => pick(SYLLABLES)).join("") : Array.from({ length: 8 }, () => pick([...ALPHANUMERIC])).join("")}`,
    title: `${word()} ${TITLES === "distinct" ? nouns.splice(Math.floor(next() * nouns.length), 1)[0] : pick(NOUNS)}`,
    price: (5 + next() * 60).toFixed(2),
  }));
  const target = pick(products);
  const code = (p: (typeof products)[number]) =>
    CODE_CASE === "shown" ? p.code : p.code.toLowerCase();
  if (ORDER === "title-first") {
    const page = products
      .map((p) => `${p.title} [SEP] ${p.code} [SEP] $${p.price}`)
      .join(" [SEP] ");
    return {
      kind,
      prompt: `Back to Search [SEP] Page 1 [SEP] ${page}\n\nBuy the ${target.title}. Its code:\n${target.title} [SEP]`,
      answer: ` ${code(target)}`,
      others: products.filter((p) => p !== target).map((p) => ` ${code(p)}`),
    };
  }
  const page = products.map((p) => `${p.code} [SEP] ${p.title} [SEP] $${p.price}`).join(" [SEP] ");
  // As WebShop's results page: the page, then its clickables (codes in lower case).
  const clickables = JSON.stringify({
    has_search_bar: false,
    clickables: ["back to search", ...products.map((p) => p.code.toLowerCase())],
  });
  return {
    kind,
    prompt: `Back to Search [SEP] Page 1 [SEP] ${page}\n\nAvailable Actions:\n${clickables}\nBuy the ${target.title}. Click its code:\n`,
    answer: `click[${code(target)}]`,
    others: products.filter((p) => p !== target).map((p) => `click[${code(p)}]`),
  };
}

interface Encoded {
  row: SupervisedRow;
  /** Positions of the answer tokens. */
  answerFrom: number;
  /** Code rows: the first answer token that some other product's answer does not share (where the product is chosen). */
  choiceAt?: number;
}

function encode(tokenizer: { encode(text: string): number[] }, row: CopyRow): Encoded {
  const prompt = tokenizer.encode(row.prompt);
  const answer = tokenizer.encode(row.answer);
  const tokens = Int32Array.from([...prompt, ...answer]);
  const lossMask = Uint8Array.from(tokens, (_, i) => (i >= prompt.length ? 1 : 0));
  const others = (row.others ?? []).map((other) => tokenizer.encode(other));
  const shared = (i: number) => others.every((other) => other[i] === answer[i]);
  const firstVarying = others.length > 0 ? answer.findIndex((_, i) => !shared(i)) : -1;
  return {
    row: { task: row.kind, tokens, lossMask },
    answerFrom: prompt.length,
    choiceAt: firstVarying >= 0 ? prompt.length + firstVarying : undefined,
  };
}

type Kind = "name" | "code";

/**
 * Per kind: exact match (every answer token is the argmax given the true prefix), the share
 * of answer tokens that are (a finer measure while exact matches are still rare), and for
 * codes the share of rows whose first product-specific token is right (did the look-up find
 * the product? writing any code of the page scores about one in the number of products).
 */
function accuracy(
  policy: Policy,
  rows: readonly Encoded[],
): Record<Kind, { exact: number; tokens: number; choice: number }> {
  const totals = {
    name: { rows: 0, exact: 0, tokens: 0, correct: 0, choices: 0 },
    code: { rows: 0, exact: 0, tokens: 0, correct: 0, choices: 0 },
  };
  for (const { row, answerFrom, choiceAt } of rows) {
    const predicted = tf.tidy(
      () =>
        tf
          .argMax(
            policy.model.forward(tf.tensor2d(row.tokens, [1, row.tokens.length], "int32")),
            -1,
          )
          .dataSync() as Int32Array,
    );
    const total = totals[row.task as Kind];
    let wrong = 0;
    for (let t = answerFrom; t < row.tokens.length; t++)
      if (predicted[t - 1] !== row.tokens[t]) wrong += 1;
    total.rows += 1;
    total.exact += wrong === 0 ? 1 : 0;
    total.tokens += row.tokens.length - answerFrom;
    total.correct += row.tokens.length - answerFrom - wrong;
    total.choices +=
      choiceAt !== undefined && predicted[choiceAt - 1] === row.tokens[choiceAt] ? 1 : 0;
  }
  const share = (kind: Kind) => {
    const { rows, exact, tokens, correct, choices } = totals[kind];
    return {
      exact: exact / Math.max(1, rows),
      tokens: correct / Math.max(1, tokens),
      choice: choices / Math.max(1, rows),
    };
  };
  return { name: share("name"), code: share("code") };
}

/** The paragraph above the table: what was trained, on which rows, with which options. */
function describe(names: readonly string[], vocabSize: number, meanTokens: number): string {
  const models = names.every((name) => name === "warmstart")
    ? "The shipped model, trained on,"
    : `Fresh models${names.includes("warmstart") ? " (preset warmstart: the shipped model itself, trained on)" : ""}`;
  const rowOptions = [
    KINDS.length === 1 ? "code rows only" : "KG-like name copies and WebShop-like ASIN look-ups",
    `codes answered ${CODE_CASE === "shown" ? "as the page spells them (upper case)" : "in lower case"}`,
    ORDER === "title-first" &&
      "the page lists each title before its code and the prompt ends with the chosen title, so the code is a forward copy",
    CODE_ALPHABET === "syllables"
      ? `codes are ${CODE_PREFIX ? "`B0` and " : ""}4 lower-case syllables`
      : !CODE_PREFIX && "codes have no `B0`",
    PRODUCTS !== 8 && `${PRODUCTS} products a page`,
    TITLES === "distinct" && "no two titles on a page share their last word",
  ].filter(Boolean);
  const repetition =
    REPEAT_ROWS > 0
      ? ` and ${REPEAT_ROWS} rows of pure repetition (12 random words and codes, then again)`
      : "";
  const threads = THREADS === 2 ? "learner + gradient thread (2 threads)" : "1 thread";
  return `${models} on the shipped tokenizer (vocabulary ${vocabSize}); rows of ~${meanTokens.toFixed(0)} tokens (${rowOptions.join("; ")}), ${BATCH} a step${repetition}, loss on the answer, AdamW lr ${LEARNING_RATE} cosine; exact match on ${HELD_OUT} held-out rows; ${threads}; load average ${loadavg()[0].toFixed(1)} at the start (shared machine).`;
}

export async function run(): Promise<BenchResult> {
  const shipped = await Policy.load(SHIPPED, { trainable: false });
  const tokenizer = shipped.tokenizer!;
  const base = shipped.config;
  shipped.dispose();
  const names = (process.env.AGENTRL_BENCH_COPY_PRESETS ?? Object.keys(PRESETS).join(",")).split(
    ",",
  );
  const heldOut = Array.from({ length: HELD_OUT }, (_, i) =>
    encode(tokenizer, makeRow(random(1_000_000 + i), KINDS[i % KINDS.length])),
  );
  const meanTokens = heldOut.reduce((n, e) => n + e.row.tokens.length, 0) / heldOut.length;
  const lines = [
    "## Copy accuracy vs training minutes (`bench/copy.ts`)",
    "",
    describe(names, base.vocabSize, meanTokens),
    "",
    "| preset | parameters | step | train min | name copy: exact | tokens | code look-up: exact | tokens | first product token |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const name of names) {
    const directory = mkdtempSync(join(tmpdir(), "agentrl-bench-copy-"));
    try {
      if (name !== "warmstart") {
        if (!(name in PRESETS))
          throw new Error(
            `unknown copy preset "${name}" (${[...Object.keys(PRESETS), "warmstart"].join(", ")})`,
          );
        const fresh = Policy.create(validateConfig({ ...base, ...PRESETS[name] }), {
          tokenizer,
          seed: 0,
        });
        await fresh.save(directory);
        fresh.dispose();
      }
      const learner = await Learner.load(name === "warmstart" ? SHIPPED : directory, {
        grpo: { klCoefficient: 0, microBatchTokens: 4096 },
        schedule: {
          learningRate: LEARNING_RATE,
          warmupSteps: 10,
          schedule: "cosine",
          totalSteps: STEPS,
        },
        gradientThreads: THREADS,
      });
      const next = random(7);
      let trainMs = 0;
      try {
        const report = (step: number) => {
          const score = accuracy(learner.policy, heldOut);
          const percent = (kind: Kind, value: number) =>
            KINDS.includes(kind) ? `${(100 * value).toFixed(0)} %` : "–";
          const line = `| ${name} | ${learner.policy.model.parameterCount.toLocaleString("en-US")} | ${step} | ${(trainMs / 60_000).toFixed(1)} | ${percent("name", score.name.exact)} | ${percent("name", score.name.tokens)} | ${percent("code", score.code.exact)} | ${percent("code", score.code.tokens)} | ${percent("code", score.code.choice)} |`;
          console.log(line);
          lines.push(line);
        };
        if (name === "warmstart") report(0); // what the trained model copies before any copy rows
        for (let step = 1; step <= STEPS; step++) {
          const batch = Array.from(
            { length: BATCH + REPEAT_ROWS },
            (_, i) =>
              encode(tokenizer, makeRow(next, i >= BATCH ? "repeat" : KINDS[i % KINDS.length])).row,
          );
          const started = performance.now();
          await learner.supervised(batch);
          trainMs += performance.now() - started;
          if (step % EVERY === 0 || step === STEPS) report(step);
        }
      } finally {
        await learner.dispose();
      }
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  }
  return { name: "copy", markdown: lines.join("\n") };
}
