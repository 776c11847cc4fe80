import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Tokenizer, TokenizerError } from "./tokenizer.js";
import { TokenizerFileError } from "./files.js";
import { trainByteLevelBpe } from "./train-bpe.js";
import { syntheticCorpus } from "./test-corpus.js";
import { qwen25AssistantText, type ChatMessage } from "./chat-template.js";

const trained = trainByteLevelBpe(syntheticCorpus(30, 2000), { vocabSize: 800 });
const tokenizer = Tokenizer.fromJson(trained.tokenizerJson, trained.tokenizerConfig);

const SAMPLES = [
  "<|im_start|>user\nList the files in /tmp, please. 😀<|im_end|>\n<|im_start|>assistant\n",
  '<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la /tmp | wc -l"}}\n</tool_call><|im_end|>',
  "Ünïcödé 日本語 한국어 🇫🇷👨‍👩‍👧 12345\t\r\n  end",
];

function withTemporaryDirectory(run: (directory: string) => void): void {
  const directory = mkdtempSync(join(tmpdir(), "agentrl-tokenizer-"));
  try {
    run(directory);
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}

describe("Tokenizer files", () => {
  test("save → fromDirectory gives identical ids, tokens and files", () => {
    withTemporaryDirectory((directory) => {
      tokenizer.save(directory);
      const loaded = Tokenizer.fromDirectory(directory);
      assert.equal(loaded.vocabSize, tokenizer.vocabSize);
      assert.equal(loaded.eosTokenId, tokenizer.eosTokenId);
      assert.equal(loaded.padTokenId, tokenizer.padTokenId);
      assert.deepEqual(loaded.stopTokenIds, tokenizer.stopTokenIds);
      for (const text of SAMPLES) assert.deepEqual(loaded.encode(text), tokenizer.encode(text));
      for (let id = 0; id < tokenizer.vocabSize; id++)
        assert.equal(loaded.idToToken(id), tokenizer.idToToken(id));
      const messages: ChatMessage[] = [{ role: "user", content: "hi" }];
      assert.equal(loaded.applyChatTemplate(messages), tokenizer.applyChatTemplate(messages));
      // Saving the loaded tokenizer writes the same files again.
      const first = readFileSync(join(directory, "tokenizer.json"), "utf8");
      loaded.save(directory);
      assert.equal(readFileSync(join(directory, "tokenizer.json"), "utf8"), first);
    });
  });

  test("generation_config.json's eos_token_id list adds stop ids", () => {
    withTemporaryDirectory((directory) => {
      tokenizer.save(directory);
      const extra = tokenizer.tokenToId("</tool_call>")!;
      writeFileSync(
        join(directory, "generation_config.json"),
        JSON.stringify({ eos_token_id: [tokenizer.eosTokenId, extra] }),
      );
      const loaded = Tokenizer.fromDirectory(directory);
      assert.deepEqual(
        loaded.stopTokenIds,
        [...tokenizer.stopTokenIds, extra].sort((a, b) => a - b),
      );
    });
  });

  test("a chat_template.jinja file is used when tokenizer_config.json has no template", () => {
    withTemporaryDirectory((directory) => {
      const { chat_template: _template, ...configWithoutTemplate } = trained.tokenizerConfig;
      Tokenizer.fromJson(trained.tokenizerJson, configWithoutTemplate).save(directory);
      assert.equal(Tokenizer.fromDirectory(directory).hasChatTemplate, false);
      writeFileSync(
        join(directory, "chat_template.jinja"),
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}",
      );
      assert.equal(
        Tokenizer.fromDirectory(directory).applyChatTemplate([{ role: "user", content: "hi" }]),
        "<user>hi",
      );
    });
  });

  test("Qwen2's on-disk variants load: NFC normalizer, merges as pairs (tokenizers >= 0.20)", () => {
    const json = structuredClone(trained.tokenizerJson) as Record<string, any>;
    json.normalizer = { type: "NFC" };
    json.model.merges = (json.model.merges as string[]).map((merge) => merge.split(" "));
    const variant = Tokenizer.fromJson(json, trained.tokenizerConfig);
    for (const text of SAMPLES) assert.deepEqual(variant.encode(text), tokenizer.encode(text));
    // NFC: a decomposed é (e + U+0301) encodes like the composed one.
    assert.deepEqual(variant.encode("cafe\u0301"), tokenizer.encode("caf\u00e9"));
    assert.notDeepEqual(tokenizer.encode("cafe\u0301"), tokenizer.encode("caf\u00e9"));
  });

  test("missing or malformed files raise TokenizerFileError", () => {
    withTemporaryDirectory((directory) => {
      assert.throws(() => Tokenizer.fromDirectory(directory), TokenizerFileError);
      writeFileSync(join(directory, "tokenizer.json"), "{ not json");
      assert.throws(() => Tokenizer.fromDirectory(directory), TokenizerFileError);
    });
    assert.throws(() => Tokenizer.fromJson({ added_tokens: "no" }, {}), TokenizerFileError);
    assert.throws(
      () => Tokenizer.fromJson(trained.tokenizerJson, { eos_token: "<|missing|>" }),
      TokenizerError,
    );
  });
});

