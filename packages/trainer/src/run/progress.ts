/**
 * How a long phase (warm start, evaluation, RL) reports its progress without knowing how it
 * is shown: the caller passes a {@link ProgressFactory} (the CLI's draws cli-progress bars on
 * a terminal); without one, nothing is drawn.
 */

/** One phase's progress: `update(done, status)` as it goes, `stop()` at the end. */
export interface PhaseReporter {
  update(done: number, status?: string): void;
  stop(): void;
}

/** Hints for how a phase would like to be shown; a factory may ignore them. */
export interface ProgressHints {
  /** Plain lines rather than a bar (e.g. evaluations inside the RL phase, whose bar is showing). */
  plain?: boolean;
  /** Least time between two plain lines, in ms. */
  minimumIntervalMs?: number;
  /** Only a bar on a terminal is wanted: elsewhere return undefined, the phase logs its own lines. */
  terminalOnly?: boolean;
}

/**
 * Makes the reporter of a phase: `phase` its name (`RL`, `eval warm`), `total` its units,
 * `unit` what a unit is (`step`, `episode`). May return undefined (nothing shown).
 */
export type ProgressFactory = (
  phase: string,
  total: number,
  unit: string,
  hints?: ProgressHints,
) => PhaseReporter | undefined;

/** Formats values per task as `kg 0.50 os 0.25`. */
export function formatPerTask(values: Record<string, number>, digits = 2): string {
  return Object.entries(values)
    .map(([task, value]) => `${task} ${value.toFixed(digits)}`)
    .join(" ");
}

/** `75` → `1m15s`, `8` → `8s`. */
export function formatSeconds(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  return s >= 60 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s` : `${s}s`;
}
