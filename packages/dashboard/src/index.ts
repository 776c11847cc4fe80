export {
  startDashboard,
  DashboardConfigError,
  DEFAULT_DASHBOARD_PORT,
  type DashboardOptions,
  type DashboardServer,
} from "./server.js";
export {
  findRuns,
  summarizeRun,
  readMetrics,
  readTrajectorySteps,
  readEvaluations,
  FileFollower,
  type RunSummary,
  type MetricsLine,
  type TrajectoryStep,
} from "./runs.js";
