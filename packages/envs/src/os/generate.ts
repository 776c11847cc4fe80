/**
 * Project-generated OS tasks whose answer must be read: a constant cannot win them.
 *
 * AgentBench's OS training tasks count a few lines in small files, so a small integer is
 * often right (a constant `3` alone scores 22 % of the held-out ones, docs/tasks/os.md), and
 * a model trained on their expert rows learns the constant. These tasks put random files in
 * the container (log lines, CSV rows, files of several extensions and sizes, accounts, config
 * keys, …) and ask a question whose answer is a count, a sum, a name or a value drawn anew
 * for every instance: a number over a wide range or a name among many. Each has a one-line
 * example solution (difficulty 0, as the warm start's AgentBench rows) and is graded as
 * AgentBench grades its own: the check re-runs the example after the agent's actions and
 * compares its output with the answer (exact, after strip). The expert (`OsExpert`) runs the
 * example and answers what it printed: a read row.
 *
 * Everything is deterministic from (seed, instance number); `expectedAnswer` is the answer
 * computed here, which the example prints in the container (os.test.ts checks it).
 */
import { Random, mixSeeds } from "../random.js";
import type { OsSample, Script } from "./data.js";

/** Indices of generated instances start here (AgentBench train: 0…999, dev: 1000…). */
export const OS_GENERATED_OFFSET = 100_000;
/** Indices of generated test instances start here (drawn from another stream than the training ones). */
export const OS_GENERATED_TEST_OFFSET = 200_000;

/** The check of every generated task: the answer equals the example's output, both stripped. */
const EXACT_MATCH: Script = {
  language: "python",
  code: "import sys\nsys.exit(0 if sys.argv[1].strip() == sys.argv[2].strip() else 1)",
};

/** Letters-only words for names and text (no word is a part of a level name or another word's field). */
const WORDS = (
  "amber anchor apple arrow aspen atlas badge basil beacon birch blossom border bramble " +
  "breeze bridge bronze cabin canyon cedar chalk cinder clover cobalt comet copper coral " +
  "cotton crane crystal dahlia delta desert dune ember falcon fern fjord flint forest " +
  "garnet glacier granite harbor hazel heron indigo island ivory jasper juniper kestrel " +
  "lagoon lantern laurel lemon lilac linen maple marble meadow mesa mint monsoon moss " +
  "nectar nickel oasis olive onyx orchid otter pebble pepper pine plum prairie quartz " +
  "quill raven reef ridge river saffron sage sapphire shadow silver slate spruce summit " +
  "tango thistle timber topaz tulip tundra velvet violet walnut willow wren zephyr"
).split(" ");
const USERS = (
  "alice bruno chen dmitri elena farah goran hana ivan jonas kenji lena marco nadia omar " +
  "priya quentin rosa sven tara umar vera wei ximena yusuf zoe"
).split(" ");
const APPS = "nginx billing indexer mailer scheduler gateway backup crawler ledger reports".split(
  " ",
);
const LEVELS = ["INFO", "WARN", "ERROR", "DEBUG"];
const EXTENSIONS = ["txt", "csv", "log", "json", "py", "md", "sh", "conf"];
const SHELLS = ["bash", "zsh", "sh", "dash", "fish"];

/** One generated task before it becomes an `OsSample`. */
interface GeneratedTask {
  kind: string;
  description: string;
  /** Bash run before the agent acts (creates the files). */
  init: string;
  /** The one-line solution; it prints `answer`. */
  example: string;
  answer: string;
}

/** A file written by the init script (a quoted here-document: no expansion). */
function writeFile(path: string, lines: readonly string[]): string {
  return `cat > ${path} <<'AGENTRL_EOF'\n${lines.join("\n")}\nAGENTRL_EOF`;
}

function parent(path: string): string {
  return path.slice(0, path.lastIndexOf("/"));
}

/** `count` distinct names `word` or `word_N` (letters, digits and `_`). */
function distinctNames(random: Random, count: number): string[] {
  const names = new Set<string>();
  while (names.size < count)
    names.add(
      random.chance(0.5) ? random.pick(WORDS) : `${random.pick(WORDS)}_${random.integer(1, 99)}`,
    );
  return [...names];
}

/** A folder the task's files go in (all under the sandbox's writable folders). */
function folder(random: Random): string {
  const app = random.pick(APPS);
  return random.pick([
    `/root/${random.pick(WORDS)}`,
    `/home/${random.pick(USERS)}/${random.pick(WORDS)}`,
    `/opt/${app}/${random.pick(WORDS)}`,
    `/srv/${app}`,
    `/var/tmp/${random.pick(WORDS)}`,
  ]);
}

function sentence(random: Random, words: number): string {
  return Array.from({ length: words }, () => random.pick(WORDS)).join(" ");
}

