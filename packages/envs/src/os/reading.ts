/**
 * Where an OS answer came from: read from what the agent's own commands printed in the
 * episode, or not (a guess, a learnt constant). A constant `3` solves 22 % of AgentBench's
 * held-out OS tasks (docs/tasks/os.md), so a right answer says little unless it was read.
 *
 * The rule: an answer is read when each of its non-empty lines (trimmed) is a whole line of
 * an output the agent saw (after the 800-character cut), or a whole field of such a line —
 * split at whitespace and at `=`, `:` and `,` (key=value, grep -c's file:count, passwd and CSV
 * rows), with the quotes and punctuation around a field dropped (`wc -l f` prints `3 f`,
 * `du -sh /home` prints `4.0K\t/home`, `ls -l` the owner and the size). A value the agent
 * typed into the command that printed it (`echo 3`, `printf '3\n'`) is not read from that
 * output: a line the command's text contains, or a field that is one of its words, does not
 * count (so the rare count equal to a number in the command, `find -maxdepth 1 … | wc -l`
 * printing 1, counts as not read). A value the agent computed in its head from an output (a
 * sum of two printed numbers) is not read by this rule; a command that prints it is.
 */

/** Characters dropped around a field: quotes, brackets and trailing punctuation (`"name",` → `name`). */
const FIELD_WRAPPING = /^["'`([{<]+|["'`)\]}>,;:.]+$/g;

/** Where a line is split into fields: whitespace, and the separators of key=value, file:count, passwd and CSV. */
const FIELD_SEPARATORS = /[\s=:,]+/;
/** The words of a command: what it could print without reading anything. */
const COMMAND_WORDS = /[^A-Za-z0-9_.\-/]+/;

/** The trimmed lines and fields of every command output the agent saw in an episode. */
export class SeenOutputs {
  private readonly lines = new Set<string>();
  private readonly fields = new Set<string>();

  /** Records one output as the agent saw it, printed by `command` (its typed values do not count as read). */
  add(output: string, command = ""): void {
    const typed = new Set(command.split(COMMAND_WORDS));
    for (const raw of output.split("\n")) {
      const line = raw.trim();
      if (line === "") continue;
      if (!command.includes(line)) this.lines.add(line);
      for (const field of [...line.split(/\s+/), ...line.split(FIELD_SEPARATORS)]) {
        for (const candidate of [field, field.replace(FIELD_WRAPPING, "")])
          if (candidate !== "" && !typed.has(candidate)) this.fields.add(candidate);
      }
    }
  }

  /** Whether `answer` was read: each of its non-empty lines a seen line or field (an empty answer never is). */
  hasRead(answer: string): boolean {
    const lines = answer
      .split("\n")
      .map((line) => line.trim())
      .filter((line) => line !== "");
    return lines.length > 0 && lines.every((line) => this.lines.has(line) || this.fields.has(line));
  }
}

/**
 * The answer-source metrics of an OS episode's ending. `answerGraded` is 1 when the task is
 * graded on the answer (a match, or checks against the example's output), 0 when it is graded
 * on the container's state (a success there is "other"); `answerFromOutput` (answer-graded
 * tasks only) is 1 when the answer was read (`SeenOutputs.hasRead`), 0 otherwise (a finish
 * without an answer, a guess, a value composed in the agent's head).
 */
export function answerSourceMetrics(
  answerGraded: boolean,
  answer: string | null,
  seen: SeenOutputs,
): Record<string, number> {
  if (!answerGraded) return { answerGraded: 0 };
  return { answerGraded: 1, answerFromOutput: answer !== null && seen.hasRead(answer) ? 1 : 0 };
}
