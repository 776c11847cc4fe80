/**
 * Project-generated OS tasks whose answer must be read: a constant cannot win them.
 *
 * AgentBench's OS training tasks count a few lines in small files, so a small integer is
 * often right (a constant `3` alone scores 22 % of the held-out ones, docs/tasks/os.md), and
 * a model trained on their expert rows learns the constant. These tasks put random files in
 * the container (log lines, text files, files of several ages and sizes, hidden key=value
 * files, …) and ask a question whose answer is a count, a sum, a name or a value drawn anew
 * for every instance. Each has a one-line example solution (difficulty 0, as the warm start's
 * AgentBench rows) and is graded as AgentBench grades its own: the check re-runs the example
 * after the agent's actions and compares its output with the answer (exact, after strip). The
 * expert (`OsExpert`) runs the example and answers what it printed: a read row.
 *
 * The tasks speak as AgentBench's OS questions do (session 29): the files are in the home
 * folder, named in words ("a directory named "project_logs" in your home directory", "a hidden
 * file named `.configdata`", "`server_logs.txt`") and the example writes the `~/…` path the
 * question names, so a row teaches copying the question's folder into the command; the kinds
 * are AgentBench's (lines with a word in a folder's .log files, lines with "Linux" in
 * documents, files modified in the last 7 days, unique IP addresses or dates, sums, unique
 * lines and keys of hidden files, the largest or newest file, …). The first generator
 * (sessions 25-27) put its files under invented absolute paths (`/var/log/billing`,
 * `/opt/ledger/…`) and a model trained on four generated rows in five wrote those paths into
 * AgentBench's questions (docs/warmstart.md, run R1). With `places: "stated"` (session 32, OsGeneratedPlaces)
 * the folders are also at absolute paths and in the working folder, as AgentBench's questions
 * state them, each written in the command as stated.
 *
 * Everything is deterministic from (seed, instance number); `expectedAnswer` is the answer
 * computed here, which the example prints in the container (generate.test.ts replays it in
 * local bash, generated.test.ts in Docker).
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

/** Folders of log files as AgentBench's questions name them. */
const LOG_FOLDERS = [
  "logs",
  "log_files",
  "logfiles",
  "project_logs",
  "data_logs",
  "server_logs",
  "system_logs",
  "app_logs",
  "log_analysis",
];
/** Folders of text files as AgentBench's questions name them. */
const TEXT_FOLDERS = [
  "documents",
  "docs",
  "project_files",
  "project_data",
  "data",
  "experiment",
  "files_directory",
  "projects",
  "notes",
];
/** First words of other folder names (`web_logs`, `team_documents`): the name must be read from the question. */
const TOPICS = (
  "project server system app web daily weekly user test archive analysis audit network " +
  "sales old team shared work client local monthly research temp access service"
).split(" ");
/** Letters-only words for text lines (none contains a searched word such as Linux, error or TODO). */
const WORDS = (
  "amber anchor apple arrow aspen atlas badge basil beacon birch blossom border breeze " +
  "bridge bronze cabin canyon cedar chalk clover cobalt comet copper coral cotton crane " +
  "crystal dahlia delta desert dune ember falcon fern fjord flint forest garnet glacier " +
  "granite harbor hazel heron indigo island ivory jasper juniper kestrel lagoon lantern " +
  "laurel lemon lilac linen maple marble meadow mesa mint moss nectar nickel oasis olive " +
  "onyx orchid otter pebble pepper pine plum prairie quartz quill raven reef ridge river " +
  "saffron sage shadow silver slate spruce summit tango thistle timber topaz tulip tundra " +
  "velvet violet walnut willow wren zephyr"
).split(" ");
/** Topic words of generated folder names: the topics, then the text words. */
const FOLDER_TOPICS = [...TOPICS, ...WORDS];
/** Log messages as AgentBench's init scripts write them (no level word inside, in any case). */
const MESSAGES = [
  "System started",
  "Failed to load module",
  "Operation successful",
  "Network timeout",
  "Connection established",
  "Disk full",
  "User login",
  "User logout",
  "Access denied",
  "Process completed",
  "Starting process",
  "Memory usage high",
  "Disk space low",
  "Connection failed",
  "Timeout occurred",
  "Service restarted",
  "Cache cleared",
  "Request handled",
  "Configuration loaded",
  "Session closed",
  "File uploaded",
  "Database query slow",
  "Package installed",
  "Health check passed",
  "Retrying request",
  "Queue is empty",
];
const PEOPLE = (
  "Alice Bob Carol Dave Erin Frank Grace Heidi Ivan Judy Mallory Nina Oscar Peggy Quinn " +
  "Rupert Sybil Trent Uma Victor Walter Yara Zoe"
).split(" ");
const LEVELS = ["INFO", "WARN", "ERROR", "DEBUG"];
/** Stems of file names, as AgentBench's files are named (`file1.txt`, `report_2023.txt`). */
const FILE_STEMS = (
  "file report data notes summary draft image photo budget invoice todo readme config " +
  "script results output archive letter chart table"
).split(" ");
const EXTENSIONS = ["txt", "csv", "log", "json", "py", "md", "sh", "conf", "jpg", "pdf"];

/** One generated task before it becomes an `OsSample`. */
interface GeneratedTask {
  kind: string;
  description: string;
  /** Bash run before the agent acts (creates the files; `~` is the agent's home folder). */
  init: string;
  /** The one-line solution; it prints `answer`. */
  example: string;
  answer: string;
}

/** A file written by the init script (a quoted here-document: no expansion). */
function writeFile(path: string, lines: readonly string[]): string {
  return `cat > ${path} <<'AGENTRL_EOF'\n${lines.join("\n")}\nAGENTRL_EOF`;
}

