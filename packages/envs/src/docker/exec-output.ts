/** Reading a `docker exec` stream: bounded output, a host deadline, and the end of a command that left a background program. */
import { PassThrough } from "node:stream";
import type Docker from "dockerode";

/** After this long, a command's process is polled: once it has exited, output stops being read. */
const POLL_AFTER_MS = 1000;
const POLL_EVERY_MS = 250;

/**
 * Reads a multiplexed exec stream, keeping at most `maxChars`, until it ends, until the host
 * deadline, or — for a command that left a background program holding its output open
 * (`server &`) — shortly after the command's own process has exited (`running` says so).
 */
export function collectOutput(
  docker: Docker,
  stream: NodeJS.ReadWriteStream,
  maxChars: number,
  deadlineMs: number,
  running: () => Promise<boolean>,
): Promise<{ output: string; truncated: boolean; hostTimedOut: boolean; elapsedMs: number }> {
  const started = Date.now();
  return new Promise((resolvePromise) => {
    let output = "";
    let truncated = false;
    let done = false;
    const sink = new PassThrough();
    sink.setEncoding("utf8"); // decodes characters split across chunks
    sink.on("data", (text: string) => {
      const room = maxChars - output.length;
      if (text.length > room) truncated = true;
      if (room > 0) output += text.slice(0, room);
    });
    docker.modem.demuxStream(stream, sink, sink);
    const finish = (hostTimedOut: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      clearTimeout(poller);
      resolvePromise({ output, truncated, hostTimedOut, elapsedMs: Date.now() - started });
    };
    const poll = async () => {
      if (done) return;
      const alive = await running().catch(() => false);
      if (done) return;
      if (alive) {
        poller = setTimeout(poll, POLL_EVERY_MS);
        return;
      }
      // The command exited; give its last output a moment to arrive, then stop reading.
      poller = setTimeout(() => {
        (stream as unknown as { destroy?: () => void }).destroy?.();
        finish(false);
      }, 500);
    };
    let poller = setTimeout(poll, POLL_AFTER_MS);
    const timer = setTimeout(() => {
      (stream as unknown as { destroy?: () => void }).destroy?.();
      finish(true);
    }, deadlineMs);
    stream.on("end", () => finish(false));
    stream.on("close", () => finish(false));
    stream.on("error", () => finish(false));
  });
}
