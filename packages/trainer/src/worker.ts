/** Starting this package's worker threads, from sources (tests, development) or from the build. */
import { Worker } from "node:worker_threads";

/**
 * Starts the worker whose entry is `./<entry>.ts` (sources) or `./<entry>.js` (built) beside
 * this file and waits for its `{ ready: true }` message; rejects with `makeError(message)`
 * when it reports `{ error }` or exits first.
 */
export async function startWorker(entry: string, workerData: Record<string, unknown>, makeError: (message: string) => Error): Promise<Worker> {
  const worker = import.meta.url.endsWith(".ts")
    ? new Worker(new URL("./worker-source.mjs", import.meta.url), { workerData: { ...workerData, entry: new URL(`./${entry}.ts`, import.meta.url).href } })
    : new Worker(new URL(`./${entry}.js`, import.meta.url), { workerData });
  await new Promise<void>((resolve, reject) => {
    const onMessage = (message: { ready?: boolean; error?: { message: string } }) => {
      if (message.ready) { cleanup(); resolve(); }
      else if (message.error) { cleanup(); void worker.terminate(); reject(makeError(`failed to start: ${message.error.message}`)); }
    };
    const onExit = (code: number) => { cleanup(); reject(makeError(`exited while starting (code ${code})`)); };
    const cleanup = () => { worker.off("message", onMessage); worker.off("exit", onExit); };
    worker.on("message", onMessage);
    worker.on("exit", onExit);
  });
  return worker;
}

/** An error thrown in a worker, as plain data for postMessage. */
export function describeError(error: unknown): { name: string; message: string; stack?: string } {
  const e = error as Error;
  return { name: e?.name ?? "Error", message: e?.message ?? String(error), stack: e?.stack };
}
