import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Tokenizer } from "./tokenizer.js";
import {
  BYTE_TO_UNICODE,
  BpeTrainingError,
  DEFAULT_SPECIAL_TOKENS,
  QWEN2_PRETOKENIZER_PATTERN,
  trainByteLevelBpe,
} from "./train-bpe.js";
import { HuggingFaceSplitPreTokenizerClass } from "./huggingface.js";
import { syntheticCorpus } from "./test-corpus.js";

const CORPUS = syntheticCorpus(40, 2000);
const trained = trainByteLevelBpe(CORPUS, { vocabSize: 1000 });
const tokenizer = new Tokenizer(trained.tokenizerJson, trained.tokenizerConfig);

/** Texts that stress a byte-level tokenizer. */
const HARD_TEXTS = [
  "Hello, world! 1234567890 3.14159 -42 1e-9 0x1F",
  "naïve café Ελληνικά русский 日本語のテキスト 한국어 עברית العربية",
  "emoji 😀👍🏽 👨‍👩‍👧‍👦 🇫🇷 and a lone combining mark e\u0301 and NFD vs NFC é",
  "  leading spaces, trailing spaces   \n\n\n\ttabs\t\tand\r\nCRLF\r\n\u00a0nbsp\u3000ideographic\u2028line sep",
  "def f(x):\n    return {\"a\": [1, 2, 3], 'b': x ** 2}  # comment\n\n\nclass A:\n\tpass\n",
  "I'M HE'LL they're it's 'S 'Ll O'Neil rock'n'roll",
  '<|im_start|>user\nliteral specials <tool_call>{"x": 1}</tool_call><|im_end|>\n<|endoftext|>',
  "\u0000\u0001\u001f\u007f control characters and \uFFFD replacement",
  "",
  " ",
];

/** Random strings over a mix of ASCII, Latin-1, CJK, emoji and whitespace code points. */
function randomTexts(count: number, seed: number): string[] {
  let state = seed;
  const random = () => (state = (Math.imul(state, 1103515245) + 12345) >>> 0) / 2 ** 32;
  const ranges: [number, number][] = [
    [0x20, 0x7e],
    [0x09, 0x0d],
    [0xa0, 0x17f],
    [0x4e00, 0x4fff],
    [0x1f600, 0x1f64f],
    [0x0300, 0x036f],
  ];
  return Array.from({ length: count }, () => {
    let text = "";
    const length = Math.floor(random() * 80);
    for (let i = 0; i < length; i++) {
      const [low, high] = ranges[Math.floor(random() * ranges.length)];
      text += String.fromCodePoint(low + Math.floor(random() * (high - low + 1)));
    }
    return text;
  });
}

