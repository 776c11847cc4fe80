/**
 * Generated DB tasks: deterministic, every kind present, labels consistent with the tables;
 * and on a real MariaDB container (skipped with the reason when the engine or the image is
 * missing): the gold-SQL expert solves every kind, the table hash computed here equals the
 * database's, and a wrong answer scores 0.
 */
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { playEpisode } from "../play.js";
import { imageUnavailable } from "../docker/images.js";
import { compareDbAnswers } from "./compare.js";
import { dbDifficulty, isModification } from "./data.js";
import {
  GENERATED_OFFSET,
  generateDbSample,
  generateDbSamples,
  generatedTableHash,
} from "./generate.js";
import { createTaskFamily, type DbTaskFamily } from "./index.js";

const samples = generateDbSamples(600, 3);

describe("generated DB tasks", () => {
  test("are deterministic from the seed and differ between seeds", () => {
    assert.deepEqual(generateDbSample(17, 3), samples[17]);
    assert.notDeepEqual(generateDbSample(17, 4), samples[17]);
    assert.deepEqual(
      samples.map((sample) => sample.index),
      samples.map((_, k) => GENERATED_OFFSET + k),
    );
    assert.ok(samples.every((sample) => sample.split === "train"));
  });

  test("cover inserts, updates, deletes and every SELECT kind, on all three difficulties", () => {
    const types = new Set(samples.map((sample) => sample.type));
    for (const type of [
      "INSERT",
      "UPDATE",
      "DELETE",
      "other",
      "counting",
      "ranking",
      "comparison",
      "aggregation-SUM",
      "aggregation-AVG",
      "aggregation-MAX",
      "aggregation-MIN",
    ])
      assert.ok(types.has(type), type);
    assert.deepEqual([...new Set(samples.map(dbDifficulty))].sort(), [0, 1, 2]);
  });

  test("draw table and column names per table, so that only a copy from the description writes them", () => {
    const tableNames = new Set(samples.map((sample) => sample.tables[0].table_name));
    assert.ok(tableNames.size > 300, `${tableNames.size} table names in 600 tasks`);
    const headers = new Set(
      samples.map((sample) =>
        sample.tables[0].table_info.columns.map((column) => column.name).join(","),
      ),
    );
    assert.ok(headers.size > 100, `${headers.size} header lists in 600 tasks`);
    for (const sample of samples) {
      const columns = sample.tables[0].table_info.columns.map((column) => column.name);
      assert.equal(new Set(columns).size, columns.length, `${sample.index}: distinct column names`);
      if (isModification(sample.type))
        assert.ok(
          sample.description.includes(sample.tables[0].table_name),
          `${sample.index}: the question names its table`,
        );
    }
  });

  test("about half the tables are made of made-up words, used alike in the table, the question and the gold SQL", () => {
    const wordsOf = (sample: (typeof samples)[number]) => {
      const table = sample.tables[0];
      const text = [
        table.table_name,
        ...table.table_info.columns.map((column) => column.name),
        ...table.table_info.rows.flat(),
      ].join(" ");
      return new Set(
        (text.match(/[A-Za-z]{3,}/g) ?? [])
          .map((word) => word.toLowerCase())
          .filter((word) => word !== "the"),
      );
    };
    const samplesWith = new Map<string, number>();
    for (const sample of samples)
      for (const word of wordsOf(sample)) samplesWith.set(word, (samplesWith.get(word) ?? 0) + 1);
    // The generator's own words recur across many tables; a made-up word almost never does.
    const open = samples.filter(
      (sample) => [...wordsOf(sample)].filter((word) => samplesWith.get(word)! >= 20).length <= 1,
    );
    assert.ok(
      open.length > 0.35 * samples.length && open.length < 0.65 * samples.length,
      `${open.length} of ${samples.length} tables made of made-up words`,
    );
    for (const sample of open) {
      // A value the question quotes is the table's, or the new one the gold statement writes.
      const known = new Set([
        ...wordsOf(sample),
        ...(sample.sql!.match(/[A-Za-z]{3,}/g) ?? []).map((word) => word.toLowerCase()),
      ]);
      const quoted = [...sample.description.matchAll(/'([^']+)'/g)].map((match) => match[1]);
      for (const value of quoted)
        for (const word of value.match(/[A-Za-z]{3,}/g) ?? [])
          assert.ok(
            word.toLowerCase() === "the" || known.has(word.toLowerCase()),
            `${sample.index}: '${word}' of the question`,
          );
      assert.ok(
        sample.sql!.includes(sample.tables[0].table_name),
        `${sample.index}: the gold SQL names the table`,
      );
    }
  });

  test("made-up words use every letter and hundreds of different syllables (a copy learnt on them is not tied to a few tokenizer pieces)", () => {
    const names = samples
      .flatMap((sample) => sample.tables[0].table_name.match(/[A-Za-z]{3,}/g) ?? [])
      .map((word) => word.toLowerCase());
    const tablesWith = new Map<string, number>();
    for (const word of names) tablesWith.set(word, (tablesWith.get(word) ?? 0) + 1);
    const madeUp = names.filter((word) => tablesWith.get(word)! < 5); // the generator's own words recur
    const letters = new Set(madeUp.join(""));
    assert.equal(
      letters.size,
      26,
      `letters of made-up table names: ${[...letters].sort().join("")}`,
    );
    const trigrams = new Set(
      madeUp.flatMap((word) =>
        Array.from({ length: word.length - 2 }, (_, k) => word.slice(k, k + 3)),
      ),
    );
    assert.ok(
      trigrams.size > 800,
      `${trigrams.size} different three-letter strings in made-up table names`,
    );
  });

  test("modifications change the table hash; SELECT labels come from the table", () => {
    for (const sample of samples) {
      const table = sample.tables[0];
      assert.match(
        sample.addDescription,
        new RegExp(`^The name of this table is ${table.table_name}, and the headers`),
      );
      if (isModification(sample.type)) {
        assert.match(String(sample.label[0]), new RegExp(`^${sample.type} `));
        assert.notEqual(
          sample.answerMd5,
          generatedTableHash(table.table_info.rows as string[][]),
          `${sample.index} changes the table`,
        );
      } else {
        assert.ok(sample.label.length > 0);
        assert.equal(sample.answerMd5, undefined);
        assert.ok(compareDbAnswers(sample.label, sample.label, sample.type));
        if (sample.type === "other" && sample.label.length === 1) {
          const cells = new Set(table.table_info.rows.flat());
          assert.ok(
            cells.has(sample.label[0]),
            `${sample.index}: the answer ${sample.label[0]} is a cell of the table`,
          );
        }
      }
    }
  });
});

