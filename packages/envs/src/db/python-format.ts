/**
 * The original DB task shows query results to the agent as Python's `str()` of the rows
 * mysql-connector returns (`[('Women +60kg Bronze',), (36,)]`), and grades by parsing that
 * text back. These helpers produce and read the same format, so agents see what the original
 * showed and grading gives the same verdicts.
 */

/** A cell as mysql-connector returns it, tagged with the Python type it would have. */
export type PythonValue =
  | { kind: "str"; value: string }
  | { kind: "int"; value: string }
  | { kind: "float"; value: number }
  | { kind: "decimal"; value: string }
  | { kind: "none" }
  | { kind: "bytes"; value: Buffer };

/** Python's `repr(str)`: single quotes unless the text has a single quote and no double quote. */
export function pythonStringRepr(text: string): string {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  let body = "";
  for (const character of text) {
    const code = character.codePointAt(0)!;
    if (character === "\\") body += "\\\\";
    else if (character === quote) body += `\\${quote}`;
    else if (character === "\n") body += "\\n";
    else if (character === "\r") body += "\\r";
    else if (character === "\t") body += "\\t";
    else if (code < 0x20 || code === 0x7f) body += `\\x${code.toString(16).padStart(2, "0")}`;
    else body += character;
  }
  return `${quote}${body}${quote}`;
}

/** Python's `repr(float)`: shortest round-trip digits, `.0` on integers, exponent outside [1e-4, 1e16). */
export function pythonFloatRepr(value: number): string {
  if (Number.isNaN(value)) return "nan";
  if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
  if (value === 0) return Object.is(value, -0) ? "-0.0" : "0.0";
  const magnitude = Math.abs(value);
  if (magnitude >= 1e16 || magnitude < 1e-4) {
    const [mantissa, exponent] = value.toExponential().split("e");
    const power = Number(exponent);
    return `${mantissa}e${power < 0 ? "-" : "+"}${String(Math.abs(power)).padStart(2, "0")}`;
  }
  const text = String(value);
  return text.includes(".") ? text : `${text}.0`;
}

export function pythonValueRepr(cell: PythonValue): string {
  switch (cell.kind) {
    case "str":
      return pythonStringRepr(cell.value);
    case "int":
      return cell.value;
    case "float":
      return pythonFloatRepr(cell.value);
    case "decimal":
      return `Decimal('${cell.value}')`;
    case "none":
      return "None";
    case "bytes":
      return `b${pythonStringRepr(cell.value.toString("latin1"))}`;
  }
}

/** Python's `str(list_of_tuples)`. */
export function pythonRowsRepr(rows: PythonValue[][]): string {
  return `[${rows.map((row) => `(${row.map(pythonValueRepr).join(", ")}${row.length === 1 ? "," : ""})`).join(", ")}]`;
}

/** Python's `str(x)` of a JSON value (as the original's `str(col)` when it fills tables). */
export function pythonStr(value: unknown): string {
  if (value === null || value === undefined) return "None";
  if (typeof value === "string") return value;
  if (typeof value === "boolean") return value ? "True" : "False";
  if (typeof value === "number")
    return Number.isInteger(value) ? String(value) : pythonFloatRepr(value);
  if (Array.isArray(value))
    return `[${value.map((item) => (typeof item === "string" ? pythonStringRepr(item) : pythonStr(item))).join(", ")}]`;
  return JSON.stringify(value);
}

/**
 * Reads a Python literal of a list of tuples (or of scalars) as `eval` would, for the shapes
 * the original parses: strings, numbers, None, True/False, Decimal('…'). Returns undefined
 * when the text is not such a literal. Values come back as Python `str()` texts.
 */
export function parsePythonList(text: string): Array<string[] | string> | undefined {
  let position = 0;
  const skip = () => {
    while (position < text.length && /\s/.test(text[position])) position += 1;
  };
  const scalar = (): string | undefined => {
    skip();
    const character = text[position];
    if (character === "'" || character === '"') {
      position += 1;
      let value = "";
      while (position < text.length && text[position] !== character) {
        if (text[position] === "\\") {
          const next = text[position + 1];
          const escapes: Record<string, string> = {
            n: "\n",
            r: "\r",
            t: "\t",
            "\\": "\\",
            "'": "'",
            '"': '"',
          };
          if (next === "x") {
            value += String.fromCharCode(parseInt(text.slice(position + 2, position + 4), 16));
            position += 4;
            continue;
          }
          value += escapes[next] ?? `\\${next}`;
          position += 2;
          continue;
        }
        value += text[position];
        position += 1;
      }
      if (text[position] !== character) return undefined;
      position += 1;
      return value;
    }
    const decimal = /^Decimal\((['"])([^'"]*)\1\)/.exec(text.slice(position));
    if (decimal) {
      position += decimal[0].length;
      return decimal[2];
    }
    const word =
      /^(None|True|False|-?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|inf|nan))/.exec(
        text.slice(position),
      );
    if (!word) return undefined;
    position += word[0].length;
    return word[0];
  };
  skip();
  if (text[position] !== "[") return undefined;
  position += 1;
  const items: Array<string[] | string> = [];
  for (;;) {
    skip();
    if (text[position] === "]") {
      position += 1;
      break;
    }
    if (text[position] === "(") {
      position += 1;
      const tuple: string[] = [];
      for (;;) {
        skip();
        if (text[position] === ")") {
          position += 1;
          break;
        }
        const value = scalar();
        if (value === undefined) return undefined;
        tuple.push(value);
        skip();
        if (text[position] === ",") position += 1;
        else if (text[position] !== ")") return undefined;
      }
      items.push(tuple);
    } else {
      const value = scalar();
      if (value === undefined) return undefined;
      items.push(value);
    }
    skip();
    if (text[position] === ",") position += 1;
    else if (text[position] !== "]") return undefined;
  }
  skip();
  return position === text.length ? items : undefined;
}