/** A folder of the task as the question names it and as the command writes it. */
interface Place {
  /** The folder in commands: `~/project_logs`, `/home/student/documents`. */
  path: string;
  /** A sentence saying the folder holds `contents` ("You have a directory named … containing …"). */
  holds: (contents: string) => string;
  /** Words naming the folder after "in" ("the directory named "logs" in your home directory"). */
  named: string;
  /** The folder is the working folder's, written relative (`log_files`): see `OsSample.mistake`. */
  relative?: boolean;
}

/** How a task's folders are placed (`places`), and the folders placed so far (`drawn`, by `place`). */
interface FolderDraw {
  places: OsGeneratedPlaces;
  drawn: Place[];
}

/**
 * A folder name: one of AgentBench's (`names`, one in four) or a topic word before one of
 * `tails`, the topic from ~140 words (`sales_logs`, `amber_documents`), so that no name is
 * common enough to be recalled rather than read: with AgentBench's names two in five and 27
 * topics (sessions 29-30) models trained on these rows wrote the frequent names
 * (`~/project_logs`) whatever the question named.
 */
function folderName(random: Random, names: readonly string[], tails: readonly string[]): string {
  if (random.chance(0.25)) return random.pick(names);
  return `${random.pick(FOLDER_TOPICS)}${random.pick(["_", "_", ""])}${random.pick(tails)}`;
}

/**
 * Where the generated tasks put their folders. `home`: in the home folder, named in words
 * (most often), or at an absolute path the question states (15 %): the tasks of the shipped
 * warm starts. `stated`: as AgentBench's questions place them, each written in the command as
 * the question states it: the home folder (40 %), an absolute path (35 %: `/home/student/…`,
 * `/var/logs/…`, `/var/data/…`, `/tmp/…`, `/opt/…`: folders writable under a read-only root) or a folder named with no place at all, which
 * AgentBench's init creates in the working folder (`mkdir -p log_files`, 25 %): the command
 * then writes it relative (`log_files/*.log`). A model trained on `home` rows writes `~/` before
 * every folder: 12 of AgentBench's 181 held-out training questions name a folder of the
 * working folder and 29 an absolute one, and the os-copy warm start solved 1 of those 41
 * (docs/tasks/os.md).
 */
export type OsGeneratedPlaces = "home" | "stated";

/** A folder of the task, as `places` draws it (see OsGeneratedPlaces). */
function place(random: Random, name: string, draw: FolderDraw): Place {
  const drawn = placeAs(random, name, draw.places);
  draw.drawn.push(drawn);
  return drawn;
}

function placeAs(random: Random, name: string, places: OsGeneratedPlaces): Place {
  if (places === "stated") {
    const draw = random.next();
    if (draw < 0.35) {
      const root = random.pick([
        "/home/student",
        "/home/student",
        name.includes("log") ? "/var/logs" : "/home/student",
        "/tmp",
        "/opt",
        "/var/data",
      ]);
      return statedPath(random, `${root}/${name}`);
    }
    return draw < 0.6 ? workingFolderPlace(random, name) : homePlace(random, name);
  }
  if (random.chance(0.15)) {
    const path =
      name.includes("log") && random.chance(0.5) ? `/var/logs/${name}` : `/home/student/${name}`;
    return statedPath(random, path);
  }
  return homePlace(random, name);
}

/** A folder at an absolute path the question states. */
function statedPath(random: Random, path: string): Place {
  return {
    path,
    holds: (contents) =>
      random.pick([
        `The directory \`${path}\` contains ${contents}.`,
        `You are given the directory "${path}", which contains ${contents}.`,
      ]),
    named: random.pick([`the \`${path}\` directory`, `the directory "${path}"`]),
  };
}

/** A folder of the working folder, named with no place (AgentBench's `mkdir -p log_files`): written relative. */
function workingFolderPlace(random: Random, name: string): Place {
  return {
    path: name,
    relative: true,
    holds: (contents) =>
      random.pick([
        `You have been given a directory named "${name}" containing ${contents}.`,
        `You are given a directory named \`${name}\`, which contains ${contents}.`,
        `There is a directory named "${name}" containing ${contents}.`,
      ]),
    named: random.pick([`the "${name}" directory`, `the directory named "${name}"`]),
  };
}

/** A folder in the home directory named in words. */
function homePlace(random: Random, name: string): Place {
  const path = `~/${name}`;
  return {
    path,
    holds: (contents) =>
      random.pick([
        `You have a directory named "${name}" in your home directory containing ${contents}.`,
        `You are given a directory named \`${name}\` in your home directory, which contains ${contents}.`,
        `In your home directory, there is a folder named "${name}" containing ${contents}.`,
        `You have a directory \`~/${name}\` containing ${contents}.`,
      ]),
    named: random.pick([
      `the directory named "${name}" in your home directory`,
      `the "${name}" directory in your home directory`,
      `the folder \`~/${name}\``,
    ]),
  };
}

/** `count` distinct names drawn by `draw`. */
function distinct(count: number, draw: () => string): string[] {
  const names = new Set<string>();
  while (names.size < count) names.add(draw());
  return [...names];
}

/** `count` distinct log file names (`system1.log`, `log_20231015.log`). */
function logFileNames(random: Random, count: number, extension = "log"): string[] {
  return distinct(count, () =>
    random.chance(0.7)
      ? `${random.pick(["system", "app", "server", "access", "log", "service", "web", "auth"])}${random.integer(1, 9)}.${extension}`
      : `log_2023${String(random.integer(1, 12)).padStart(2, "0")}${String(random.integer(10, 28))}.${extension}`,
  );
}

/** `count` distinct file names of the given extension, or of random ones (`report3.txt`). */
function fileNames(random: Random, count: number, extension?: string): string[] {
  return distinct(
    count,
    () =>
      `${random.pick(FILE_STEMS)}${random.pick(["", "_"])}${random.integer(1, 30)}.${extension ?? random.pick(EXTENSIONS)}`,
  );
}

function sentence(random: Random, words: number): string {
  return Array.from({ length: words }, () => random.pick(WORDS)).join(" ");
}

