/**
 * Project-generated DB tasks: tables, questions, gold SQL and answers in the form of the
 * AgentBench dbbench samples (data.ts), graded by the same comparison (compare.ts).
 *
 * 150 AgentBench training samples are too few for a small model to learn SQL; these add
 * thousands of training instances of the same kinds: INSERT (difficulty 0), UPDATE and
 * DELETE (1), and SELECT kinds (2: lookups and lists `other`, `counting`, `ranking`,
 * `comparison`, `aggregation-SUM/AVG/MAX/MIN`). Everything is deterministic from
 * (seed, instance number). Each instance has one table of 6-14 rows of one of six domains,
 * its name and column names drawn per table (hundreds of names a domain, so that a model
 * copies them from the description rather than recalls them), every value a string and
 * every column TEXT in the database, as in dbbench; a question in the project's or dbbench's
 * phrasings; the table description dbbench gives (`add_description`); gold SQL that is valid
 * MySQL; and:
 * - SELECT kinds: the answers the gold SQL returns, computed here (`label`);
 * - INSERT / UPDATE / DELETE: the gold statement (`label`, which the expert replays) and
 *   `answer_md5`, the table hash after it, computed here exactly as the database computes
 *   `tableHashQuery` (MD5 over the sorted 5-character MD5 prefixes of the rows' comma-joined
 *   values).
 */
import { createHash } from "node:crypto";
import { Random, mixSeeds } from "../random.js";
import { quoteIdentifier, type DbSample, type DbTable } from "./data.js";

/** Indices of generated instances start here (AgentBench train: 0…, dev: 10000…). */
export const GENERATED_OFFSET = 100_000;
/** Generated training instances the DB family adds by default. */
export const DEFAULT_GENERATED_COUNT = 4000;

interface ColumnSpec {
  /** The names a table may give this column (one is drawn per table), so that a model must copy them from the description. */
  names: readonly string[];
  /** A value of this column (a string, as stored). */
  value: (random: Random) => string;
  /** Numbers (the aggregates, rankings and comparisons use these). */
  numeric?: boolean;
}

/** A column of one table: its spec with the name drawn for it. */
interface Column extends ColumnSpec {
  name: string;
}

interface Domain {
  /** What its tables are called; a table's name puts one of these in a pattern (`tableName`). */
  nouns: readonly string[];
  /** Singular and plural of what a row is. */
  entity: string;
  entities: string;
  /** The column whose values are unique (how a question names a row). */
  key: ColumnSpec;
  columns: readonly ColumnSpec[];
}

const FIRST = [
  "Amir",
  "Bea",
  "Carlos",
  "Dana",
  "Elif",
  "Femi",
  "Greta",
  "Hiro",
  "Ines",
  "Jonas",
  "Kira",
  "Luca",
  "Maya",
  "Nils",
  "Omar",
  "Priya",
  "Quinn",
  "Rosa",
  "Sven",
  "Tara",
  "Umar",
  "Vera",
  "Wen",
  "Yusuf",
  "Zoe",
];
const LAST = [
  "Novak",
  "Okafor",
  "Lindqvist",
  "Moreau",
  "Tanaka",
  "Haddad",
  "Kowalski",
  "Silva",
  "Brennan",
  "Ivanova",
  "Mensah",
  "Castillo",
  "Fischer",
  "Duarte",
  "Nakamura",
  "Osei",
  "Petrov",
  "Quintero",
  "Rahman",
  "Sato",
];
const PLACES = [
  "Ashford",
  "Brookvale",
  "Cedar Falls",
  "Dunmore",
  "Eastwick",
  "Fairhaven",
  "Glenrock",
  "Harborview",
  "Ironbridge",
  "Juniper Bay",
  "Kingsport",
  "Lakemont",
  "Millbrook",
  "Northgate",
  "Oakridge",
  "Pinecrest",
  "Redwater",
  "Stonehill",
  "Thornbury",
  "Westfield",
];
const COUNTRIES = [
  "Norway",
  "Chile",
  "Kenya",
  "Japan",
  "Canada",
  "Portugal",
  "India",
  "Poland",
  "Ghana",
  "Peru",
];
const DEPARTMENTS = [
  "Sales",
  "Engineering",
  "Finance",
  "Marketing",
  "Support",
  "Legal",
  "Research",
];
const CATEGORIES = ["Kitchen", "Garden", "Toys", "Office", "Sports", "Audio", "Lighting"];
const BRANDS = ["Acme", "Borealis", "Corvid", "Dynamo", "Everline", "Fjord", "Gale"];
const GENRES = ["Mystery", "Fantasy", "History", "Poetry", "Science", "Romance", "Travel"];
const TITLE_WORDS = [
  "Silent",
  "River",
  "Crimson",
  "Garden",
  "Northern",
  "Light",
  "Hidden",
  "Harbor",
  "Paper",
  "Moon",
  "Glass",
  "Forest",
  "Winter",
  "Salt",
  "Iron",
  "Echo",
  "Copper",
  "Lantern",
];
const MASCOTS = ["Hawks", "Otters", "Comets", "Rangers", "Wolves", "Pilots", "Foxes", "Giants"];
const LETTERS = "ABCDEFGHJKLMNPRSTUVWXZ";

