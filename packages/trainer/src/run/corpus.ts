/**
 * The corpus for training a fresh model's byte-level BPE tokenizer (`agentrl model init`
 * without `--corpus`, and the fresh model of `agentrl sft`):
 * - `defaultTokenizerCorpus()`: representative agent text in the Qwen2.5 chat format, with
 *   `<tool_call>` JSON, bash, SQL, knowledge-graph and shopping actions, household
 *   commands, numbers and plain English (synchronous, a few hundred documents);
 * - `gatherTaskText()`: the task families' OWN text — opening messages and tool schemas
 *   rendered by the chat template, expert turns and observations of expert episodes at
 *   every difficulty (KG, WebShop, ALFWorld), and the AgentBench OS / DB problem texts
 *   read from their data files (no Docker needed);
 * - `tokenizerCorpus()`: both, what `model init` trains on.
 *
 * A tokenizer trained on the task text makes the tasks' words, entity names, relations and
 * product codes short, which is what a tiny model needs to copy them (see
 * docs/warmstart.md).
 */
import { QWEN25_CHAT_TEMPLATE, renderChatTemplate } from "@agentrl/policy";
import {
  createTaskFamily,
  loadDbSamples,
  loadOsSamples,
  playEpisodes,
  type CurriculumTaskFamily,
} from "@agentrl/envs";

/** Extra corpus sources (functions returning documents), appended by `defaultTokenizerCorpus()`. */
export const TASK_TEXT_SOURCES: (() => string[])[] = [];

const SYSTEM_PROMPTS = [
  "You are a helpful assistant.",
  "You are an agent that solves tasks by calling tools. Think step by step, then call exactly one tool per turn.",
  "You are an assistant that will act like a person. I will play the role of a Linux (Ubuntu) operating system. Your goal is to implement the operations required by me or answer the questions proposed by me.",
  "You are a database assistant. Use execute_sql to query the MySQL database and commit_final_answer when you know the answer.",
  "You are an agent that answers questions based on the knowledge stored in a knowledge base. To achieve this, you can use the following tools to query the KB.",
  "You are web shopping. I will give you instructions about what to do. You have to follow the instructions.",
  "Interact with a household to solve a task. Imagine you are an intelligent agent in a household environment and your target is to perform actions to complete the task goal.",
];

const USER_TASKS = [
  "How many files are there in /etc that end with .conf?",
  "Find the total size of all .log files under /var/log, in bytes.",
  "Create a user named alice and add her to the group developers.",
  "What is the process id of the program listening on port 8080?",
  "Count the lines of /usr/share/dict/words that contain the letter q.",
  "Which employees in the sales department earn more than 50000? Give their names.",
  "What was the total revenue in March 2021 according to the orders table?",
  "Insert a new row for the product 'blue mug' with price 7.99 into the products table.",
  "Update the status of order 1042 to 'shipped'.",
  "Which team won the most matches in the 2019 season?",
  "Which film directed by Christopher Nolan has the longest runtime?",
  "Who are the children of the person that founded the company Acme Robotics?",
  "Find the river that flows through the most countries among those in Europe.",
  "i need a long clip-in hair extension which is natural looking, and price lower than 40.00 dollars",
  "i want a pack of 3 organic green tea bags with no sugar, and price lower than 20.00 dollars",
  "Your task is to: put a clean mug in coffeemachine.",
  "Your task is to: heat some egg and put it in garbagecan.",
  "Your task is to: examine the alarmclock with the desklamp.",
  "Your task is to: find two pillow and put them in sofa.",
  "Add 32 and 49, then multiply the result by 82.",
];

