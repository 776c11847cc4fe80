// Starts a worker of this package (the learner, the gradient thread) from TypeScript sources
// (development and tests): worker threads do not inherit tsx's loader, so register it here
// first, then import `workerData.entry`. Built packages start the compiled .js entries directly.
import { register } from "tsx/esm/api";
import { workerData } from "node:worker_threads";

register();
await import(workerData.entry);