const person = (random: Random) => `${random.pick(FIRST)} ${random.pick(LAST)}`;
const code = (prefix: (random: Random) => string, digits: number) => (random: Random) =>
  `${prefix(random)}-${String(random.integer(10 ** (digits - 1), 10 ** digits - 1))}`;
const letters = (count: number) => (random: Random) =>
  Array.from({ length: count }, () => random.pick([...LETTERS])).join("");
const integer =
  (low: number, high: number, step = 1) =>
  (random: Random) =>
    String(low + step * random.integer(0, Math.floor((high - low) / step)));
const one = (items: readonly string[]) => (random: Random) => random.pick(items);

const DOMAINS: readonly Domain[] = [
  {
    nouns: [
      "Employees",
      "Staff Directory",
      "Company Staff",
      "Personnel",
      "Payroll",
      "Team Members",
      "Workforce",
    ],
    entity: "employee",
    entities: "employees",
    key: { names: ["Name", "Employee", "Full Name", "Employee Name"], value: person },
    columns: [
      { names: ["Department", "Dept", "Division", "Unit"], value: one(DEPARTMENTS) },
      { names: ["City", "Office", "Location", "Based In"], value: one(PLACES) },
      {
        names: ["Salary", "Annual Salary", "Pay", "Salary (USD)"],
        value: integer(30000, 120000, 500),
        numeric: true,
      },
      { names: ["Age", "Age (years)", "Years Old"], value: integer(21, 64), numeric: true },
    ],
  },
  {
    nouns: [
      "Products",
      "Inventory",
      "Store Catalog",
      "Stock List",
      "Product Range",
      "Warehouse Items",
    ],
    entity: "product",
    entities: "products",
    key: { names: ["Product Code", "SKU", "Item No.", "Code"], value: code(letters(2), 4) },
    columns: [
      { names: ["Category", "Type", "Product Type", "Section"], value: one(CATEGORIES) },
      { names: ["Brand", "Maker", "Manufacturer", "Label"], value: one(BRANDS) },
      {
        names: ["Price", "Unit Price", "Price ($)", "Cost"],
        value: integer(5, 900),
        numeric: true,
      },
      { names: ["Stock", "Units", "In Stock", "Quantity"], value: integer(0, 500), numeric: true },
    ],
  },
  {
    nouns: [
      "Books",
      "Library Catalog",
      "Reading List",
      "Book Collection",
      "Bestsellers",
      "Publications",
    ],
    entity: "book",
    entities: "books",
    key: {
      names: ["Title", "Book", "Book Title", "Work"],
      value: (random) => `The ${random.pick(TITLE_WORDS)} ${random.pick(TITLE_WORDS)}`,
    },
    columns: [
      { names: ["Author", "Writer", "Written By"], value: person },
      { names: ["Genre", "Category", "Subject"], value: one(GENRES) },
      {
        names: ["Year", "Published", "Year Published", "Release Year"],
        value: integer(1950, 2023),
        numeric: true,
      },
      { names: ["Pages", "Page Count", "Length (pages)"], value: integer(80, 900), numeric: true },
    ],
  },
  {
    nouns: [
      "Teams",
      "League Table",
      "Club Standings",
      "Season Results",
      "Division Standings",
      "Tournament Teams",
    ],
    entity: "team",
    entities: "teams",
    key: {
      names: ["Team", "Club", "Team Name", "Side"],
      value: (random) => `${random.pick(PLACES)} ${random.pick(MASCOTS)}`,
    },
    columns: [
      { names: ["Coach", "Head Coach", "Manager"], value: person },
      { names: ["Home City", "Home", "Base", "Hometown"], value: one(PLACES) },
      { names: ["Wins", "W", "Games Won", "Won"], value: integer(0, 30), numeric: true },
      { names: ["Points", "Pts", "Total Points", "Score"], value: integer(0, 90), numeric: true },
    ],
  },
  {
    nouns: [
      "Cities",
      "Town Statistics",
      "Municipalities",
      "Urban Areas",
      "City Data",
      "Settlements",
    ],
    entity: "city",
    entities: "cities",
    key: {
      names: ["City", "Town", "Name", "Municipality"],
      value: (random) =>
        `${random.pick(PLACES)} ${random.pick(["North", "South", "Upper", "Lower", "Old", "New"])}`,
    },
    columns: [
      { names: ["Country", "Nation", "State"], value: one(COUNTRIES) },
      { names: ["Mayor", "Leader", "Head of Council"], value: person },
      {
        names: ["Population", "Residents", "Inhabitants", "Pop."],
        value: integer(1000, 900000),
        numeric: true,
      },
      {
        names: ["Area", "Area (km2)", "Size", "Land Area"],
        value: integer(10, 900),
        numeric: true,
      },
    ],
  },
  {
    nouns: [
      "Courses",
      "Class Schedule",
      "Course Catalog",
      "Course Offerings",
      "Timetable",
      "Modules",
    ],
    entity: "course",
    entities: "courses",
    key: { names: ["Course Code", "Code", "Course", "Course No."], value: code(letters(3), 3) },
    columns: [
      { names: ["Instructor", "Teacher", "Lecturer", "Taught By"], value: person },
      { names: ["Room", "Classroom", "Venue", "Hall"], value: code(letters(1), 2) },
      { names: ["Credits", "Credit Hours", "ECTS", "Units"], value: integer(1, 6), numeric: true },
      {
        names: ["Enrolled", "Students", "Enrollment", "Class Size"],
        value: integer(5, 300),
        numeric: true,
      },
    ],
  },
];

