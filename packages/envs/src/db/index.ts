/**
 * The DB task (AgentBench dbbench): the agent answers a question about a table, or changes
 * the table, with SQL on a real MariaDB server, in at most 15 turns.
 *
 * Semantics of the original: each session gets a fresh database holding the sample's table
 * (every column TEXT); `execute_sql` runs one statement (60 s limit) and shows the rows as
 * Python's `str()` of mysql-connector's tuples, or the error as `errno (state): message`,
 * cut to 800 characters; `commit_final_answer` ends the episode: SELECT kinds compare the
 * answers with the label after normalisation, INSERT/UPDATE compare the table hash (MD5 over
 * sorted row-MD5 prefixes) with `answer_md5`. One shared server serves all sessions; a
 * session's database is dropped when it ends.
 */
import { randomBytes } from "node:crypto";
import type { Connection, FieldPacket } from "mysql2/promise";
import type { TaskFamilyOptions } from "../types.js";
import { FunctionCallSession, type ToolReply } from "../session.js";
import type {
  AssistantMessage,
  CurriculumTaskFamily,
  Expert,
  Message,
  Split,
  StartResult,
  ToolSpec,
} from "../types.js";
import { EnvironmentError } from "../types.js";
import { DockerRuntime } from "../docker/runtime.js";
import { Slots } from "../docker/slots.js";
import { FailedSession } from "../docker/failed-session.js";
import { compareDbAnswers, cleanAnswer } from "./compare.js";
import {
  dbDifficulty,
  initStatements,
  isModification,
  loadDbSamples,
  quoteIdentifier,
  unbuildableReason,
  type DbSample,
} from "./data.js";
import { gradeDb } from "./reward.js";
import { parsePythonList, pythonRowsRepr, type PythonValue } from "./python-format.js";
import { MariaDbServer, type MariaDbServerOptions, type SessionLogin } from "./server.js";
import { DEFAULT_GENERATED_COUNT, GENERATED_OFFSET, generateDbSamples } from "./generate.js";

export { compareDbAnswers, cleanAnswer } from "./compare.js";
export {
  loadDbSamples,
  dbDifficulty,
  initStatements,
  tableHashQuery,
  unbuildableReason,
  type DbSample,
} from "./data.js";
export { MariaDbServer } from "./server.js";
export { generateDbSample, generateDbSamples, GENERATED_OFFSET } from "./generate.js";

export const DB_MAX_TURNS = 15;
/** Seconds one statement may run (the original's limit). */
export const DB_QUERY_SECONDS = 60;

export const DB_SYSTEM_PROMPT = `I will ask you a question, then you should help me operate a MySQL database with SQL to answer the question.
You have to explain the problem and your solution to me and write down your thoughts.
After thinking and explaining thoroughly, every round you can choose to operate or to answer with the two specific tools provided.
If you should execute a SQL query, use the \`execute_sql\` function, Your SQL should be in one line.
Every time you can only execute one SQL statement. I will only execute the statement in the first SQL code block. Every time you write a SQL, I will execute it for you and give you the output.
If you are done operating, and you want to commit your final answer, then use the \`commit_final_answer\` function.
DO NOT use this tool unless you are sure about your answer. I expect an accurate and correct answer.
Your answer should be accurate. Your answer must be exactly the same as the correct answer.
If the question is about modifying the database, then after done operation, your answer field can be anything.
If your response cannot match any pattern I mentioned earlier, you will be judged as FAIL immediately.
You should always use the tools provided to submit your answer. Be careful not to write it in the content field.
Your input will be raw MySQL response, you have to deal with it by yourself.`;

