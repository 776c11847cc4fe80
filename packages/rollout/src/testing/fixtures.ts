/**
 * Test and benchmark fixtures (not part of the package's API; excluded from the build):
 * a small trained tokenizer with the Qwen2.5 chat template, the `test`-preset policy, a
 * scripted model that "writes" given texts through the real engine, and small task
 * families (echo tasks of mixed lengths; faulty ones: throws, hangs, dies mid-episode).
 */
import {
  FunctionCallSession,
  InProcessEnvironmentClient,
  type AssistantMessage,
  type EnvironmentClient,
  type InteractResult,
  type Split,
  type StartResult,
  type TaskFamily,
  type TaskSession,
  type ToolReply,
  type ToolSpec,
} from "@agentrl/envs";
import {
  CHAT_TEMPLATES,
  Policy,
  Tokenizer,
  initBackend,
  presetConfig,
  trainByteLevelBpe,
  type ChatTemplateName,
  type PresetName,
} from "@agentrl/policy";
import type { EngineModel, EngineSequence } from "../engine/index.js";
import { formatToolCalls } from "../toolcall.js";

export { Tokenizer };

/**
 * A byte-level BPE tokenizer trained on rendered echo conversations and some words and
 * numbers. `vocabSize` is an upper bound (default 512, the `test` preset); `chatTemplate`
 * is one of `@agentrl/policy`'s CHAT_TEMPLATES (default `qwen2.5`; `compact` lists tools as
 * one-line signatures, as fresh models of the CLI do).
 */
export function testTokenizer(
  vocabSize = 512,
  options: { chatTemplate?: ChatTemplateName } = {},
): Tokenizer {
  const templateName = options.chatTemplate ?? "qwen2.5";
  const cacheKey = `${vocabSize}/${templateName}`;
  const cached = tokenizers.get(cacheKey);
  if (cached) return cached;
  const chatTemplate = CHAT_TEMPLATES[templateName];
  const words =
    "the of and to in is that for it as was with be by on not this are or from at which have an they you file list count lines table select answer city shop buy search click item price".split(
      " ",
    );
  const seed = trainByteLevelBpe(["hello world"], {
    vocabSize: 300,
    minFrequency: 1,
    chatTemplate,
  });
  const renderer = new Tokenizer(seed.tokenizerJson, seed.tokenizerConfig);
  const corpus: string[] = [];
  for (let i = 0; i < 60; i++) {
    const messages = new EchoSession(1 + (i % 4), 10, () => 0).start.messages;
    const call = formatToolCalls([{ name: "echo", arguments: { text: `hello number ${i}` } }]);
    corpus.push(
      renderer.applyChatTemplate(
        [
          ...messages,
          { role: "assistant", content: call },
          { role: "tool", tool_call_id: "c", content: `echo: hello number ${i}` },
        ],
        { tools: [ECHO_TOOL], addGenerationPrompt: true },
      ),
    );
    corpus.push(
      Array.from({ length: 80 }, (_, j) =>
        j % 7 === 0 ? String((i * 31 + j * 17) % 1000) : words[(i * 13 + j * 7) % words.length],
      ).join(" "),
    );
  }
  const trained = trainByteLevelBpe(corpus, { vocabSize, chatTemplate });
  const tokenizer = new Tokenizer(trained.tokenizerJson, trained.tokenizerConfig);
  tokenizers.set(cacheKey, tokenizer);
  return tokenizer;
}

const tokenizers = new Map<string, Tokenizer>();

/** A freshly initialised policy of a preset (default `test`) with the test tokenizer. */
export async function testPolicy(
  options: { preset?: PresetName; seed?: number; tokenizer?: Tokenizer } = {},
): Promise<Policy> {
  await initBackend({ log: null });
  const tokenizer = options.tokenizer ?? testTokenizer();
  return Policy.create(presetConfig(options.preset ?? "test", { vocabSize: tokenizer.vocabSize }), {
    tokenizer,
    seed: options.seed ?? 1,
  });
}

export const ECHO_TOOL: ToolSpec = {
  type: "function",
  function: {
    name: "echo",
    description: "Repeats the text.",
    parameters: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  },
};

