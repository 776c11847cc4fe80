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
  type RunSummary,
  type MetricsLine,
  type TrajectoryStep,
} from "./runs.js";