function time(random: Random): string {
  const two = (value: number) => String(value).padStart(2, "0");
  return `${two(random.integer(0, 23))}:${two(random.integer(0, 59))}:${two(random.integer(0, 59))}`;
}

/** A date of 2023 among the first `days` days of October and November (distinct for distinct `day`). */
function date(day: number): string {
  const month = day <= 31 ? 10 : 11;
  return `2023-${month}-${String(day <= 31 ? day : day - 31).padStart(2, "0")}`;
}

/** Lines with a level word in the .log files of a folder (a .txt file beside them does not count). */
function logLevelLines(random: Random, draw: FolderDraw): GeneratedTask {
  const folder = place(
    random,
    folderName(random, LOG_FOLDERS, ["logs", "log_files", "logfiles"]),
    draw,
  );
  const ignoreCase = random.chance(0.25);
  const level = random.weighted(LEVELS, [1, 2, 4, 1]);
  const word = ignoreCase ? level.toLowerCase() : level;
  const format = random.pick([
    {
      shown: "YYYY-MM-DD HH:MM:SS LEVEL Message",
      line: (d: string, l: string, m: string) => `${d} ${l} ${m}`,
    },
    {
      shown: "YYYY-MM-DD HH:MM:SS - LEVEL - Message",
      line: (d: string, l: string, m: string) => `${d} - ${l} - ${m}`,
    },
    {
      shown: "[YYYY-MM-DD HH:MM:SS] LEVEL: Message",
      line: (d: string, l: string, m: string) => `[${d}] ${l}: ${m}`,
    },
    { shown: "LEVEL: Message", line: (_d: string, l: string, m: string) => `${l}: ${m}` },
  ]);
  let count = 0;
  const line = () => {
    const lineLevel = random.weighted(LEVELS, [3, 2, 2, 2]);
    const spelled =
      ignoreCase && random.chance(0.3)
        ? lineLevel[0] + lineLevel.slice(1).toLowerCase()
        : lineLevel;
    return {
      lineLevel,
      text: format.line(
        `${date(random.integer(1, 40))} ${time(random)}`,
        spelled,
        random.pick(MESSAGES),
      ),
    };
  };
  const writes = logFileNames(random, random.integer(2, 5)).map((file) => {
    const lines = Array.from({ length: random.integer(4, 24) }, () => {
      const { lineLevel, text } = line();
      if (lineLevel === level) count += 1;
      return text;
    });
    return writeFile(`${folder.path}/${file}`, lines);
  });
  const distractor = writeFile(
    `${folder.path}/${random.pick(["readme", "notes", "old"])}.txt`,
    Array.from({ length: random.integer(1, 4) }, () => line().text),
  );
  const caseNote = ignoreCase ? " (case-insensitive)" : "";
  const description = random.pick([
    `${folder.holds('multiple log files with the ".log" extension')} Count the total number of lines that contain the word "${word}"${caseNote} across all ".log" files within this directory.`,
    `Count the number of lines containing the word "${word}"${caseNote} in all ".log" files located in ${folder.named}.`,
    `${folder.holds(`multiple log files with the extension ".log". Each line has the format "${format.shown}"`)} Your task is to count how many log entries have the level "${word}"${caseNote} across all these log files.`,
  ]);
  return {
    kind: "log-level-lines",
    description,
    init: [`mkdir -p ${folder.path}`, ...writes, distractor].join("\n"),
    example: `grep -h${ignoreCase ? "i" : ""} '${word}' ${folder.path}/*.log | wc -l`,
    answer: String(count),
  };
}

/** Lines containing a word (AgentBench's "Linux") in the .txt files of a folder. */
function wordLines(random: Random, draw: FolderDraw): GeneratedTask {
  const folder = place(
    random,
    folderName(random, TEXT_FOLDERS, ["files", "documents", "docs", "data", "notes"]),
    draw,
  );
  const word = random.weighted(["Linux", "error", "TODO", "Ubuntu", "kernel"], [4, 2, 1, 1, 1]);
  const ignoreCase = random.chance(0.3);
  let count = 0;
  const writes = fileNames(random, random.integer(2, 6), "txt").map((file) => {
    const lines = Array.from({ length: random.integer(3, 18) }, () => {
      const spelling = random.weighted(
        [word, word.toLowerCase(), word.toUpperCase(), ""],
        [3, ignoreCase ? 1 : 0.5, ignoreCase ? 1 : 0.5, 4],
      );
      const matches = spelling !== "" && (ignoreCase || spelling === word);
      if (matches) count += 1;
      const words = sentence(random, random.integer(2, 6)).split(" ");
      if (spelling !== "") words.splice(random.integer(0, words.length), 0, spelling);
      return words.join(" ");
    });
    return writeFile(`${folder.path}/${file}`, lines);
  });
  const caseNote = ignoreCase ? ", ignoring case" : " (case-sensitive)";
  const description = random.pick([
    `Count the total number of lines across all \`.txt\` files in ${folder.named} that contain the word "${word}"${caseNote}.`,
    `${folder.holds("multiple .txt files")} Count how many lines of these files contain the word "${word}"${caseNote}.`,
    `You need to determine the total number of lines across all \`.txt\` files within ${folder.named}, and only count lines that contain the word "${word}"${caseNote}.`,
  ]);
  return {
    kind: "word-lines",
    description,
    init: [`mkdir -p ${folder.path}`, ...writes].join("\n"),
    example: `grep -h${ignoreCase ? "i" : ""} '${word}' ${folder.path}/*.txt | wc -l`,
    answer: String(count),
  };
}

