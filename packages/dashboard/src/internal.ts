/**
 * `@agentrl/dashboard/internal`: what benches and tests reach for besides the public API of the
 * package entry (./index.ts, what the README documents). No stability promise.
 */
export { readMetrics, readTrajectorySteps, readEvaluations, FileFollower } from "./runs.js";
