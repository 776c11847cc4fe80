/**
 * `RoutingEnvironmentClient`: one `EnvironmentClient` over several, chosen by task name, so a
 * run can play some tasks in its own process and others through controllers on other
 * machines (AgentRL's trainer → controller → task workers), e.g. KG in-process and OS behind
 * `agentrl env serve` + `agentrl env worker`:
 *
 *   startSample("os", 7) ──► the client of task "os" (an HttpEnvironmentClient: POST /api/start_sample)
 *   interact("r1:ctl-12", …) ──► route 1 (the session id names its route), session "ctl-12"
 *
 * Errors pass through unchanged: a controller that cannot be reached or a worker that died
 * rejects (or answers `task error`), which the episode runner classes as an infrastructure
 * fault (retried, then masked or penalised); a full controller answers 406, which it waits out.
 */
import {
  HttpEnvironmentClient,
  type AssistantMessage,
  type EnvironmentClient,
  type InteractResult,
  type Split,
  type StartResult,
} from "@agentrl/envs";
import { AgentRLError } from "@agentrl/spec";

/** A session id or task name no route knows. */
export class RoutingError extends AgentRLError {}

export interface EnvironmentRoute {
  /** The tasks this client plays (names as the client knows them). */
  tasks: string[];
  client: EnvironmentClient;
  /** Where the route goes, for messages (e.g. the controller's URL, or "in-process"). */
  label?: string;
}

export class RoutingEnvironmentClient implements EnvironmentClient {
  private readonly routeOfTask = new Map<string, number>();

  constructor(readonly routes: EnvironmentRoute[]) {
    routes.forEach((route, position) => {
      for (const task of route.tasks) {
        const other = this.routeOfTask.get(task);
        if (other !== undefined)
          throw new RoutingError(
            `task "${task}" is routed twice (${routes[other].label ?? `route ${other}`} and ${route.label ?? `route ${position}`})`,
          );
        this.routeOfTask.set(task, position);
      }
    });
  }

  /** The route of task `name` (its position in `routes`). */
  routeOf(name: string): number {
    const position = this.routeOfTask.get(name);
    if (position === undefined)
      throw new RoutingError(
        `no environment serves task "${name}"; routed: ${[...this.routeOfTask.keys()].join(", ") || "none"}`,
      );
    return position;
  }

  /** Where task `name` is played (its route's label). */
  labelOf(name: string): string {
    const position = this.routeOf(name);
    return this.routes[position].label ?? `route ${position}`;
  }

  async startSample(name: string, index: number): Promise<{ sessionId: string } & StartResult> {
    const position = this.routeOf(name);
    const session = await this.routes[position].client.startSample(name, index);
    return { ...session, sessionId: `r${position}:${session.sessionId}` };
  }

  async interact(sessionId: string, message: AssistantMessage): Promise<InteractResult> {
    const { client, inner } = this.sessionRoute(sessionId);
    return client.interact(inner, message);
  }

  async cancel(sessionId: string): Promise<void> {
    const { client, inner } = this.sessionRoute(sessionId);
    return client.cancel(inner);
  }

  async getIndices(name: string, split?: Split): Promise<number[]> {
    return this.routes[this.routeOf(name)].client.getIndices(name, split);
  }

  /** Indices of a split at one difficulty, from the task's controller (an HttpEnvironmentClient's route). */
  async getIndicesAt(name: string, split: Split, difficulty: number): Promise<number[]> {
    const route = this.routes[this.routeOf(name)];
    if (!(route.client instanceof HttpEnvironmentClient))
      throw new RoutingError(
        `the client of task "${name}" (${route.label ?? "a route"}) cannot select instances by difficulty`,
      );
    return route.client.getIndices(name, split, difficulty);
  }

  async close(): Promise<void> {
    await Promise.all(this.routes.map((route) => route.client.close?.()));
  }

  private sessionRoute(sessionId: string): { client: EnvironmentClient; inner: string } {
    const match = /^r(\d+):(.*)$/s.exec(sessionId);
    const route = match ? this.routes[Number(match[1])] : undefined;
    if (!match || !route)
      throw new RoutingError(
        `session ${JSON.stringify(sessionId)} was not started through this client`,
      );
    return { client: route.client, inner: match[2] };
  }
}
