/**
 * The DB sandbox under attack, on a real MariaDB container (no AgentBench data needed): a
 * session cannot see, read, change or drop another session's database, cannot shut the
 * server down, grant, kill, or read and write files, and a slow statement is stopped by the
 * server. Skips with the reason when no engine answers or the `agentrl/db` image is missing.
 */
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import Docker from "dockerode";
import { isDockerAvailable } from "../docker/runtime.js";
import { IMAGES, imageHash } from "../docker/images.js";
import type { DbSample } from "./data.js";
import { createTaskFamily, type DbSession, type DbTaskFamily } from "./index.js";

const docker = new Docker();
const engine = await isDockerAvailable(docker);
const image = engine ? await imageHash(docker, IMAGES.db.tag) : undefined;
const skip = !engine
  ? "no Docker engine answers (bash scripts/start-dockerd.sh)"
  : image === undefined
    ? "image agentrl/db missing (agentrl env build)"
    : false;

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
