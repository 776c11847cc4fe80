/** The OS task's reward: AgentBench's judge (a match on the answer, or check scripts run in the container). */
import type { DockerRuntime, ExecResult } from "../docker/runtime.js";
import type { OsSample, Script } from "./data.js";

/** Grades an answer (`null` for finish) as the original: match, or check scripts in the container. */
export async function gradeOs(
  runtime: DockerRuntime,
  containerId: string,
  sample: OsSample,
  answer: string | null,
  workingFolder = "/",
): Promise<boolean> {
  if (sample.match) {
    if (answer === null) return false;
    const given = sample.match.strip ? answer.trim() : answer;
    if (sample.match.answer !== undefined) return given === sample.match.answer;
    if (sample.match.regex !== undefined) return new RegExp(sample.match.regex).test(given);
    return false;
  }
  const params = [answer === null ? "None" : answer];
  for (const script of sample.check ?? []) {
    const result = await runScript(
      runtime,
      containerId,
      script ?? sample.example!,
      params,
      workingFolder,
    );
    if (result.exitCode !== 0) return false;
    params.push(result.output);
  }
  return true;
}

/** Bash that compiles the C / C++ program in $1 with the compiler in $2 and runs it with the remaining arguments. */
const COMPILE_AND_RUN = `printf '%s' "$1" > /tmp/main.cpp && "$2" -x "$3" -o /tmp/a.out /tmp/main.cpp && shift 3 && exec /tmp/a.out "$@"`;

/**
 * Runs a script non-interactively, as the original: `bash -c code -- args`, `python3 -c code
 * args`, or (C, C++) compiled to /tmp/a.out and run with the args.
 */
export function runScript(
  runtime: DockerRuntime,
  containerId: string,
  script: Script,
  args: string[],
  workingFolder: string,
  timeoutSeconds = 60,
): Promise<ExecResult> {
  let command: string[];
  if (script.language === "python") command = ["python3", "-c", script.code, ...args];
  else if (script.language === "c" || script.language === "c++") {
    const [compiler, language] = script.language === "c" ? ["gcc", "c"] : ["g++", "c++"];
    command = ["bash", "-c", COMPILE_AND_RUN, "--", script.code, compiler, language, ...args];
  } else command = ["bash", "-c", script.code, ...(args.length ? ["--", ...args] : [])];
  return runtime.exec(containerId, command, { timeoutSeconds, workingDir: workingFolder });
}