/** All lines, non-empty lines, or lines without a word, of a folder's .txt or .log files. */
function totalLines(random: Random, draw: FolderDraw): GeneratedTask {
  const logs = random.chance(0.5);
  const folder = logs
    ? place(random, folderName(random, LOG_FOLDERS, ["logs", "log_files"]), draw)
    : place(random, folderName(random, TEXT_FOLDERS, ["files", "documents", "data"]), draw);
  const extension = logs ? "log" : "txt";
  const variant = random.pick(["all", "non-empty", "without"] as const);
  const excluded = random.pick(["error", "debug", "secret"]);
  let count = 0;
  const names = logs
    ? logFileNames(random, random.integer(1, 4))
    : fileNames(random, random.integer(1, 4), "txt");
  const writes = names.map((file) => {
    const lines = Array.from({ length: random.integer(2, 25) }, () => {
      if (variant === "non-empty" && random.chance(0.25)) return "";
      const text = logs
        ? `${date(random.integer(1, 40))} ${time(random)} ${random.pick(MESSAGES)}`
        : sentence(random, random.integer(1, 7));
      if (variant === "without" && random.chance(0.3)) return `${text} ${excluded}`;
      count += 1;
      return text;
    });
    return writeFile(`${folder.path}/${file}`, lines);
  });
  const other = fileNames(random, random.integer(0, 2), logs ? "txt" : "md").map((file) =>
    writeFile(`${folder.path}/${file}`, [sentence(random, 3), sentence(random, 2)]),
  );
  const what = `all \`.${extension}\` files in ${folder.named}`;
  const description =
    variant === "all"
      ? random.pick([
          `Count the total number of lines across ${what}.`,
          `${folder.holds(`several files, some of them with the ".${extension}" extension`)} Find the total number of lines in all the ".${extension}" files of this directory.`,
        ])
      : variant === "non-empty"
        ? random.pick([
            `Count the total number of lines across ${what}, excluding empty lines.`,
            `${folder.holds(`multiple ".${extension}" files`)} Count the non-empty lines of these files in total.`,
          ])
        : random.pick([
            `Count the total number of lines across ${what}, excluding any lines that contain the word "${excluded}".`,
            `${folder.holds(`multiple ".${extension}" files`)} How many of their lines do not contain the word "${excluded}"?`,
          ]);
  const files = `${folder.path}/*.${extension}`;
  return {
    kind: "total-lines",
    description,
    init: [`mkdir -p ${folder.path}`, ...writes, ...other].join("\n"),
    example:
      variant === "all"
        ? `cat ${files} | wc -l`
        : variant === "non-empty"
          ? `cat ${files} | grep -v '^$' | wc -l`
          : `cat ${files} | grep -v '${excluded}' | wc -l`,
    answer: String(count),
  };
}

/** Files modified in the last days (of an extension, or above a size) in the home directory or a folder of it. */
function recentFiles(random: Random): GeneratedTask {
  const name = folderName(
    random,
    [...TEXT_FOLDERS, ...LOG_FOLDERS],
    ["files", "documents", "data", "logs"],
  );
  // The whole home folder only with a filter its own dotfiles never match (an extension, a size).
  const whole = random.chance(0.6);
  const [days, period] = random.weighted(
    [
      [7, "the last 7 days"],
      [1, "the last 24 hours"],
      [3, "the last 3 days"],
      [30, "the last 30 days"],
    ] as const,
    [5, 2, 1, 1],
  );
  const filter = random.pick(
    whole ? (["extension", "size"] as const) : (["extension", "size", "none"] as const),
  );
  const extension = random.pick(["txt", "log", "csv", "jpg", "py"]);
  // find's -size +N<unit> counts whole units rounded up: a file counts when larger than N units.
  const [threshold, thresholdBytes, thresholdWords] = random.pick([
    ["+1M", 1 << 20, "1MB"],
    ["+100k", 100 << 10, "100KB"],
    ["+500k", 500 << 10, "500KB"],
  ] as const);
  const subfolders = ["", "", `/${random.pick(["old", "archive", "2023", "work"])}`];
  const files = new Map<string, { age: string; bytes: number }>();
  let count = 0;
  for (const file of fileNames(random, random.integer(6, 45))) {
    const own =
      filter === "extension" && random.chance(0.6) ? `${file.split(".")[0]}.${extension}` : file;
    const path = `~/${name}${random.pick(subfolders)}/${own}`;
    if (files.has(path)) continue;
    // Ages well inside or outside the period (find's -mtime -N: less than N whole days old).
    const recent = random.chance(0.6);
    const age = !recent
      ? `${random.integer(days + 1, days + 40)} days ago`
      : days === 1
        ? `${random.integer(1, 20)} hours ago`
        : `${random.integer(0, days - 1)} days ago`;
    const large = random.chance(0.5);
    const bytes = large
      ? Math.floor((thresholdBytes * random.integer(11, 60)) / 10)
      : random.integer(10, thresholdBytes / 2);
    files.set(path, { age, bytes });
    const passes =
      filter === "none" || (filter === "extension" ? own.endsWith(`.${extension}`) : large);
    if (recent && passes) count += 1;
  }
  const where = whole
    ? "your home directory"
    : random.pick([
        `the directory named "${name}" in your home directory`,
        `the "${name}" directory in your home directory`,
      ]);
  const condition =
    filter === "extension"
      ? ` and have a ".${extension}" extension`
      : filter === "size"
        ? ` and are larger than ${thresholdWords}`
        : "";
  const description = random.pick([
    `Count the number of files in ${where} that have been modified in ${period}${condition}.`,
    `How many files in ${where} were modified in ${period}${condition}? Exclude directories from the count.`,
    `Find and count the number of files within ${where} (and its subdirectories) that have been modified in ${period}${condition}.`,
  ]);
  const test =
    filter === "extension"
      ? ` -name '*.${extension}'`
      : filter === "size"
        ? ` -size ${threshold}`
        : "";
  return {
    kind: "recent-files",
    description,
    init: [
      ...[...new Set(subfolders)].map((sub) => `mkdir -p ~/${name}${sub}`),
      ...[...files].flatMap(([path, file]) => [
        `truncate -s ${file.bytes} ${path}`,
        `touch -d '${file.age}' ${path}`,
      ]),
    ].join("\n"),
    example: `find ${whole ? "~" : `~/${name}`} -type f -mtime -${days}${test} | wc -l`,
    answer: String(count),
  };
}

