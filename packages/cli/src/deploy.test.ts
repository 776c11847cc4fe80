/**
 * deploy/: the Docker Swarm stack (the tested path, test/swarm.test.ts) and the Kubernetes
 * manifests describe one topology. Every document parses; every agentrl container runs a
 * command the CLI has with flags that command has (and its required ones); every service,
 * port, flag, secret, environment variable and host volume of the stack file appears in the
 * manifests; both reference only images the project builds; both run configurations
 * validate; docs/scale-out.md names every flag of the commands they run.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Command } from "commander";
import { parse, parseAllDocuments } from "yaml";
import { buildProgram } from "./main.js";
import { validateConfig } from "@agentrl/trainer";

const repository = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
const manifestsDir = join(repository, "deploy/kubernetes");
const stackFile = join(repository, "deploy/swarm/stack.yml");
/** The only images the project builds (agentrl env build): the runtime and the task images. */
const PROJECT_IMAGE = /^agentrl\/(runtime|os|db):latest$/;

interface Manifest {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string };
  spec?: { replicas?: number; template?: { spec?: PodSpec } };
  data?: Record<string, string>;
}
interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  env?: Array<{ name: string; value?: string }>;
  ports?: Array<{ containerPort: number }>;
  volumeMounts?: Array<{ name: string; mountPath: string; subPath?: string }>;
}
interface Volume {
  name: string;
  hostPath?: { path: string };
  secret?: { secretName: string; items?: Array<{ key: string; path: string }> };
}
interface PodSpec {
  containers?: Container[];
  initContainers?: Container[];
  volumes?: Volume[];
}
interface StackService {
  image: string;
  command?: string[];
  entrypoint?: unknown;
  networks?: string[];
  secrets?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  configs?: Array<{ source: string; target: string }>;
  deploy?: { replicas?: number };
}
interface Stack {
  services: Record<string, StackService>;
  secrets: Record<string, { file: string }>;
  configs: Record<string, { file: string }>;
}

function manifests(): Array<{ file: string; doc: Manifest }> {
  const out: Array<{ file: string; doc: Manifest }> = [];
  for (const file of readdirSync(manifestsDir)
    .filter((name) => name.endsWith(".yaml"))
    .sort()) {
    for (const document of parseAllDocuments(readFileSync(join(manifestsDir, file), "utf8"))) {
      assert.deepEqual(document.errors.map(String), [], `${file} parses`);
      const doc = document.toJS() as Manifest | null;
      if (doc) out.push({ file, doc });
    }
  }
  return out;
}

const stack = (): Stack => parse(readFileSync(stackFile, "utf8")) as Stack;

/** The subcommand that `args` names and the option tokens after it; throws on an unknown command. */
function resolveCommand(
  program: Command,
  args: string[],
): { command: Command; path: string; rest: string[] } {
  let command = program;
  let i = 0;
  while (i < args.length && !args[i].startsWith("-")) {
    const next = command.commands.find(
      (sub) => sub.name() === args[i] || sub.aliases().includes(args[i]),
    );
    if (!next) break;
    command = next;
    i += 1;
  }
  assert.notEqual(command, program, `"${args.join(" ")}" names an agentrl command`);
  assert.equal(
    command.commands.length,
    0,
    `"${args.slice(0, i).join(" ")}" is a command group, not a command`,
  );
  return { command, path: args.slice(0, i).join(" "), rest: args.slice(i) };
}

/** Checks `args` against the CLI; returns the command path and `flag → value` (value "" for a bare flag). */
function checkArguments(
  program: Command,
  where: string,
  args: string[],
): { path: string; flags: Map<string, string> } {
  const globalFlags = new Set(program.options.map((option) => option.long));
  const { command, path, rest } = resolveCommand(program, args);
  const flags = new Map<string, string>();
  for (let i = 0; i < rest.length; i += 1) {
    if (!rest[i].startsWith("--")) continue;
    const flag = rest[i].split("=")[0];
    const option = command.options.find((candidate) => candidate.long === flag);
    assert.ok(option || globalFlags.has(flag), `${where}: agentrl ${path} has no flag ${flag}`);
    const takesValue = option !== undefined && (option.required || option.optional);
    const value = rest[i].includes("=")
      ? rest[i].slice(flag.length + 1)
      : takesValue && i + 1 < rest.length && !rest[i + 1].startsWith("--")
        ? rest[i + 1]
        : "";
    if (option?.required) assert.ok(value !== "", `${where}: ${flag} needs a value`);
    flags.set(flag, value);
  }
  for (const option of command.options.filter((candidate) => candidate.mandatory)) {
    assert.ok(flags.has(option.long!), `${where}: agentrl ${path} requires ${option.long}`);
  }
  return { path, flags };
}