describe("trainByteLevelBpe", () => {
  test("vocabulary: 256 bytes in GPT-2 order, merges, then the specials; exactly vocabSize ids", () => {
    assert.equal(tokenizer.vocabSize, 1000);
    const model = trained.tokenizerJson.model as {
      vocab: Record<string, number>;
      merges: string[];
    };
    assert.equal(model.vocab["!"], 0);
    assert.equal(
      model.vocab["Ġ"],
      BYTE_TO_UNICODE.slice()
        .sort((a, b) => a.charCodeAt(0) - b.charCodeAt(0))
        .indexOf("Ġ"),
    );
    assert.equal(Object.keys(model.vocab).length, 1000 - DEFAULT_SPECIAL_TOKENS.length);
    assert.ok(model.merges.length >= 1000 - 256 - DEFAULT_SPECIAL_TOKENS.length);
    const added = trained.tokenizerJson.added_tokens;
    assert.deepEqual(
      added.map((token) => [token.id, token.content, token.special]),
      DEFAULT_SPECIAL_TOKENS.map((token, index) => [
        1000 - DEFAULT_SPECIAL_TOKENS.length + index,
        token.content,
        token.special,
      ]),
    );
    assert.equal(tokenizer.idToToken(tokenizer.eosTokenId), "<|im_end|>");
    assert.equal(tokenizer.idToToken(tokenizer.padTokenId), "<|endoftext|>");
    assert.deepEqual(
      tokenizer.stopTokenIds.map((id) => tokenizer.idToToken(id)),
      ["<|endoftext|>", "<|im_end|>"],
    );
  });

  test("tokenizer.json follows the Hugging Face schema with Qwen2's pipeline", () => {
    const json = trained.tokenizerJson as Record<string, any>;
    assert.equal(json.model.type, "BPE");
    assert.equal(json.decoder.type, "ByteLevel");
    assert.deepEqual(
      json.pre_tokenizer.pretokenizers.map((step: { type: string }) => step.type),
      ["Split", "ByteLevel"],
    );
    assert.equal(json.pre_tokenizer.pretokenizers[0].pattern.Regex, QWEN2_PRETOKENIZER_PATTERN);
    for (const merge of json.model.merges as string[]) {
      const [left, right, ...rest] = merge.split(" ");
      assert.equal(rest.length, 0);
      assert.ok(
        left + right in json.model.vocab,
        `merge result ${left + right} is in the vocabulary`,
      );
    }
    assert.equal(new Set(json.model.merges).size, json.model.merges.length, "no duplicate merges");
    assert.equal(trained.tokenizerConfig.chat_template, tokenizer.tokenizerConfig.chat_template);
    assert.equal(trained.tokenizerConfig.eos_token, "<|im_end|>");
    assert.equal(trained.tokenizerConfig.pad_token, "<|endoftext|>");
  });

  test("merges are learnt by pair frequency, most frequent first", () => {
    // Pieces: "ab" ×1, " ab" ×3, " cd" ×1 → (a,b) = 4, then (Ġ,ab) = 3; the rest occur once.
    const small = trainByteLevelBpe(["ab ab ab ab cd"], {
      vocabSize: 300,
      specialTokens: [],
      minFrequency: 2,
    });
    assert.deepEqual((small.tokenizerJson.model as { merges: string[] }).merges, ["a b", "Ġ ab"]);
  });

  test("incremental pair counts give the same merges as recounting after every merge", () => {
    const corpus = syntheticCorpus(6, 1500, 7).concat(randomTexts(30, 3));
    const fast = (
      trainByteLevelBpe(corpus, {
        vocabSize: 500,
        specialTokens: [],
        minFrequency: 2,
        maxTokenLength: 1000,
      }).tokenizerJson.model as {
        merges: string[];
      }
    ).merges;
    assert.deepEqual(fast, naiveMerges(corpus, 500 - 256, 2));
  });

  test("round-trips arbitrary text exactly (unicode, emoji, numbers, whitespace, code)", () => {
    for (const text of [...HARD_TEXTS, ...randomTexts(300, 11)]) {
      const ids = tokenizer.encode(text);
      assert.equal(tokenizer.decode(ids), text, JSON.stringify(text));
    }
  });

  test("special and added tokens encode to single ids; only special ones are skipped", () => {
    for (const { content } of DEFAULT_SPECIAL_TOKENS) {
      const ids = tokenizer.encode(content);
      assert.equal(ids.length, 1, content);
      assert.equal(tokenizer.idToToken(ids[0]), content);
      assert.equal(tokenizer.tokenToId(content), ids[0]);
    }
    const ids = tokenizer.encode("<|im_start|>assistant\n<tool_call>\n{}\n</tool_call><|im_end|>");
    assert.equal(ids[0], tokenizer.tokenToId("<|im_start|>"));
    assert.equal(ids.at(-1), tokenizer.eosTokenId);
    assert.equal(
      tokenizer.decode(ids, { skipSpecialTokens: true }),
      "assistant\n<tool_call>\n{}\n</tool_call>",
    );
  });

  test("digits are kept separate even when the corpus is full of numbers", () => {
    const numeric = trainByteLevelBpe(["12345 apples 678 2024 oranges 1000000 ".repeat(2000)], {
      vocabSize: 400,
    });
    const merges = (numeric.tokenizerJson.model as { merges: string[] }).merges;
    assert.ok(
      merges.includes("Ġ apples") || merges.some((merge) => merge.endsWith("les")),
      "words do merge",
    );
    for (const merge of merges) assert.ok(!/\d/.test(merge), `merge "${merge}" involves a digit`);
    const numericTokenizer = new Tokenizer(numeric.tokenizerJson, numeric.tokenizerConfig);
    assert.ok(
      numericTokenizer.vocabSize < 400,
      "the corpus ran out of pairs: fewer ids than asked for",
    );
    const tokens = numericTokenizer
      .encode("2024 apples 1000000")
      .map((id) => numericTokenizer.idToToken(id));
    assert.deepEqual(tokens, [
      "2",
      "0",
      "2",
      "4",
      "Ġapples",
      "Ġ",
      "1",
      "0",
      "0",
      "0",
      "0",
      "0",
      "0",
    ]);
    // The same holds for the tokenizer trained on the general corpus.
    const general = tokenizer.encode("in 2024: 31415").map((id) => tokenizer.idToToken(id));
    assert.deepEqual(
      general.filter((token) => /\d/.test(token!)),
      ["2", "0", "2", "4", "3", "1", "4", "1", "5"],
    );
  });

  test("maxTokenLength caps merged tokens (long runs do not become one token)", () => {
    const runs = trainByteLevelBpe(["x".repeat(5000) + " =====".repeat(100)], {
      vocabSize: 400,
      maxTokenLength: 8,
    });
    const vocab = Object.keys(
      (runs.tokenizerJson.model as { vocab: Record<string, number> }).vocab,
    );
    assert.ok(vocab.includes("xxxxxxxx"));
    assert.ok(
      vocab.every((token) => token.length <= 8),
      vocab.filter((token) => token.length > 8).join(","),
    );
    const runsTokenizer = new Tokenizer(runs.tokenizerJson, runs.tokenizerConfig);
    assert.equal(runsTokenizer.encode("x".repeat(64)).length, 8);
  });

  test("pre-tokenization matches the library's Split pre-tokenizer (digits alone, words with their space)", () => {
    const splitter = new HuggingFaceSplitPreTokenizerClass({
      type: "Split",
      pattern: { Regex: QWEN2_PRETOKENIZER_PATTERN },
      behavior: "Isolated",
      invert: false,
    });
    assert.deepEqual(splitter.pre_tokenize_text("Hello world, it's 2024!\n  x"), [
      "Hello",
      " world",
      ",",
      " it",
      "'s",
      " ",
      "2",
      "0",
      "2",
      "4",
      "!\n",
      " ",
      " x",
    ]);
  });

  test("rejects a vocabSize too small for the bytes and specials", () => {
    assert.throws(() => trainByteLevelBpe(CORPUS, { vocabSize: 260 }), BpeTrainingError);
    assert.throws(
      () => trainByteLevelBpe(CORPUS, { vocabSize: 300, specialTokens: ["<a>", "<a>"] }),
      BpeTrainingError,
    );
  });

  test("trains a 2,000-token vocabulary on ~1 MB of text in a few seconds", () => {
    const corpus = syntheticCorpus(250, 4000, 5);
    const characters = corpus.reduce((sum, text) => sum + text.length, 0);
    const start = performance.now();
    const result = trainByteLevelBpe(corpus, { vocabSize: 2000 });
    const seconds = (performance.now() - start) / 1000;
    const trainedTokenizer = new Tokenizer(result.tokenizerJson, result.tokenizerConfig);
    const ids = trainedTokenizer.encode(corpus[0]);
    console.log(
      `# trained vocab ${trainedTokenizer.vocabSize} on ${(characters / 1e6).toFixed(2)} M characters in ${seconds.toFixed(2)} s; ` +
        `${(corpus[0].length / ids.length).toFixed(2)} characters per token`,
    );
    assert.ok(characters > 900_000);
    assert.ok(seconds < 20, `took ${seconds} s`);
    assert.ok(corpus[0].length / ids.length > 2.5, "the merges compress the text");
  });
});