/**
 * A table's name: one of the domain's nouns in one of the shapes dbbench's tables have
 * (`Music Chart History`, `skyscrapers_in_Columbus`, `Baseball_Team_Record`), with a place or
 * a year, so that hundreds of names per domain make a model copy the name, not recall it.
 */
function tableName(domain: Domain, random: Random): string {
  const noun = random.pick(domain.nouns);
  const place = random.pick(PLACES);
  const year = String(random.integer(1990, 2024));
  const snake = (text: string) => text.replaceAll(" ", "_");
  return random.pick([
    () => noun,
    () => `${place} ${noun}`,
    () => `${noun} ${year}`,
    () => `${noun} of ${place}`,
    () => snake(`${noun.toLowerCase()} in ${place}`),
    () => snake(`${place} ${noun}`),
  ])();
}

/** Task kinds and their weights: about dbbench's mix (a third INSERT, a third UPDATE/DELETE, a third SELECT kinds). */
const KINDS = [
  "INSERT",
  "UPDATE",
  "DELETE",
  "other",
  "list",
  "counting",
  "ranking",
  "comparison",
  "aggregation-SUM",
  "aggregation-AVG",
  "aggregation-MAX",
  "aggregation-MIN",
] as const;
type Kind = (typeof KINDS)[number];
const KIND_WEIGHTS = [8, 6, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1];

/** A table of one domain: `rows` rows, unique keys. */
interface Table {
  domain: Domain;
  name: string;
  columns: Column[];
  rows: string[][];
}