export const DB_TOOLS: ToolSpec[] = [
  {
    type: "function",
    function: {
      name: "execute_sql",
      description: "Execute one SQL statement on the MySQL database and return the raw result.",
      parameters: {
        type: "object",
        properties: { query: { type: "string", description: "One SQL statement, on one line." } },
        required: ["query"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "commit_final_answer",
      description:
        "Commit the final answer (the values that answer the question); this ends the task. For a question that modifies the database, the answers can be anything.",
      parameters: {
        type: "object",
        properties: {
          answers: {
            type: "array",
            description: 'The answer values, e.g. ["36"] or ["a", "b"].',
            items: { type: "string" },
          },
        },
        required: ["answers"],
      },
    },
  },
];

export interface DbFamilyOptions extends TaskFamilyOptions {
  /** A Docker runtime to use (shared with others). Default: a new one on the local engine. */
  runtime?: DockerRuntime;
  /** Settings of the shared MariaDB container. */
  server?: MariaDbServerOptions;
  /** Sessions running at once (one database each); more wait for a slot. Default 64. */
  maxSessions?: number;
  /** Seconds one statement of a session may run, enforced by the server. Default 60 (the original's limit). */
  statementSeconds?: number;
  /** Samples to use instead of reading the data folder and generating (tests). */
  samples?: DbSample[];
  /** Generated training instances added to AgentBench's (generate.ts; the test split stays AgentBench's dev set). Default 4000; 0 for none. */
  generatedSize?: number;
}

export class DbTaskFamily implements CurriculumTaskFamily {
  readonly name = "db";
  readonly difficulties = [0, 1, 2];
  readonly runtime: DockerRuntime;
  readonly samples: DbSample[];
  /** The samples whose tables MySQL can build (`unbuildableReason`): the splits' members. */
  private readonly playable: DbSample[];
  private readonly slots: Slots;
  private readonly ownsRuntime: boolean;
  private readonly serverOptions: MariaDbServerOptions;
  private server: Promise<MariaDbServer> | undefined;
  private readonly sessions = new Set<DbSession>();
  readonly statementSeconds: number;
  /** The family whose server and session slots this one uses (`atWorld`); undefined when it has its own. */
  private readonly host: DbTaskFamily | undefined;
  /** The families on other worlds that use this one's server (`atWorld`). */
  private readonly worlds = new Set<DbTaskFamily>();

  constructor(
    runtime: DockerRuntime,
    options: DbFamilyOptions = {},
    ownsRuntime = false,
    host?: DbTaskFamily,
  ) {
    this.runtime = runtime;
    this.ownsRuntime = ownsRuntime;
    this.host = host;
    this.samples = options.samples ?? loadDbSamples(options.dataDir);
    this.playable = this.samples.filter((sample) => !unbuildableReason(sample));
    this.statementSeconds = options.statementSeconds ?? DB_QUERY_SECONDS;
    this.serverOptions = {
      statementSeconds: this.statementSeconds,
      sessionSlots: options.maxSessions ?? 64,
      ...options.server,
    };
    this.slots = host?.slots ?? new Slots(options.maxSessions ?? 64);
  }

  /**
   * The family on world `seed`: that seed's generated tasks (AgentBench's are the same), on
   * this family's server and session slots, so that a training world costs no container.
   * Closing it ends only its own sessions.
   */
  atWorld(seed: number): DbTaskFamily {
    const host = this.host ?? this;
    const agentBench = host.samples.filter((sample) => sample.index < GENERATED_OFFSET);
    const generated = host.samples.length - agentBench.length;
    const world = new DbTaskFamily(
      host.runtime,
      {
        samples: [...agentBench, ...generateDbSamples(generated, seed)],
        statementSeconds: host.statementSeconds,
      },
      false,
      host,
    );
    host.worlds.add(world);
    return world;
  }

  get activeSessions(): number {
    return this.slots.inUse;
  }

  /** A split's samples whose tables MySQL can build (see `unbuildableReason`: one AgentBench dev sample is left out). */
  indices(split: Split): number[] {
    return this.playable.filter((sample) => sample.split === split).map((sample) => sample.index);
  }

  indicesAt(split: Split, difficulty: number): number[] {
    return this.playable
      .filter((sample) => sample.split === split && dbDifficulty(sample) === difficulty)
      .map((sample) => sample.index);
  }

  sample(index: number): DbSample {
    const sample = this.samples.find((candidate) => candidate.index === index);
    if (!sample) throw new EnvironmentError(`db has no sample ${index}`);
    return sample;
  }

  /** The shared server, started on first use and restarted after it died. */
  async sharedServer(): Promise<MariaDbServer> {
    if (this.host) return this.host.sharedServer();
    if (!this.server) {
      // Assigned before any await, so sessions starting together share one server.
      const starting = this.runtime.reaped.then(() =>
        MariaDbServer.start(this.runtime, this.serverOptions),
      );
      this.server = starting;
      starting.then(
        (server) =>
          this.runtime.onDeath(server.containerId, () => {
            server.stopped = true;
            this.serverDied(starting);
          }),
        () => {
          if (this.server === starting) this.server = undefined;
        },
      );
    }
    return this.server;
  }

  private serverDied(which: Promise<MariaDbServer>): void {
    if (this.server === which) this.server = undefined;
    void which.then((server) => server.dispose());
    for (const family of [this, ...this.worlds])
      for (const session of family.sessions) void session.fail("the MariaDB container stopped");
  }

  /**
   * Starts a session on sample `index` in a fresh database. A sample whose table MySQL
   * refuses (e.g. an empty column name) gives a session that is already over (`task error`,
   * see `FailedSession`); a server that cannot start throws.
   */
  async startSession(index: number): Promise<DbSession | FailedSession> {
    const sample = this.sample(index);
    const releaseSlot = await this.slots.acquire();
    let connection: Connection | undefined;
    let login: SessionLogin | undefined;
    const database = `dbbench_${randomBytes(6).toString("hex")}`;
    try {
      const server = await this.sharedServer();
      const releaseSpace = await server.claimSpace(database);
      try {
        login = await this.withAdmin((admin) =>
          MariaDbServer.createSessionUser(admin, database, this.statementSeconds),
        );
      } catch (error) {
        releaseSpace();
        throw error;
      }
      login.releaseSpace = releaseSpace;
      login.server = server;
      connection = await server.connectAs(login);
      for (const statement of initStatements(sample)) {
        try {
          await connection.query(statement.sql, statement.values);
        } catch (error) {
          const failure = error as { errno?: number; fatal?: boolean; message: string };
          if (!failure.errno || failure.fatal) throw error;
          await this.dropSession(connection, login);
          releaseSlot();
          return FailedSession.create(
            openingOf(sample),
            `the table of db sample ${index} cannot be built: ${failure.message}`,
          );
        }
      }
      const session = new DbSession(this, sample, connection, login, releaseSlot);
      this.sessions.add(session);
      return session;
    } catch (error) {
      if (login) await this.dropSession(connection, login);
      releaseSlot();
      throw new EnvironmentError(`db sample ${index} could not start: ${(error as Error).message}`);
    }
  }

  /** Runs `work` on a fresh admin connection of `server` (default: the shared one), closed after. */
  private async withAdmin<T>(
    work: (admin: Connection) => Promise<T>,
    server?: MariaDbServer,
  ): Promise<T> {
    const admin = await (server ?? (await this.sharedServer())).connect();
    try {
      return await work(admin);
    } finally {
      admin.destroy();
    }
  }

  /**
   * Closes a session's connection, stops its statements, drops its user and database on the
   * server that holds them (never throws). After that server died there is nothing to drop,
   * and no new server is started for it: the session's slot is freed at once.
   */
  async dropSession(connection: Connection | undefined, login: SessionLogin): Promise<void> {
    connection?.destroy();
    // `server` is set with the login in startSession; never start a server just to drop a user.
    const server = login.server;
    if (!server || server.stopped) return login.releaseSpace?.();
    // dropSessionUser never throws and frees the space itself: this catch is a failed connect.
    await this.withAdmin((admin) => MariaDbServer.dropSessionUser(admin, login), server).catch(() =>
      login.releaseSpace?.(),
    );
  }

  /** Called by a session when it ends. */
  forget(session: DbSession): void {
    this.sessions.delete(session);
  }

  expert(index: number): Expert {
    return new DbExpert(this.sample(index));
  }

  wrongExpert(index: number): Expert {
    return new DbWrongExpert(this.sample(index));
  }

  async close(): Promise<void> {
    await Promise.all([...this.worlds].map((world) => world.close()));
    await Promise.all([...this.sessions].map((session) => session.cancel()));
    this.host?.worlds.delete(this);
    const server = this.server;
    this.server = undefined;
    if (server) {
      const started = await server.catch(() => undefined);
      if (started) {
        await this.runtime.remove(started.containerId);
        started.dispose();
      }
    }
    if (this.ownsRuntime) await this.runtime.close();
  }
}

/** mysql2 column type codes that mysql-connector returns as Python int / float / Decimal. */
const INTEGER_TYPES = new Set([1, 2, 3, 8, 9, 13, 16]);
const FLOAT_TYPES = new Set([4, 5]);
const DECIMAL_TYPES = new Set([0, 246]);

/** A cell as the Python type mysql-connector would give it. */
function toPythonValue(value: unknown, field: FieldPacket | undefined): PythonValue {
  if (value === null || value === undefined) return { kind: "none" };
  const type = field?.columnType ?? field?.type ?? 253;
  if (Buffer.isBuffer(value)) return { kind: "bytes", value };
  if (INTEGER_TYPES.has(type)) return { kind: "int", value: String(value) };
  if (FLOAT_TYPES.has(type)) return { kind: "float", value: Number(value) };
  if (DECIMAL_TYPES.has(type)) return { kind: "decimal", value: String(value) };
  return { kind: "str", value: String(value) };
}

export class DbSession extends FunctionCallSession {
  constructor(
    private readonly family: DbTaskFamily,
    readonly sample: DbSample,
    private readonly connection: Connection,
    private readonly login: SessionLogin,
    private readonly releaseSlot: () => void,
  ) {
    super(openingOf(sample), { maxTurns: DB_MAX_TURNS, maxOutputChars: 800 });
  }

  /** The session's own database. */
  get database(): string {
    return this.login.database;
  }

  /** Runs one statement and formats the result as the original. */
  async execute(sql: string): Promise<string> {
    try {
      const [rows, fields] = await this.connection.query({
        sql,
        rowsAsArray: true,
        timeout: (this.family.statementSeconds + 5) * 1000,
      });
      if (!Array.isArray(rows)) return "[]";
      const table = (rows as unknown[][]).map((row) =>
        row.map((value, column) => toPythonValue(value, fields?.[column])),
      );
      return pythonRowsRepr(table);
    } catch (error) {
      const failure = error as {
        errno?: number;
        sqlState?: string;
        sqlMessage?: string;
        message: string;
        code?: string;
        fatal?: boolean;
      };
      if (failure.fatal)
        throw new EnvironmentError(`the database connection failed: ${failure.message}`);
      if (failure.code === "PROTOCOL_SEQUENCE_TIMEOUT") return "Error: SQL execution timed out.";
      return failure.errno
        ? `${failure.errno} (${failure.sqlState}): ${failure.sqlMessage}`
        : failure.message;
    }
  }

  protected async callTool(name: string, args: Record<string, unknown>): Promise<ToolReply> {
    if (name === "execute_sql") {
      const result = await this.execute(String(args.query));
      return { content: result.length > 0 ? result : "No response from database." };
    }
    const correct = await gradeDb(this.sample, args.answers, (sql) => this.execute(sql));
    return {
      content: "Your answer has been committed.",
      outcome: {
        reward: correct ? 1 : 0,
        status: "completed",
        metrics: { score: correct ? 1 : 0 },
      },
    };
  }

  protected override async release(): Promise<void> {
    try {
      this.family.forget(this);
      await this.family.dropSession(this.connection, this.login);
    } finally {
      this.releaseSlot();
    }
  }
}

function openingOf(sample: DbSample): StartResult {
  let prompt = "";
  if (sample.evidence) prompt += `Evidence about the question: ${sample.evidence}\n`;
  if (sample.addDescription)
    prompt += `Additional table information about the question: ${sample.addDescription}\n`;
  prompt += `Question: ${sample.description}\n`;
  const messages: Message[] = [
    { role: "system", content: DB_SYSTEM_PROMPT },
    { role: "user", content: prompt },
  ];
  return { messages, tools: DB_TOOLS };
}

function toolCall(name: string, args: Record<string, unknown>, turn: number): AssistantMessage {
  return {
    role: "assistant",
    content: null,
    tool_calls: [
      { id: `call_${turn}`, type: "function", function: { name, arguments: JSON.stringify(args) } },
    ],
  };
}

function assistantTurns(history: Message[]): number {
  return history.filter((message) => message.role === "assistant").length;
}

function lastToolOutput(history: Message[]): string {
  for (let position = history.length - 1; position >= 0; position -= 1) {
    const message = history[position];
    if (message.role === "tool") return message.content;
  }
  return "";
}

/** The first-column values of a result text, or undefined when it is an error. */
export function resultValues(output: string): string[] | undefined {
  const rows = parsePythonList(output.trim());
  if (!rows) return undefined;
  return rows.map((row) => (Array.isArray(row) ? (row[0] ?? "") : row));
}

/**
 * Replays the sample's own solution: for INSERT/UPDATE its reference statement (the label),
 * then commits; for SELECT kinds its gold SQL, then commits the result when it matches the
 * label and the label otherwise (the gold SQL is often not valid MySQL: see docs/tasks.md).
 */
export class DbExpert implements Expert {
  constructor(private readonly sample: DbSample) {}

  act(history: Message[]): AssistantMessage {
    const turn = assistantTurns(history);
    const { sample } = this;
    if (turn === 0) {
      const statement = isModification(sample.type)
        ? String(sample.label[0] ?? "")
        : (sample.sql ?? `SELECT COUNT(*) FROM ${quoteIdentifier(sample.tables[0].table_name)}`);
      return toolCall("execute_sql", { query: statement }, turn);
    }
    if (isModification(sample.type)) return toolCall("commit_final_answer", { answers: [] }, turn);
    const label = sample.label.map((value) => String(value));
    const replayed = resultValues(lastToolOutput(history));
    const answers = replayed && compareDbAnswers(replayed, label, sample.type) ? replayed : label;
    return toolCall("commit_final_answer", { answers }, turn);
  }
}

/** Answers deliberately wrong: commits without changing the table, or a value no label has. */
export class DbWrongExpert implements Expert {
  constructor(private readonly sample: DbSample) {}

  act(history: Message[]): AssistantMessage {
    const turn = assistantTurns(history);
    if (isModification(this.sample.type))
      return toolCall("commit_final_answer", { answers: [] }, turn);
    const wrong = cleanAnswer(this.sample.label).includes("-424242.5")
      ? "agentrl-wrong"
      : "-424242.5";
    return toolCall("commit_final_answer", { answers: [wrong] }, turn);
  }
}

/** The DB task family on the local Docker engine. */
export async function createTaskFamily(options: DbFamilyOptions = {}): Promise<DbTaskFamily> {
  const samples = options.samples ?? [
    ...loadDbSamples(options.dataDir),
    ...generateDbSamples(options.generatedSize ?? DEFAULT_GENERATED_COUNT, options.seed ?? 0),
  ];
  const runtime = options.runtime ?? (await DockerRuntime.connect());
  return new DbTaskFamily(runtime, { ...options, samples }, options.runtime === undefined);
}