const BASH_COMMANDS = [
  "ls -la /etc | grep '\\.conf$' | wc -l",
  "find /var/log -name '*.log' -type f -exec du -cb {} + | tail -n 1",
  "useradd -m alice && usermod -aG developers alice",
  "ss -ltnp | grep ':8080'",
  "grep -c q /usr/share/dict/words",
  "cat /proc/cpuinfo | grep 'model name' | head -n 1",
  "awk -F: '$3 >= 1000 {print $1}' /etc/passwd",
  "du -sh /home/* 2>/dev/null | sort -h | tail -n 3",
  'for f in *.txt; do echo "$f: $(wc -w < "$f")"; done',
  "ps aux --sort=-%mem | head -n 5",
  "echo $((1024 * 1024)) && date +%Y-%m-%d",
  "tar -czf backup.tar.gz /opt/app && ls -l backup.tar.gz",
  "sed -i 's/localhost/127.0.0.1/g' /etc/app/config.ini",
  "chmod 755 /usr/local/bin/run.sh && ls -l /usr/local/bin/run.sh",
  "python3 -c 'print(sum(range(101)))'",
];

const SQL_QUERIES = [
  "SELECT name FROM employees WHERE department = 'sales' AND salary > 50000;",
  "SELECT SUM(amount) FROM orders WHERE order_date BETWEEN '2021-03-01' AND '2021-03-31';",
  "INSERT INTO products (name, price) VALUES ('blue mug', 7.99);",
  "UPDATE orders SET status = 'shipped' WHERE id = 1042;",
  "SELECT team, COUNT(*) AS wins FROM matches WHERE season = 2019 AND result = 'W' GROUP BY team ORDER BY wins DESC LIMIT 1;",
  "SELECT `Player`, `Points` FROM `table_1_2345` WHERE `Position` = 'Guard' ORDER BY `Points` DESC;",
  "SELECT COUNT(DISTINCT customer_id) FROM orders;",
  "SELECT AVG(price) FROM products WHERE category = 'kitchen';",
  "DELETE FROM sessions WHERE last_seen < '2020-01-01';",
  "SELECT e.name, d.name FROM employees e JOIN departments d ON e.department_id = d.id;",
];

const TOOL_CALLS: [string, Record<string, unknown>][] = [
  ["bash_action", { script: "ls -la /etc | grep '\\.conf$' | wc -l" }],
  ["answer_action", { answer: "42" }],
  ["finish_action", { thought: "The user alice was created and added to developers." }],
  ["execute_sql", { query: "SELECT COUNT(*) FROM employees;" }],
  ["commit_final_answer", { answers: ["Alice", "Bob"] }],
  ["get_relations", { variable: "Christopher Nolan" }],
  ["get_neighbors", { variable: "Christopher Nolan", relation: "film.director.film" }],
  ["intersection", { variable1: "#0", variable2: "#1" }],
  ["get_attributes", { variable: "#0" }],
  ["argmax", { variable: "#1", attribute: "film.film.runtime" }],
  ["count", { variable: "#2" }],
  ["search_action", { keywords: "natural looking long clip-in hair extension" }],
  ["click_action", { value: "B09QQP3356" }],
  ["click_action", { value: "buy now" }],
  ["take_action", { action: "go to countertop 1" }],
  ["take_action", { action: "take mug 2 from countertop 1" }],
  ["take_action", { action: "clean mug 2 with sinkbasin 1" }],
  ["take_action", { action: "put mug 2 in/on coffeemachine 1" }],
  ["calculator", { expression: "(32 + 49) * 82" }],
];

const OBSERVATIONS = [
  "17",
  "total 3456789",
  'LISTEN 0 128 0.0.0.0:8080 0.0.0.0:* users:(("node",pid=2317,fd=19))',
  "[('Alice',), ('Bob',), ('Carol',)]",
  "[(1234567.89,)]",
  "Query OK, 1 row affected (0.01 sec)",
  "[film.director.film, people.person.children, organization.organization.founders]",
  "Variable #0, which are instances of film.film",
  "[Search Results] Page 1 (Total results: 50) [B09QQP3356] Clip in Hair Extensions, 22 inch, Natural Black $29.99",
  "You arrive at countertop 1. On the countertop 1, you see a mug 2, a knife 1, and a bread 1.",
  "You pick up the mug 2 from the countertop 1.",
  "You clean the mug 2 using the sinkbasin 1.",
  "Nothing happens.",
  "6642",
  "No executable tool calls found. Please call a tool instead.",
];