/** Unique IP addresses (the first field) across a folder's .log files, or of one access.log. */
function uniqueAddresses(random: Random, draw: FolderDraw): GeneratedTask {
  const folder = place(
    random,
    folderName(random, LOG_FOLDERS, ["logs", "log_files", "access_logs"]),
    draw,
  );
  const prefix = random.pick(["192.168", "10.0", "172.16"]);
  const pool = distinct(
    random.integer(2, 35),
    () => `${prefix}.${random.integer(0, 9)}.${random.integer(1, 254)}`,
  );
  const single = random.chance(0.3);
  const names = single ? ["access.log"] : logFileNames(random, random.integer(2, 4));
  const lines = names.map(() => [] as string[]);
  const total = random.integer(Math.max(pool.length, names.length), pool.length + 30);
  for (let k = 0; k < total; k++) {
    // Every address of the pool appears at least once, every file has a line.
    const address = k < pool.length ? pool[k] : random.pick(pool);
    const text = random.chance(0.5)
      ? `${address} - - [12/Oct/2023:${time(random)}] "GET /${random.pick(WORDS)} HTTP/1.1" ${random.pick([200, 200, 304, 404, 500])} ${random.integer(100, 9000)}`
      : `${address} ${random.pick(MESSAGES)}`;
    lines[k < names.length ? k : random.integer(0, names.length - 1)].push(text);
  }
  const writes = names.map((file, k) =>
    writeFile(`${folder.path}/${file}`, random.shuffle(lines[k])),
  );
  const description = single
    ? random.pick([
        `Count the number of unique IP addresses that have accessed the web server, using the log file \`${folder.path}/access.log\`. Each line starts with the client's IP address.`,
        `${folder.holds('a web server log named "access.log"')} Each line starts with an IP address. How many unique IP addresses appear in it?`,
      ])
    : random.pick([
        `${folder.holds('multiple log files with the ".log" extension')} Each line starts with an IP address. Count the total number of unique IP addresses across all these log files.`,
        `Count how many distinct IP addresses have accessed the server, as recorded in the ".log" files of ${folder.named}. The IP address is the first field of every line.`,
      ]);
  return {
    kind: "unique-addresses",
    description,
    init: [`mkdir -p ${folder.path}`, ...writes].join("\n"),
    example: `cat ${folder.path}/${single ? "access.log" : "*.log"} | awk '{print $1}' | sort -u | wc -l`,
    answer: String(pool.length),
  };
}

/** Unique dates (YYYY-MM-DD, the first field) across a folder's .log files. */
function uniqueDates(random: Random, draw: FolderDraw): GeneratedTask {
  const folder = place(
    random,
    folderName(random, LOG_FOLDERS, ["logs", "log_files", "logfiles"]),
    draw,
  );
  const days = random.sample(
    Array.from({ length: 60 }, (_, k) => k + 1),
    random.integer(1, 30),
  );
  const names = logFileNames(random, random.integer(2, 4));
  const lines = names.map(() => [] as string[]);
  const line = (day: number) => `${date(day)} ${time(random)} ${random.pick(MESSAGES)}`;
  days.forEach((day, k) => lines[k % names.length].push(line(day)));
  for (let extra = random.integer(0, 20); extra > 0; extra--)
    lines[random.integer(0, names.length - 1)].push(line(random.pick(days)));
  // Every file has a line (an empty file would add an empty date).
  for (const file of lines) if (file.length === 0) file.push(line(random.pick(days)));
  return {
    kind: "unique-dates",
    description: random.pick([
      `${folder.holds('multiple log files with the extension ".log". Each line starts with a timestamp in the format "YYYY-MM-DD HH:MM:SS" followed by a message')} Determine how many distinct days are represented across all log files combined.`,
      `Count how many unique dates (YYYY-MM-DD) appear across all the ".log" files in ${folder.named}; every line starts with its date.`,
    ]),
    init: [
      `mkdir -p ${folder.path}`,
      ...names.map((file, k) => writeFile(`${folder.path}/${file}`, random.shuffle(lines[k]))),
    ].join("\n"),
    example: `cat ${folder.path}/*.log | awk '{print $1}' | sort -u | wc -l`,
    answer: String(days.length),
  };
}

/** The sum of the integers at the start of the lines of a file in the home directory. */
function sumNumbers(random: Random): GeneratedTask {
  const file = random.pick(["data.txt", "numbers.txt", "values.txt", "scores.txt", "amounts.txt"]);
  const values = Array.from({ length: random.integer(3, 15) }, () => random.integer(1, 120));
  const withWord = random.chance(0.6);
  const hidden = random.chance(0.2);
  const path = `~/${hidden ? "." : ""}${file}`;
  return {
    kind: "sum-numbers",
    description: withWord
      ? `In your home directory, there is a ${hidden ? "hidden " : ""}file named \`${hidden ? "." : ""}${file}\` containing multiple lines of text. Each line consists of an integer followed by a word. Find the sum of all the integers in the file.`
      : `In your home directory, there is a ${hidden ? "hidden " : ""}file named "${hidden ? "." : ""}${file}" containing a list of numbers, one per line. What is the sum of all these numbers?`,
    init: writeFile(
      path,
      values.map((value) => (withWord ? `${value} ${random.pick(WORDS)}` : String(value))),
    ),
    example: `awk '{s += $1} END {print s}' ${path}`,
    answer: String(values.reduce((sum, value) => sum + value, 0)),
  };
}

