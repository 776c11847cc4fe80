/** Starting this package's worker threads, from sources (tests, development) or from the build. */
import { Worker } from "node:worker_threads";

/**
 * Starts the worker whose entry is `./<entry>.ts` (sources) or `./<entry>.js` (built) beside
 * this file and waits for its `{ ready: true }` message; rejects with `makeError(message)`
 * when it reports `{ error }` or exits first.
 */
export async function startWorker(
  entry: string,
  workerData: Record<string, unknown>,
  makeError: (message: string) => Error,
): Promise<Worker> {
  const worker = import.meta.url.endsWith(".ts")
    ? new Worker(new URL("./worker-source.mjs", import.meta.url), {
        workerData: { ...workerData, entry: new URL(`./${entry}.ts`, import.meta.url).href },
      })
    : new Worker(new URL(`./${entry}.js`, import.meta.url), { workerData });
  await new Promise<void>((resolve, reject) => {
    const onMessage = (message: { ready?: boolean; error?: { message: string } }) => {
      if (message.ready) {
        cleanup();
        resolve();
      } else if (message.error) {
        cleanup();
        void worker.terminate();
        reject(makeError(`failed to start: ${message.error.message}`));
      }
    };
    const onExit = (code: number) => {
      cleanup();
      reject(makeError(`exited while starting (code ${code})`));
    };
    const cleanup = () => {
      worker.off("message", onMessage);
      worker.off("exit", onExit);
    };
    worker.on("message", onMessage);
    worker.on("exit", onExit);
  });
  return worker;
}

/**
 * Calls into a worker, each answered by `{ id, result }` or `{ id, error }`: the request /
 * response bookkeeping shared by the learner's and the gradient thread's handles. Once the
 * worker crashes, exits or is closed, every pending and later call rejects with that error.
 */
export class WorkerChannel {
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { resolve: (value: unknown) => void; reject: (error: Error) => void }
  >();
  private failure: Error | undefined;

  /** `label` names the thread in errors (e.g. "the learner thread"); `makeError` gives them their class. */
  constructor(
    private readonly worker: Worker,
    label: string,
    private readonly makeError: (message: string) => Error,
  ) {
    worker.on(
      "message",
      (message: {
        id: number;
        result?: unknown;
        error?: { name: string; message: string; stack?: string };
      }) => {
        const waiter = this.pending.get(message.id);
        if (!waiter) return;
        this.pending.delete(message.id);
        if (message.error) {
          const error = makeError(`${message.error.name}: ${message.error.message}`);
          error.stack = message.error.stack;
          waiter.reject(error);
        } else waiter.resolve(message.result);
      },
    );
    worker.on("error", (error) => this.fail(makeError(`${label} crashed: ${error.message}`)));
    worker.on("exit", (code) => this.fail(makeError(`${label} exited (code ${code})`)));
  }

  /** Posts `message` with a fresh `id` (moving `transfer`) and resolves with the worker's result. */
  call<T>(message: Record<string, unknown>, transfer: ArrayBuffer[] = []): Promise<T> {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      this.worker.postMessage({ ...message, id }, transfer);
    });
  }

  /** Stops the worker; later calls reject with `reason`. */
  async close(reason: string): Promise<void> {
    this.fail(this.makeError(reason));
    await this.worker.terminate();
  }

  private fail(error: Error): void {
    this.failure ??= error;
    for (const waiter of this.pending.values()) waiter.reject(error);
    this.pending.clear();
  }
}

/** An error thrown in a worker, as plain data for postMessage. */
export function describeError(error: unknown): { name: string; message: string; stack?: string } {
  const e = error as Error;
  return { name: e?.name ?? "Error", message: e?.message ?? String(error), stack: e?.stack };
}