const ENGLISH = [
  "The quick brown fox jumps over the lazy dog.",
  "First I will list the files, then I will count the matching ones.",
  "The answer is the number of lines printed by the previous command.",
  "I need to check the schema of the table before writing the query.",
  "Let me look at the relations of this entity to find the right one.",
  "The search results show a matching product under the price limit, so I will open it.",
  "I should go to the countertop, take the mug, clean it in the sink, and put it in the coffee machine.",
  "The task is complete. The final answer is given above.",
  "Reinforcement learning improves the agent by rewarding successful episodes.",
  "Each turn, the agent reads the observation, thinks, and calls one tool with JSON arguments.",
  "If the command fails, read the error message carefully and try a different approach.",
  "Numbers such as 3, 14, 159, 2653, 58979 and 3.14159 appear in many tasks.",
];

const HOUSEHOLD_OBJECTS = [
  "apple",
  "bowl",
  "bread",
  "butterknife",
  "cellphone",
  "creditcard",
  "cup",
  "dishsponge",
  "egg",
  "fork",
  "kettle",
  "keychain",
  "knife",
  "ladle",
  "lettuce",
  "mug",
  "newspaper",
  "pan",
  "pen",
  "pencil",
  "peppershaker",
  "plate",
  "pot",
  "potato",
  "remotecontrol",
  "saltshaker",
  "soapbar",
  "spatula",
  "spoon",
  "spraybottle",
  "tomato",
  "towel",
  "vase",
  "watch",
  "winebottle",
  "book",
  "box",
  "candle",
  "cd",
  "cloth",
  "laptop",
  "pillow",
  "statue",
  "tissuebox",
  "toiletpaper",
];
const RECEPTACLES = [
  "cabinet",
  "countertop",
  "drawer",
  "fridge",
  "garbagecan",
  "microwave",
  "shelf",
  "sinkbasin",
  "stoveburner",
  "toaster",
  "coffeemachine",
  "diningtable",
  "sidetable",
  "desk",
  "dresser",
  "bed",
  "sofa",
  "armchair",
  "safe",
  "bathtubbasin",
  "toilet",
  "handtowelholder",
  "towelholder",
  "coffeetable",
  "tvstand",
];
const ACTIONS = [
  "go to",
  "open",
  "close",
  "take",
  "put",
  "clean",
  "heat",
  "cool",
  "use",
  "examine",
  "inventory",
  "look",
];
const PRODUCT_WORDS = [
  "organic",
  "gluten free",
  "sugar free",
  "vegan",
  "long lasting",
  "waterproof",
  "wireless",
  "stainless steel",
  "cotton",
  "leather",
  "memory foam",
  "rechargeable",
  "non-slip",
  "lightweight",
  "portable",
  "high resolution",
  "noise cancelling",
  "men's",
  "women's",
  "x-large",
  "small",
  "medium",
  "pack of 6",
  "size 9",
  "black",
  "white",
  "navy blue",
  "dark brown",
  "rose gold",
];
const PRODUCTS = [
  "running shoes",
  "yoga mat",
  "face moisturizer",
  "hair extension",
  "bluetooth headphones",
  "phone case",
  "coffee maker",
  "green tea",
  "protein bars",
  "t-shirt",
  "hiking boots",
  "desk lamp",
  "throw pillow",
  "shampoo",
  "wall art",
  "gaming mouse",
  "water bottle",
  "backpack",
  "sunglasses",
  "dog food",
];
const RELATIONS = [
  "people.person.place_of_birth",
  "people.person.nationality",
  "people.person.children",
  "film.film.directed_by",
  "film.film.starring",
  "film.actor.film",
  "music.artist.album",
  "location.location.containedby",
  "location.country.capital",
  "organization.organization.founders",
  "sports.sports_team.championships",
  "book.author.works_written",
  "award.award_winner.awards_won",
  "education.educational_institution.students_graduates",
  "government.politician.party",
];
const PATHS = [
  "/etc/passwd",
  "/etc/hosts",
  "/var/log/syslog",
  "/home/user/notes.txt",
  "/usr/local/bin",
  "/tmp/data.csv",
  "/opt/app/config.yaml",
  "/root/.bashrc",
  "/proc/meminfo",
  "/srv/www/index.html",
];