/** Session of the echo task: ends `completed` (reward 1 by default) after `turnsNeeded` turns of any kind. */
class EchoSession extends FunctionCallSession {
  constructor(
    private readonly turnsNeeded: number,
    maxTurns: number,
    private readonly latency: () => number,
    private readonly rewardOf: () => number = () => 1,
    private readonly endMetrics: Record<string, number> = {},
  ) {
    super(
      {
        messages: [
          { role: "system", content: "You repeat things." },
          { role: "user", content: `Say hello ${turnsNeeded} times.` },
        ],
        tools: [ECHO_TOOL],
      },
      { maxTurns },
    );
  }
  protected override async callTool(
    _name: string,
    args: Record<string, unknown>,
  ): Promise<ToolReply> {
    await sleep(this.latency());
    return {
      content: `echo: ${String(args.text)}`,
      ...(this.turns >= this.turnsNeeded
        ? { outcome: { reward: this.rewardOf(), status: "completed", metrics: this.endMetrics } }
        : {}),
    };
  }
  protected override async onText(
    content: string,
  ): Promise<{ content: string; outcome?: ToolReply["outcome"] }> {
    await sleep(this.latency());
    return {
      content: `You said ${content.length} characters.`,
      ...(this.turns >= this.turnsNeeded
        ? { outcome: { reward: this.rewardOf(), status: "completed", metrics: this.endMetrics } }
        : {}),
    };
  }
}

export interface EchoFamilyOptions {
  name?: string;
  /** Instances; instance i needs minTurnsNeeded + (i mod (maxTurnsNeeded − minTurnsNeeded + 1)) turns. Default 16. */
  size?: number;
  /** Fewest turns an instance needs. Default 1. */
  minTurnsNeeded?: number;
  /** Most turns an instance needs. Default 4. */
  maxTurnsNeeded?: number;
  /** The session's turn limit. Default 10. */
  maxTurns?: number;
  /** Milliseconds each environment step takes. Default 0. */
  latency?: () => number;
  /** Reward of a finished episode. Default 1. */
  reward?: () => number;
  /** Metrics of a finished episode's last reply (say, `answerFromOutput`). Default none. */
  metrics?: Record<string, number>;
}

/** Echo tasks of mixed lengths (minTurnsNeeded … maxTurnsNeeded turns). */
export function echoFamily(options: EchoFamilyOptions = {}): TaskFamily {
  const size = options.size ?? 16;
  const minTurnsNeeded = options.minTurnsNeeded ?? 1;
  const spread = Math.max(1, (options.maxTurnsNeeded ?? 4) - minTurnsNeeded + 1);
  return {
    name: options.name ?? "echo",
    indices: (split: Split) =>
      Array.from({ length: size }, (_, i) => (split === "train" ? i : size + i)),
    startSession: async (index: number) =>
      new EchoSession(
        minTurnsNeeded + (index % spread),
        options.maxTurns ?? 10,
        options.latency ?? (() => 0),
        options.reward ?? (() => 1),
        options.metrics,
      ),
  };
}

/** How a faulty family misbehaves at its `faultTurn`-th interaction. */
export type Fault = "throws" | "hangs" | "dies";

/**
 * A client over the in-process client of `@agentrl/envs` that injects faults for tasks
 * named `throws`, `hangs` and `dies` (each an echo task underneath):
 * - `throws`: `interact` rejects (an environment fault, e.g. an HTTP 500);
 * - `hangs`: `interact` never settles (only the rollout's time limit ends the episode);
 * - `dies`: the session disappears (its interact answers 404 from then on).
 */
export class FaultyClient implements EnvironmentClient {
  readonly inner: InProcessEnvironmentClient;
  readonly cancelled: string[] = [];
  private readonly taskOf = new Map<string, string>();
  private readonly turns = new Map<string, number>();
  private readonly dead = new Set<string>();

  constructor(
    families: TaskFamily[],
    private readonly faultTurn = 2,
  ) {
    this.inner = new InProcessEnvironmentClient(families, { concurrency: 1024 });
  }

  async startSample(name: string, index: number): Promise<{ sessionId: string } & StartResult> {
    const started = await this.inner.startSample(name, index);
    this.taskOf.set(started.sessionId, name);
    return started;
  }

