/**
 * The chat server with a scripted engine (no model): request validation, auth, routes,
 * the response builder (content, tool calls, finish reasons, stop strings, n), streaming.
 * The full path over a real model is in test/serve.test.ts.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import {
  Tokenizer,
  WeightsError,
  serializeSafetensors,
  trainByteLevelBpe,
  type ExportedWeights,
} from "@agentrl/policy";
import {
  ContextLimitError,
  type EngineStats,
  type GenerationRequest,
  type GenerationResult,
} from "../engine/index.js";
import { generateInChunks } from "./chunked.js";
import { ChoiceStreamer, longestSuffixPrefix } from "./stream.js";
import { ChatServer, isLoopbackHost, type ServeEngine } from "./server.js";
import { buildPrompt, cutAtStop, interpretGeneration } from "./chat.js";
import { parseChatCompletionRequest } from "./schema.js";
import { ServeConfigError, serveKeyFromEnvironment, serverWeightsKey } from "./key.js";
import { createServer } from "node:http";
import { spawn } from "node:child_process";
import type { AddressInfo } from "node:net";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const corpus = [
  'hello world, the weather is fine. <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
  "I will look it up. Sunny in Paris, 21 degrees.",
];
const trained = trainByteLevelBpe(corpus, { vocabSize: 400, minFrequency: 1 });
const tokenizer = new Tokenizer(trained.tokenizerJson, trained.tokenizerConfig);
const endOfTurn = tokenizer.stopTokenIds[0];

/**
 * An engine that "generates" the next scripted text (cycling), ending with the end-of-turn
 * token unless cut by maxNewTokens; a request with a cacheKey it has seen continues that script.
 */
class ScriptedEngine implements ServeEngine {
  requests: GenerationRequest[] = [];
  released: string[] = [];
  private scripts = 0;
  private continued = new Map<string, { tokens: number[]; offset: number }>();
  constructor(private readonly texts: string[]) {}
  async generate(request: GenerationRequest): Promise<GenerationResult> {
    this.requests.push(request);
    let script = request.cacheKey === undefined ? undefined : this.continued.get(request.cacheKey);
    if (!script) {
      script = {
        tokens: [...tokenizer.encode(this.texts[this.scripts++ % this.texts.length]), endOfTurn],
        offset: 0,
      };
      if (request.cacheKey !== undefined) this.continued.set(request.cacheKey, script);
    }
    const tokens = script.tokens.slice(script.offset, script.offset + request.maxNewTokens);
    script.offset += tokens.length;
    await new Promise((resolve) => setTimeout(resolve, 1));
    const stopped = tokens.at(-1) === endOfTurn;
    return {
      tokens,
      logprobs: tokens.map(() => -0.5),
      versions: tokens.map(() => 3),
      finishReason: stopped ? "stop" : "length",
      prefilledTokens: request.promptTokens.length,
    };
  }
  releaseCache(cacheKey: string): void {
    this.released.push(cacheKey);
    this.continued.delete(cacheKey);
  }
  /** Weights installed by POST /v1/weights (the served version follows them). */
  installed: ExportedWeights[] = [];
  async updateWeights(weights: ExportedWeights, version: number): Promise<void> {
    if (weights.tensors.some((tensor) => tensor.name !== "w"))
      throw new WeightsError(`unexpected tensor ${weights.tensors[0].name}`);
    this.installed.push({ ...weights, version });
  }
  stats(): EngineStats {
    return { version: this.installed.at(-1)?.version ?? 3 } as EngineStats;
  }
}

const WEATHER_TOOL = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Weather of a city.",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

async function withServer(
  texts: string[],
  options: { apiKey?: string; weightsKey?: string; weightSources?: string[] } = {},
) {
  const engine = new ScriptedEngine(texts);
  const server = new ChatServer({
    engine,
    tokenizer,
    modelName: "scripted",
    apiKey: options.apiKey,
    weightsKey: options.weightsKey,
    weightSources: options.weightSources,
    log: null,
  });
  const address = await server.listen(0, "127.0.0.1");
  return { engine, server, url: address.baseUrl };
}