/** Generated task-like lines: household commands, product searches, KG relations, shell paths, numbers. */
function generatedTaskLines(pick: <T>(items: readonly T[]) => T): string[] {
  const lines: string[] = [];
  for (let i = 0; i < 400; i++) {
    const object = pick(HOUSEHOLD_OBJECTS);
    const receptacle = pick(RECEPTACLES);
    const n = 1 + (i % 4);
    lines.push(
      `${pick(ACTIONS)} ${object} ${n} ${i % 2 ? "from" : "in/on"} ${receptacle} ${1 + (i % 3)}. On the ${receptacle} ${n}, you see a ${pick(HOUSEHOLD_OBJECTS)} ${n}, and a ${object} ${1 + (i % 5)}.`,
    );
    lines.push(
      `i am looking for ${pick(PRODUCT_WORDS)} ${pick(PRODUCT_WORDS)} ${pick(PRODUCTS)}, and price lower than ${(10 + ((i * 7) % 90)).toFixed(2)} dollars. [B0${(100000 + i * 7919).toString(36).toUpperCase()}] $${(5 + ((i * 13) % 95)).toFixed(2)}`,
    );
    lines.push(
      `get_neighbors(#${i % 5}, ${pick(RELATIONS)}) -> #${(i % 5) + 1}; get_relations returned [${pick(RELATIONS)}, ${pick(RELATIONS)}]`,
    );
    lines.push(
      `cat ${pick(PATHS)} | grep -c "${pick(HOUSEHOLD_OBJECTS)}" ; echo $? ; wc -l ${pick(PATHS)} # ${(i * 37) % 1000} lines, ${i * 4096} bytes`,
    );
  }
  return lines;
}

function chat(
  system: string,
  user: string,
  calls: [string, Record<string, unknown>][],
  observations: string[],
  final: string,
): string {
  const parts = [`<|im_start|>system\n${system}<|im_end|>`, `<|im_start|>user\n${user}<|im_end|>`];
  calls.forEach(([name, args], i) => {
    parts.push(
      `<|im_start|>assistant\n<tool_call>\n${JSON.stringify({ name, arguments: args })}\n</tool_call><|im_end|>`,
    );
    parts.push(
      `<|im_start|>user\n<tool_response>\n${observations[i % observations.length]}\n</tool_response><|im_end|>`,
    );
  });
  parts.push(`<|im_start|>assistant\n${final}<|im_end|>`);
  return parts.join("\n");
}

/** Deterministic documents (a few hundred) for BPE training. */
export function defaultTokenizerCorpus(): string[] {
  const documents: string[] = [];
  let state = 12345;
  const pick = <T>(items: readonly T[]): T => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return items[(state >>> 8) % items.length];
  };
  for (let i = 0; i < 160; i++) {
    const calls = Array.from({ length: 1 + (i % 4) }, () => pick(TOOL_CALLS));
    const observations = calls.map(() => pick(OBSERVATIONS));
    documents.push(
      chat(pick(SYSTEM_PROMPTS), pick(USER_TASKS), calls, observations, pick(ENGLISH)),
    );
  }
  for (const command of BASH_COMMANDS)
    documents.push(
      `<tool_call>\n${JSON.stringify({ name: "bash_action", arguments: { script: command } })}\n</tool_call>`,
      command,
    );
  for (const query of SQL_QUERIES)
    documents.push(
      `<tool_call>\n${JSON.stringify({ name: "execute_sql", arguments: { query } })}\n</tool_call>`,
      query,
    );
  for (let i = 0; i < 120; i++) {
    const a = (i * 37) % 1000;
    const b = (i * 91 + 7) % 100;
    documents.push(`${a} + ${b} = ${a + b}. ${a} * ${b} = ${a * b}. ${pick(ENGLISH)}`);
  }
  documents.push(...ENGLISH, ...OBSERVATIONS, ...USER_TASKS, ...generatedTaskLines(pick));
  for (const source of TASK_TEXT_SOURCES) documents.push(...source());
  return documents;
}

/** Task families whose expert episodes feed the corpus (pure TypeScript, no Docker). */
export const CORPUS_TASKS = ["kg", "webshop", "alfworld"] as const;

