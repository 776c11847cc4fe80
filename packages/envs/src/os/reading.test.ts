import { test } from "node:test";
import assert from "node:assert/strict";
import { answerSourceMetrics, SeenOutputs } from "./reading.js";
import { isAnswerGraded, type OsSample, type Script } from "./data.js";

/** What the agent saw in a hand-made episode: three command outputs. */
function episodeOutputs(): SeenOutputs {
  const seen = new SeenOutputs();
  seen.add("5\n");
  seen.add("  12 /root/logs/app.log\n  3 /root/logs/db.log\n 15 total");
  seen.add(`4.0K\t/home\n"alice", 'bob'\nThe output of the OS is empty.`);
  return seen;
}

test("SeenOutputs: an answer is read when it is a whole line or a whole field of an output the agent saw", () => {
  const seen = episodeOutputs();
  // Whole lines (trimmed).
  assert.equal(seen.hasRead("5"), true);
  assert.equal(seen.hasRead(" 5 \n"), true);
  assert.equal(seen.hasRead("12 /root/logs/app.log"), true);
  // Fields: wc's count beside the file name, du's size, a quoted name.
  assert.equal(seen.hasRead("12"), true);
  assert.equal(seen.hasRead("15"), true);
  assert.equal(seen.hasRead("4.0K"), true);
  assert.equal(seen.hasRead("/home"), true);
  assert.equal(seen.hasRead("alice"), true);
  assert.equal(seen.hasRead("bob"), true);
  // Every line of a multi-line answer must be read.
  assert.equal(seen.hasRead("12\n3"), true);
  assert.equal(seen.hasRead("12\n7"), false);
});

test("SeenOutputs: a constant, a part of a field, a composed value or an empty answer is not read", () => {
  const seen = episodeOutputs();
  assert.equal(seen.hasRead("4"), false); // a learnt constant: in no output
  assert.equal(seen.hasRead("1"), false); // part of 12 and 15, not a field
  assert.equal(seen.hasRead("27"), false); // 12 + 15 composed in the head
  assert.equal(seen.hasRead("app.log"), false); // part of a path
  assert.equal(seen.hasRead(""), false);
  assert.equal(seen.hasRead("  \n "), false);
  assert.equal(new SeenOutputs().hasRead("5"), false); // no command run at all
});

test("SeenOutputs: fields split at = : and , too (key=value, grep -c's file:count, passwd and CSV rows)", () => {
  const seen = new SeenOutputs();
  seen.add("port=8080\nworkers=4", "cat /etc/app/app.conf");
  seen.add("/root/logs/a.log:17", "grep -c ERROR /root/logs/*.log");
  seen.add("alice:x:1000:1000::/home/alice:/bin/zsh", "head -n 1 /root/accounts.txt");
  seen.add("1,amber,312", "sed -n 2p /root/sales.csv");
  for (const answer of ["8080", "4", "17", "1000", "/bin/zsh", "amber", "312", "port=8080"])
    assert.equal(seen.hasRead(answer), true, answer);
  assert.equal(seen.hasRead("80"), false);
});

test("SeenOutputs: a value typed into the command that printed it is not read from its output (echo 3); printed by another command it is", () => {
  const seen = new SeenOutputs();
  seen.add("3", "echo 3");
  seen.add("3 apples", "printf '3 apples\\n'");
  seen.add("7", "echo $((3 + 4))");
  seen.add("1", "find /root/x -maxdepth 1 -type f | wc -l");
  assert.equal(seen.hasRead("3"), false);
  assert.equal(seen.hasRead("3 apples"), false);
  assert.equal(seen.hasRead("apples"), false);
  assert.equal(seen.hasRead("7"), true, "computed by the shell, not typed");
  assert.equal(seen.hasRead("1"), false, "equal to a number of the command: counted as not read");
  seen.add("3", "grep -c ERROR /root/logs/app.log");
  assert.equal(seen.hasRead("3"), true);
});

test("answerSourceMetrics: answer tasks report whether the answer was read; a state-graded task reports only answerGraded 0", () => {
  const seen = episodeOutputs();
  assert.deepEqual(answerSourceMetrics(true, "15", seen), { answerGraded: 1, answerFromOutput: 1 });
  assert.deepEqual(answerSourceMetrics(true, "3 ", seen), { answerGraded: 1, answerFromOutput: 1 });
  assert.deepEqual(answerSourceMetrics(true, "4", seen), { answerGraded: 1, answerFromOutput: 0 });
  // finish_action on an answer task: no answer, so not read.
  assert.deepEqual(answerSourceMetrics(true, null, seen), { answerGraded: 1, answerFromOutput: 0 });
  assert.deepEqual(answerSourceMetrics(false, "15", seen), { answerGraded: 0 });
  assert.deepEqual(answerSourceMetrics(false, null, seen), { answerGraded: 0 });
});

test("isAnswerGraded: match and checks against the example's output grade the answer; other checks grade the state", () => {
  const base = { index: 0, split: "train", description: "", init: [], image: "default" };
  const script: Script = { language: "bash", code: "true" };
  const sample = (fields: Partial<OsSample>) => ({ ...base, ...fields }) as unknown as OsSample;
  assert.equal(isAnswerGraded(sample({ match: { answer: "3", strip: true } })), true);
  assert.equal(isAnswerGraded(sample({ example: script, check: [null, script] })), true);
  assert.equal(isAnswerGraded(sample({ check: [script] })), false);
});