describe("encode / decode", () => {
  test("decode(encode(text)) === text; empty input; unknown ids rejected", () => {
    for (const text of SAMPLES) assert.equal(tokenizer.decode(tokenizer.encode(text)), text);
    assert.deepEqual(tokenizer.encode(""), []);
    assert.equal(tokenizer.decode([]), "");
    assert.throws(() => tokenizer.decode([tokenizer.vocabSize]), TokenizerError);
    assert.throws(() => tokenizer.decode([1.5]), TokenizerError);
  });

  test("tokenToId / idToToken are inverse, in the byte-level alphabet", () => {
    assert.equal(tokenizer.idToToken(tokenizer.tokenToId("Ġ")!), "Ġ");
    assert.equal(tokenizer.tokenToId("not-a-token-at-all"), undefined);
    assert.equal(tokenizer.idToToken(tokenizer.vocabSize + 5), undefined);
  });
});

describe("stream decoder", () => {
  test("multi-byte characters split across tokens come out whole, once", () => {
    const text = "a😀b 日本 👨‍👩‍👧";
    const ids = tokenizer.encode(text);
    // The corpus has no emoji: 😀 is 4 byte tokens, and no token is a complete emoji.
    const emojiTokens = tokenizer.encode("😀");
    assert.equal(emojiTokens.length, 4);
    const decoder = tokenizer.createStreamDecoder();
    const pieces = ids.map((id) => decoder.push(id));
    assert.equal(pieces.join("") + decoder.flush(), text);
    for (const piece of pieces) assert.ok(!piece.includes("\uFFFD"), JSON.stringify(pieces));
    const start = ids.indexOf(emojiTokens[0]);
    assert.deepEqual(pieces.slice(start, start + 4), ["", "", "", "😀"]);
  });

  test("streams the samples and random texts exactly", () => {
    for (const text of SAMPLES) {
      const decoder = tokenizer.createStreamDecoder();
      let streamed = "";
      for (const id of tokenizer.encode(text)) streamed += decoder.push(id);
      streamed += decoder.flush();
      assert.equal(streamed, text);
      assert.equal(decoder.text, text);
    }
  });

  test("skipSpecialTokens drops <|im_end|>; invalid UTF-8 is emitted as U+FFFD, not held forever", () => {
    const decoder = tokenizer.createStreamDecoder({ skipSpecialTokens: true });
    let text = "";
    for (const id of tokenizer.encode("ok<|im_end|>")) text += decoder.push(id);
    assert.equal(text, "ok");
    // A skipped token right before a split emoji does not count as pending bytes.
    let emoji = "";
    for (const id of tokenizer.encode("😀")) emoji += decoder.push(id);
    assert.equal(emoji, "😀");
    // A lone UTF-8 continuation byte (0x80 is "Ģ" in the byte alphabet) followed by ASCII.
    const invalid = [tokenizer.tokenToId("Ģ")!, ...tokenizer.encode("abcdef")];
    const stream = tokenizer.createStreamDecoder();
    const out = invalid.map((id) => stream.push(id)).join("") + stream.flush();
    assert.equal(out, "\uFFFDabcdef");
  });
});

