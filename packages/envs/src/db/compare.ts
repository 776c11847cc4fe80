/**
 * Grading of the DB task, as dbbench's `DBResultProcessor` does it:
 * - answers and labels are cleaned into lists of strings: a MySQL result text
 *   (`[('a',), (1.0,)]`) gives its one-column values; a list gives its items; quotes and
 *   spaces are stripped; `None`, `null`, `nan`, `inf`, empty → "0"; a trailing `%` and
 *   thousands separators are dropped;
 * - INSERT / UPDATE / DELETE: the cleaned table hash must equal the cleaned `answer_md5`;
 * - one value each: equal as floats within 0.01, or as strings;
 * - several values: all floats → matched one to one within 0.01; else equal as sets.
 */
import { parsePythonList, pythonStr } from "./python-format.js";

const SPECIAL_VALUES: Record<string, string> = {
  none: "0",
  null: "0",
  undefined: "0",
  nan: "0",
  inf: "0",
  infinity: "0",
  "-inf": "0",
  "-infinity": "0",
  "": "0",
};

/** Python's `str.strip(chars)`. */
function stripChars(text: string, characters: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && characters.includes(text[start])) start += 1;
  while (end > start && characters.includes(text[end - 1])) end -= 1;
  return text.slice(start, end);
}

const WHITESPACE = " \t\n\r\v\f";

export function normaliseSpecialValue(value: unknown): string {
  if (value === null || value === undefined) return "0";
  let text = stripChars(pythonStr(value), WHITESPACE);
  if (text.endsWith("%")) return stripChars(text.slice(0, -1), WHITESPACE);
  if (text.includes(",") && !text.startsWith("[") && !text.endsWith("]"))
    text = text.replaceAll(",", "");
  return SPECIAL_VALUES[text.toLowerCase()] ?? text;
}

function cleanItem(item: unknown): string {
  const text = Array.isArray(item) && item.length === 1 ? pythonStr(item[0]) : pythonStr(item);
  return normaliseSpecialValue(stripChars(stripChars(text, WHITESPACE), "'\""));
}

/** The cleaned list of an answer or label (dbbench's `_clean_answer`). */
export function cleanAnswer(answer: unknown): string[] {
  if (answer === null || answer === undefined) return ["0"];
  if (typeof answer === "string") {
    const text = stripChars(answer, WHITESPACE);
    if (text.startsWith("[") && text.endsWith("]")) {
      const parsed = parsePythonList(text);
      if (parsed) {
        // A MySQL result: one-column tuples give their value, wider tuples are skipped.
        const isRows = parsed.every((item) => Array.isArray(item));
        if (isRows)
          return parsed
            .filter((row) => row.length === 1)
            .map((row) => cleanItem((row as string[])[0]));
        return parsed.map((item) => cleanItem(item));
      }
      return splitListText(text.slice(1, -1));
    }
    return [normaliseSpecialValue(stripChars(text, "'\""))];
  }
  if (Array.isArray(answer)) return answer.map((item) => cleanItem(item));
  return [normaliseSpecialValue(stripChars(stripChars(pythonStr(answer), WHITESPACE), "'\""))];
}

/** The original's fallback for a bracketed text that is not a Python literal: split on commas outside quotes. */
function splitListText(body: string): string[] {
  const items: string[] = [];
  let current = "";
  let inQuotes = false;
  for (const character of body) {
    if (character === '"' || character === "'") inQuotes = !inQuotes;
    else if (character === "," && !inQuotes) {
      if (current)
        items.push(normaliseSpecialValue(stripChars(stripChars(current, WHITESPACE), "'\"")));
      current = "";
    } else current += character;
  }
  if (current)
    items.push(normaliseSpecialValue(stripChars(stripChars(current, WHITESPACE), "'\"")));
  return items;
}

/** Python's `float(text)` acceptance. */
function isFloat(text: string): boolean {
  return /^\s*[+-]?(\d+\.?\d*(e[+-]?\d+)?|\.\d+(e[+-]?\d+)?|inf(inity)?|nan)\s*$/i.test(
    text.replaceAll("_", ""),
  );
}

function floatEqual(a: string, b: string, tolerance = 1e-2): boolean {
  return Math.abs(Number(a) - Number(b)) <= tolerance;
}

/** Whether an answer matches the ground truth for a query type (`INSERT`, `UPDATE`, `DELETE` or a SELECT kind). */
export function compareDbAnswers(
  answer: unknown,
  groundTruth: unknown,
  queryType: string,
): boolean {
  const given = cleanAnswer(answer);
  const expected = cleanAnswer(groundTruth);
  if (queryType === "INSERT" || queryType === "DELETE" || queryType === "UPDATE") {
    return (
      given.length === expected.length &&
      given.every((value, position) => value === expected[position])
    );
  }
  if (given.length === 1 && expected.length === 1) {
    const [a, b] = [given[0], expected[0]];
    if (a === "0" && b === "0") return true;
    if (isFloat(a) && isFloat(b)) return floatEqual(a, b);
    return a === b;
  }
  if (given.every(isFloat) && expected.every(isFloat)) {
    if (given.length !== expected.length) return false;
    const matched = new Array(expected.length).fill(false);
    for (const value of given) {
      const position = expected.findIndex(
        (candidate, index) => !matched[index] && floatEqual(value, candidate),
      );
      if (position < 0) return false;
      matched[position] = true;
    }
    return matched.every(Boolean);
  }
  const givenSet = new Set(given);
  const expectedSet = new Set(expected);
  return (
    givenSet.size === expectedSet.size && [...givenSet].every((value) => expectedSet.has(value))
  );
}

/** The table-hash text `[('<md5>',)]` reduced as the original: the md5 alone. */
export function hashFromResult(result: string): string {
  const cleaned = stripChars(result, "[]()");
  return stripChars(stripChars(cleaned.split(",")[0], WHITESPACE), "'");
}