/** `a, b, and c` (`a and b`, `a`). */
function andList(items: readonly string[]): string {
  return items.length < 3
    ? items.join(" and ")
    : `${items.slice(0, -1).join(", ")}, and ${items[items.length - 1]}`;
}

/** `text` as a SQL string literal. */
function literal(text: string): string {
  return `'${text.replaceAll("\\", "\\\\").replaceAll("'", "''")}'`;
}

/** The row hash of `tableHashQuery`: the first 5 hex digits of MD5(CONCAT_WS(',', values)). */
function rowHash(row: readonly string[]): string {
  return createHash("md5").update(row.join(","), "utf8").digest("hex").slice(0, 5);
}

/** `answer_md5` of a table's rows: MD5 of the sorted row hashes joined by commas (GROUP_CONCAT), as `[('<md5>',)]`. */
export function generatedTableHash(rows: readonly (readonly string[])[]): string {
  const joined = rows.map(rowHash).sort().join(",");
  return `[('${createHash("md5").update(joined, "utf8").digest("hex")}',)]`;
}

// Every letter of the alphabet and most of English's spellings of a syllable, so that made-up
// words come out in many tokenizer pieces: a copy learnt on a few hundred pieces (the first
// inventory, 21 onsets × 10 vowels × 10 codas) garbled AgentBench's names of other pieces
// (docs/warmstart.md, session 20). Single letters are the most common, as in English.
const SINGLE_ONSETS = [
  "",
  "b",
  "c",
  "d",
  "f",
  "g",
  "h",
  "j",
  "k",
  "l",
  "m",
  "n",
  "p",
  "qu",
  "r",
  "s",
  "t",
  "v",
  "w",
  "x",
  "y",
  "z",
];
const CLUSTER_ONSETS = [
  "bl",
  "br",
  "ch",
  "cl",
  "cr",
  "dr",
  "fl",
  "fr",
  "gl",
  "gr",
  "kn",
  "ph",
  "pl",
  "pr",
  "sc",
  "sh",
  "sk",
  "sl",
  "sm",
  "sn",
  "sp",
  "st",
  "sw",
  "th",
  "tr",
  "tw",
  "wh",
  "wr",
];
const VOWELS = [
  "a",
  "e",
  "i",
  "o",
  "u",
  "y",
  "a",
  "e",
  "i",
  "o",
  "ai",
  "au",
  "ea",
  "ee",
  "ei",
  "ie",
  "io",
  "oa",
  "oo",
  "ou",
  "ue",
];
const SINGLE_CODAS = ["b", "d", "f", "g", "l", "m", "n", "p", "r", "s", "t", "x", "z"];
const CLUSTER_CODAS = ["ck", "ll", "nd", "ng", "nk", "nt", "rd", "rk", "rn", "ss", "st", "th"];

/** A made-up word of 2 or 3 syllables (`Quelbon`, `twaimex`): none of the generator's own words. */
function madeUpWord(random: Random): string {
  const syllable = () =>
    random.pick(random.chance(0.75) ? SINGLE_ONSETS : CLUSTER_ONSETS) +
    random.pick(VOWELS) +
    (random.chance(0.5) ? "" : random.pick(random.chance(0.75) ? SINGLE_CODAS : CLUSTER_CODAS));
  return Array.from({ length: random.chance(0.7) ? 2 : 3 }, syllable).join("");
}

/**
 * The renaming of an open-vocabulary table: every word of 3+ letters (but `The`, `and`, units) in
 * its name, column names and values becomes a made-up word, the same one wherever it occurs
 * (so the question, the table and the gold SQL agree), keeping the word's capital. With the
 * generator's ~200 words a model can learn to "copy" by recalling among them (session 19:
 * table names right on generated tasks, generator words on AgentBench's); made-up words leave
 * copying as the only way.
 */
function renaming(random: Random): (text: string) => string {
  const KEEP = new Set(["the", "and", "usd", "years", "pages"]); // function words and units
  const words = new Map<string, string>();
  const used = new Set<string>();
  const rename = (word: string) => {
    let made = words.get(word.toLowerCase());
    while (made === undefined) {
      const candidate = madeUpWord(random);
      if (!used.has(candidate)) {
        used.add(candidate);
        words.set(word.toLowerCase(), (made = candidate));
      }
    }
    return word[0] === word[0].toUpperCase() ? made[0].toUpperCase() + made.slice(1) : made;
  };
  return (text) =>
    text.replace(/[A-Za-z]{3,}/g, (word) => (KEEP.has(word.toLowerCase()) ? word : rename(word)));
}