function post(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
) {
  return fetch(`${url}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
    signal,
  });
}

/** A response body as JSON (untyped: the tests check its shape). */
async function json(response: Response): Promise<any> {
  return response.json();
}

describe("chat server (scripted engine)", () => {
  let running: Awaited<ReturnType<typeof withServer>>;
  before(async () => {
    running = await withServer([
      'I will look it up.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
      "Sunny in Paris, 21 degrees.",
    ]);
  });
  after(async () => running.server.close());

  test("a tool-call generation becomes tool_calls with JSON-string arguments and finish_reason tool_calls", async () => {
    const response = await post(running.url, {
      model: "scripted",
      messages: [{ role: "user", content: "Weather in Paris?" }],
      tools: [WEATHER_TOOL],
    });
    assert.equal(response.status, 200);
    const body = await json(response);
    assert.equal(body.object, "chat.completion");
    assert.match(body.id, /^chatcmpl-/);
    const choice = body.choices[0];
    assert.equal(choice.finish_reason, "tool_calls");
    assert.equal(choice.message.content, "I will look it up.");
    assert.equal(choice.message.tool_calls.length, 1);
    assert.equal(choice.message.tool_calls[0].type, "function");
    assert.equal(choice.message.tool_calls[0].function.name, "get_weather");
    assert.deepEqual(JSON.parse(choice.message.tool_calls[0].function.arguments), {
      city: "Paris",
    });
    assert.ok(body.usage.prompt_tokens > 10);
    assert.equal(body.usage.total_tokens, body.usage.prompt_tokens + body.usage.completion_tokens);
    // The prompt holds the tools (Qwen2.5 template) and ends with the generation prompt.
    const prompt = tokenizer.decode(running.engine.requests.at(-1)!.promptTokens);
    assert.ok(prompt.includes("<tools>") && prompt.includes("get_weather"));
    assert.ok(prompt.endsWith("<|im_start|>assistant\n"));
  });

  test("plain text, max_tokens → length, stop strings cut, n choices", async () => {
    const response = await post(running.url, {
      model: "scripted",
      messages: [{ role: "user", content: "hi" }],
      n: 2,
      stop: [", 21"],
      max_tokens: 200,
    });
    const body = await json(response);
    assert.equal(body.choices.length, 2);
    assert.deepEqual(
      body.choices.map((c: { index: number }) => c.index),
      [0, 1],
    );
    const texts = body.choices.map((c: { message: { content: string } }) => c.message.content);
    assert.ok(texts.includes("Sunny in Paris"), JSON.stringify(texts));
    const short = await json(
      await post(running.url, {
        model: "scripted",
        messages: [{ role: "user", content: "hi" }],
        max_completion_tokens: 2,
      }),
    );
    assert.equal(short.choices[0].finish_reason, "length");
    assert.equal(short.usage.completion_tokens, 2);
  });

  test("tool_choice none leaves tools out of the prompt and does not parse calls", async () => {
    const before = running.engine.requests.length;
    const texts = [];
    for (let i = 0; i < 2; i++) {
      const body = await json(
        await post(running.url, {
          model: "scripted",
          messages: [{ role: "user", content: "x" }],
          tools: [WEATHER_TOOL],
          tool_choice: "none",
        }),
      );
      texts.push(body.choices[0]);
    }
    assert.ok(!tokenizer.decode(running.engine.requests[before].promptTokens).includes("<tools>"));
    assert.ok(
      texts.every(
        (choice) => choice.message.tool_calls === undefined && choice.finish_reason === "stop",
      ),
    );
  });

  test("parallel_tool_calls false keeps only the first call", () => {
    const prompt = buildPrompt(
      tokenizer,
      parseChatCompletionRequest({
        model: "m",
        messages: [{ role: "user", content: "x" }],
        tools: [WEATHER_TOOL],
      }),
    );
    const call =
      '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
    const tokens = tokenizer.encode(`${call}\n${call}`);
    const both = interpretGeneration(
      tokenizer,
      { tokens, finishReason: "stop" },
      { prompt, stops: [], idPrefix: "c" },
    );
    const first = interpretGeneration(
      tokenizer,
      { tokens, finishReason: "stop" },
      { prompt, stops: [], idPrefix: "c", singleToolCall: true },
    );
    assert.equal(both.message.tool_calls?.length, 2);
    assert.equal(first.message.tool_calls?.length, 1);
    assert.equal(first.finishReason, "tool_calls");
  });

  test("a named tool_choice writes the call's opening into the prompt", () => {
    const request = parseChatCompletionRequest({
      model: "m",
      messages: [{ role: "user", content: "x" }],
      tools: [WEATHER_TOOL],
      tool_choice: { type: "function", function: { name: "get_weather" } },
    });
    const prompt = buildPrompt(tokenizer, request);
    assert.ok(prompt.text.endsWith('<tool_call>\n{"name": "get_weather", "arguments": '));
    assert.throws(
      () =>
        buildPrompt(tokenizer, {
          ...request,
          tool_choice: { type: "function", function: { name: "nope" } },
        }),
      /not among the tools/,
    );
  });

  test("assistant tool_calls and tool messages in the history render through the template", async () => {
    const response = await post(running.url, {
      model: "scripted",
      tools: [WEATHER_TOOL],
      messages: [
        { role: "system", content: [{ type: "text", text: "Be brief." }] },
        { role: "user", content: "Weather in Paris?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            {
              id: "c1",
              type: "function",
              function: { name: "get_weather", arguments: '{"city": "Paris"}' },
            },
          ],
        },
        { role: "tool", tool_call_id: "c1", content: "sunny" },
      ],
    });
    assert.equal(response.status, 200);
    const prompt = tokenizer.decode(running.engine.requests.at(-1)!.promptTokens);
    assert.ok(prompt.includes("<tool_response>\nsunny\n</tool_response>"), prompt);
    assert.ok(prompt.includes('{"name": "get_weather", "arguments": {"city": "Paris"}}'));
    assert.ok(prompt.startsWith("<|im_start|>system\nBe brief."));
  });

  test("streaming: role chunk, content deltas that spell the message, tool-call delta, finish, usage, [DONE]", async () => {
    const response = await post(running.url, {
      model: "scripted",
      messages: [{ role: "user", content: "Weather?" }],
      tools: [WEATHER_TOOL],
      stream: true,
      stream_options: { include_usage: true },
    });
    assert.equal(response.headers.get("content-type"), "text/event-stream; charset=utf-8");
    const events = (await response.text())
      .split("\n\n")
      .filter(Boolean)
      .map((event) => event.replace(/^data: /, ""));
    assert.equal(events.at(-1), "[DONE]");
    const chunks = events.slice(0, -1).map((event) => JSON.parse(event));
    assert.ok(
      chunks.every(
        (chunk) => chunk.object === "chat.completion.chunk" && chunk.id === chunks[0].id,
      ),
    );
    assert.equal(chunks[0].choices[0].delta.role, "assistant");
    const content = chunks.map((chunk) => chunk.choices[0]?.delta?.content ?? "").join("");
    const calls = chunks.flatMap((chunk) => chunk.choices[0]?.delta?.tool_calls ?? []);
    const finishes = chunks.map((chunk) => chunk.choices[0]?.finish_reason).filter(Boolean);
    const usage = chunks.at(-1).usage;
    // The scripted engine alternates texts: this request got either the tool call or plain text.
    if (calls.length > 0) {
      assert.equal(content, "I will look it up.");
      assert.equal(calls[0].function.name, "get_weather");
      assert.equal(calls[0].index, 0);
      assert.deepEqual(finishes, ["tool_calls"]);
    } else {
      assert.equal(content, "Sunny in Paris, 21 degrees.");
      assert.deepEqual(finishes, ["stop"]);
    }
    assert.equal(chunks.at(-1).choices.length, 0);
    assert.ok(usage.completion_tokens > 0);
  });

  test("bad requests get 400 with an OpenAI error body naming the field", async () => {
    const cases: [unknown, string][] = [
      [{ model: "scripted", messages: [] }, "messages"],
      [{ model: "scripted", messages: [{ role: "wizard", content: "x" }] }, "messages.0.role"],
      [
        { model: "scripted", messages: [{ role: "user", content: "x" }], temperature: 5 },
        "temperature",
      ],
      [{ model: "scripted", messages: [{ role: "user", content: "x" }], n: 0 }, "n"],
      [
        { model: "scripted", messages: [{ role: "user", content: "x" }], frequency_penalty: 0.5 },
        "frequency_penalty",
      ],
      [
        {
          model: "scripted",
          messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }],
        },
        "messages.0.content",
      ],
      [
        { model: "scripted", messages: [{ role: "user", content: "x" }], tool_choice: "required" },
        "tool_choice",
      ],
    ];
    for (const [body, param] of cases) {
      const response = await post(running.url, body);
      assert.equal(response.status, 400, JSON.stringify(body));
      const error = (await json(response)).error;
      assert.equal(error.type, "invalid_request_error");
      assert.ok(
        error.param === param || error.param?.startsWith(param),
        `${error.param} for ${JSON.stringify(body)}`,
      );
      assert.equal(typeof error.message, "string");
    }
    const notJson = await fetch(`${running.url}/chat/completions`, {
      method: "POST",
      body: "{oops",
    });
    assert.equal(notJson.status, 400);
    assert.equal((await json(notJson)).error.code, "invalid_json");
  });

  test("unknown model and unknown route get 404; models and health answer", async () => {
    const unknownModel = await post(running.url, {
      model: "gpt-9",
      messages: [{ role: "user", content: "x" }],
    });
    assert.equal(unknownModel.status, 404);
    assert.equal((await json(unknownModel)).error.code, "model_not_found");
    const unknownRoute = await fetch(`${running.url}/completions`, { method: "POST", body: "{}" });
    assert.equal(unknownRoute.status, 404);
    const models = await json(await fetch(`${running.url}/models`));
    assert.deepEqual(
      models.data.map((m: { id: string }) => m.id),
      ["scripted"],
    );
    const health = await json(await fetch(running.url.replace(/\/v1$/, "/health")));
    assert.equal(health.status, "ok");
    assert.equal(health.engine.version, 3);
  });
});

test("an API key is required on /v1/* (401 when missing or wrong), not on /health", async () => {
  const { server, url } = await withServer(["ok"], { apiKey: "secret-key" });
  try {
    const body = { model: "scripted", messages: [{ role: "user", content: "x" }] };
    const missing = await post(url, body);
    assert.equal(missing.status, 401);
    assert.equal((await json(missing)).error.code, "invalid_api_key");
    assert.equal((await post(url, body, { authorization: "Bearer wrong-key!" })).status, 401);
    assert.equal((await fetch(`${url}/models`)).status, 401);
    const ok = await post(url, body, { authorization: "Bearer secret-key" });
    assert.equal(ok.status, 200);
    assert.equal((await json(ok)).choices[0].message.content, "ok");
    assert.equal((await fetch(url.replace(/\/v1$/, "/health"))).status, 200);
  } finally {
    await server.close();
  }
});

test("a non-loopback host is refused without an API key", async () => {
  assert.ok(
    isLoopbackHost("127.0.0.1") &&
      isLoopbackHost("127.1.2.3") &&
      isLoopbackHost("::1") &&
      isLoopbackHost("localhost"),
  );
  assert.ok(!isLoopbackHost("0.0.0.0") && !isLoopbackHost("192.168.1.4"));
  const server = new ChatServer({
    engine: new ScriptedEngine(["x"]),
    tokenizer,
    modelName: "m",
    log: null,
  });
  await assert.rejects(server.listen(0, "0.0.0.0"), ServeConfigError);
});

test("stop strings cut at the earliest match", () => {
  assert.deepEqual(cutAtStop("a STOP b END", ["END", "STOP"]), { text: "a ", stopped: true });
  assert.deepEqual(cutAtStop("abc", ["x"]), { text: "abc", stopped: false });
  assert.equal(longestSuffixPrefix("Sunny <tool", ["<tool_call>"]), 5);
  assert.equal(longestSuffixPrefix("Sunny", ["<tool_call>"]), 0);
});

describe("ChoiceStreamer", () => {
  const toolText =
    'I will look it up.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
  const tools = buildPrompt(
    tokenizer,
    parseChatCompletionRequest({
      model: "m",
      messages: [{ role: "user", content: "x" }],
      tools: [WEATHER_TOOL],
    }),
  );
  const plain = buildPrompt(
    tokenizer,
    parseChatCompletionRequest({ model: "m", messages: [{ role: "user", content: "x" }] }),
  );

  /** Streams `text` token by token; returns the content released after each token, and all deltas. */
  function stream(text: string, prompt: typeof tools, stops: string[] = []) {
    const tokens = [...tokenizer.encode(text), endOfTurn];
    const streamer = new ChoiceStreamer(tokenizer, prompt, stops);
    const released: string[] = [];
    const deltas = tokens.flatMap((token) => {
      const out = streamer.push(token);
      released.push(streamer.releasedContent);
      return out;
    });
    const outcome = interpretGeneration(
      tokenizer,
      { tokens, finishReason: "stop" },
      { prompt, stops, idPrefix: "call" },
    );
    deltas.push(...streamer.finish(outcome));
    return { released, deltas, outcome };
  }

  test("content streams token by token and never shows the tool call's text", () => {
    const { released, deltas, outcome } = stream(toolText, tools);
    const contents = deltas.flatMap((delta) => ("content" in delta ? [delta.content] : []));
    assert.ok(contents.length > 2, "content arrives in several deltas");
    assert.equal(contents.join(""), outcome.message.content);
    assert.equal(contents.join(""), "I will look it up.");
    assert.ok(released.every((text) => !text.includes("<") && !text.includes("{")));
    const calls = deltas.flatMap((delta) => ("tool_calls" in delta ? delta.tool_calls : []));
    assert.deepEqual(
      calls.map((call) => [call.index, call.function.name, call.function.arguments]),
      [[0, "get_weather", '{"city":"Paris"}']],
    );
  });

  test("a tail that may become a stop string is held back; text after it never appears", () => {
    const { released, deltas } = stream("Sunny in Paris, 21 degrees.", plain, [", 21"]);
    const contents = deltas.flatMap((delta) => ("content" in delta ? [delta.content] : []));
    assert.equal(contents.join(""), "Sunny in Paris");
    assert.ok(released.every((text) => !text.includes(",")));
  });

  test("with tools offered, plain text is released trimmed and still adds up", () => {
    const { deltas, outcome } = stream("  Sunny in Paris.  ", tools);
    const contents = deltas.flatMap((delta) => ("content" in delta ? [delta.content] : []));
    assert.equal(contents.join(""), "Sunny in Paris.");
    assert.equal(outcome.message.content, "Sunny in Paris.");
    assert.equal(outcome.finishReason, "stop");
  });
});

/** An engine whose generations wait until `release()` (or their abort signal). */
class HeldEngine implements ServeEngine {
  aborted = 0;
  private waiting: (() => void)[] = [];
  generate(request: GenerationRequest): Promise<GenerationResult> {
    return new Promise((resolve, reject) => {
      let settled = false;
      request.signal?.addEventListener("abort", () => {
        if (settled) return;
        settled = true;
        this.aborted += 1;
        reject(request.signal!.reason);
      });
      this.waiting.push(() => {
        settled = true;
        resolve({
          tokens: [...tokenizer.encode("done"), endOfTurn],
          logprobs: [0, 0],
          versions: [0, 0],
          finishReason: "stop",
          prefilledTokens: 1,
        });
      });
    });
  }
  releaseCache(): void {}
  async updateWeights(): Promise<void> {}
  get held(): number {
    return this.waiting.length;
  }
  release(): void {
    for (const resolve of this.waiting.splice(0)) resolve();
  }
  stats(): EngineStats {
    return { version: 0 } as EngineStats;
  }
}

async function until(condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("timed out waiting for a condition");
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

test("a client that disconnects aborts its generation", async () => {
  const engine = new HeldEngine();
  const server = new ChatServer({ engine, tokenizer, modelName: "m", log: null });
  const { baseUrl } = await server.listen(0);
  try {
    const controller = new AbortController();
    const request = post(
      baseUrl,
      { model: "m", messages: [{ role: "user", content: "x" }], n: 2 },
      {},
      controller.signal,
    );
    await until(() => engine.held === 2);
    controller.abort();
    await assert.rejects(request);
    await until(() => engine.aborted === 2);
    assert.equal(server.activeRequests, 0);
  } finally {
    await server.close(0);
  }
});

test("close() lets requests in flight finish, refuses new connections", async () => {
  const engine = new HeldEngine();
  const server = new ChatServer({ engine, tokenizer, modelName: "m", log: null });
  const { baseUrl } = await server.listen(0);
  const inFlight = post(baseUrl, { model: "m", messages: [{ role: "user", content: "x" }] });
  await until(() => engine.held === 1);
  const closing = server.close(5000);
  await new Promise((resolve) => setTimeout(resolve, 30));
  await assert.rejects(fetch(`${baseUrl}/models`), "no new connections while closing");
  engine.release();
  const response = await inFlight;
  assert.equal(response.status, 200);
  assert.equal((await json(response)).choices[0].message.content, "done");
  await closing;
  assert.equal(engine.aborted, 0);
});

test("close() aborts what is still running after the grace period", async () => {
  const engine = new HeldEngine();
  const server = new ChatServer({ engine, tokenizer, modelName: "m", log: null });
  const { baseUrl } = await server.listen(0);
  const inFlight = post(baseUrl, { model: "m", messages: [{ role: "user", content: "x" }] }).then(
    (response) => response.status,
    () => "connection closed",
  );
  await until(() => engine.held === 1);
  await server.close(50);
  assert.equal(engine.aborted, 1);
  assert.ok([503, "connection closed"].includes(await inFlight));
});

test("streaming generates in slices that continue one cache, released at the end; a stop string ends it early", async () => {
  const text = "Sunny in Paris, 21 degrees. Tomorrow rain in the north and wind.";
  const engine = new ScriptedEngine([text]);
  const server = new ChatServer({
    engine,
    tokenizer,
    modelName: "m",
    log: null,
    streamChunkTokens: 3,
  });
  const { baseUrl } = await server.listen(0);
  try {
    const read = async (body: object) => {
      const response = await post(baseUrl, {
        model: "m",
        messages: [{ role: "user", content: "x" }],
        stream: true,
        ...body,
      });
      const events = (await response.text())
        .split("\n\n")
        .filter((event) => event.startsWith("data: {"));
      const chunks = events.map((event) => JSON.parse(event.slice(6)));
      return {
        content: chunks.map((chunk) => chunk.choices[0]?.delta?.content ?? "").join(""),
        finish: chunks.at(-1).choices[0].finish_reason,
      };
    };
    const whole = await read({});
    assert.equal(whole.content, text);
    assert.equal(whole.finish, "stop");
    const slices = engine.requests.length;
    const expectedSlices = Math.ceil((tokenizer.encode(text).length + 1) / 3);
    assert.equal(slices, expectedSlices);
    const keys = new Set(engine.requests.map((request) => request.cacheKey));
    assert.equal(keys.size, 1);
    assert.deepEqual(engine.released, [...keys]);
    // Each slice's prompt is the previous one's plus the tokens generated since.
    for (let i = 1; i < slices; i++)
      assert.equal(
        engine.requests[i].promptTokens.length,
        engine.requests[i - 1].promptTokens.length + 3,
      );

    const cut = await read({ stop: ["21"] });
    assert.equal(cut.content, "Sunny in Paris, ");
    assert.equal(cut.finish, "stop");
    assert.ok(
      engine.requests.length - slices < expectedSlices,
      `stopped early: ${engine.requests.length - slices} slices`,
    );
  } finally {
    await server.close();
  }
});

test("generateInChunks: a context that fills at a slice boundary is a length finish", async () => {
  let calls = 0;
  const engine = {
    async generate(request: GenerationRequest): Promise<GenerationResult> {
      calls += 1;
      if (request.promptTokens.length >= 6) throw new ContextLimitError("full");
      const tokens = [7, 7];
      return {
        tokens,
        logprobs: [0, 0],
        versions: [0, 0],
        finishReason: "length",
        prefilledTokens: 0,
      };
    },
    releaseCache: () => {},
  };
  const result = await generateInChunks(
    engine,
    { promptTokens: [1, 2], maxNewTokens: 100 },
    { chunkTokens: 2, cacheKey: "k", onTokens: () => true },
  );
  assert.equal(result.tokens.length, 4);
  assert.equal(result.finishReason, "length");
  assert.equal(calls, 3);
});

test("token-in and token-out: prompt_token_ids are the prompt as given; return_token_ids gives ids, log-probs and versions", async () => {
  const { engine, server, url } = await withServer(["Sunny in Paris."]);
  try {
    const prompt = tokenizer.encode("hello world");
    const response = await post(url, {
      model: "scripted",
      prompt_token_ids: prompt,
      return_token_ids: true,
      cache_key: "episode-1",
      stop_token_ids: [5],
    });
    assert.equal(response.status, 200);
    const body = await json(response);
    assert.deepEqual(engine.requests[0].promptTokens, prompt);
    assert.equal(engine.requests[0].cacheKey, "episode-1");
    assert.ok(
      engine.requests[0].stopTokenIds!.includes(5) &&
        engine.requests[0].stopTokenIds!.includes(endOfTurn),
    );
    const choice = body.choices[0];
    assert.deepEqual(choice.token_ids, [...tokenizer.encode("Sunny in Paris."), endOfTurn]);
    assert.deepEqual(
      choice.token_logprobs,
      choice.token_ids.map(() => -0.5),
    );
    assert.deepEqual(
      choice.token_versions,
      choice.token_ids.map(() => 3),
    );
    assert.equal(choice.message.content, "Sunny in Paris.");
    assert.equal(choice.finish_reason, "stop");
    // Invalid token-in requests.
    for (const bad of [
      { model: "scripted", prompt_token_ids: prompt, messages: [{ role: "user", content: "x" }] },
      { model: "scripted" },
      { model: "scripted", prompt_token_ids: prompt, tools: [WEATHER_TOOL] },
      { model: "scripted", prompt_token_ids: prompt, stream: true },
      { model: "scripted", prompt_token_ids: prompt, cache_key: "k", n: 2 },
      { model: "scripted", prompt_token_ids: [-1] },
    ]) {
      assert.equal((await post(url, bad)).status, 400, JSON.stringify(bad));
    }
  } finally {
    await server.close();
  }
});

test("POST /v1/weights installs a pushed version (safetensors body); older versions and wrong weights are refused", async () => {
  const { engine, server, url } = await withServer(["x"], { apiKey: "k", weightsKey: "w-key" });
  const auth = { authorization: "Bearer w-key" };
  const body = (name: string) =>
    serializeSafetensors([{ name, shape: [2], data: Float32Array.from([1, 2]) }], {
      metadata: { version: "7" },
    });
  const push = (bytes: Uint8Array, headers: Record<string, string> = {}) =>
    fetch(`${url}/weights`, {
      method: "POST",
      headers: { "content-type": "application/octet-stream", ...auth, ...headers },
      body: bytes,
    });
  try {
    assert.equal(
      (
        await fetch(`${url}/weights`, {
          method: "POST",
          headers: { "content-type": "application/octet-stream" },
          body: body("w"),
        })
      ).status,
      401,
    );
    const installed = await push(body("w"));
    assert.equal(installed.status, 200);
    assert.deepEqual(
      { ...(await json(installed)), milliseconds: 0 },
      { object: "policy_version", version: 7, previous_version: 3, tensors: 1, milliseconds: 0 },
    );
    assert.deepEqual(Array.from(engine.installed[0].tensors[0].data), [1, 2]);
    assert.equal((await json(await fetch(`${url}/weights`, { headers: auth }))).version, 7);
    assert.equal((await push(body("w"), { "x-agentrl-policy-version": "9" })).status, 200);
    assert.equal((await push(body("w"), { "x-agentrl-policy-version": "8" })).status, 409);
    assert.equal((await push(body("other"), { "x-agentrl-policy-version": "10" })).status, 400);
    assert.equal((await push(Uint8Array.from([1, 2, 3]))).status, 400);
    // The API key does not open the weight routes.
    assert.equal(
      (await push(body("w"), { authorization: "Bearer k", "x-agentrl-policy-version": "20" }))
        .status,
      401,
    );
    assert.equal(
      (await fetch(`${url}/weights`, { headers: { authorization: "Bearer k" } })).status,
      401,
    );
    assert.equal(engine.stats().version, 9);
  } finally {
    await server.close();
  }
});

test("weight routes need the weights key, also on loopback, and are off without one", async () => {
  const weights = serializeSafetensors([{ name: "w", shape: [1], data: Float32Array.from([5]) }], {
    metadata: { version: "4" },
  });
  const push = (url: string, headers: Record<string, string> = {}) =>
    fetch(`${url}/weights`, {
      method: "POST",
      headers: { "content-type": "application/octet-stream", ...headers },
      body: weights,
    });
  const open = await withServer(["x"]);
  try {
    // No API key, no weights key: chat works, the weight routes are off.
    assert.equal(
      (await post(open.url, { model: "scripted", messages: [{ role: "user", content: "hi" }] }))
        .status,
      200,
    );
    const off = await push(open.url);
    assert.equal(off.status, 403);
    assert.equal((await json(off)).error.code, "weights_routes_off");
    assert.equal((await fetch(`${open.url}/weights`)).status, 403);
    assert.equal(open.engine.installed.length, 0);
  } finally {
    await open.server.close();
  }
  const keyed = await withServer(["x"], { weightsKey: "secret" });
  try {
    assert.equal((await push(keyed.url)).status, 401);
    assert.equal((await push(keyed.url, { authorization: "Bearer wrong!" })).status, 401);
    assert.equal(keyed.engine.installed.length, 0);
    assert.equal((await push(keyed.url, { authorization: "Bearer secret" })).status, 200);
    assert.equal(keyed.engine.stats().version, 4);
  } finally {
    await keyed.server.close();
  }
});

test("pulls by path or URL only from the allowed folders and URL prefixes", async () => {
  const root = mkdtempSync(join(tmpdir(), "agentrl-weights-from-"));
  const allowed = join(root, "allowed");
  const outside = join(root, "outside");
  for (const folder of [allowed, outside]) {
    mkdirSync(join(folder, "model"), { recursive: true });
    writeFileSync(
      join(folder, "model", "model.safetensors"),
      serializeSafetensors([{ name: "w", shape: [1], data: Float32Array.from([1]) }]),
    );
  }
  symlinkSync(join(outside, "model"), join(allowed, "escape"));
  // A file server with one allowed prefix (/weights/) and the same file elsewhere (/private/), and a redirect out.
  const files = createServer((request, response) => {
    if (request.url === "/weights/redirect/model.safetensors")
      return void response.writeHead(302, { location: "/private/m/model.safetensors" }).end();
    if (!request.url?.endsWith("/model.safetensors")) return void response.writeHead(404).end();
    response
      .writeHead(200, { "content-type": "application/octet-stream" })
      .end(serializeSafetensors([{ name: "w", shape: [1], data: Float32Array.from([2]) }]));
  });
  await new Promise<void>((resolve) => files.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${(files.address() as AddressInfo).port}`;
  const { engine, server, url } = await withServer(["x"], {
    weightsKey: "key",
    weightSources: [allowed, `${origin}/weights/`],
  });
  const pull = async (body: Record<string, unknown>) => {
    const response = await fetch(`${url}/weights`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer key" },
      body: JSON.stringify(body),
    });
    return { status: response.status, code: (await json(response)).error?.code };
  };
  try {
    assert.deepEqual(await pull({ path: join(allowed, "model"), version: 10 }), {
      status: 200,
      code: undefined,
    });
    assert.deepEqual(await pull({ path: join(outside, "model"), version: 11 }), {
      status: 403,
      code: "weights_source_refused",
    });
    assert.deepEqual(await pull({ path: `${allowed}/../outside/model`, version: 11 }), {
      status: 403,
      code: "weights_source_refused",
    });
    assert.deepEqual(
      await pull({ path: join(allowed, "escape"), version: 11 }),
      { status: 403, code: "weights_source_refused" },
      "a symbolic link out of the folder",
    );
    assert.deepEqual(await pull({ path: join(allowed, "missing"), version: 11 }), {
      status: 404,
      code: "weights_not_found",
    });
    assert.deepEqual(await pull({ url: `${origin}/weights/m`, version: 12 }), {
      status: 200,
      code: undefined,
    });
    assert.deepEqual(await pull({ url: `${origin}/private/m`, version: 13 }), {
      status: 403,
      code: "weights_source_refused",
    });
    assert.deepEqual(await pull({ url: `${origin}/weights/../private/m`, version: 13 }), {
      status: 403,
      code: "weights_source_refused",
    });
    assert.deepEqual(
      await pull({
        url: `http://localhost:${(files.address() as AddressInfo).port}/weights/m`,
        version: 13,
      }),
      { status: 403, code: "weights_source_refused" },
      "another origin",
    );
    assert.deepEqual(
      await pull({ url: `${origin}/weights/redirect`, version: 13 }),
      { status: 404, code: "weights_not_found" },
      "redirects are not followed",
    );
    assert.deepEqual(
      engine.installed.map((weights) => weights.version),
      [10, 12],
    );
  } finally {
    await server.close();
    files.close();
    rmSync(root, { recursive: true, force: true });
  }
  // Without --weights-from, no pull at all.
  const closed = await withServer(["x"], { weightsKey: "key" });
  try {
    const response = await fetch(`${closed.url}/weights`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer key" },
      body: JSON.stringify({ path: tmpdir() }),
    });
    assert.equal(response.status, 403);
  } finally {
    await closed.server.close();
  }
});