/** Unique lines of a hidden file in the home directory (case-sensitive or not). */
function uniqueLines(random: Random): GeneratedTask {
  const file = `.${random.pick(["filedata", "entries", "wordlist", "names", "items", "records"])}`;
  const ignoreCase = random.chance(0.4);
  const pool = random.sample(WORDS, random.integer(2, 30));
  const lines = [
    ...pool,
    ...Array.from({ length: random.integer(1, 20) }, () => random.pick(pool)),
  ].map((word) => (random.chance(ignoreCase ? 0.4 : 0) ? word.toUpperCase() : word));
  // Case-sensitive tasks keep every word in lower case, so both counts are the pool's size.
  return {
    kind: "unique-lines",
    description: ignoreCase
      ? `In your home directory, there is a hidden file named "${file}" containing several words, one per line; some are repeated, in upper or lower case. Count the number of unique lines in this file without considering case differences.`
      : `In your home directory, there is a hidden file named \`${file}\` containing several lines of text. Some lines are duplicated. Count the number of unique lines in this file.`,
    init: writeFile(`~/${file}`, random.shuffle(lines)),
    example: ignoreCase
      ? `tr '[:upper:]' '[:lower:]' < ~/${file} | sort -u | wc -l`
      : `sort -u ~/${file} | wc -l`,
    answer: String(pool.length),
  };
}

/** Keys of a hidden key=value file in the home directory: how many unique keys, or one key's value. */
function configKeys(random: Random): GeneratedTask {
  const file = `.${random.pick(["configdata", "configurations", "settings", "envfile", "appconfig"])}`;
  const keys = random.sample(
    "user port timeout retries language timezone theme domain workers cache_size log_level max_clients backup_hour queue_depth region mode".split(
      " ",
    ),
    random.integer(3, 16),
  );
  const value = (key: string) =>
    key === "user"
      ? random.pick(PEOPLE).toLowerCase()
      : key === "language"
        ? random.pick(["en", "fr", "de", "es", "it", "ja"])
        : key === "timezone"
          ? random.pick(["UTC", "CET", "EST", "PST", "JST"])
          : ["theme", "mode", "region", "domain", "log_level"].includes(key)
            ? random.pick(WORDS)
            : String(random.integer(key === "port" ? 1024 : 1, key === "port" ? 65000 : 5000));
  const entries = keys.map((key) => [key, value(key)] as const);
  // Repeated keys (a later line gives another value): the unique count is still the keys'.
  const repeats = Array.from(
    { length: random.integer(0, 4) },
    () => [random.pick(keys), random.pick(WORDS)] as const,
  );
  const asksValue = random.chance(0.5);
  const once = entries.filter(([key]) => !repeats.some(([other]) => other === key));
  const target = once.length > 0 ? random.pick(once) : undefined;
  const lines = random.shuffle([...entries, ...repeats]).map(([key, v]) => `${key}=${v}`);
  if (asksValue && target !== undefined)
    return {
      kind: "config-value",
      description: random.pick([
        `In your home directory, there is a hidden file named \`${file}\` containing configuration entries in the format \`key=value\`. What is the value of the key "${target[0]}"?`,
        `The hidden file "${file}" in your home directory holds settings as key=value lines. Tell me the value of ${target[0]}.`,
      ]),
      init: writeFile(`~/${file}`, lines),
      example: `grep '^${target[0]}=' ~/${file} | cut -d= -f2`,
      answer: target[1],
    };
  return {
    kind: "unique-keys",
    description: `In your home directory, there is a hidden file named \`${file}\` containing various configuration entries in the format \`key=value\`; some keys appear more than once. Count how many unique keys are present in this file.`,
    init: writeFile(`~/${file}`, lines),
    example: `cut -d= -f1 ~/${file} | sort -u | wc -l`,
    answer: String(keys.length),
  };
}

/** Entries of one error code (or unique codes) in `server_logs.txt`: "Timestamp - ServerID - ErrorCode". */
function errorCodes(random: Random): GeneratedTask {
  const codes = random.sample(
    "E100 E204 E301 E302 E404 E418 E429 E500 E502 E503 E504 E601 E777 E808 E901 E999".split(" "),
    random.integer(2, 14),
  );
  const entries = Array.from({ length: random.integer(Math.max(10, codes.length), 60) }, (_, k) =>
    k < codes.length ? codes[k] : random.pick(codes),
  );
  const file = random.pick(["server_logs.txt", "errors.log", "server.log"]);
  const lines = random
    .shuffle(entries)
    .map(
      (code) =>
        `${date(random.integer(1, 40))} ${time(random)} - server${random.integer(1, 9)} - ${code}`,
    );
  const target = random.pick(codes);
  const counts = random.chance(0.5);
  return {
    kind: counts ? "error-code-entries" : "unique-error-codes",
    description: counts
      ? `In your home directory, there is a file named \`${file}\` which contains logs from multiple servers with entries formatted as "Timestamp - ServerID - ErrorCode". Count how many entries have the error code ${target}.`
      : `In your home directory, there is a file named "${file}" with log entries formatted as "Timestamp - ServerID - ErrorCode". Count how many unique ErrorCode entries are present in the file.`,
    init: writeFile(`~/${file}`, lines),
    example: counts
      ? `grep -c '${target}' ~/${file}`
      : `awk '{print $NF}' ~/${file} | sort -u | wc -l`,
    answer: String(counts ? entries.filter((code) => code === target).length : codes.length),
  };
}

/** How many times a person did an action in a stock log ("Name | Action | index | count"). */
function personActions(random: Random): GeneratedTask {
  const people = random.sample(PEOPLE, random.integer(2, 6));
  const person = random.pick(people);
  const action = random.pick(["Buy", "Sell"]);
  const lines = Array.from(
    { length: random.integer(10, 60) },
    () =>
      `${random.pick(people)} | ${random.pick(["Buy", "Sell"])} | ${random.integer(1, 99)} | ${random.integer(1, 500)}`,
  );
  const path = random.pick(["~/stock.log", "~/trades.log", "/var/logs/stock.log"]);
  return {
    kind: "person-actions",
    description: `Stock logs are shown in ${path}. Each line is "name | action | stock index | count". Tell me how many times ${person} ${action === "Buy" ? "bought" : "sold"} a stock.`,
    init: [`mkdir -p ${path.slice(0, path.lastIndexOf("/"))}`, writeFile(path, lines)].join("\n"),
    example: `grep '${person} | ${action}' ${path} | wc -l`,
    answer: String(lines.filter((line) => line.startsWith(`${person} | ${action} |`)).length),
  };
}

