/** Errors of the Docker runtime, and how a container died. */
import { AgentRLError } from "@agentrl/spec";

/** No Docker engine answers. */
export class DockerUnavailableError extends AgentRLError {}

/** A container died or an exec failed for reasons outside the agent's command. */
export class ContainerError extends AgentRLError {}

/**
 * The container ended on its own while it ran commands: no one outside killed or removed
 * it (no `kill` event from the engine before its `die`), so its own processes ended it —
 * PID 1's child killed (`kill -9 -1`), out of memory, … For a sandbox whose commands are the
 * agent's, that is the agent's doing, not an infrastructure fault.
 */
export class SandboxEndedError extends ContainerError {
  constructor(
    message: string,
    readonly exitCode: number,
    readonly outOfMemory: boolean,
  ) {
    super(message);
  }
}

/** Why a container stopped: `own` (its own processes ended it) or `external` (killed, removed, engine gone). */
export type DeathCause = { cause: "own" | "external"; exitCode: number; outOfMemory: boolean };
