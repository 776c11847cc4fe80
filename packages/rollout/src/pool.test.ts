import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { TrajectoryBuffer } from "./buffer.js";
import { InferenceEngine } from "./engine/index.js";
import { runEpisode } from "./episode.js";
import { ExternalChatModel, ExternalModelError } from "./external.js";
import { PolicyPool } from "./pool.js";
import { RolloutScheduler } from "./scheduler.js";
import {
  FaultyClient,
  ScriptedModel,
  echoFamily,
  testTokenizer,
  turnScript,
  type Tokenizer,
} from "./testing/fixtures.js";
import { formatToolCalls } from "./toolcall.js";
import { POLICY_CODES } from "./types.js";

describe("cross-policy sampling", () => {
  let tokenizer: Tokenizer;
  let client: FaultyClient;
  before(() => {
    tokenizer = testTokenizer();
    client = new FaultyClient([echoFamily({ maxTurnsNeeded: 4, maxTurns: 10 })]);
  });
  after(() => client.close());

  const engine = (initialVersion = 0) =>
    new InferenceEngine(
      new ScriptedModel(
        tokenizer.vocabSize,
        turnScript(tokenizer, (k) =>
          formatToolCalls([{ name: "echo", arguments: { text: `t${k}` } }]),
        ),
      ),
      {
        temperature: 0,
        stopTokenIds: tokenizer.stopTokenIds,
        initialVersion,
      },
    );

  test("p = 0.25 puts 25 % ± 5 % of 400+ turns on the stale policy; stale turns do not count toward staleness", async () => {
    const pool = new PolicyPool({
      current: engine(),
      stale: engine(),
      staleProbability: 0.25,
      refreshEvery: 3,
      seed: 7,
    });
    const buffer = new TrajectoryBuffer({ capacityGroups: 1000, maxStaleness: 0 });
    const scheduler = new RolloutScheduler({
      client,
      tokenizer,
      pool,
      buffer,
      tasks: [{ name: "echo" }],
      groupSize: 4,
      maxGroups: 44,
      seed: 2,
      maxConcurrentEpisodes: 32,
    });
    // Two weight updates while rolling out: current moves to version 2, stale stays at 0 (refreshed every 3).
    let updates = 0;
    const updater = setInterval(() => updates < 2 && pool.updateWeights(++updates, updates), 20);
    await scheduler.start();
    clearInterval(updater);
    const groups = buffer.takeAvailable();
    const turns = groups.flatMap((g) => g.trajectories.flatMap((t) => t.turns));
    assert.ok(turns.length >= 400, `${turns.length} turns`);
    const staleShare = turns.filter((turn) => turn.policy === "stale").length / turns.length;
    assert.ok(Math.abs(staleShare - 0.25) <= 0.05, `stale share ${staleShare}`);
    assert.equal(pool.stale!.version, 0);
    for (const trajectory of groups.flatMap((g) => g.trajectories)) {
      for (const turn of trajectory.turns) {
        const [from, to] = turn.generated;
        const code = POLICY_CODES[turn.policy];
        for (let t = from; t < to; t++) assert.equal(trajectory.policyIds[t], code);
        if (turn.policy === "stale") assert.equal(turn.minVersion, 0);
      }
      const currentVersions = trajectory.turns
        .filter((turn) => turn.policy === "current")
        .map((turn) => turn.minVersion);
      assert.equal(
        trajectory.minVersion,
        currentVersions.length ? Math.min(...currentVersions) : -1,
      );
    }
    // maxStaleness 0 at version 2: only groups whose CURRENT turns are all at version 2 survive, stale-pool turns notwithstanding.
    buffer.setPolicyVersion(2);
    const stats = buffer.stats();
    assert.equal(pool.current.version, 2);
    assert.ok(stats.groupsTaken > 0);
    const survivorsWithStaleTurns = groups.filter(
      (g) =>
        g.minVersion === 2 &&
        g.trajectories.some((t) => t.turns.some((turn) => turn.policy === "stale")),
    );
    assert.ok(
      survivorsWithStaleTurns.length > 0,
      "groups mixing version-0 stale turns with version-2 current turns count as fresh",
    );
  });

  describe("an external OpenAI-compatible model", () => {
    let server: Server;
    let baseUrl: string;
    let requests = 0;
    let resets = 0;
    before(async () => {
      server = createServer((request, response) => {
        let body = "";
        request.on("data", (chunk) => (body += chunk));
        request.on("end", () => {
          requests += 1;
          const parsed = JSON.parse(body);
          // `reset-once` drops the connection of every other request unanswered; `reset-always` of every request.
          if (
            parsed.model === "reset-always" ||
            (parsed.model === "reset-once" && resets % 2 === 0)
          ) {
            resets += 1;
            request.socket.destroy();
            return;
          }
          if (parsed.model === "broken") {
            response
              .writeHead(200, { "content-type": "application/json" })
              .end(JSON.stringify({ nothing: true }));
            return;
          }
          const reply = {
            choices: [
              {
                message: {
                  role: "assistant",
                  content: null,
                  tool_calls: [
                    {
                      id: "x",
                      type: "function",
                      function: { name: "echo", arguments: '{"text": "external"}' },
                    },
                  ],
                },
              },
            ],
          };
          response
            .writeHead(200, { "content-type": "application/json" })
            .end(JSON.stringify(reply));
        });
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
    });
    after(() => new Promise<void>((resolve) => server.close(() => resolve())));

    test("its turns enter the trajectory with loss mask 0, as the template renders them", async () => {
      const external = new ExternalChatModel({ baseUrl, model: "guide" });
      const pool = new PolicyPool({
        current: engine(),
        external,
        externalProbability: 0.5,
        seed: 3,
      });
      const trajectory = await runEpisode(
        { client, tokenizer, pool },
        { task: "echo", index: 3, groupId: "g", member: 0 },
      );
      assert.equal(trajectory.status, "completed");
      const externalTurns = trajectory.turns.filter((turn) => turn.policy === "external");
      assert.ok(
        externalTurns.length >= 1 && externalTurns.length < trajectory.turns.length,
        `${externalTurns.length} external turns`,
      );
      for (const turn of externalTurns) {
        const [from, to] = turn.generated;
        assert.equal(
          tokenizer.decode(Array.from(trajectory.tokens.slice(from, to))),
          '<tool_call>\n{"name": "echo", "arguments": {"text": "external"}}\n</tool_call><|im_end|>',
        );
        for (let t = from; t < to; t++) {
          assert.equal(trajectory.lossMask[t], 0);
          assert.equal(trajectory.policyIds[t], POLICY_CODES.external);
          assert.equal(trajectory.versions[t], -1);
        }
      }
      assert.equal(trajectory.metrics.templateFallbacks, 0);
      assert.ok(requests >= externalTurns.length);
    });

    test("a connection reset before the answer is sent again; resets beyond connectionRetries are an ExternalModelError", async () => {
      resets = 0;
      const once = new ExternalChatModel({ baseUrl, model: "reset-once" });
      const message = await once.complete([{ role: "user", content: "hi" }], []);
      assert.equal(message.tool_calls?.[0].function.name, "echo");
      assert.equal(resets, 1);
      resets = 0;
      const always = new ExternalChatModel({ baseUrl, model: "reset-always" });
      await assert.rejects(
        always.complete([{ role: "user", content: "hi" }], []),
        (error: Error) =>
          error instanceof ExternalModelError &&
          /could not be reached \(\w+, 3 tries\)/.test(error.message),
      );
      assert.equal(resets, 3, "the first try and 2 retries");
      resets = 0;
      const noRetries = new ExternalChatModel({
        baseUrl,
        model: "reset-once",
        connectionRetries: 0,
      });
      await assert.rejects(
        noRetries.complete([{ role: "user", content: "hi" }], []),
        (error: Error) =>
          error instanceof ExternalModelError && /could not be reached \(\w+\)/.test(error.message),
      );
      assert.equal(resets, 1);
    });

    test("a malformed answer is an ExternalModelError, and the episode ends as a task error", async () => {
      const external = new ExternalChatModel({ baseUrl, model: "broken" });
      await assert.rejects(
        external.complete([{ role: "user", content: "hi" }], []),
        ExternalModelError,
      );
      const pool = new PolicyPool({ current: engine(), external, externalProbability: 1 });
      const trajectory = await runEpisode(
        { client, tokenizer, pool },
        { task: "echo", index: 0, groupId: "g", member: 0 },
      );
      assert.equal(trajectory.status, "task error");
      assert.match(trajectory.error ?? "", /ExternalModelError/);
    });
  });
});
