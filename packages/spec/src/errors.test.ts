import { test } from "node:test";
import assert from "node:assert/strict";
import { AgentRLError } from "./errors.js";

class ParseError extends AgentRLError {}
class LineError extends ParseError {
  constructor(
    message: string,
    readonly line: number,
  ) {
    super(`line ${line}: ${message}`);
  }
}

test("AgentRLError: the name is the constructed class's, instanceof holds along the chain", () => {
  const error = new LineError("unexpected token", 3);
  assert.equal(error.name, "LineError");
  assert.equal(error.message, "line 3: unexpected token");
  assert.equal(error.line, 3);
  assert.ok(
    error instanceof LineError &&
      error instanceof ParseError &&
      error instanceof AgentRLError &&
      error instanceof Error,
  );
  assert.equal(String(error), "LineError: line 3: unexpected token");
  assert.match(error.stack ?? "", /^LineError: line 3/);
  assert.equal(new ParseError("x").name, "ParseError");
  assert.equal(new AgentRLError("x").name, "AgentRLError");
  assert.ok(!(new Error("x") instanceof AgentRLError));
});

test("AgentRLError: carries a cause, and none when not given", () => {
  const reason = new TypeError("fetch failed");
  const error = new ParseError("could not read the file", { cause: reason });
  assert.equal(error.cause, reason);
  assert.equal(new ParseError("x").cause, undefined);
  assert.ok(!("cause" in new ParseError("x")));
});