/** Lines of a certain level in the .log files of a folder. */
function logLevelCount(random: Random): GeneratedTask {
  const dir = random.pick([
    `/root/logs`,
    `/var/log/${random.pick(APPS)}`,
    `${folder(random)}/logs`,
  ]);
  const level = random.pick(LEVELS);
  const files = distinctNames(random, random.integer(1, 3));
  let count = 0;
  const writes = files.map((file) => {
    const lines = Array.from({ length: random.integer(4, 30) }, () => {
      const lineLevel = random.weighted(LEVELS, [4, 2, 2, 1]);
      if (lineLevel === level) count += 1;
      const time = `${String(random.integer(0, 23)).padStart(2, "0")}:${String(random.integer(0, 59)).padStart(2, "0")}`;
      return `2024-0${random.integer(1, 9)}-${String(random.integer(10, 28))} ${time} ${lineLevel} ${sentence(random, random.integer(2, 5))}`;
    });
    return writeFile(`${dir}/${file}.log`, lines);
  });
  const description = random.pick([
    `How many ${level} lines are there in total in the .log files of ${dir}?`,
    `Count the lines containing '${level}' in all .log files under ${dir} (not in subfolders). Tell me the number only.`,
    `The log files (*.log) of ${dir} record events with a level. How many events have the level ${level}?`,
  ]);
  return {
    kind: "log-level-count",
    description,
    init: [`mkdir -p ${dir}`, ...writes].join("\n"),
    example: `grep -h '${level}' ${dir}/*.log | wc -l`,
    answer: String(count),
  };
}

/** Files of one extension directly in a folder (a subfolder holds more that do not count). */
function extensionCount(random: Random): GeneratedTask {
  const dir = folder(random);
  const extension = random.pick(EXTENSIONS);
  const names = distinctNames(random, random.integer(4, 28));
  let count = 0;
  const paths = names.map((name) => {
    const own = random.chance(0.4) ? extension : random.pick(EXTENSIONS);
    if (own === extension) count += 1;
    return `${dir}/${name}.${own}`;
  });
  const nested = distinctNames(random, random.integer(0, 4)).map(
    (name) => `${dir}/archive/${name}.${extension}`,
  );
  const description = random.pick([
    `How many .${extension} files are there directly in ${dir} (not counting subdirectories)?`,
    `Count the files with the extension .${extension} in the folder ${dir}, without looking into its subfolders.`,
  ]);
  return {
    kind: "extension-count",
    description,
    init: [`mkdir -p ${dir}/archive`, ...[...paths, ...nested].map((path) => `touch ${path}`)].join(
      "\n",
    ),
    example: `find ${dir} -maxdepth 1 -type f -name '*.${extension}' | wc -l`,
    answer: String(count),
  };
}

/** The lines of a text file. */
function lineCount(random: Random): GeneratedTask {
  const path = `${folder(random)}/${random.pick(WORDS)}.txt`;
  const lines = Array.from({ length: random.integer(3, 120) }, () =>
    sentence(random, random.integer(1, 6)),
  );
  return {
    kind: "line-count",
    description: random.pick([
      `How many lines does the file ${path} have?`,
      `Tell me the number of lines in ${path}.`,
    ]),
    init: [`mkdir -p ${parent(path)}`, writeFile(path, lines)].join("\n"),
    example: `wc -l < ${path}`,
    answer: String(lines.length),
  };
}

/** The sum of one column of a CSV file. */
function csvColumnSum(random: Random): GeneratedTask {
  const path = `${folder(random)}/${random.pick(["sales", "orders", "stock", "payments", "usage"])}.csv`;
  const columns = random.sample(["amount", "quantity", "price", "weight", "hours", "points"], 3);
  const target = random.integer(0, columns.length - 1);
  let sum = 0;
  const rows = Array.from({ length: random.integer(3, 14) }, (_, row) => {
    const values = columns.map(() => random.integer(1, 400));
    sum += values[target];
    return [row + 1, random.pick(USERS), ...values].join(",");
  });
  return {
    kind: "csv-column-sum",
    description: random.pick([
      `What is the sum of the ${columns[target]} column in ${path}?`,
      `${path} is a CSV file with a header line. Add up its ${columns[target]} values and tell me the total.`,
    ]),
    init: [
      `mkdir -p ${parent(path)}`,
      writeFile(path, [["id", "name", ...columns].join(","), ...rows]),
    ].join("\n"),
    example: `awk -F, 'NR>1 {s+=$${target + 3}} END {print s}' ${path}`,
    answer: String(sum),
  };
}

