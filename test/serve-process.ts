/** `agentrl serve` as a child process, for tests and benchmarks (any free port). */
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

const repositoryRoot = fileURLToPath(new URL("..", import.meta.url));

/** Starts `agentrl serve --model <model> --port 0 <extra…>` (with `backend`: env AGENTRL_BACKEND); resolves with its base URL (`…/v1`) once it listens, and its stderr so far (`output()`). */
export async function startServeProcess(
  model: string,
  extra: string[] = [],
  options: { backend?: string } = {},
): Promise<{ child: ChildProcess; url: string; output: () => string }> {
  const child = spawn(
    process.execPath,
    [
      "--conditions=source",
      "--import",
      "tsx",
      "packages/cli/src/main.ts",
      "serve",
      "--model",
      model,
      "--port",
      "0",
      ...extra,
    ],
    {
      cwd: repositoryRoot,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...(options.backend ? { AGENTRL_BACKEND: options.backend } : {}) },
    },
  );
  let stderr = "";
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`the server did not start in 120 s:\n${stderr}`)),
      120_000,
    );
    child.stderr!.on("data", (data: Buffer) => {
      stderr += data.toString();
      const match = /at (http:\/\/\S+\/v1)/.exec(stderr);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    child.on("exit", (code) => reject(new Error(`the server exited with ${code}:\n${stderr}`)));
  });
  return { child, url, output: () => stderr };
}