export interface TaskTextOptions {
  /** Generated families to play expert episodes of. Default `CORPUS_TASKS` (kg, webshop, alfworld). */
  tasks?: readonly string[];
  /** Expert episodes per difficulty of each family (train split). Default 40. */
  episodesPerDifficulty?: number;
  /** Seed of the generated worlds (the training's `worldSeed`). Default 0. */
  seed?: number;
  /** AgentBench data folder for the OS and DB problem texts. Default `../shared/data/agentbench` when it exists; skipped when absent. */
  dataDir?: string;
  /** Chat template the conversations are rendered with (the one the model will use). Default Qwen2.5's. */
  chatTemplate?: string;
  /** Where one-line notes go (a family that failed to start, data not found). Default: nowhere. */
  log?: (line: string) => void;
}

/**
 * The task families' own text, one document per expert episode (the whole conversation
 * rendered by the chosen chat template (Qwen2.5 by default), tools included), plus the OS and DB problem texts.
 * Deterministic for a seed. A few seconds for the defaults.
 */
export async function gatherTaskText(options: TaskTextOptions = {}): Promise<string[]> {
  const log = options.log ?? (() => {});
  const perDifficulty = options.episodesPerDifficulty ?? 40;
  const documents: string[] = [];
  for (const name of options.tasks ?? CORPUS_TASKS) {
    let family: CurriculumTaskFamily;
    try {
      family = await createTaskFamily(name, { seed: options.seed ?? 0 });
    } catch (error) {
      log(`corpus: skipping ${name}: ${(error as Error).message.split("\n")[0]}`);
      continue;
    }
    try {
      for (const difficulty of family.difficulties) {
        const indices = family.indicesAt("train", difficulty).slice(0, perDifficulty);
        const episodes = await playEpisodes(family, indices, (index) => family.expert(index));
        for (const episode of episodes) {
          documents.push(
            renderChatTemplate(options.chatTemplate ?? QWEN25_CHAT_TEMPLATE, episode.messages, {
              tools: episode.tools,
            }),
          );
        }
      }
    } finally {
      await family.close?.();
    }
  }
  documents.push(...agentBenchProblemTexts(options.dataDir, log));
  return documents;
}

/**
 * OS problem descriptions with their example scripts, and DB questions with their table
 * names, columns and SQL, from the AgentBench training files as envs reads them
 * (`loadOsSamples`, `loadDbSamples`; no Docker). Empty when the data is not there.
 */
export function agentBenchProblemTexts(
  dataDir: string | undefined,
  log: (line: string) => void = () => {},
): string[] {
  const documents: string[] = [];
  try {
    for (const sample of loadOsSamples(dataDir, false).filter((s) => s.split === "train")) {
      const code = sample.example?.code;
      documents.push(
        `Now, I will start a new problem in a new OS. My problem is:\n\n${sample.description}${code ? `\n<tool_call>\n${JSON.stringify({ name: "bash_action", arguments: { script: code } })}\n</tool_call>` : ""}`,
      );
    }
  } catch (error) {
    log(`corpus: OS text skipped (${(error as Error).message.split(". ")[0]})`);
  }
  try {
    for (const sample of loadDbSamples(dataDir)
      .filter((s) => s.split === "train")
      .slice(0, 1500)) {
      const table = sample.tables.length === 1 ? sample.tables[0] : undefined;
      const columns = table?.table_info.columns.map((column) => column.name).join(", ") ?? "";
      documents.push(
        `${sample.description}\nThe name of this table is ${table?.table_name ?? ""}, and the headers of this table are ${columns}.${sample.sql ? `\n<tool_call>\n${JSON.stringify({ name: "execute_sql", arguments: { query: sample.sql } })}\n</tool_call>` : ""}`,
      );
    }
  } catch (error) {
    log(`corpus: DB text skipped (${(error as Error).message.split(". ")[0]})`);
  }
  return documents;
}

/** The built-in agent corpus plus the task families' own text: what a fresh model's tokenizer trains on. */
export async function tokenizerCorpus(options: TaskTextOptions = {}): Promise<string[]> {
  return [...defaultTokenizerCorpus(), ...(await gatherTaskText(options))];
}