/** The name of the largest file of a folder. */
function largestFile(random: Random): GeneratedTask {
  const dir = folder(random);
  const names = distinctNames(random, random.integer(3, 8)).map(
    (name) => `${name}.${random.pick(EXTENSIONS)}`,
  );
  // Distinct sizes: the largest is one file.
  const sizes = random.sample(
    Array.from({ length: 4000 }, (_, k) => 64 + 7 * k),
    names.length,
  );
  const largest = names[sizes.indexOf(Math.max(...sizes))];
  return {
    kind: "largest-file",
    description: random.pick([
      `Which file in ${dir} is the largest? Answer with its name only.`,
      `Find the biggest file in the directory ${dir} and tell me its file name.`,
    ]),
    init: [
      `mkdir -p ${dir}`,
      ...names.map((file, k) => `head -c ${sizes[k]} /dev/zero > ${dir}/${file}`),
    ].join("\n"),
    example: `ls -S ${dir} | head -n 1`,
    answer: largest,
  };
}

/** The value of one key of a config file. */
function configValue(random: Random): GeneratedTask {
  const app = random.pick(APPS);
  const path = `/etc/${app}/${app}.conf`;
  const keys = random.sample(
    [
      "port",
      "workers",
      "timeout",
      "retries",
      "max_clients",
      "cache_size",
      "log_level",
      "owner",
      "backup_hour",
      "queue_depth",
    ],
    random.integer(4, 8),
  );
  const values = keys.map((key) =>
    key === "log_level"
      ? random.pick(["debug", "info", "warning", "error"])
      : key === "owner"
        ? random.pick(USERS)
        : String(key === "port" ? random.integer(1024, 65000) : random.integer(1, 5000)),
  );
  const target = random.integer(0, keys.length - 1);
  return {
    kind: "config-value",
    description: random.pick([
      `What is the value of ${keys[target]} in ${path}?`,
      `The service ${app} is configured in ${path} (key=value lines). Which ${keys[target]} is it set to?`,
    ]),
    init: [
      `mkdir -p /etc/${app}`,
      writeFile(path, [`# ${app} settings`, ...keys.map((key, k) => `${key}=${values[k]}`)]),
    ].join("\n"),
    example: `grep '^${keys[target]}=' ${path} | cut -d= -f2`,
    answer: values[target],
  };
}

/** Distinct client addresses of an access log. */
function distinctAddresses(random: Random): GeneratedTask {
  const path = `/var/log/${random.pick(APPS)}/access.log`;
  const pool = new Set<string>();
  const wanted = random.integer(2, 30);
  while (pool.size < wanted)
    pool.add(`10.${random.integer(0, 255)}.${random.integer(0, 255)}.${random.integer(1, 254)}`);
  const addresses = [...pool];
  const used = new Set<string>();
  const lines = Array.from({ length: random.integer(wanted, wanted + 40) }, (_, k) => {
    // Every address of the pool appears at least once.
    const address = k < addresses.length ? addresses[k] : random.pick(addresses);
    used.add(address);
    return `${address} - - [12/Mar/2024:10:${String(random.integer(10, 59))}:00] "GET /${random.pick(WORDS)} HTTP/1.1" ${random.pick([200, 200, 304, 404])} ${random.integer(100, 9000)}`;
  });
  return {
    kind: "distinct-addresses",
    description: random.pick([
      `How many distinct IP addresses made requests in ${path}?`,
      `Count the unique client addresses (the first field) in the access log ${path}.`,
    ]),
    init: [`mkdir -p ${parent(path)}`, writeFile(path, random.shuffle(lines))].join("\n"),
    example: `awk '{print $1}' ${path} | sort -u | wc -l`,
    answer: String(used.size),
  };
}

/** Accounts of a passwd-like file with a given shell. */
function shellAccounts(random: Random): GeneratedTask {
  const path = `/root/${random.pick(["accounts", "users", "staff", "members"])}.txt`;
  const shell = random.pick(SHELLS);
  const names = random.sample(
    USERS.flatMap((user) => [user, `${user}${random.integer(1, 9)}`]),
    random.integer(3, 40),
  );
  let count = 0;
  const lines = names.map((name, k) => {
    const own = random.chance(0.35) ? shell : random.pick(SHELLS);
    if (own === shell) count += 1;
    return `${name}:x:${1000 + k}:${1000 + k}::/home/${name}:/bin/${own}`;
  });
  return {
    kind: "shell-accounts",
    description: random.pick([
      `${path} lists accounts in the passwd format. How many of them use the shell /bin/${shell}?`,
      `How many accounts in ${path} have /bin/${shell} as their login shell?`,
    ]),
    init: [`mkdir -p ${parent(path)}`, writeFile(path, lines)].join("\n"),
    example: `grep -c ':/bin/${shell}$' ${path}`,
    answer: String(count),
  };
}