describe("token-level prefix stability", () => {
  test("prompt ids + generated ids + eos + reply ids = ids of the whole rendering (boundaries at special tokens)", () => {
    const tools = [
      {
        type: "function" as const,
        function: { name: "bash", description: "Run a command.", parameters: { type: "object" } },
      },
    ];
    const conversation: ChatMessage[] = [
      { role: "user", content: "How many files are in /tmp?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          {
            id: "1",
            type: "function",
            function: { name: "bash", arguments: '{"command":"ls /tmp | wc -l"}' },
          },
        ],
      },
      { role: "tool", tool_call_id: "1", content: "42" },
      { role: "assistant", content: "There are 42 files." },
    ];
    const ids: number[] = [];
    let rendered = "";
    for (let k = 0; k < conversation.length; k++) {
      const message = conversation[k];
      if (message.role !== "assistant") continue;
      const prompt = tokenizer.applyChatTemplate(conversation.slice(0, k), {
        tools,
        addGenerationPrompt: true,
      });
      ids.push(...tokenizer.encode(prompt.slice(rendered.length))); // the environment's part (mask 0)
      ids.push(...tokenizer.encode(qwen25AssistantText(message)), tokenizer.eosTokenId); // "generated" (mask 1)
      rendered = tokenizer.applyChatTemplate(conversation.slice(0, k + 1), { tools });
      assert.ok(rendered.startsWith(prompt), `turn ${k}`);
      // The template's "\n" after <|im_end|> comes with the next environment part.
      rendered = rendered.slice(0, -1);
    }
    const whole = tokenizer.applyChatTemplate(conversation, { tools });
    assert.deepEqual([...ids, ...tokenizer.encode("\n")], tokenizer.encode(whole));
  });
});

describe("chat template selection", () => {
  test("a list of named templates: tool_use with tools, default otherwise, or by name", () => {
    const config = {
      ...trained.tokenizerConfig,
      chat_template: [
        { name: "default", template: "D{% for m in messages %}|{{ m.content }}{% endfor %}" },
        { name: "tool_use", template: "T{{ tools | length }}" },
      ],
    };
    const named = Tokenizer.fromJson(trained.tokenizerJson, config);
    const messages: ChatMessage[] = [{ role: "user", content: "x" }];
    assert.equal(named.applyChatTemplate(messages), "D|x");
    assert.equal(
      named.applyChatTemplate(messages, { tools: [{ type: "function", function: { name: "f" } }] }),
      "T1",
    );
    assert.equal(named.applyChatTemplate(messages, { templateName: "tool_use", tools: [] }), "T0");
    assert.throws(
      () => named.applyChatTemplate(messages, { templateName: "nope" }),
      TokenizerError,
    );
    const none = Tokenizer.fromJson(trained.tokenizerJson, {
      ...trained.tokenizerConfig,
      chat_template: undefined,
    });
    assert.equal(none.hasChatTemplate, false);
    assert.throws(() => none.applyChatTemplate(messages), TokenizerError);
  });

  test("templates see bos_token / eos_token", () => {
    const config = { ...trained.tokenizerConfig, chat_template: "{{ eos_token }}{{ bos_token }}" };
    assert.equal(
      Tokenizer.fromJson(trained.tokenizerJson, config).applyChatTemplate([]),
      "<|im_end|>",
    );
  });
});

/**
 * A hand-written Llama(2)-style tokenizer.json: SentencePiece-like BPE over `▁`-joined text
 * with byte fallback, a BOS-adding post-processor and the matching decoder chain.
 */
