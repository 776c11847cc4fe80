/**
 * `agentrl serve`: an OpenAI-compatible chat-completions server for a saved policy
 * (see docs/serve.md and ../serve/). Runs until SIGINT / SIGTERM, then drains requests in
 * flight (up to `--grace` seconds) and exits.
 */
import { Option, type Command } from "commander";
import { numberOption } from "../options.js";
import {
  startModelServer,
  isLoopbackHost,
  ServeConfigError,
  type ModelServerOptions,
} from "@agentrl/rollout";

export interface ServeCommandOptions {
  /** Model directory. */
  model: string;
  /** Default 8000. */
  port: number;
  /** Default 127.0.0.1. */
  host: string;
  /** Default none; required for a non-loopback host. Also read from env AGENTRL_API_KEY. */
  apiKey?: string;
  /** Key of the weight routes. Default: env AGENTRL_SERVE_KEY, else ~/.agentrl/serve-key (generated when missing). */
  weightsKey?: string;
  /** Folders and URL prefixes POST /v1/weights may pull from. Default none. */
  weightsFrom?: string[];
  /** Default 32. */
  maxBatch: number;
  /** Default: the model directory's name. */
  name?: string;
  /** Default: generation_config.json's, else 1. */
  temperature?: number;
  /** Default: generation_config.json's, else 1. */
  topP?: number;
  /** Default 1,024. */
  maxTokens: number;
  /** Default 0. */
  seed: number;
  /** Tokens per slice of a streamed generation; 0 = send it all at the end. Default 16. */
  streamChunk: number;
  /** Seconds requests in flight get at shutdown. Default 10. */
  grace: number;
  /** Kept KV caches survive a weight update. Default false. */
  keepCachesOnUpdate: boolean;
  /** Do not log one line per request. Default false. */
  quiet: boolean;
}

