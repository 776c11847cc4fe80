/**
 * The `agentrl` command line. Each command lives in its own file under `commands/` and
 * registers itself on the program; this file only wires them together.
 */
import { Command } from "commander";
import { AgentRLError } from "@agentrl/spec";
import { registerModelCommands } from "./commands/model.js";
import { registerGenerateCommand } from "./commands/generate.js";
import { registerEnvCommands } from "./commands/env.js";
import { registerSftCommand } from "./commands/sft.js";
import { registerAblationCommand, registerTrainCommand } from "./commands/train.js";
import { registerEvalCommand } from "./commands/eval.js";
import { registerServeCommand } from "./commands/serve.js";
import { registerBenchCommand } from "./commands/bench.js";
import { registerDashboardCommand } from "./commands/dashboard.js";

export function buildProgram(): Command {
  const program = new Command("agentrl")
    .description(
      "Train LLM agents with reinforcement learning over many turns and many tasks, on TensorFlow.js",
    )
    .version("0.1.0")
    .showHelpAfterError()
    .option(
      "--backend <name>",
      "force a tfjs backend: tensorflow (node/node-gpu), wasm or cpu (env AGENTRL_BACKEND)",
    );
  program.hook("preAction", (cmd) => {
    const backend = cmd.opts().backend as string | undefined;
    if (backend) process.env.AGENTRL_BACKEND = backend;
  });
  registerModelCommands(program);
  registerGenerateCommand(program);
  registerEnvCommands(program);
  registerSftCommand(program);
  registerTrainCommand(program);
  registerAblationCommand(program);
  registerEvalCommand(program);
  registerServeCommand(program);
  registerBenchCommand(program);
  registerDashboardCommand(program);
  return program;
}

export async function main(argv: string[]): Promise<void> {
  try {
    await buildProgram().parseAsync(argv);
  } catch (error) {
    const err = error as Error;
    console.error(`agentrl: ${err.name === "Error" ? "" : err.name + ": "}${err.message}`);
    // An AgentRLError says what went wrong and what to do; anything else (a RangeError, a
    // TypeError) is a fault of agentrl itself: its stack is what a bug report needs.
    if (process.env.AGENTRL_DEBUG || !(error instanceof AgentRLError)) console.error(err.stack);
    process.exitCode = 1;
  }
}

const invokedDirectly =
  process.argv[1] && import.meta.url.endsWith(process.argv[1].replace(/\\/g, "/"));
if (invokedDirectly) await main(process.argv);