/** Share of generated tables whose words are made up (`renaming`). */
const OPEN_VOCABULARY_SHARE = 0.5;

/**
 * A table of one domain: `rows` rows, unique keys. `words` (an independent stream, so that the
 * other tables stay what they were) decides whether its words are made up.
 */
function makeTable(random: Random, words: Random): Table {
  const domain = random.pick(DOMAINS);
  const rename = words.chance(OPEN_VOCABULARY_SHARE) ? renaming(words) : (text: string) => text;
  const columns = [domain.key, ...domain.columns].map((spec) => ({
    ...spec,
    name: rename(random.pick(spec.names)),
    value: (r: Random) => rename(spec.value(r)),
  }));
  const count = random.integer(6, 14);
  const keys = new Set<string>();
  const rows: string[][] = [];
  while (rows.length < count) {
    const key = columns[0].value(random);
    if (keys.has(key.toLowerCase())) continue;
    keys.add(key.toLowerCase());
    rows.push(columns.map((column, i) => (i === 0 ? key : column.value(random))));
  }
  return { domain, name: rename(tableName(domain, random)), columns, rows };
}

/** A row not in the table yet (a fresh key). */
function newRow(table: Table, random: Random): string[] {
  const keys = new Set(table.rows.map((row) => row[0].toLowerCase()));
  for (;;) {
    const key = table.columns[0].value(random);
    if (!keys.has(key.toLowerCase()))
      return [key, ...table.columns.slice(1).map((column) => column.value(random))];
  }
}

interface Generated {
  description: string;
  sql: string;
  /** SELECT kinds: the answers. */
  answers?: string[];
  /** Modifications: the rows after the gold statement. */
  after?: string[][];
}

const number = (text: string) => Number(text);
/** Python's repr of a float the way the label writes it (at most 2 decimals: the comparison allows 0.01). */
const decimal = (value: number) => String(Math.round(value * 100) / 100);