/** The name of the largest, or the most recently modified, file of a folder. */
function extremeFile(random: Random, draw: FolderDraw): GeneratedTask {
  const folder = place(
    random,
    folderName(random, TEXT_FOLDERS, ["files", "documents", "data"]),
    draw,
  );
  const names = fileNames(random, random.integer(3, 9));
  const largest = random.chance(0.5);
  // Distinct sizes and days: one file is the answer.
  const sizes = random.sample(
    Array.from({ length: 4000 }, (_, k) => 64 + 7 * k),
    names.length,
  );
  const days = random.sample(
    Array.from({ length: 28 }, (_, k) => k + 1),
    names.length,
  );
  const answer = largest
    ? names[sizes.indexOf(Math.max(...sizes))]
    : names[days.indexOf(Math.max(...days))];
  return {
    kind: largest ? "largest-file" : "newest-file",
    description: largest
      ? random.pick([
          `Which file in ${folder.named} is the largest? Answer with its file name only (without its directory).`,
          `${folder.holds("several files of different sizes")} Find the biggest file and tell me its name.`,
        ])
      : random.pick([
          `Which file in ${folder.named} was modified most recently? Tell me the file name only (without its directory).`,
          `${folder.holds("several files")} Tell me the name of the newest file (by modification time).`,
        ]),
    init: [
      `mkdir -p ${folder.path}`,
      ...names.map(
        (file, k) =>
          `head -c ${sizes[k]} /dev/zero > ${folder.path}/${file} && touch -d '2023-11-${String(days[k]).padStart(2, "0")} 12:00' ${folder.path}/${file}`,
      ),
    ].join("\n"),
    example: `ls -${largest ? "S" : "t"} ${folder.path} | head -n 1`,
    answer,
  };
}

/** The .log file of a folder with the most lines of a level (one file has the most). */
function mostEntriesFile(random: Random, draw: FolderDraw): GeneratedTask {
  const folder = place(random, folderName(random, LOG_FOLDERS, ["logs", "log_files"]), draw);
  const names = logFileNames(random, random.integer(2, 6));
  const level = random.pick(["ERROR", "WARN"]);
  const counts = random.sample(
    Array.from({ length: 15 }, (_, k) => k),
    names.length,
  );
  const writes = names.map((file, k) => {
    const lines = [
      ...Array.from(
        { length: counts[k] },
        () => `${date(random.integer(1, 40))} ${level} ${random.pick(MESSAGES)}`,
      ),
      ...Array.from(
        { length: random.integer(1, 8) },
        () => `${date(random.integer(1, 40))} INFO ${random.pick(MESSAGES)}`,
      ),
    ];
    return writeFile(`${folder.path}/${file}`, random.shuffle(lines));
  });
  return {
    kind: "most-entries-file",
    description: `${folder.holds('multiple log files with the extension ".log"')} Find out which log file contains the most lines with "${level}" and return its filename (without the directory).`,
    init: [`mkdir -p ${folder.path}`, ...writes].join("\n"),
    example: `cd ${folder.path} && grep -c '${level}' *.log | sort -t: -k2 -n | tail -n 1 | cut -d: -f1`,
    answer: names[counts.indexOf(Math.max(...counts))],
  };
}

/** Directories (recursively), hidden files, empty files, or files of an extension, in a folder. */
function folderCounts(random: Random, draw: FolderDraw): GeneratedTask {
  const folder = place(
    random,
    folderName(random, TEXT_FOLDERS, ["files", "data", "projects"]),
    draw,
  );
  const kind = random.pick(["directories", "hidden", "empty", "extension", "name"] as const);
  const subfolders = distinct(random.integer(1, 14), () =>
    Array.from({ length: random.integer(1, 3) }, () => random.pick(WORDS.slice(0, 24))).join("/"),
  );
  const directories = new Set<string>();
  for (const sub of subfolders) {
    const parts = sub.split("/");
    for (let k = 1; k <= parts.length; k++) directories.add(parts.slice(0, k).join("/"));
  }
  const extension = random.pick(["helloworld", "bak", "tmp", "dat", "cfg", "md"]);
  const stem = random.pick(["report", "summary", "draft", "invoice"]);
  let count = 0;
  const files = distinct(random.integer(5, 40), () => {
    const inFolder = kind === "hidden" || random.chance(0.4) ? "" : `${random.pick(subfolders)}/`;
    const hidden = random.chance(0.4);
    const file =
      kind === "extension" && random.chance(0.45)
        ? `${random.pick(FILE_STEMS)}${random.integer(1, 40)}.${extension}`
        : kind === "name" && random.chance(0.45)
          ? `${random.pick(["", "weekly_", "old_", "final_"])}${stem}${random.integer(1, 40)}.${random.pick(EXTENSIONS)}`
          : `${random.pick(FILE_STEMS.filter((other) => !other.includes(stem)))}${random.integer(1, 40)}.${random.pick(EXTENSIONS)}`;
    return `${inFolder}${kind === "hidden" && hidden ? "." : ""}${file}`;
  });
  const empty = new Set(files.filter(() => random.chance(0.4)));
  for (const file of files) {
    const base = file.slice(file.lastIndexOf("/") + 1);
    if (
      kind === "hidden"
        ? base.startsWith(".")
        : kind === "empty"
          ? empty.has(file)
          : kind === "extension"
            ? base.endsWith(`.${extension}`)
            : kind === "name"
              ? base.includes(stem)
              : false
    )
      count += 1;
  }
  const answer = kind === "directories" ? directories.size + 1 : count;
  const descriptions = {
    directories: [
      `How many directories (recursively) are in ${folder.named}, counting the directory itself?`,
      `Count all directories under ${folder.named}, including itself and every subdirectory at any depth.`,
    ],
    hidden: [
      `How many hidden files are in ${folder.named}? (not including subdirectories)`,
      `Count the hidden files (names starting with a dot) directly in ${folder.named}.`,
    ],
    empty: [
      `How many empty files are there in ${folder.named} and all of its subdirectories?`,
      `Count the files of size zero in ${folder.named}, recursively.`,
    ],
    extension: [
      `Recursively find how many files have the extension .${extension} in ${folder.named}.`,
      `How many ".${extension}" files are there in ${folder.named} and its subdirectories?`,
    ],
    name: [
      `Count the number of files in ${folder.named} (recursively) whose names contain the word "${stem}".`,
      `How many files under ${folder.named} have "${stem}" in their file name?`,
    ],
  };
  const examples = {
    directories: `find ${folder.path} -type d | wc -l`,
    hidden: `find ${folder.path} -maxdepth 1 -type f -name '.*' | wc -l`,
    empty: `find ${folder.path} -type f -empty | wc -l`,
    extension: `find ${folder.path} -type f -name '*.${extension}' | wc -l`,
    name: `find ${folder.path} -type f -name '*${stem}*' | wc -l`,
  };
  return {
    kind: `folder-${kind}`,
    description: random.pick(descriptions[kind]),
    init: [
      `mkdir -p ${folder.path}`,
      ...subfolders.map((sub) => `mkdir -p ${folder.path}/${sub}`),
      ...files.map((file) =>
        empty.has(file)
          ? `touch ${folder.path}/${file}`
          : `echo ${random.pick(WORDS)} > ${folder.path}/${file}`,
      ),
    ].join("\n"),
    example: examples[kind],
    answer: String(answer),
  };
}

