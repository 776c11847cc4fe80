/**
 * A deterministic synthetic corpus for tests and demos: English-like sentences, numbers,
 * code, and ChatML conversations with tool calls (the text an agent policy sees).
 */

const WORDS = (
  "the of and to in is that for it as was with be by on not he this are or his from at which but have an they " +
  "you were her she there been one all we their has would when if so what can file list directory count lines " +
  "database table select where entity relation answer weather city temperature shop buy search click item price"
).split(" ");

const SYLLABLES =
  "ka lo mi ne ru sa ti vo ze ba de fi go hu ja ku li mo nu pa qui ra se to ul ve wa xi yo zu an er in on st tr pl gr ch sh th ng".split(
    " ",
  );

/** A small linear congruential generator, so the corpus is the same on every run. */
function createRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

/**
 * `documents` texts of roughly `charactersPerDocument` characters each.
 * @param seed seed of the generator (default 1)
 */
export function syntheticCorpus(
  documents: number,
  charactersPerDocument: number,
  seed = 1,
): string[] {
  const random = createRandom(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];
  const corpus: string[] = [];
  for (let d = 0; d < documents; d++) {
    let text = "";
    while (text.length < charactersPerDocument) {
      const kind = random();
      if (kind < 0.6) {
        const length = 4 + Math.floor(random() * 12);
        // Common words, plus made-up words (Zipf-like: short ones are frequent) for a long tail.
        const madeUpWord = () =>
          Array.from({ length: 1 + Math.floor(random() * random() * 5) }, () =>
            pick(SYLLABLES),
          ).join("");
        const words = Array.from({ length }, () => (random() < 0.6 ? pick(WORDS) : madeUpWord()));
        words[0] = words[0][0].toUpperCase() + words[0].slice(1);
        text +=
          words.join(" ") + (random() < 0.2 ? ` ${Math.floor(random() * 100000)}` : "") + ". ";
      } else if (kind < 0.75) {
        const name = pick(["count", "total", "items", "rows"]);
        text += `\ndef ${name}_${pick(WORDS)}(x):\n    return x * ${Math.floor(random() * 1000)} + len("${pick(WORDS)}")\n`;
      } else {
        text +=
          `<|im_start|>user\nFind the ${pick(WORDS)} of ${pick(WORDS)}.<|im_end|>\n<|im_start|>assistant\n` +
          `<tool_call>\n{"name": "${pick(["bash", "sql", "search"])}", "arguments": {"query": "${pick(WORDS)} ${pick(WORDS)}"}}\n</tool_call><|im_end|>\n` +
          `<|im_start|>user\n<tool_response>\n${Math.floor(random() * 1000)}\n</tool_response><|im_end|>\n`;
      }
    }
    corpus.push(text);
  }
  return corpus;
}