/** The workload of swarm service `name` in the manifests (`agentrl-<name>`), with its pod. */
function workloadOf(name: string): { doc: Manifest; pod: PodSpec; container: Container } {
  const doc = manifests().find(
    ({ doc }) =>
      ["Deployment", "StatefulSet", "Job"].includes(doc.kind ?? "") &&
      doc.metadata?.name === `agentrl-${name}`,
  )?.doc;
  assert.ok(doc, `swarm service ${name} has a Kubernetes workload agentrl-${name}`);
  const pod = doc.spec!.template!.spec!;
  const containers = (pod.containers ?? []).filter((container) =>
    container.image.startsWith("agentrl/runtime"),
  );
  assert.equal(containers.length, 1, `agentrl-${name} runs one agentrl/runtime container`);
  return { doc, pod, container: containers[0] };
}

const isUrl = (value: string) => /^https?:\/\//.test(value);

test("deploy/kubernetes: every document is a Kubernetes object and the kustomization lists every manifest", () => {
  const all = manifests();
  for (const { file, doc } of all) {
    assert.ok(doc.apiVersion && doc.kind, `${file}: apiVersion and kind`);
    if (doc.kind !== "Kustomization")
      assert.ok(doc.metadata?.name, `${file}: ${doc.kind} has metadata.name`);
  }
  const kustomization = all.find(({ file }) => file === "kustomization.yaml")!.doc as {
    resources?: string[];
  };
  const files = new Set(
    readdirSync(manifestsDir).filter(
      (name) => name.endsWith(".yaml") && name !== "kustomization.yaml",
    ),
  );
  assert.deepEqual(new Set(kustomization.resources), files, "kustomization lists every manifest");
});

test("deploy: the stack file and the manifests reference only images the project builds", () => {
  for (const [name, service] of Object.entries(stack().services))
    assert.match(service.image, PROJECT_IMAGE, `swarm service ${name}`);
  for (const { file, doc } of manifests()) {
    const pod = doc.spec?.template?.spec;
    for (const container of [...(pod?.initContainers ?? []), ...(pod?.containers ?? [])]) {
      assert.match(
        container.image,
        PROJECT_IMAGE,
        `${file} ${doc.metadata?.name} container ${container.name}`,
      );
    }
  }
});

test("deploy: every agentrl command of the stack file and the manifests is a real command with real flags (and its required ones)", () => {
  const program = buildProgram();
  const used = new Set<string>();
  for (const [name, service] of Object.entries(stack().services)) {
    assert.equal(
      service.entrypoint,
      undefined,
      `swarm service ${name}: uses the image's entry point (agentrl)`,
    );
    used.add(checkArguments(program, `swarm service ${name}`, service.command ?? []).path);
  }
  for (const { file, doc } of manifests()) {
    for (const container of doc.spec?.template?.spec?.containers ?? []) {
      assert.equal(
        container.command,
        undefined,
        `${file} ${doc.metadata?.name}: uses the image's entry point (agentrl) with args`,
      );
      used.add(checkArguments(program, `${file} ${doc.metadata?.name}`, container.args ?? []).path);
    }
  }
  assert.deepEqual([...used].sort(), ["env serve", "env worker", "serve", "train"]);
});