/** One question of `kind` on `table`, or undefined when the table does not allow it (e.g. a tie for a ranking). */
function makeQuestion(kind: Kind, table: Table, random: Random): Generated | undefined {
  const { domain, rows, columns } = table;
  const T = quoteIdentifier(table.name);
  const key = columns[0];
  const K = quoteIdentifier(key.name);
  const row = random.pick(rows);
  const categorical = columns.slice(1).filter((column) => !column.numeric);
  const numeric = columns.filter((column) => column.numeric);
  const at = (column: Column) => columns.indexOf(column);
  switch (kind) {
    case "INSERT": {
      const added = newRow(table, random);
      const names = columns.map((column) => quoteIdentifier(column.name)).join(", ");
      const sql = `INSERT INTO ${T} (${names}) VALUES (${added.map(literal).join(", ")})`;
      const details = columns.map((column, i) => `${column.name} '${added[i]}'`).join(", ");
      const quoted = added.map((value) => `'${value}'`);
      const description = random.pick([
        `Add a new ${domain.entity} to the ${table.name} table: ${details}.`,
        `Insert (${quoted.join(", ")}) into the '${table.name}' table.`,
        `A new ${domain.entity} has to be recorded in ${table.name} with ${details}.`,
        // dbbench's own shapes
        `Insert into the '${table.name}' table the values for ${andList(columns.map((column) => column.name))}, which are ${andList(quoted)}, respectively.`,
        `Insert a new row into the '${table.name}' table with the following values: ${columns.map((column, i) => `${column.name} as ${quoted[i]}`).join(", ")}.`,
        `Insert data into the table named ${table.name}, with values ${andList(columns.map((column, i) => `${quoted[i]} for ${column.name}`))}.`,
        // dbbench's too: columns in lower case, numbers unquoted (the header list spells them)
        `Insert a new record into the '${table.name}' table with the values of ${andList(columns.map((column, i) => `${column.name.toLowerCase()} ${column.numeric ? added[i] : quoted[i]}`))}.`,
      ]);
      return { description, sql, after: [...rows, added] };
    }
    case "UPDATE": {
      const column = random.pick(columns.slice(1));
      let value = column.value(random);
      while (value === row[at(column)]) value = column.value(random);
      const sql = `UPDATE ${T} SET ${quoteIdentifier(column.name)} = ${literal(value)} WHERE ${K} = ${literal(row[0])}`;
      const description = random.pick([
        `Change the ${column.name} of the ${domain.entity} '${row[0]}' to '${value}' in the ${table.name} table.`,
        `In ${table.name}, set ${column.name} to '${value}' for the ${domain.entity} whose ${key.name} is '${row[0]}'.`,
        `The ${column.name} of ${row[0]} is now '${value}'; update the ${table.name} table.`,
        // dbbench's own shapes
        `In the '${table.name}' table, update the '${column.name}' column to '${value}' where the '${key.name}' column equals '${row[0]}'.`,
        `Alter the '${column.name}' value to '${value}' for the entry with '${key.name}' equal to '${row[0]}' in the '${table.name}' table.`,
        `Update the ${column.name.toLowerCase()} of ${row[0]} to ${column.numeric ? value : `'${value}'`} in the ${table.name} table.`,
      ]);
      return {
        description,
        sql,
        after: rows.map((r) => (r === row ? r.map((v, i) => (i === at(column) ? value : v)) : r)),
      };
    }
    case "DELETE": {
      if (random.chance(0.7)) {
        const sql = `DELETE FROM ${T} WHERE ${K} = ${literal(row[0])}`;
        const description = random.pick([
          `Remove the ${domain.entity} '${row[0]}' from the ${table.name} table.`,
          `Delete the row of ${row[0]} from ${table.name}.`,
        ]);
        return { description, sql, after: rows.filter((r) => r !== row) };
      }
      const column = random.pick(categorical);
      const value = row[at(column)];
      const sql = `DELETE FROM ${T} WHERE ${quoteIdentifier(column.name)} = ${literal(value)}`;
      const after = rows.filter((r) => r[at(column)] !== value);
      if (after.length === 0) return undefined; // the hash of an empty table is NULL
      return {
        description: `Delete every ${domain.entity} whose ${column.name} is '${value}' from the ${table.name} table.`,
        sql,
        after,
      };
    }
    case "other": {
      const column = random.pick(columns.slice(1));
      const sql = `SELECT ${quoteIdentifier(column.name)} FROM ${T} WHERE ${K} = ${literal(row[0])}`;
      const description = random.pick([
        `What is the ${column.name} of the ${domain.entity} '${row[0]}'?`,
        `Which ${column.name} does ${row[0]} have?`,
        `what is the ${column.name.toLowerCase()} of ${row[0]}?`,
      ]);
      return { description, sql, answers: [row[at(column)]] };
    }
    case "list": {
      const column = random.pick(categorical);
      const value = row[at(column)];
      const sql = `SELECT ${K} FROM ${T} WHERE ${quoteIdentifier(column.name)} = ${literal(value)}`;
      return {
        description: `List the ${key.name} of every ${domain.entity} whose ${column.name} is '${value}'.`,
        sql,
        answers: rows.filter((r) => r[at(column)] === value).map((r) => r[0]),
      };
    }
    case "counting": {
      if (random.chance(0.5)) {
        const column = random.pick(categorical);
        const value = row[at(column)];
        const sql = `SELECT COUNT(*) FROM ${T} WHERE ${quoteIdentifier(column.name)} = ${literal(value)}`;
        return {
          description: `How many ${domain.entities} have the ${column.name} '${value}'?`,
          sql,
          answers: [String(rows.filter((r) => r[at(column)] === value).length)],
        };
      }
      const column = random.pick(numeric);
      const threshold = number(row[at(column)]);
      const sql = `SELECT COUNT(*) FROM ${T} WHERE ${quoteIdentifier(column.name)} > ${threshold}`;
      return {
        description: `How many ${domain.entities} have a ${column.name} greater than ${threshold}?`,
        sql,
        answers: [String(rows.filter((r) => number(r[at(column)]) > threshold).length)],
      };
    }
    case "ranking": {
      const column = random.pick(numeric);
      const highest = random.chance(0.5);
      const sorted = [...rows].sort(
        (a, b) => (highest ? -1 : 1) * (number(a[at(column)]) - number(b[at(column)])),
      );
      if (sorted[0][at(column)] === sorted[1][at(column)]) return undefined;
      const sql = `SELECT ${K} FROM ${T} ORDER BY CAST(${quoteIdentifier(column.name)} AS SIGNED) ${highest ? "DESC" : "ASC"} LIMIT 1`;
      return {
        description: `Which ${domain.entity} has the ${highest ? "highest" : "lowest"} ${column.name}?`,
        sql,
        answers: [sorted[0][0]],
      };
    }
    case "comparison": {
      const column = random.pick(numeric);
      const other = random.pick(rows.filter((r) => r !== row && r[at(column)] !== row[at(column)]));
      if (!other) return undefined;
      const winner = number(row[at(column)]) > number(other[at(column)]) ? row : other;
      const sql = `SELECT ${K} FROM ${T} WHERE ${K} IN (${literal(row[0])}, ${literal(other[0])}) ORDER BY CAST(${quoteIdentifier(column.name)} AS SIGNED) DESC LIMIT 1`;
      return {
        description: `Which has the higher ${column.name}, ${row[0]} or ${other[0]}?`,
        sql,
        answers: [winner[0]],
      };
    }
    default: {
      const operation = kind.slice("aggregation-".length) as "SUM" | "AVG" | "MAX" | "MIN";
      const column = random.pick(numeric);
      const filter = random.pick(categorical);
      const value = row[at(filter)];
      const values = rows.filter((r) => r[at(filter)] === value).map((r) => number(r[at(column)]));
      const total = values.reduce((a, b) => a + b, 0);
      const result = {
        SUM: total,
        AVG: total / values.length,
        MAX: Math.max(...values),
        MIN: Math.min(...values),
      }[operation];
      const target =
        operation === "MAX" || operation === "MIN"
          ? `CAST(${quoteIdentifier(column.name)} AS SIGNED)`
          : quoteIdentifier(column.name);
      const sql = `SELECT ${operation}(${target}) FROM ${T} WHERE ${quoteIdentifier(filter.name)} = ${literal(value)}`;
      const word = { SUM: "total", AVG: "average", MAX: "highest", MIN: "lowest" }[operation];
      return {
        description: `What is the ${word} ${column.name} of the ${domain.entities} whose ${filter.name} is '${value}'?`,
        sql,
        answers: [decimal(result)],
      };
    }
  }
}

