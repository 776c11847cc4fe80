/**
 * AgentBench dbbench samples: loading and validation (zod).
 *
 * Files (in `<data>/dbbench/`): `train.jsonl` (split `train`, indices 0…) and `dev.jsonl`
 * (split `test`, indices 10000 + j). Each sample has one table (name, columns, rows), a
 * question, a type (`INSERT`, `UPDATE`, or a SELECT kind such as `counting`), the label
 * (expected answers; for INSERT/UPDATE the reference statement) and, for INSERT/UPDATE,
 * `answer_md5`: the table hash after the right change.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { resolveAgentBenchDir, TaskDataError } from "../docker/agentbench.js";
import type { Split } from "../types.js";
import { pythonStr } from "./python-format.js";

const tableSchema = z.object({
  table_name: z.string(),
  table_info: z.object({
    columns: z.array(z.object({ name: z.string(), type: z.string().optional() })),
    rows: z.array(z.array(z.unknown())),
  }),
});

const sampleSchema = z.object({
  description: z.string(),
  label: z.array(z.unknown()).optional(),
  type: z.array(z.string()).min(1),
  table: z.union([tableSchema, z.array(tableSchema)]),
  add_description: z.string().optional(),
  evidence: z.string().optional(),
  sql: z.object({ query: z.string() }).nullable().optional(),
  answer_md5: z.string().optional(),
});

export type DbTable = z.infer<typeof tableSchema>;

export interface DbSample {
  index: number;
  split: Split;
  description: string;
  /** `INSERT`, `UPDATE`, `DELETE`, or a SELECT kind (`other`, `counting`, `aggregation-MAX`, …). */
  type: string;
  tables: DbTable[];
  addDescription: string;
  evidence: string;
  /** Expected answers (SELECT kinds) or the reference statement (INSERT/UPDATE). */
  label: unknown[];
  /** Gold SQL of SELECT kinds, as given (often not valid MySQL). */
  sql?: string;
  /** `[('<md5>',)]` of the table after the right change (INSERT/UPDATE/DELETE). */
  answerMd5?: string;
}

export const TRAIN_FILE = "train.jsonl";
export const TEST_FILE = "dev.jsonl";
export const TEST_OFFSET = 10_000;

export function isModification(type: string): boolean {
  return type === "INSERT" || type === "UPDATE" || type === "DELETE";
}

function loadFile(path: string, split: Split, offset: number): DbSample[] {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new TaskDataError(`cannot read ${path}: ${(error as Error).message}`);
  }
  return text
    .split("\n")
    .filter((line) => line.trim())
    .map((line, position) => {
      const parsed = sampleSchema.safeParse(JSON.parse(line));
      if (!parsed.success)
        throw new TaskDataError(
          `${path} line ${position + 1} is not a dbbench sample: ${parsed.error.message.slice(0, 300)}`,
        );
      const raw = parsed.data;
      const type = raw.type[0];
      if (isModification(type) && !raw.answer_md5)
        throw new TaskDataError(`${path} line ${position + 1}: ${type} sample without answer_md5`);
      return {
        index: offset + position,
        split,
        description: raw.description,
        type,
        tables: Array.isArray(raw.table) ? raw.table : [raw.table],
        addDescription: raw.add_description ?? "",
        evidence: raw.evidence ?? "",
        label: raw.label ?? [],
        sql: raw.sql?.query,
        answerMd5: raw.answer_md5,
      };
    });
}

/** All DB samples (train then test), from `dataDir` (the AgentBench folder) or the default. */
export function loadDbSamples(dataDir?: string): DbSample[] {
  const folder = resolveAgentBenchDir("dbbench", dataDir);
  return [
    ...loadFile(join(folder, TRAIN_FILE), "train", 0),
    ...loadFile(join(folder, TEST_FILE), "test", TEST_OFFSET),
  ];
}

/**
 * Why MySQL would refuse to build `sample`'s tables (a table or column name empty or over 64
 * characters, a column name twice), or `undefined` when it can build them. One AgentBench dev
 * sample (10005, `historic_sites`) has an empty column name: no agent can solve it.
 */
export function unbuildableReason(sample: DbSample): string | undefined {
  for (const table of sample.tables) {
    const names = table.table_info.columns.map((column) => column.name);
    const bad = [table.table_name, ...names].find((name) => name.trim() === "" || name.length > 64);
    if (bad !== undefined)
      return `table ${JSON.stringify(table.table_name)} has a name MySQL refuses (${JSON.stringify(bad)}: empty or over 64 characters)`;
    if (new Set(names.map((name) => name.toLowerCase())).size !== names.length)
      return `table ${JSON.stringify(table.table_name)} names a column twice`;
  }
  return undefined;
}

/** `name` quoted as a MySQL identifier. */
export function quoteIdentifier(name: string): string {
  return `\`${name.replaceAll("`", "``")}\``;
}

/**
 * The statements that build a sample's tables, as the original: every column TEXT, every
 * value Python's `str()` of the JSON value, inserted with placeholders.
 */
export function initStatements(sample: DbSample): Array<{ sql: string; values: string[] }> {
  const statements: Array<{ sql: string; values: string[] }> = [];
  for (const table of sample.tables) {
    const columns = table.table_info.columns.map((column) => quoteIdentifier(column.name));
    statements.push({
      sql: `CREATE TABLE IF NOT EXISTS ${quoteIdentifier(table.table_name)} (${columns.map((column) => `${column} TEXT`).join(",")})`,
      values: [],
    });
    const rows = table.table_info.rows;
    if (rows.length === 0) continue;
    const placeholders = rows.map((row) => `(${row.map(() => "?").join(",")})`).join(",");
    statements.push({
      sql: `INSERT INTO ${quoteIdentifier(table.table_name)} (${columns.join(",")}) VALUES ${placeholders}`,
      values: rows.flatMap((row) => row.map((value) => pythonStr(value))),
    });
  }
  return statements;
}

/** The original's table-hash query: MD5 over the sorted 5-character MD5 prefixes of the rows. */
export function tableHashQuery(table: DbTable): string {
  const columns = table.table_info.columns.map((column) => quoteIdentifier(column.name)).join(",");
  return `select md5(group_concat(rowhash order by rowhash)) as hash from( SELECT substring(MD5(CONCAT_WS(',', ${columns})), 1, 5) AS rowhash FROM ${quoteIdentifier(table.table_name)}) as sub;`;
}

/**
 * Difficulty levels, from the sample's type:
 * - 0: INSERT — the row to add is spelled out in the question (one statement, then commit);
 * - 1: UPDATE — find the row and change it (one statement, then commit);
 * - 2: SELECT kinds — query, read the result and transcribe the answer exactly.
 */
export function dbDifficulty(sample: DbSample): number {
  if (sample.type === "INSERT") return 0;
  if (isModification(sample.type)) return 1;
  return 2;
}