const dockerSkip = await imageUnavailable("db");

describe("generated DB tasks on MariaDB", { skip: dockerSkip }, () => {
  let family: DbTaskFamily;
  // three of each type
  const chosen = [...new Set(samples.map((sample) => sample.type))].flatMap((type) =>
    samples.filter((sample) => sample.type === type).slice(0, 3),
  );
  before(async () => {
    family = await createTaskFamily({ samples: chosen });
  });
  after(async () => {
    await family.close();
  });

  test("the gold-SQL expert solves every generated kind (the hashes computed here are the database's)", async () => {
    const failed: string[] = [];
    for (const sample of chosen) {
      const episode = await playEpisode(family, sample.index, family.expert(sample.index));
      if (episode.reward !== 1)
        failed.push(
          `${sample.type} ${sample.index}: ${sample.sql} → ${JSON.stringify(episode.messages.slice(-3))}`,
        );
    }
    assert.deepEqual(failed, []);
  });

  test("a wrong answer or an unchanged table scores 0", async () => {
    for (const type of ["INSERT", "DELETE", "counting", "aggregation-AVG"]) {
      const sample = chosen.find((candidate) => candidate.type === type)!;
      const episode = await playEpisode(family, sample.index, family.wrongExpert(sample.index));
      assert.equal(episode.reward, 0, type);
    }
  });
});