test("serverWeightsKey: given, else env, else the key file, else generated into it with mode 0600 (once for two servers)", () => {
  const folder = mkdtempSync(join(tmpdir(), "agentrl-serve-key-"));
  const file = join(folder, "nested", "serve-key");
  const saved = process.env.AGENTRL_SERVE_KEY;
  delete process.env.AGENTRL_SERVE_KEY;
  try {
    assert.deepEqual(serverWeightsKey("given", file), {
      key: "given",
      source: "--weights-key",
      created: false,
    });
    assert.equal(existsSync(file), false);
    const first = serverWeightsKey(undefined, file);
    assert.equal(first.created, true);
    assert.ok(first.key.length >= 32);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    const second = serverWeightsKey(undefined, file);
    assert.deepEqual(second, { key: first.key, source: file, created: false });
    assert.equal(serveKeyFromEnvironment(file), first.key);
    process.env.AGENTRL_SERVE_KEY = "from-env";
    assert.equal(serverWeightsKey(undefined, file).key, "from-env");
    assert.equal(serveKeyFromEnvironment(file), "from-env");
  } finally {
    if (saved === undefined) delete process.env.AGENTRL_SERVE_KEY;
    else process.env.AGENTRL_SERVE_KEY = saved;
    rmSync(folder, { recursive: true, force: true });
  }
});

