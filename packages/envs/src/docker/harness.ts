/**
 * The command harness: a small python3 program that is the main process of a container
 * (under Docker's init) and runs the commands the runtime writes to its stdin, so a command
 * costs no `docker exec` (no runc, no engine call): one attach stream per container carries
 * every command and its result.
 *
 * Protocol: one JSON object a line each way (json.dumps is ASCII, so a line is a frame).
 * Requests carry an `id`; each gets exactly one reply with that `id`:
 *   {"id", "op": "run", "argv", "cwd", "timeout", "max", "stdinBytes"?, "env"?}
 *       (with `stdinBytes`, that many raw bytes follow the line: the command's stdin)
 *       a fresh process (like `docker exec`): stdout and stderr interleaved, at most `max`
 *       characters; at `timeout` seconds its process group and every process carrying its tag
 *       are killed (exit 124, timedOut).
 *   {"id", "op": "shell-start", "cwd"}
 *       starts the long-lived login shell (`bash --login`: /etc/profile, ~/.profile, ~/.bashrc
 *       run once, here), as AgentBench started one before the sample's init.
 *   {"id", "op": "shell", "script", "timeout", "max"}
 *       the script typed into that shell (sourced from a file, stdin /dev/null), so its `cd`,
 *       variables, functions and aliases stay for the next one. At the time limit the shell
 *       and every process of the command are killed, and the next command gets a new login
 *       shell in the shell's folder (its variables are gone: a timeout costs the state).
 * Replies: {"id", "exit", "output", "timedOut", "truncated"} or {"id", "error"}.
 */
import { PassThrough } from "node:stream";
import type Docker from "dockerode";