test("deploy: every service, port, flag, secret, environment variable and host volume of the stack file is in the Kubernetes manifests", () => {
  const program = buildProgram();
  const { services, secrets } = stack();
  assert.deepEqual(Object.keys(services).sort(), [
    "controller",
    "env-worker-db",
    "env-worker-os",
    "inference",
    "trainer",
  ]);
  const secretItems = new Map<string, string>(); // file name under /run/secrets → key of agentrl-secrets
  for (const [name, service] of Object.entries(services)) {
    const { doc, pod, container } = workloadOf(name);
    assert.equal(container.image, service.image, `${name}: same image`);
    assert.equal(doc.spec?.replicas ?? 1, service.deploy?.replicas ?? 1, `${name}: same replicas`);
    // Flags: the same, with the same values but addresses (127.0.0.1 on the swarm's host network, service names in the cluster).
    const swarm = checkArguments(program, `swarm ${name}`, service.command ?? []);
    const cluster = checkArguments(program, `kubernetes ${name}`, container.args ?? []);
    assert.equal(cluster.path, swarm.path, `${name}: same command`);
    for (const [flag, value] of swarm.flags) {
      assert.ok(cluster.flags.has(flag), `${name}: ${flag} is in the manifest`);
      if (!isUrl(value))
        assert.equal(cluster.flags.get(flag), value, `${name}: ${flag} has the same value`);
    }
    for (const flag of cluster.flags.keys())
      assert.ok(
        swarm.flags.has(flag) || flag === "--resume",
        `${name}: ${flag} of the manifest is in the stack file`,
      );
    // Ports: every port a flag binds is a container port.
    const port = swarm.flags.get("--port");
    if (port)
      assert.ok(
        container.ports?.some((entry) => String(entry.containerPort) === port),
        `${name}: port ${port} is a container port`,
      );
    // Environment: the same variables (a swarm template such as 800{{.Task.Slot}} is per node; the cluster's pods each have their own address).
    const environment = new Map((container.env ?? []).map((entry) => [entry.name, entry.value]));
    for (const [variable, value] of Object.entries(service.environment ?? {})) {
      assert.ok(environment.has(variable), `${name}: environment ${variable} is in the manifest`);
      if (!value.includes("{{"))
        assert.equal(environment.get(variable), value, `${name}: ${variable} has the same value`);
    }
    // Secrets: mounted at the same paths (/run/secrets/<name>) from agentrl-secrets.
    const mounted = new Set<string>();
    const secretVolume = pod.volumes?.find((volume) => volume.secret);
    if (secretVolume) {
      assert.ok(
        container.volumeMounts?.some(
          (mount) => mount.name === secretVolume.name && mount.mountPath === "/run/secrets",
        ),
        `${name}: secrets at /run/secrets`,
      );
      for (const item of secretVolume.secret!.items ?? []) {
        mounted.add(item.path);
        secretItems.set(item.path, item.key);
      }
    }
    assert.deepEqual(
      [...mounted].sort(),
      [...(service.secrets ?? [])].sort(),
      `${name}: the same secrets`,
    );
    // Host volumes: the same host paths at the same places.
    for (const volume of service.volumes ?? []) {
      const [source, target] = volume.split(":");
      if (!source.startsWith("/")) continue;
      const hostVolume = pod.volumes?.find((entry) => entry.hostPath?.path === source);
      assert.ok(hostVolume, `${name}: host path ${source} is a hostPath volume`);
      assert.ok(
        container.volumeMounts?.some(
          (mount) => mount.name === hostVolume.name && mount.mountPath === target,
        ),
        `${name}: ${source} mounted at ${target}`,
      );
    }
    // Configs: mounted at the same path.
    for (const config of service.configs ?? []) {
      assert.ok(
        container.volumeMounts?.some((mount) => mount.mountPath === config.target),
        `${name}: the run configuration at ${config.target}`,
      );
    }
  }
  // Every secret of the stack is a key of the cluster's Secret.
  const secretDoc = manifests().find(({ doc }) => doc.kind === "Secret")?.doc as
    { metadata: { name: string }; stringData: Record<string, string> } | undefined;
  assert.ok(secretDoc, "a Secret is defined");
  for (const [secret, { file }] of Object.entries(secrets)) {
    const key = secretItems.get(secret);
    assert.ok(
      key && key in secretDoc.stringData,
      `secret ${secret} is key ${key} of ${secretDoc.metadata.name}`,
    );
    assert.ok(file.endsWith(`/${key}`), `secret ${secret} comes from the file ${key}`);
  }
});

test("deploy: both run configurations validate and describe the same run", () => {
  const swarmConfig = validateConfig(
    parse(readFileSync(join(repository, "deploy/swarm/run.yaml"), "utf8")),
    "deploy/swarm/run.yaml",
  );
  const configMap = manifests().find(
    ({ doc }) => doc.kind === "ConfigMap" && doc.metadata?.name === "agentrl-run",
  )?.doc;
  assert.ok(configMap?.data?.["run.yaml"], "ConfigMap agentrl-run has run.yaml");
  const clusterConfig = validateConfig(
    parse(configMap.data["run.yaml"]),
    "deploy/kubernetes/trainer.yaml run.yaml",
  );
  const withoutAddresses = (config: typeof swarmConfig) => ({
    ...config,
    tasks: config.tasks.map((task) => ({
      ...task,
      controller: task.controller ? "<controller>" : undefined,
    })),
    rollout: { ...config.rollout, servers: config.rollout.servers.map(() => "<server>") },
  });
  assert.deepEqual(withoutAddresses(clusterConfig), withoutAddresses(swarmConfig));
  assert.deepEqual(
    swarmConfig.tasks.map((task) => [task.name, Boolean(task.controller)]),
    [
      ["kg", false],
      ["os", true],
    ],
    "KG in-process, OS through the controller",
  );
  assert.equal(
    swarmConfig.rollout.servers.length,
    stack().services.inference.deploy?.replicas,
    "one rollout server per inference replica",
  );
});

test("docs/scale-out.md explains every flag of the commands the stack runs", () => {
  const doc = readFileSync(join(repository, "docs/scale-out.md"), "utf8");
  const program = buildProgram();
  for (const path of ["env serve", "env worker", "env build", "serve", "train"]) {
    const { command } = resolveCommand(program, path.split(" "));
    for (const option of command.options) {
      assert.ok(
        doc.includes(`\`${option.long}`),
        `docs/scale-out.md mentions \`${option.long}\` of agentrl ${path}`,
      );
    }
  }
});
