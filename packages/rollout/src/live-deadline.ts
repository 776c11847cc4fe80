/**
 * A deadline counted in this process's LIVE time: time during which its event loop could read
 * an answer. A trainer's event loop may be blocked for many seconds (a learner step on the main
 * thread, a checkpoint, encoding weights); a plain `AbortSignal.timeout` then expires in the
 * timers phase right after the block, BEFORE the poll phase reads an answer that arrived long
 * ago, and a server that answered within milliseconds is blamed ("no answer within 5000 ms")
 * and marked down. Here the clock ticks every `milliseconds / 20` (10 ms to 1 s) and each tick
 * counts at most two tick intervals, so a blocked stretch counts as (at most) two ticks: once
 * the loop runs again, answers that arrived meanwhile are read before the deadline can pass.
 */
export interface LiveDeadline {
  /** Aborts (reason: a `TimeoutError` DOMException) once `milliseconds` of live time passed. */
  signal: AbortSignal;
  /** Stops the clock (call when the guarded work ends). */
  clear(): void;
}

export function liveDeadline(milliseconds: number): LiveDeadline {
  const controller = new AbortController();
  const tick = Math.min(1_000, Math.max(10, milliseconds / 20));
  let left = milliseconds;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    left -= Math.min(now - last, 2 * tick);
    last = now;
    if (left > 0) return;
    clearInterval(timer);
    controller.abort(
      new DOMException(`no answer within ${milliseconds} ms of live time`, "TimeoutError"),
    );
  }, tick);
  // Like AbortSignal.timeout: the deadline alone does not keep the process alive.
  timer.unref();
  return { signal: controller.signal, clear: () => clearInterval(timer) };
}
