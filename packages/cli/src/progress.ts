/**
 * Live progress of a long command: one bar per phase (warm start, evaluation, RL) with the
 * step, ETA and a short status (reward, success per task). On a terminal it is a
 * cli-progress bar on stderr; elsewhere (logs, tests) a plain line per update, at most one
 * every `minimumIntervalMs`, plus the last one.
 */
import cliProgress from "cli-progress";
import {
  formatPerTask,
  formatSeconds,
  type PhaseReporter,
  type ProgressFactory,
} from "@agentrl/trainer";

export { formatPerTask, formatSeconds };

export interface PhaseProgressOptions {
  /** Where bars and lines go. Default `process.stderr`. */
  stream?: NodeJS.WriteStream;
  /** Force plain lines (true) or a bar (false). Default: a bar when `stream` is a TTY. */
  plain?: boolean;
  /** Plain mode: least time between two lines, in ms. Default 0 (every update). */
  minimumIntervalMs?: number;
}

/** One phase's progress: `update(value, status)` as it goes, `stop()` at the end. */
export class PhaseProgress implements PhaseReporter {
  private readonly bar: cliProgress.SingleBar | undefined;
  private readonly stream: NodeJS.WriteStream;
  private readonly minimumIntervalMs: number;
  private readonly started = performance.now();
  private lastLine = -Infinity;
  private lastText = "";
  private value = 0;
  /** The value of the first update (a resumed phase starts above 0); the pace counts from it. */
  private firstValue: number | undefined;

  /**
   * @param phase  name shown in front, e.g. `warm start`
   * @param total  units of the phase (steps or episodes)
   * @param unit   what a unit is, e.g. `step` or `episode`
   */
  constructor(
    readonly phase: string,
    readonly total: number,
    readonly unit: string,
    options: PhaseProgressOptions = {},
  ) {
    this.stream = options.stream ?? process.stderr;
    this.minimumIntervalMs = options.minimumIntervalMs ?? 0;
    const plain = options.plain ?? !this.stream.isTTY;
    if (!plain) {
      this.bar = new cliProgress.SingleBar(
        {
          stream: this.stream,
          format: `${phase.padEnd(12)} [{bar}] {value}/{total} ${unit}s | ETA {eta_formatted} | {status}`,
          barsize: 24,
          hideCursor: true,
          etaBuffer: 8,
          fps: 4,
        },
        cliProgress.Presets.shades_classic,
      );
      this.bar.start(total, 0, { status: "" });
    }
  }

  /** Sets the units done and the status text. */
  update(value: number, status = ""): void {
    this.value = value;
    this.firstValue ??= value;
    this.lastText = status;
    if (this.bar) {
      this.bar.update(value, { status });
      return;
    }
    const now = performance.now();
    if (value < this.total && now - this.lastLine < this.minimumIntervalMs) return;
    this.lastLine = now;
    this.stream.write(
      `${this.phase}: ${this.unit} ${value}/${this.total} | ETA ${this.eta()} | ${status}\n`,
    );
  }

  /** Estimated time left from the average pace so far, as `1m05s`. */
  private eta(): string {
    const done = this.value - (this.firstValue ?? 0);
    if (done <= 0) return "?";
    const elapsed = (performance.now() - this.started) / 1000;
    return formatSeconds((elapsed / done) * (this.total - this.value));
  }

  stop(): void {
    if (this.bar) {
      this.bar.update(this.value, { status: this.lastText });
      this.bar.stop();
    }
  }
}

/**
 * The CLI's {@link ProgressFactory}: a {@link PhaseProgress} per phase. `bars`: true bars,
 * false plain lines, undefined a bar on a terminal. A `terminalOnly` phase gets nothing
 * off a terminal (it logs its own lines).
 */
export function progressFactory(
  bars?: boolean,
  stream: NodeJS.WriteStream = process.stderr,
): ProgressFactory {
  return (phase, total, unit, hints = {}) => {
    if (hints.terminalOnly && (bars === false || !stream.isTTY)) return undefined;
    const plain = hints.plain ?? (bars === undefined ? undefined : !bars);
    return new PhaseProgress(phase, total, unit, {
      stream,
      plain,
      minimumIntervalMs: hints.minimumIntervalMs,
    });
  };
}
