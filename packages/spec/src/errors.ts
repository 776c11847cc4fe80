/**
 * The base class of every typed error agentrl throws (`TokenizerError`, `EnvironmentError`,
 * `ConfigError`, ...), so that callers can tell the framework's own failures from any other:
 *
 *   try { ... } catch (error) { if (error instanceof AgentRLError) console.error(`${error.name}: ${error.message}`); else throw error; }
 *
 * `name` is the name of the class that was constructed (`new ConfigError("x").name ===
 * "ConfigError"`), so subclasses need not set it; `cause` (ES2022) carries the error that led
 * to this one.
 */
export class AgentRLError extends Error {
  constructor(message?: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}