  async interact(sessionId: string, message: AssistantMessage): Promise<InteractResult> {
    const turn = (this.turns.get(sessionId) ?? 0) + 1;
    this.turns.set(sessionId, turn);
    const task = this.taskOf.get(sessionId);
    if (this.dead.has(sessionId))
      throw new Error(`session ${sessionId} is gone (its container died)`);
    if (turn >= this.faultTurn) {
      if (task === "throws") throw new Error("HTTP 500: the task worker crashed");
      if (task === "hangs") return new Promise<InteractResult>(() => {});
      if (task === "dies") {
        this.dead.add(sessionId);
        await this.inner.cancel(sessionId);
        throw new Error(`session ${sessionId} is gone (its container died)`);
      }
    }
    return this.inner.interact(sessionId, message);
  }

  async cancel(sessionId: string): Promise<void> {
    this.cancelled.push(sessionId);
    if (!this.dead.has(sessionId)) await this.inner.cancel(sessionId).catch(() => {});
  }

  getIndices(name: string, split?: Split): Promise<number[]> {
    return this.inner.getIndices(name, split);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

/** A sequence of the scripted model: just the tokens fed. */
export class ScriptedSequence implements EngineSequence {
  readonly fed: number[] = [];
  disposed = false;
  get length(): number {
    return this.fed.length;
  }
  dispose(): void {
    this.disposed = true;
  }
}

/**
 * A model with no weights whose logits put (almost) all mass on `next(fed)`: the engine,
 * sampling greedily, "writes" whatever the script says. `weights` is a version label.
 */
export class ScriptedModel implements EngineModel<ScriptedSequence, number> {
  loadedWeights = 0;
  decodeBatchSizes: number[] = [];

  constructor(
    private readonly vocabSize: number,
    private readonly next: (fed: readonly number[]) => number,
  ) {}

  createSequence(): ScriptedSequence {
    return new ScriptedSequence();
  }

  prefill(sequence: ScriptedSequence, tokenIds: number[]): Float32Array {
    sequence.fed.push(...tokenIds);
    return this.logits(sequence.fed);
  }

  decodeStep(sequences: ScriptedSequence[], tokenIds: number[]): Float32Array[] {
    this.decodeBatchSizes.push(sequences.length);
    return sequences.map((sequence, i) => {
      sequence.fed.push(tokenIds[i]);
      return this.logits(sequence.fed);
    });
  }

  fork(sequence: ScriptedSequence, length = sequence.fed.length): ScriptedSequence {
    const copy = new ScriptedSequence();
    copy.fed.push(...sequence.fed.slice(0, length));
    return copy;
  }

  loadWeights(weights: number): void {
    this.loadedWeights = weights;
  }

  private logits(fed: readonly number[]): Float32Array {
    const logits = new Float32Array(this.vocabSize);
    logits[this.next(fed)] = 30;
    return logits;
  }
}

/**
 * A script for the scripted model: in turn k (counted by `<|im_start|>assistant\n` openings
 * in the context) it writes `texts(k)` then `<|im_end|>`.
 */
export function turnScript(
  tokenizer: Tokenizer,
  texts: (turn: number) => string,
): (fed: readonly number[]) => number {
  const opening = tokenizer.encode("<|im_start|>assistant\n");
  const endOfTurn = tokenizer.encode("<|im_end|>")[0];
  const targets = new Map<number, number[]>();
  return (fed) => {
    let turn = 0;
    let generatedFrom = fed.length;
    for (let i = 0; i + opening.length <= fed.length; i++) {
      if (opening.every((token, j) => fed[i + j] === token)) {
        turn += 1;
        generatedFrom = i + opening.length;
      }
    }
    const target = targets.get(turn - 1) ?? [...tokenizer.encode(texts(turn - 1)), endOfTurn];
    targets.set(turn - 1, target);
    return target[fed.length - generatedFrom] ?? endOfTurn;
  };
}

export function sleep(milliseconds: number): Promise<void> {
  return milliseconds > 0
    ? new Promise((resolve) => setTimeout(resolve, milliseconds))
    : Promise.resolve();
}

export type { TaskSession };
