/** The DB task's reward, as the original: SELECT kinds compare the answers with the label, INSERT/UPDATE/DELETE the tables' hash with the expected one. */
import { compareDbAnswers, hashFromResult } from "./compare.js";
import { isModification, tableHashQuery, type DbSample } from "./data.js";

/**
 * Whether the committed `answers` are right: for a modification, the MD5 of each table (run
 * through `execute`, the session's own connection) against the sample's; otherwise the answers
 * against the label after normalisation.
 */
export async function gradeDb(
  sample: DbSample,
  answers: unknown,
  execute: (sql: string) => Promise<string>,
): Promise<boolean> {
  if (isModification(sample.type)) {
    const hashes: string[] = [];
    for (const table of sample.tables)
      hashes.push(hashFromResult(await execute(tableHashQuery(table))));
    return compareDbAnswers(hashes.sort().join("_"), sample.answerMd5, sample.type);
  }
  return compareDbAnswers(answers, sample.label, sample.type);
}