export const HARNESS_SOURCE = String.raw`
import json, os, select, signal, subprocess, sys, threading, time

out_lock = threading.Lock()

def send(message):
    data = (json.dumps(message) + "\n").encode()
    with out_lock:
        view = memoryview(data)
        while view:
            view = view[os.write(1, view):]

def tagged(tag):
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as f:
                if ("AGENTRL_EXEC=%s" % tag).encode() in f.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            pass
    return found

def kill_all(group, tag):
    for _ in range(3):
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass
        for pid in tagged(tag):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

def exit_code(returncode):
    return 128 - returncode if returncode < 0 else returncode

class Output:
    def __init__(self, limit):
        self.limit = limit
        self.parts = []
        self.size = 0
        self.truncated = False
    def add(self, data):
        room = self.limit * 4 - self.size
        if len(data) > room:
            self.truncated = True
            data = data[:max(room, 0)]
        self.parts.append(data)
        self.size += len(data)
    def text(self):
        text = b"".join(self.parts).decode("utf-8", "replace")
        if len(text) > self.limit:
            self.truncated = True
            text = text[:self.limit]
        return text

def run(request):
    tag = "%x-%d" % (os.getpid(), request["id"])
    env = dict(os.environ)
    env.update(request.get("env") or {})
    env["AGENTRL_EXEC"] = tag
    given = request.get("stdinData")
    try:
        process = subprocess.Popen(request["argv"], cwd=request.get("cwd") or "/", env=env, start_new_session=True,
                                   stdin=subprocess.PIPE if given is not None else subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except OSError as error:
        # The command could not start (no process slot left, no such program): its own failure.
        return {"exit": 127 if isinstance(error, FileNotFoundError) else 126, "output": "cannot run %s: %s" % (request["argv"][0], error), "timedOut": False, "truncated": False}
    if given is not None:
        def feed():
            try:
                process.stdin.write(given)
                process.stdin.close()
            except OSError:
                pass
        threading.Thread(target=feed, daemon=True).start()
    output = Output(request.get("max", 65536))
    deadline = time.monotonic() + request.get("timeout", 60)
    fd = process.stdout.fileno()
    exited_at = None
    timed_out = False
    while True:
        now = time.monotonic()
        if now >= deadline:
            timed_out = True
            break
        ready, _, _ = select.select([fd], [], [], min(0.05 if exited_at else 0.5, deadline - now))
        if ready:
            data = os.read(fd, 65536)
            if not data:
                break
            output.add(data)
            continue
        if process.poll() is not None:
            # A background program may hold the output open: stop reading shortly after the command's end.
            if exited_at is None:
                exited_at = now
            elif now - exited_at > 0.3:
                break
    if timed_out:
        kill_all(process.pid, tag)
    process.wait()
    process.stdout.close()
    return {"exit": 124 if timed_out else exit_code(process.returncode), "output": output.text(), "timedOut": timed_out, "truncated": output.truncated}

class Shell:
    def __init__(self):
        self.process = None
        self.cwd = "/"
        self.count = 0
        self.lock = threading.Lock()
        self.folder = "/dev/shm/.agentrl"

    def start(self, cwd):
        os.makedirs(self.folder, exist_ok=True)
        self.cwd = cwd
        self.process = subprocess.Popen(["bash", "--login"], cwd=cwd, start_new_session=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.buffer = b""
        self.write("shopt -s expand_aliases\n")
        # Wait until the shell has read its startup files (it reads them before its first
        # command): init runs after shell-start answers, so a ~/.bashrc init writes never runs here.
        ready = ("\x1eAGENTRL-READY-%s\x1e" % os.urandom(6).hex()).encode()
        self.write("printf '%s'\n" % ready.decode().replace("\x1e", "\\036"))
        fd = self.process.stdout.fileno()
        seen = b""
        deadline = time.monotonic() + 30
        while ready not in seen and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.25)[0]:
                data = os.read(fd, 65536)
                if not data:
                    break
                seen += data

    def write(self, text):
        self.process.stdin.write(text.encode())
        self.process.stdin.flush()

    def run(self, request):
        if self.process is None or self.process.poll() is not None:
            self.start(self.cwd)
        self.count += 1
        tag = "%x-s%d" % (os.getpid(), self.count)
        nonce = "%s-%d" % (os.urandom(6).hex(), self.count)
        path = "%s/command" % self.folder
        with open(path, "w") as f:
            f.write(request["script"])
        marker = ("\x1eAGENTRL-%s " % nonce).encode()
        self.write("AGENTRL_EXEC=%s source %s </dev/null; __agentrl_status=$?; printf '\\036AGENTRL-%s %%d %%s\\036' \"$__agentrl_status\" \"$PWD\"\n" % (tag, path, nonce))
        output = Output(request.get("max", 65536))
        deadline = time.monotonic() + request.get("timeout", 30)
        fd = self.process.stdout.fileno()
        pending = b""
        timed_out = False
        while True:
            now = time.monotonic()
            if now >= deadline:
                # The command and its jobs are killed with the shell that runs it (a loop of
                # builtins runs in the shell itself); the next command gets a new login shell
                # in the folder the shell was in.
                try:
                    self.cwd = os.readlink("/proc/%d/cwd" % self.process.pid)
                except OSError:
                    pass
                kill_all(self.process.pid, tag)
                self.process.wait()
                output.add(pending)
                self.process = None
                return {"exit": 124, "output": output.text(), "timedOut": True, "truncated": output.truncated}
            ready, _, _ = select.select([fd], [], [], 0.25)
            if not ready:
                continue
            data = os.read(fd, 65536)
            if not data:
                # The shell ended (the script ran exit): the next command gets a new one.
                self.process.wait()
                output.add(pending)
                code = exit_code(self.process.returncode)
                self.process = None
                return {"exit": code, "output": output.text(), "timedOut": timed_out, "truncated": output.truncated}
            pending += data
            at = pending.find(marker)
            if at >= 0:
                end = pending.find(b"\x1e", at + len(marker))
                if end >= 0:
                    output.add(pending[:at])
                    status, _, folder = pending[at + len(marker):end].decode("utf-8", "replace").partition(" ")
                    self.cwd = folder or self.cwd
                    return {"exit": int(status), "output": output.text(), "timedOut": timed_out, "truncated": output.truncated}
                continue
            keep = len(marker) + 8
            if len(pending) > keep:
                output.add(pending[:-keep])
                pending = pending[-keep:]

shell = Shell()

def handle(request):
    try:
        op = request.get("op")
        if op == "run":
            reply = run(request)
        elif op == "shell-start":
            with shell.lock:
                shell.start(request.get("cwd") or "/")
            reply = {"exit": 0, "output": "", "timedOut": False, "truncated": False}
        elif op == "shell":
            with shell.lock:
                reply = shell.run(request)
        else:
            reply = {"error": "unknown op %r" % op}
    except Exception as error:
        reply = {"error": "%s: %s" % (type(error).__name__, error)}
    reply["id"] = request.get("id")
    send(reply)

# A container the engine gave no network (NetworkDisabled) has no /etc/hosts of the engine's:
# write the one Docker writes for --network none (and an empty resolv.conf), unless the image's has content.
HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nff00::0\tip6-mcastprefix\nff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n"
if "--etc-hosts" in sys.argv[1:]:
    for path, text in (("/etc/hosts", HOSTS), ("/etc/resolv.conf", "")):
        try:
            if not os.path.exists(path) or os.path.getsize(path) == 0:
                with open(path, "w") as f:
                    f.write(text)
        except OSError:
            pass

signal.signal(signal.SIGPIPE, signal.SIG_DFL)
send({"id": 0, "ready": True})
stdin = sys.stdin.buffer
while True:
    line = stdin.readline()
    if not line:
        break
    line = line.strip()
    if line:
        request = json.loads(line)
        if "stdinBytes" in request:
            request["stdinData"] = stdin.read(request.pop("stdinBytes"))
        try:
            threading.Thread(target=handle, args=(request,), daemon=True).start()
        except RuntimeError:
            handle(request)  # no thread to be had (the process limit): answer in turn
`;