/** The most recently modified file of a folder. */
function newestFile(random: Random): GeneratedTask {
  const dir = folder(random);
  const files = distinctNames(random, random.integer(3, 9)).map(
    (name) => `${name}.${random.pick(EXTENSIONS)}`,
  );
  const days = random.sample(
    Array.from({ length: 28 }, (_, k) => k + 1),
    files.length,
  );
  const newest = files[days.indexOf(Math.max(...days))];
  return {
    kind: "newest-file",
    description: random.pick([
      `Which file in ${dir} was modified most recently? Answer with the file name only.`,
      `Tell me the name of the newest file (by modification time) in ${dir}.`,
    ]),
    init: [
      `mkdir -p ${dir}`,
      ...files.map(
        (file, k) => `touch -d '2023-11-${String(days[k]).padStart(2, "0")} 12:00' ${dir}/${file}`,
      ),
    ].join("\n"),
    example: `ls -t ${dir} | head -n 1`,
    answer: newest,
  };
}

/** Directories under a folder, at any depth. */
function directoryCount(random: Random): GeneratedTask {
  const root = folder(random);
  const directories = new Set<string>();
  const paths = Array.from({ length: random.integer(1, 12) }, () => {
    const depth = random.integer(1, 3);
    const parts = Array.from({ length: depth }, () => random.pick(WORDS.slice(0, 30)));
    for (let k = 1; k <= depth; k++) directories.add(parts.slice(0, k).join("/"));
    return `${root}/${parts.join("/")}`;
  });
  const files = Array.from(
    { length: random.integer(0, 6) },
    () => `${random.pick(paths)}/${random.pick(WORDS)}.${random.pick(EXTENSIONS)}`,
  );
  return {
    kind: "directory-count",
    description: random.pick([
      `How many directories are there under ${root}, at any depth, not counting ${root} itself?`,
      `Count all subdirectories of ${root} (recursively).`,
    ]),
    init: [
      `mkdir -p ${root}`,
      ...paths.map((path) => `mkdir -p ${path}`),
      ...files.map((file) => `touch ${file}`),
    ].join("\n"),
    example: `find ${root} -mindepth 1 -type d | wc -l`,
    answer: String(directories.size),
  };
}

/** Occurrences of a word in a text file. */
function wordOccurrences(random: Random): GeneratedTask {
  const path = `${folder(random)}/${random.pick(["notes", "story", "report", "draft", "minutes"])}.txt`;
  const vocabulary = random.sample(WORDS, random.integer(4, 12));
  const word = random.pick(vocabulary);
  let count = 0;
  const lines = Array.from({ length: random.integer(2, 25) }, () =>
    Array.from({ length: random.integer(1, 8) }, () => {
      const chosen = random.pick(vocabulary);
      if (chosen === word) count += 1;
      return chosen;
    }).join(" "),
  );
  return {
    kind: "word-occurrences",
    description: random.pick([
      `How many times does the word '${word}' occur in ${path}?`,
      `Count the occurrences of the word ${word} in the file ${path}.`,
    ]),
    init: [`mkdir -p ${parent(path)}`, writeFile(path, lines)].join("\n"),
    example: `grep -o -w '${word}' ${path} | wc -l`,
    answer: String(count),
  };
}

/** The kinds of generated tasks, drawn uniformly. */
const KINDS: ReadonlyArray<(random: Random) => GeneratedTask> = [
  logLevelCount,
  extensionCount,
  lineCount,
  csvColumnSum,
  largestFile,
  configValue,
  distinctAddresses,
  shellAccounts,
  newestFile,
  directoryCount,
  wordOccurrences,
];

/** Generated instance `k` of a split on world `seed` (train: index OS_GENERATED_OFFSET + k; test: OS_GENERATED_TEST_OFFSET + k). */
export function generateOsSample(k: number, seed = 0, split: "train" | "test" = "train"): OsSample {
  const random = new Random(mixSeeds(seed, split === "train" ? 0x05 : 0x05e, k));
  const task = random.pick(KINDS)(random);
  return {
    index: (split === "train" ? OS_GENERATED_OFFSET : OS_GENERATED_TEST_OFFSET) + k,
    split,
    description: task.description,
    image: "default",
    init: [{ language: "bash", code: task.init }],
    check: [null, EXACT_MATCH],
    example: { language: "bash", code: task.example },
    labels: ["generated", task.kind],
    extraFolders: [],
    extraFiles: [],
    expectedAnswer: task.answer,
  };
}

/** `count` generated instances of a split on world `seed`. */
export function generateOsSamples(
  count: number,
  seed = 0,
  split: "train" | "test" = "train",
): OsSample[] {
  return Array.from({ length: count }, (_, k) => generateOsSample(k, seed, split));
}