describe("compatibility with the Rust tokenizers (what Python `tokenizers` runs)", () => {
  const rust = loadRustTokenizers();
  test(
    "loads our tokenizer.json and encodes to the same ids",
    {
      skip:
        rust === undefined
          ? "the npm package `tokenizers` (Rust bindings) is not installed; set RUST_TOKENIZERS_MODULE to its path to run"
          : false,
    },
    async () => {
      const directory = mkdtempSync(join(tmpdir(), "agentrl-tokenizer-"));
      try {
        tokenizer.save(directory);
        const reference = rust!.Tokenizer.fromFile(join(directory, "tokenizer.json"));
        assert.equal(reference.getVocabSize(true), tokenizer.vocabSize);
        for (const text of [...HARD_TEXTS, ...CORPUS.slice(0, 5), ...randomTexts(50, 5)]) {
          if (text.length === 0) continue;
          const encoding = await reference.encode(text, null, { addSpecialTokens: false });
          assert.deepEqual(
            tokenizer.encode(text),
            encoding.getIds(),
            JSON.stringify(text.slice(0, 60)),
          );
        }
      } finally {
        rmSync(directory, { recursive: true, force: true });
      }
    },
  );
});

interface RustTokenizersModule {
  Tokenizer: {
    fromFile(path: string): {
      getVocabSize(withAddedTokens: boolean): number;
      encode(
        text: string,
        pair: null,
        options: { addSpecialTokens: boolean },
      ): Promise<{ getIds(): number[] }>;
    };
  };
}

