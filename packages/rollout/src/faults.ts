/**
 * Injected infrastructure faults, to measure what they do to training: a client around a real
 * one in which a chosen share of sessions "lose their container" — their first interaction
 * fails the way a dead container or worker does (the session is cancelled underneath and
 * `interact` rejects). The rollout sees an infrastructure fault (status `task error`), which it
 * retries and then masks or penalises (see `runEpisode`).
 */
import { AgentRLError } from "@agentrl/spec";
import type {
  AssistantMessage,
  EnvironmentClient,
  InteractResult,
  Split,
  StartResult,
} from "@agentrl/envs";
import { Rng } from "@agentrl/policy";

export interface FaultInjectionOptions {
  /** Share of sessions killed, in [0, 1]. */
  sessionShare: number;
  /** Seed of the draw of which sessions die. Default 0. */
  seed?: number;
}

/** The error of a killed session's interaction. */
export class InjectedFaultError extends AgentRLError {}

export class FaultInjectingClient implements EnvironmentClient {
  private readonly rng: Rng;
  /** Sessions drawn to die (at their first interaction) and not cancelled yet. */
  readonly killed = new Set<string>();
  /** Sessions started so far, and of them those drawn to die. */
  started = 0;
  kills = 0;

  constructor(
    private readonly inner: EnvironmentClient,
    private readonly options: FaultInjectionOptions,
  ) {
    if (!(options.sessionShare >= 0 && options.sessionShare <= 1))
      throw new RangeError(`sessionShare must lie in [0, 1], got ${options.sessionShare}`);
    this.rng = new Rng(options.seed ?? 0);
  }

  async startSample(name: string, index: number): Promise<{ sessionId: string } & StartResult> {
    const session = await this.inner.startSample(name, index);
    this.started += 1;
    if (this.rng.next() < this.options.sessionShare) {
      this.killed.add(session.sessionId);
      this.kills += 1;
    }
    return session;
  }

  async interact(sessionId: string, message: AssistantMessage): Promise<InteractResult> {
    if (this.killed.has(sessionId)) {
      await this.inner.cancel(sessionId).catch(() => {});
      throw new InjectedFaultError(`injected fault: the container of session ${sessionId} died`);
    }
    return this.inner.interact(sessionId, message);
  }

  cancel(sessionId: string): Promise<void> {
    this.killed.delete(sessionId);
    return this.inner.cancel(sessionId);
  }

  getIndices(name: string, split?: Split): Promise<number[]> {
    return this.inner.getIndices(name, split);
  }

  async close(): Promise<void> {
    await this.inner.close?.();
  }
}