/** Generated instance `k` (0-based) of `seed`: a training sample with index GENERATED_OFFSET + k. */
export function generateDbSample(k: number, seed = 0): DbSample {
  const random = new Random(mixSeeds(seed, 0xdb, k));
  const words = new Random(mixSeeds(seed, 0xdb0, k));
  for (;;) {
    const table = makeTable(random, words);
    const kind = random.weighted(KINDS, KIND_WEIGHTS);
    const question = makeQuestion(kind, table, random);
    if (!question) continue;
    const dbTable: DbTable = {
      table_name: table.name,
      table_info: {
        columns: table.columns.map((column) => ({ name: column.name, type: "TEXT" })),
        rows: table.rows,
      },
    };
    const modification = question.after !== undefined;
    return {
      index: GENERATED_OFFSET + k,
      split: "train",
      description: question.description,
      type: kind === "list" ? "other" : kind,
      tables: [dbTable],
      addDescription: `The name of this table is ${table.name}, and the headers of this table are ${table.columns.map((column) => column.name).join(",")}.`,
      evidence: "",
      label: modification ? [question.sql] : question.answers!,
      sql: question.sql,
      ...(modification ? { answerMd5: generatedTableHash(question.after!) } : {}),
    };
  }
}

/** `count` generated training instances of `seed`. */
export function generateDbSamples(count = DEFAULT_GENERATED_COUNT, seed = 0): DbSample[] {
  return Array.from({ length: count }, (_, k) => generateDbSample(k, seed));
}