function llamaStyleTokenizer(): Tokenizer {
  const vocab: Record<string, number> = { "<unk>": 0, "<s>": 1, "</s>": 2 };
  for (let byte = 0; byte < 256; byte++)
    vocab[`<0x${byte.toString(16).toUpperCase().padStart(2, "0")}>`] = 3 + byte;
  const pieces = [
    "▁",
    "h",
    "e",
    "l",
    "o",
    "w",
    "r",
    "d",
    "he",
    "ll",
    "hell",
    "hello",
    "▁w",
    "or",
    "▁wor",
    "▁world",
    "▁hello",
  ];
  for (const piece of pieces) vocab[piece] = Object.keys(vocab).length;
  const merges = [
    "h e",
    "l l",
    "he ll",
    "hell o",
    "▁ w",
    "o r",
    "▁w or",
    "▁wor l",
    "▁worl d",
    "▁ hello",
  ];
  vocab["▁worl"] = Object.keys(vocab).length;
  const special = (id: number, content: string) => ({
    id,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  });
  const tokenizerJson = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")],
    normalizer: {
      type: "Sequence",
      normalizers: [
        { type: "Prepend", prepend: "▁" },
        { type: "Replace", pattern: { String: " " }, content: "▁" },
      ],
    },
    pre_tokenizer: null,
    post_processor: {
      type: "TemplateProcessing",
      single: [{ SpecialToken: { id: "<s>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
      pair: [
        { SpecialToken: { id: "<s>", type_id: 0 } },
        { Sequence: { id: "A", type_id: 0 } },
        { Sequence: { id: "B", type_id: 1 } },
      ],
      special_tokens: { "<s>": { id: "<s>", ids: [1], tokens: ["<s>"] } },
    },
    decoder: {
      type: "Sequence",
      decoders: [
        { type: "Replace", pattern: { String: "▁" }, content: " " },
        { type: "ByteFallback" },
        { type: "Fuse" },
        { type: "Strip", content: " ", start: 1, stop: 0 },
      ],
    },
    model: {
      type: "BPE",
      dropout: null,
      unk_token: "<unk>",
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: true,
      byte_fallback: true,
      vocab,
      merges,
    },
  };
  const tokenizerConfig = {
    bos_token: "<s>",
    eos_token: "</s>",
    unk_token: "<unk>",
    clean_up_tokenization_spaces: false,
    chat_template:
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}{{ eos_token }}{% endfor %}",
  };
  return Tokenizer.fromJson(tokenizerJson, tokenizerConfig);
}

describe("a Llama-style tokenizer (metaspace + byte fallback)", () => {
  const llama = llamaStyleTokenizer();

  test("encodes with merges and byte fallback, decodes back", () => {
    const ids = llama.encode("hello world", { addSpecialTokens: true });
    assert.deepEqual(
      ids.map((id) => llama.idToToken(id)),
      ["<s>", "▁hello", "▁world"],
    );
    assert.deepEqual(
      llama.encode("hello world"),
      ids.slice(1),
      "addSpecialTokens defaults to false",
    );
    const emoji = llama.encode("hello 😀");
    assert.deepEqual(
      emoji.map((id) => llama.idToToken(id)),
      ["▁hello", "▁", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>"],
    );
    assert.equal(llama.decode(emoji), "hello 😀");
    assert.equal(llama.decode(ids, { skipSpecialTokens: true }), "hello world");
    assert.equal(llama.eosTokenId, 2);
    assert.deepEqual(llama.stopTokenIds, [2]);
    assert.equal(llama.applyChatTemplate([{ role: "user", content: "hi" }]), "<s>[user] hi</s>");
  });

  test("the stream decoder keeps the spaces the Strip decoder would drop from a lone token", () => {
    const ids = llama.encode("hello world hello 😀");
    assert.equal(llama.decode(ids.slice(1, 2)), "world", "decoded alone, '▁world' loses its space");
    const decoder = llama.createStreamDecoder();
    const pieces = ids.map((id) => decoder.push(id));
    assert.equal(pieces.join("") + decoder.flush(), "hello world hello 😀");
    assert.deepEqual(pieces.slice(0, 3), ["hello", " world", " hello"]);
  });
});