/** Files of a folder that contain a word (TODO), or the words of its .txt files. */
function contentCounts(random: Random, draw: FolderDraw): GeneratedTask {
  const folder = place(
    random,
    folderName(random, TEXT_FOLDERS, ["files", "documents", "notes"]),
    draw,
  );
  const words = random.chance(0.5);
  const names = fileNames(random, random.integer(4, 26), "txt");
  const marker = random.pick(["TODO", "FIXME", "Linux"]);
  let count = 0;
  const writes = names.map((file) => {
    const lines = Array.from({ length: random.integer(1, 6) }, () =>
      sentence(random, random.integer(1, 8)),
    );
    if (!words && random.chance(0.45)) {
      lines.splice(random.integer(0, lines.length), 0, `${marker}: ${sentence(random, 2)}`);
      count += 1;
    }
    if (words) count += lines.join(" ").split(" ").length;
    return writeFile(`${folder.path}/${file}`, lines);
  });
  return words
    ? {
        kind: "word-count",
        description: random.pick([
          `Count the total number of words across all \`.txt\` files in ${folder.named}.`,
          `${folder.holds("several text files (.txt)")} How many words do they hold in total?`,
        ]),
        init: [`mkdir -p ${folder.path}`, ...writes].join("\n"),
        example: `cat ${folder.path}/*.txt | wc -w`,
        answer: String(count),
      }
    : {
        kind: "files-containing",
        description: random.pick([
          `Count the number of files in ${folder.named} that contain the string "${marker}" in their contents.`,
          `${folder.holds("several text files")} How many of these files contain the word "${marker}"?`,
        ]),
        init: [`mkdir -p ${folder.path}`, ...writes].join("\n"),
        example: `grep -l '${marker}' ${folder.path}/*.txt | wc -l`,
        answer: String(count),
      };
}

/** The kinds of generated tasks and their weights: AgentBench's most frequent kinds most often. */
const KINDS: ReadonlyArray<readonly [(random: Random, draw: FolderDraw) => GeneratedTask, number]> =
  [
    [logLevelLines, 4],
    [wordLines, 3],
    [totalLines, 2],
    [recentFiles, 3],
    [uniqueAddresses, 2],
    [uniqueDates, 1],
    [sumNumbers, 1],
    [uniqueLines, 1],
    [configKeys, 2],
    [errorCodes, 1],
    [personActions, 1],
    [extremeFile, 3],
    [mostEntriesFile, 1],
    [folderCounts, 3],
    [contentCounts, 2],
  ];

/**
 * Generated instance `k` of a split on world `seed` (train: index OS_GENERATED_OFFSET + k; test:
 * OS_GENERATED_TEST_OFFSET + k), its folders placed as `places` says (default `home`).
 */
export function generateOsSample(
  k: number,
  seed = 0,
  split: "train" | "test" = "train",
  places: OsGeneratedPlaces = "home",
): OsSample {
  const random = new Random(mixSeeds(seed, split === "train" ? 0x05 : 0x05e, k));
  const kind = random.weighted(
    KINDS.map(([generate]) => generate),
    KINDS.map(([, weight]) => weight),
  );
  const draw: FolderDraw = { places, drawn: [] };
  const task = kind(random, draw);
  const mistake = homeWritten(task.example, draw.drawn);
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
    ...(mistake === undefined ? {} : { mistake: { language: "bash", code: mistake } }),
  };
}

/**
 * The example with each of the working folder's folders written in the home folder instead
 * (`log_files/*.log` -> `~/log_files/*.log`): the command a model trained on home rows writes
 * for "a directory named "log_files"" (docs/tasks/os.md); undefined when no folder is relative.
 */
function homeWritten(example: string, folders: readonly Place[]): string | undefined {
  let written = example;
  for (const folder of folders.filter((f) => f.relative)) {
    const name = folder.path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    written = written.replace(
      new RegExp(`(?<![\\w~/.-])${name}(?=[/\\s'"]|$)`, "g"),
      `~/${folder.path}`,
    );
  }
  return written === example ? undefined : written;
}

/** `count` generated instances of a split on world `seed`, their folders placed as `places` says. */
export function generateOsSamples(
  count: number,
  seed = 0,
  split: "train" | "test" = "train",
  places: OsGeneratedPlaces = "home",
): OsSample[] {
  return Array.from({ length: count }, (_, k) => generateOsSample(k, seed, split, places));
}
