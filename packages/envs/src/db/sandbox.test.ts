/**
 * The DB sandbox under attack, on a real MariaDB container (no AgentBench data needed): a
 * session cannot see, read, change or drop another session's database, cannot shut the
 * server down, grant, kill, or read and write files, and a slow statement is stopped by the
 * server, and a session that fills its space (its own tmpfs) leaves every other session's
 * space, and the server, working. Skips with the reason when no engine answers or the `agentrl/db` image is missing.
 */
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import Docker from "dockerode";
import { imageUnavailable } from "../docker/images.js";
import type { DbSample } from "./data.js";
import { createTaskFamily, type DbSession, type DbTaskFamily } from "./index.js";

const docker = new Docker();
const skip = await imageUnavailable("db", docker);

const SAMPLE: DbSample = {
  index: 0,
  split: "train",
  description: "How many secrets are there?",
  type: "counting",
  tables: [
    {
      table_name: "secrets",
      table_info: { columns: [{ name: "value", type: "TEXT" }], rows: [["alpha"], ["beta"]] },
    },
  ],
  addDescription: "",
  evidence: "",
  label: ["2"],
};

describe("DB sandbox probes", { skip }, () => {
  let family: DbTaskFamily;
  let victim: DbSession;
  let attacker: DbSession;
  before(async () => {
    family = await createTaskFamily({ samples: [SAMPLE], statementSeconds: 2 });
    victim = (await family.startSession(0)) as DbSession;
    attacker = (await family.startSession(0)) as DbSession;
  });
  after(async () => {
    await family.close();
  });

  test("another session's database is invisible, unreadable, unwritable and cannot be dropped", async () => {
    const other = victim.database;
    const databases = await attacker.execute("SHOW DATABASES");
    assert.ok(!databases.includes(other), databases);
    assert.ok(databases.includes(attacker.database), databases);
    assert.match(await attacker.execute(`SELECT * FROM \`${other}\`.secrets`), /^1142 |^1044 /);
    assert.match(
      await attacker.execute(`INSERT INTO \`${other}\`.secrets VALUES ('x')`),
      /^1142 |^1044 /,
    );
    assert.match(await attacker.execute(`DROP DATABASE \`${other}\``), /^1044 /);
    assert.match(
      await attacker.execute(
        "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = '" + other + "'",
      ),
      /\[\(0,\)\]/,
    );
    assert.equal(
      await victim.execute("SELECT COUNT(*) FROM secrets"),
      "[(2,)]",
      "the victim's table is whole",
    );
  });

  test("no server administration: shutdown, grant, users, global settings, other connections", async () => {
    for (const statement of [
      "SHUTDOWN",
      `GRANT ALL PRIVILEGES ON *.* TO CURRENT_USER()`,
      "CREATE USER 'intruder'@'localhost'",
      "SET GLOBAL max_statement_time = 0",
      "KILL 1",
    ]) {
      const result = await attacker.execute(statement);
      assert.match(result, /^(1227|1044|1045|1094|1095) \(/, `${statement}: ${result}`);
    }
    const processes = await attacker.execute("SHOW PROCESSLIST");
    assert.ok(
      !processes.includes(victim.database),
      `sees no other session's connections: ${processes}`,
    );
    assert.equal(
      await victim.execute("SELECT 1"),
      "[(1,)]",
      "the server still serves the other session",
    );
  });

  test("no file reads or writes", async () => {
    assert.match(
      await attacker.execute("SELECT 'x' INTO OUTFILE '/tmp/agentrl-owned'"),
      /^1045 |^1227 |^1290 /,
    );
    assert.match(
      await attacker.execute("SELECT * FROM secrets INTO DUMPFILE '/run/agentrl/x'"),
      /^1045 |^1227 |^1290 /,
    );
    assert.equal(await attacker.execute("SELECT LOAD_FILE('/etc/passwd')"), "[(None,)]");
    assert.match(
      await attacker.execute("LOAD DATA INFILE '/etc/passwd' INTO TABLE secrets"),
      /^1045 |^1227 |^1290 /,
    );
  });

  test("a slow statement is stopped by the server and the session goes on", async () => {
    const result = await attacker.execute("SELECT SLEEP(30), COUNT(*) FROM secrets");
    // MariaDB ends SLEEP early at max_statement_time (result 1) or reports 1969.
    assert.match(result, /^1969 |^\[\(1, 2\)\]$/, result);
    assert.equal(await attacker.execute("SELECT COUNT(*) FROM secrets"), "[(2,)]");
  });

  test("one session filling its space cannot fill another's: it gets disk-full errors, the other writes on", async () => {
    const spaceBytes = 16 * 1024 ** 2; // the server's default session space
    // Other engines are refused: a full InnoDB table space ends the whole server.
    assert.match(
      await attacker.execute("CREATE TABLE big_innodb (x LONGTEXT) ENGINE=InnoDB"),
      /^1290 /,
    );
    assert.match(await attacker.execute("SET SESSION enforce_storage_engine = NULL"), /^1227 /);
    assert.match(await attacker.execute("CREATE TEMPORARY TABLE scratch (x INT)"), /^1044 /);
    assert.equal(await attacker.execute("CREATE TABLE big (x LONGTEXT)"), "[]");
    assert.equal(await attacker.execute("INSERT INTO big VALUES (REPEAT('a', 500000))"), "[]");
    let failure = "";
    for (let doubling = 0; doubling < 12 && !failure; doubling += 1) {
      const result = await attacker.execute("INSERT INTO big SELECT * FROM big");
      if (result !== "[]") failure = result;
    }
    // Disk full (1021 / 1114 / 3 / 126), or the statement stopped at its limit while MyISAM waited for space.
    assert.match(failure, /^(1021|1114|3|126|1969|145) \(|full|interrupted|timed out/i, failure);
    const held = await victim.execute(
      `SELECT SUM(DATA_LENGTH + INDEX_LENGTH) FROM information_schema.TABLES WHERE TABLE_SCHEMA = '${attacker.database}'`,
    );
    assert.ok(held.length > 0);
    // The other session still writes, in a new table and in its own.
    assert.equal(await victim.execute("CREATE TABLE notes (x LONGTEXT)"), "[]");
    assert.equal(
      await victim.execute("INSERT INTO notes VALUES (REPEAT('b', 100000)), ('c')"),
      "[]",
    );
    assert.equal(await victim.execute("SELECT COUNT(*) FROM notes"), "[(2,)]");
    assert.equal(await victim.execute("INSERT INTO secrets VALUES ('gamma')"), "[]");
    assert.equal(await victim.execute("SELECT COUNT(*) FROM secrets"), "[(3,)]");
    // And a session started after it gets a space of its own.
    const later = (await family.startSession(0)) as DbSession;
    try {
      assert.equal(await later.execute("INSERT INTO secrets VALUES ('delta')"), "[]");
      assert.equal(await later.execute("SELECT COUNT(*) FROM secrets"), "[(3,)]");
    } finally {
      await later.cancel();
    }
    // The attacker's files stayed within its space.
    const server = await family.sharedServer();
    const usage = await family.runtime.exec(server.containerId, [
      "sh",
      "-c",
      "du -s -B1 /var/lib/agentrl-db-space/* | sort -n | tail -1",
    ]);
    assert.ok(Number(usage.output.split(/\s/)[0]) <= spaceBytes, usage.output);
  });

  test("an ended session's user and database are gone, and its running statement is stopped", async () => {
    const session = (await family.startSession(0)) as DbSession;
    const database = session.database;
    await session.cancel();
    const admin = await (await family.sharedServer()).connect();
    try {
      const [databases] = await admin.query("SHOW DATABASES LIKE ?", [database]);
      assert.deepEqual(databases, []);
      const [users] = await admin.query(
        "SELECT COUNT(*) AS n FROM mysql.user WHERE User LIKE 's\\_%'",
      );
      assert.equal(
        Number((users as Array<{ n: number }>)[0].n),
        2,
        "only the two live sessions' users remain",
      );
    } finally {
      admin.destroy();
    }
  });
});