/** Starts the server and resolves once it has shut down after a signal. */
export async function runServe(options: ServeCommandOptions): Promise<void> {
  const apiKey = options.apiKey ?? process.env.AGENTRL_API_KEY;
  if (!isLoopbackHost(options.host) && !apiKey) {
    throw new ServeConfigError(
      `binding ${options.host} (reachable from other machines) needs an API key: --api-key KEY or env AGENTRL_API_KEY`,
    );
  }
  const serverOptions: ModelServerOptions = {
    model: options.model,
    port: options.port,
    host: options.host,
    apiKey,
    weightsKey: options.weightsKey,
    weightsFrom: options.weightsFrom ?? [],
    maxBatch: options.maxBatch,
    name: options.name,
    temperature: options.temperature,
    topP: options.topP,
    maxTokens: options.maxTokens,
    seed: options.seed,
    streamChunkTokens: options.streamChunk,
    keepCachesOnUpdate: options.keepCachesOnUpdate,
    log: options.quiet ? null : (line) => console.error(line),
  };
  const running = await startModelServer(serverOptions);
  console.error(
    `agentrl serve: model "${running.server.modelName}" (version ${running.policy.version}) at ${running.address.baseUrl}` +
      ` — max batch ${options.maxBatch}${apiKey ? ", API key required" : ""}; Ctrl-C stops`,
  );
  const key = running.weightsKey;
  console.error(
    `agentrl serve: /v1/weights needs the weights key ${key.source === "--weights-key" || key.source === "AGENTRL_SERVE_KEY" ? `given by ${key.source}` : `in ${key.source}${key.created ? " (generated now, mode 0600)" : ""}`}` +
      `; pulls from ${options.weightsFrom?.length ? options.weightsFrom.join(", ") : "nowhere (--weights-from)"}`,
  );
  await new Promise<void>((resolve) => {
    const stop = (signal: NodeJS.Signals) => {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
      console.error(
        `agentrl serve: ${signal}, finishing ${running.server.activeRequests} request(s) in flight (at most ${options.grace} s)`,
      );
      void running.close(options.grace * 1000).then(resolve, resolve);
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
  });
  console.error("agentrl serve: stopped");
}

export function registerServeCommand(program: Command): void {
  program
    .command("serve")
    .description(
      "serve a model over an OpenAI-compatible chat-completions API (one engine, continuous batching)",
    )
    .requiredOption(
      "--model <dir>",
      "model directory (config.json, safetensors, tokenizer.json with a chat template)",
    )
    .addOption(
      new Option(
        "--port <n>",
        "port to listen on (0 = any free port; env AGENTRL_SERVE_PORT, e.g. one per swarm replica: 800{{.Task.Slot}})",
      )
        .env("AGENTRL_SERVE_PORT")
        .argParser(numberOption("--port", { integer: true, minimum: 0, maximum: 65_535 }))
        .default(8000),
    )
    .option(
      "--host <address>",
      "address to bind; anything but loopback needs --api-key",
      "127.0.0.1",
    )
    .option(
      "--api-key <key>",
      "require 'Authorization: Bearer <key>' on /v1/* but the weight routes (env AGENTRL_API_KEY)",
    )
    .option(
      "--weights-key <key>",
      "key of GET|POST /v1/weights (env AGENTRL_SERVE_KEY; default: ~/.agentrl/serve-key, generated when missing)",
    )
    .option(
      "--weights-from <location...>",
      "folders and URL prefixes (http(s)://host:port/path/) POST /v1/weights may pull weights from (default: none)",
    )
    .option(
      "--max-batch <n>",
      "most sequences in one decode step",
      numberOption("--max-batch", { integer: true, minimum: 1 }),
      32,
    )
    .option("--name <id>", "model id clients send as 'model' (default: the directory's name)")
    .option(
      "--temperature <t>",
      "temperature of requests that give none (default: generation_config.json, else 1)",
      numberOption("--temperature", { minimum: 0, maximum: 2 }),
    )
    .option(
      "--top-p <p>",
      "nucleus sampling for every request, server-wide (default: generation_config.json, else 1)",
      numberOption("--top-p", { minimum: 0, maximum: 1 }),
    )
    .option(
      "--max-tokens <n>",
      "max_tokens of requests that give none",
      numberOption("--max-tokens", { integer: true, minimum: 1 }),
      1024,
    )
    .option(
      "--seed <n>",
      "seed of the sampler",
      numberOption("--seed", { integer: true, minimum: 0 }),
      0,
    )
    .option(
      "--stream-chunk <n>",
      "streamed text reaches the client every n tokens (0 = all at the end)",
      numberOption("--stream-chunk", { integer: true, minimum: 0 }),
      16,
    )
    .option(
      "--grace <seconds>",
      "time requests in flight get to finish at shutdown",
      numberOption("--grace", { minimum: 0 }),
      10,
    )
    .option(
      "--keep-caches-on-update",
      "KV caches kept between turns survive POST /v1/weights (log-probs stay exact)",
      false,
    )
    .option("--quiet", "no log line per request", false)
    .addHelpText(
      "after",
      `
Routes: POST /v1/chat/completions (stream, tools, n, stop, …; token-in prompt_token_ids,
return_token_ids), GET /v1/models, GET /health, GET|POST /v1/weights (install a new policy
version: safetensors body, or JSON {path | url} from a --weights-from location; always behind
the weights key, never the API key), POST /v1/cache/release. See docs/serve.md.

Examples:
  agentrl serve --model models/tiny
  agentrl serve --model runs/kg/checkpoints/step-200 --name kg-200 --port 8001 --max-batch 64
  agentrl serve --model models/tiny --host 0.0.0.0 --api-key "$(openssl rand -hex 16)"
  curl -s localhost:8000/v1/chat/completions -H 'content-type: application/json' \\
    -d '{"model":"tiny","messages":[{"role":"user","content":"List the files in /etc"}]}'
`,
    )
    .action(async (options: ServeCommandOptions) => {
      await runServe(options);
    });
}
