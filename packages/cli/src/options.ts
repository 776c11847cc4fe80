/**
 * Parsers of command-line option values for commander, one for every command: a number
 * within bounds, a comma-separated list. A bad value is an `InvalidArgumentError` naming the
 * flag and the value (commander prints it and exits with code 1).
 */
import { InvalidArgumentError } from "commander";

export interface NumberBounds {
  /** Whole numbers only. Default false. */
  integer?: boolean;
  /** Smallest value allowed. Default −∞. */
  minimum?: number;
  /** The minimum itself is not allowed (e.g. a learning rate > 0). Default false. */
  exclusiveMinimum?: boolean;
  /** Largest value allowed. Default +∞. */
  maximum?: number;
}

/** `numberOption("--steps", { integer: true, minimum: 1 })`: parses a flag's value as a bounded number. */
export function numberOption(label: string, bounds: NumberBounds = {}): (value: string) => number {
  const {
    integer = false,
    minimum = -Infinity,
    exclusiveMinimum = false,
    maximum = Infinity,
  } = bounds;
  const kind = integer ? "an integer" : "a number";
  const range = [
    Number.isFinite(minimum) ? `${exclusiveMinimum ? ">" : "≥"} ${minimum}` : "",
    Number.isFinite(maximum) ? `≤ ${maximum}` : "",
  ]
    .filter(Boolean)
    .join(" and ");
  return (value: string): number => {
    const parsed = value.trim() === "" ? Number.NaN : Number(value);
    const fits =
      Number.isFinite(parsed) &&
      (exclusiveMinimum ? parsed > minimum : parsed >= minimum) &&
      parsed <= maximum &&
      (!integer || Number.isInteger(parsed));
    if (!fits)
      throw new InvalidArgumentError(
        `${label} must be ${kind}${range ? ` ${range}` : ""}, got "${value}"`,
      );
    return parsed;
  };
}

/** `a, b,c` → `["a", "b", "c"]` (empty items dropped). */
export function listOption(value: string): string[] {
  return value
    .split(",")
    .map((item) => item.trim())
    .filter((item) => item !== "");
}
