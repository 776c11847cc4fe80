/**
 * deploy/: every Kubernetes manifest parses, every `agentrl` container runs a command the CLI
 * has with flags that command has (and its required ones), the trainer's run configuration
 * validates, and docs/scale-out.md names every flag of the commands the manifests run.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Command } from "commander";
import { parseAllDocuments } from "yaml";
import { buildProgram } from "./main.js";
import { validateConfig } from "@agentrl/trainer";

const repository = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
const manifestsDir = join(repository, "deploy/kubernetes");
const AGENTRL_IMAGE = /^agentrl\/agentrl(:|$)/;

interface Manifest {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string };
  spec?: { template?: { spec?: PodSpec } };
  data?: Record<string, string>;
}
interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
}
interface PodSpec {
  containers?: Container[];
  initContainers?: Container[];
}

function manifests(): Array<{ file: string; doc: Manifest }> {
  const out: Array<{ file: string; doc: Manifest }> = [];
  for (const file of readdirSync(manifestsDir).filter((name) => name.endsWith(".yaml")).sort()) {
    for (const document of parseAllDocuments(readFileSync(join(manifestsDir, file), "utf8"))) {
      assert.deepEqual(document.errors.map(String), [], `${file} parses`);
      const doc = document.toJS() as Manifest | null;
      if (doc) out.push({ file, doc });
    }
  }
  return out;
}

/** The subcommand that `args` names and the option tokens after it; throws on an unknown command. */
function resolveCommand(program: Command, args: string[]): { command: Command; path: string; rest: string[] } {
  let command = program;
  let i = 0;
  while (i < args.length && !args[i].startsWith("-")) {
    const next = command.commands.find((sub) => sub.name() === args[i] || sub.aliases().includes(args[i]));
    if (!next) break;
    command = next;
    i += 1;
  }
  assert.notEqual(command, program, `"${args.join(" ")}" names an agentrl command`);
  assert.equal(command.commands.length, 0, `"${args.slice(0, i).join(" ")}" is a command group, not a command`);
  return { command, path: args.slice(0, i).join(" "), rest: args.slice(i) };
}

const agentrlContainers = (): Array<{ where: string; container: Container }> =>
  manifests().flatMap(({ file, doc }) => {
    const pod = doc.spec?.template?.spec;
    return [...(pod?.initContainers ?? []), ...(pod?.containers ?? [])]
      .filter((container) => AGENTRL_IMAGE.test(container.image))
      .map((container) => ({ where: `${file} ${doc.kind}/${doc.metadata?.name} container ${container.name}`, container }));
  });

test("deploy/kubernetes: every document is a Kubernetes object; the four components are there", () => {
  const all = manifests();
  for (const { file, doc } of all) {
    assert.ok(doc.apiVersion && doc.kind, `${file}: apiVersion and kind`);
    if (doc.kind !== "Kustomization") assert.ok(doc.metadata?.name, `${file}: ${doc.kind} has metadata.name`);
  }
  const names = new Set(all.map(({ doc }) => `${doc.kind}/${doc.metadata?.name}`));
  for (const expected of ["Deployment/agentrl-controller", "Deployment/agentrl-env-worker-os", "StatefulSet/agentrl-inference", "Job/agentrl-train", "Service/agentrl-controller", "Service/agentrl-inference"]) {
    assert.ok(names.has(expected), `${expected} is defined`);
  }
  const kustomization = all.find(({ file }) => file === "kustomization.yaml")!.doc as { resources?: string[] };
  const files = new Set(readdirSync(manifestsDir).filter((name) => name.endsWith(".yaml") && name !== "kustomization.yaml"));
  assert.deepEqual(new Set(kustomization.resources), files, "kustomization lists every manifest");
});

test("deploy/kubernetes: agentrl containers run real commands with real flags (and their required ones)", () => {
  const program = buildProgram();
  const globalFlags = new Set(program.options.map((option) => option.long));
  const containers = agentrlContainers();
  assert.ok(containers.length >= 6, `agentrl containers found: ${containers.length}`);
  const commandsUsed = new Set<string>();
  for (const { where, container } of containers) {
    assert.equal(container.command, undefined, `${where}: uses the image's entry point (agentrl) with args`);
    const { command, path, rest } = resolveCommand(program, container.args ?? []);
    commandsUsed.add(path);
    const given = new Set<string>();
    for (let i = 0; i < rest.length; i += 1) {
      if (!rest[i].startsWith("--")) continue;
      const flag = rest[i].split("=")[0];
      const option = command.options.find((candidate) => candidate.long === flag);
      assert.ok(option || globalFlags.has(flag), `${where}: agentrl ${path} has no flag ${flag}`);
      given.add(flag);
      if (option?.required && !rest[i].includes("=")) {
        assert.ok(i + 1 < rest.length && !rest[i + 1].startsWith("--"), `${where}: ${flag} needs a value`);
      }
    }
    for (const option of command.options.filter((candidate) => candidate.mandatory)) {
      assert.ok(given.has(option.long!), `${where}: agentrl ${path} requires ${option.long}`);
    }
  }
  assert.deepEqual([...commandsUsed].sort(), ["env build", "env serve", "env worker", "serve", "train"]);
});

test("deploy/kubernetes: the trainer's run configuration validates", () => {
  const config = manifests().find(({ doc }) => doc.kind === "ConfigMap" && doc.metadata?.name === "agentrl-run")?.doc;
  assert.ok(config?.data?.["run.yaml"], "ConfigMap agentrl-run has run.yaml");
  const parsed = parseAllDocuments(config.data["run.yaml"])[0].toJS();
  const validated = validateConfig(parsed, "deploy/kubernetes/trainer.yaml run.yaml");
  assert.deepEqual(validated.tasks.map((task) => task.name), ["kg", "alfworld", "os"]);
});

test("docs/scale-out.md explains every flag of the commands the manifests run", () => {
  const doc = readFileSync(join(repository, "docs/scale-out.md"), "utf8");
  const program = buildProgram();
  for (const path of ["env serve", "env worker", "env build", "serve", "train"]) {
    const { command } = resolveCommand(program, path.split(" "));
    for (const option of command.options) {
      assert.ok(doc.includes(`\`${option.long}`), `docs/scale-out.md mentions \`${option.long}\` of agentrl ${path}`);
    }
  }
});