function loadRustTokenizers(): RustTokenizersModule | undefined {
  const require = createRequire(import.meta.url);
  for (const specifier of [process.env.RUST_TOKENIZERS_MODULE, "tokenizers"]) {
    if (!specifier) continue;
    try {
      return require(specifier) as RustTokenizersModule;
    } catch {
      // not installed: try the next one
    }
  }
  return undefined;
}

/** Reference BPE training: recounts every pair after every merge (slow, obviously right). */
function naiveMerges(corpus: string[], mergeCount: number, minFrequency: number): string[] {
  const splitter = new HuggingFaceSplitPreTokenizerClass({
    type: "Split",
    pattern: { Regex: QWEN2_PRETOKENIZER_PATTERN },
    behavior: "Isolated",
    invert: false,
  });
  const encoder = new TextEncoder();
  const counts = new Map<string, number>();
  for (const text of corpus) {
    for (const piece of splitter.pre_tokenize_text(text)) {
      const word = Array.from(encoder.encode(piece), (byte) => BYTE_TO_UNICODE[byte]).join("");
      counts.set(word, (counts.get(word) ?? 0) + 1);
    }
  }
  const order = BYTE_TO_UNICODE.slice().sort((a, b) => a.charCodeAt(0) - b.charCodeAt(0));
  const ids = new Map(order.map((symbol, id) => [symbol, id]));
  const words = [...counts].map(([word, count]) => ({ symbols: Array.from(word), count }));
  const merges: string[] = [];
  let added = 0;
  while (added < mergeCount) {
    const pairs = new Map<string, number>();
    for (const { symbols, count } of words) {
      for (let i = 0; i + 1 < symbols.length; i++) {
        const key = `${symbols[i]} ${symbols[i + 1]}`;
        pairs.set(key, (pairs.get(key) ?? 0) + count);
      }
    }
    let best: string | undefined;
    let bestCount = 0;
    let bestRank = Infinity;
    for (const [key, count] of pairs) {
      const [left, right] = key.split(" ");
      const rank = ids.get(left)! * 2 ** 21 + ids.get(right)!;
      if (count > bestCount || (count === bestCount && rank < bestRank)) {
        best = key;
        bestCount = count;
        bestRank = rank;
      }
    }
    if (best === undefined || bestCount < minFrequency) break;
    const [left, right] = best.split(" ");
    if (!merges.includes(best)) merges.push(best);
    if (!ids.has(left + right)) {
      ids.set(left + right, ids.size);
      added++;
    }
    for (const word of words) {
      const merged: string[] = [];
      for (let i = 0; i < word.symbols.length; i++) {
        if (
          i + 1 < word.symbols.length &&
          word.symbols[i] === left &&
          word.symbols[i + 1] === right
        ) {
          merged.push(left + right);
          i++;
        } else merged.push(word.symbols[i]);
      }
      word.symbols = merged;
    }
  }
  return merges;
}
