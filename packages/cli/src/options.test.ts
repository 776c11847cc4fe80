import { test } from "node:test";
import assert from "node:assert/strict";
import { InvalidArgumentError } from "commander";
import { listOption, numberOption } from "./options.js";

test("numberOption: bounds, integers and an exclusive minimum; the error names the flag and the value", () => {
  const steps = numberOption("--steps", { integer: true, minimum: 1 });
  assert.equal(steps("12"), 12);
  for (const bad of ["0", "1.5", "abc", "", "Infinity"])
    assert.throws(() => steps(bad), InvalidArgumentError, bad);
  assert.throws(() => steps("0"), /--steps must be an integer ≥ 1, got "0"/);
  const rate = numberOption("--learning-rate", { minimum: 0, exclusiveMinimum: true });
  assert.equal(rate("3e-4"), 3e-4);
  assert.throws(() => rate("0"), /--learning-rate must be a number > 0, got "0"/);
  const port = numberOption("--port", { integer: true, minimum: 0, maximum: 65_535 });
  assert.equal(port("0"), 0);
  assert.throws(() => port("70000"), /--port must be an integer ≥ 0 and ≤ 65535/);
});

test("listOption splits on commas and drops empty items", () => {
  assert.deepEqual(listOption(" kg, webshop,,alfworld "), ["kg", "webshop", "alfworld"]);
});
