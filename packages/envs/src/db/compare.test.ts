/**
 * The DB task's grading and result format, checked against what the original (Python,
 * mysql-connector, dbbench's DBResultProcessor) gives on the same inputs. No Docker needed.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { cleanAnswer, compareDbAnswers, hashFromResult } from "./compare.js";
import { initStatements, tableHashQuery, dbDifficulty, type DbSample } from "./data.js";
import {
  parsePythonList,
  pythonFloatRepr,
  pythonRowsRepr,
  pythonStr,
  pythonStringRepr,
} from "./python-format.js";

describe("Python result format", () => {
  test("str of rows as mysql-connector shows them", () => {
    const text = pythonRowsRepr([
      [{ kind: "str", value: "Women +60kg Bronze" }],
      [
        { kind: "int", value: "36" },
        { kind: "float", value: 167 },
        { kind: "none" },
        { kind: "decimal", value: "1.50" },
      ],
    ]);
    assert.equal(text, "[('Women +60kg Bronze',), (36, 167.0, None, Decimal('1.50'))]");
    assert.equal(pythonRowsRepr([]), "[]");
  });

  test("repr of strings picks quotes and escapes as Python", () => {
    assert.equal(pythonStringRepr("it's"), `"it's"`);
    assert.equal(pythonStringRepr(`say "hi" it's`), `'say "hi" it\\'s'`);
    assert.equal(pythonStringRepr("a\nb\\c"), "'a\\nb\\\\c'");
  });

  test("repr of floats as Python", () => {
    assert.equal(pythonFloatRepr(2002), "2002.0");
    assert.equal(pythonFloatRepr(0.1 + 0.2), "0.30000000000000004");
    assert.equal(pythonFloatRepr(1e16), "1e+16");
    assert.equal(pythonFloatRepr(0.00001), "1e-05");
    assert.equal(pythonFloatRepr(123456789.5), "123456789.5");
    assert.equal(pythonStr(5), "5");
    assert.equal(pythonStr(null), "None");
  });

  test("reads a result back", () => {
    assert.deepEqual(parsePythonList("[('a',), (1.0,), (None,)]"), [["a"], ["1.0"], ["None"]]);
    assert.deepEqual(parsePythonList(`[("it's",), ('x\\ny',)]`), [["it's"], ["x\ny"]]);
    assert.deepEqual(parsePythonList("[(Decimal('2.50'),)]"), [["2.50"]]);
    assert.equal(parsePythonList("1064 (42000): You have an error"), undefined);
    assert.equal(parsePythonList("[('a',"), undefined);
  });
});

describe("dbbench comparison", () => {
  test("cleaning: special values, percent, thousands, quotes", () => {
    assert.deepEqual(cleanAnswer(["None", "  'x' ", "12%", "1,234", ""]), [
      "0",
      "x",
      "12",
      "1234",
      "0",
    ]);
    assert.deepEqual(cleanAnswer("[('a',), ('b',)]"), ["a", "b"]);
    assert.deepEqual(cleanAnswer(null), ["0"]);
  });

  test("single values: floats within 0.01, else exact strings", () => {
    assert.equal(compareDbAnswers(["1"], ["1.0"], "counting"), true);
    assert.equal(compareDbAnswers(["293.004"], ["293.0"], "aggregation-AVG"), true);
    assert.equal(compareDbAnswers(["293.02"], ["293.0"], "aggregation-AVG"), false);
    assert.equal(compareDbAnswers(["Cairns Saints"], ["Cairns Saints"], "other"), true);
    assert.equal(compareDbAnswers(["cairns saints"], ["Cairns Saints"], "other"), false);
    assert.equal(compareDbAnswers(["none"], ["null"], "other"), true);
  });

  test("several values: one-to-one floats, else sets", () => {
    assert.equal(compareDbAnswers(["2", "1"], ["1.0", "2.0"], "ranking"), true);
    assert.equal(compareDbAnswers(["1", "1"], ["1.0", "2.0"], "ranking"), false);
    assert.equal(compareDbAnswers(["b", "a", "a"], ["a", "b"], "other"), true);
    assert.equal(compareDbAnswers(["a"], ["a", "b"], "other"), false);
  });

  test("modifications compare the hash with answer_md5", () => {
    const md5 = "03b2eddd4fe471e0f29fc9e907fd5a5d";
    assert.equal(hashFromResult(`[('${md5}',)]`), md5);
    assert.equal(compareDbAnswers(md5, `[('${md5}',)]`, "INSERT"), true);
    assert.equal(compareDbAnswers("ffff", `[('${md5}',)]`, "UPDATE"), false);
  });
});

describe("dbbench tables", () => {
  const sample: DbSample = {
    index: 0,
    split: "train",
    description: "q",
    type: "INSERT",
    tables: [
      {
        table_name: "Team `A`",
        table_info: {
          columns: [{ name: "Year" }, { name: "Goals %" }],
          rows: [
            ["2019", 3],
            ["2020", null],
          ],
        },
      },
    ],
    addDescription: "",
    evidence: "",
    label: [],
  };

  test("tables are built with TEXT columns and Python str() values", () => {
    const [create, insert] = initStatements(sample);
    assert.equal(
      create.sql,
      "CREATE TABLE IF NOT EXISTS `Team ``A``` (`Year` TEXT,`Goals %` TEXT)",
    );
    assert.equal(insert.sql, "INSERT INTO `Team ``A``` (`Year`,`Goals %`) VALUES (?,?),(?,?)");
    assert.deepEqual(insert.values, ["2019", "3", "2020", "None"]);
  });

  test("the hash query is the original's", () => {
    assert.match(
      tableHashQuery(sample.tables[0]),
      /^select md5\(group_concat\(rowhash order by rowhash\)\) as hash from\( SELECT substring\(MD5\(CONCAT_WS\(',', `Year`,`Goals %`\)\), 1, 5\)/,
    );
  });

  test("difficulty follows the type", () => {
    assert.equal(dbDifficulty(sample), 0);
    assert.equal(dbDifficulty({ ...sample, type: "UPDATE" }), 1);
    assert.equal(dbDifficulty({ ...sample, type: "counting" }), 2);
  });
});