test("serverWeightsKey: a key file another server has created but not yet written is read once written (it refused to start: 'the weights key file … is empty')", async () => {
  const folder = mkdtempSync(join(tmpdir(), "agentrl-serve-key-"));
  const file = join(folder, "serve-key");
  const saved = process.env.AGENTRL_SERVE_KEY;
  delete process.env.AGENTRL_SERVE_KEY;
  try {
    // The other server, in its own process: the file exists empty; its key arrives 150 ms later.
    writeFileSync(file, "", { mode: 0o600 });
    const writer = spawn(
      process.execPath,
      [
        "-e",
        `setTimeout(() => require("node:fs").writeFileSync(process.argv[1], "written-later\\n"), 150); console.log("started")`,
        file,
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    await new Promise((resolve) => writer.stdout!.once("data", resolve));
    assert.deepEqual(serverWeightsKey(undefined, file), {
      key: "written-later",
      source: file,
      created: false,
    });
    writeFileSync(file, "");
    assert.throws(() => serverWeightsKey(undefined, file), ServeConfigError);
  } finally {
    if (saved === undefined) delete process.env.AGENTRL_SERVE_KEY;
    else process.env.AGENTRL_SERVE_KEY = saved;
    rmSync(folder, { recursive: true, force: true });
  }
});
