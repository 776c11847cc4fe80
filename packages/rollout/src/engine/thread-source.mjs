// Starts an engine thread from TypeScript sources (development and tests): worker threads do
// not inherit tsx's loader, so register it here first, then import `workerData.entry`. Built
// packages start the compiled thread-worker.js directly.
import { register } from "tsx/esm/api";
import { workerData } from "node:worker_threads";

register();
await import(workerData.entry);