/** A request to the harness (see HARNESS_SOURCE), without its id. */
export type HarnessRequest =
  | {
      op: "run";
      argv: string[];
      cwd?: string;
      timeout: number;
      max: number;
      /** Bytes for the command's stdin, sent raw after the request's line (no base64, no JSON). */
      stdin?: Buffer;
      env?: Record<string, string>;
    }
  | { op: "shell-start"; cwd: string }
  | { op: "shell"; script: string; timeout: number; max: number };

export interface HarnessReply {
  exit: number;
  output: string;
  timedOut: boolean;
  truncated: boolean;
}

/** The harness's stream closed (the container died, or the engine went away). */
export class HarnessLost extends Error {}

/** The runtime's end of one container's harness: requests written to its stdin, replies read from its stdout. */
export class HarnessConnection {
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { resolve: (reply: HarnessReply) => void; reject: (error: Error) => void }
  >();
  private lost: Error | undefined;
  private stderr = "";
  /** Resolves when the harness said it is ready. */
  readonly ready: Promise<void>;

  constructor(
    docker: Docker,
    private readonly stream: NodeJS.ReadWriteStream,
  ) {
    let markReady: () => void = () => {};
    let failReady: (error: Error) => void = () => {};
    this.ready = new Promise<void>((resolve, reject) => {
      markReady = resolve;
      failReady = reject;
    });
    this.ready.catch(() => {});
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    docker.modem.demuxStream(stream, stdout, stderr);
    let buffer = "";
    stdout.setEncoding("utf8");
    stdout.on("data", (text: string) => {
      buffer += text;
      let newline = buffer.indexOf("\n");
      while (newline >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + 1);
        newline = buffer.indexOf("\n");
        let message: { id?: number; ready?: boolean; error?: string } & Partial<HarnessReply>;
        try {
          message = JSON.parse(line);
        } catch {
          continue;
        }
        if (message.ready) {
          markReady();
          continue;
        }
        const waiter = this.pending.get(message.id ?? -1);
        if (!waiter) continue;
        this.pending.delete(message.id!);
        if (message.error) waiter.reject(new Error(`the command harness failed: ${message.error}`));
        else
          waiter.resolve({
            exit: message.exit ?? -1,
            output: message.output ?? "",
            timedOut: message.timedOut === true,
            truncated: message.truncated === true,
          });
      }
    });
    stderr.setEncoding("utf8");
    stderr.on("data", (text: string) => {
      this.stderr = (this.stderr + text).slice(-2000);
    });
    const close = (reason: string) => {
      if (this.lost) return;
      this.lost = new HarnessLost(
        `the container's command stream closed (${reason})${this.stderr ? `: ${this.stderr.trim().slice(-300)}` : ""}`,
      );
      failReady(this.lost);
      for (const waiter of this.pending.values()) waiter.reject(this.lost);
      this.pending.clear();
    };
    stream.on("end", () => close("end"));
    stream.on("close", () => close("closed"));
    stream.on("error", (error: Error) => close(error.message));
  }

  get closed(): boolean {
    return this.lost !== undefined;
  }

  /** Sends a request; rejects with `HarnessLost` when the stream closes first, or after `deadlineMs`. */
  request(request: HarnessRequest, deadlineMs: number): Promise<HarnessReply> {
    if (this.lost) return Promise.reject(this.lost);
    const id = this.nextId++;
    return new Promise<HarnessReply>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(
          new Error(`the command harness did not answer within ${Math.round(deadlineMs / 1000)} s`),
        );
      }, deadlineMs);
      this.pending.set(id, {
        resolve: (reply) => {
          clearTimeout(timer);
          resolve(reply);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      });
      if (request.op === "run" && request.stdin) {
        const { stdin, ...rest } = request;
        this.stream.write(`${JSON.stringify({ ...rest, id, stdinBytes: stdin.length })}\n`);
        this.stream.write(stdin);
      } else this.stream.write(`${JSON.stringify({ ...request, id })}\n`);
    });
  }

  close(): void {
    (this.stream as unknown as { destroy?: () => void }).destroy?.();
  }
}
