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
import os, select, sys, time
# Lean start (a container's harness starts once per episode): the C modules under json,
# subprocess, threading and signal, so that re, enum, locale, collections and functools are
# never imported (~30 ms of CPU a container).
try:
    import _json, _signal, _thread
except ImportError:
    import _thread, json as _json, signal as _signal
    _json.dumps_ = _json.dumps
    _json.loads_ = _json.loads
else:
    class _Context:
        strict = True
        object_hook = None
        object_pairs_hook = None
        parse_float = float
        parse_int = int
        parse_constant = float
        memo = {}
    _scan = _json.make_scanner(_Context())

    def _encode(value):
        if value is True:
            return "true"
        if value is False:
            return "false"
        if value is None:
            return "null"
        if isinstance(value, int):
            return str(value)
        if isinstance(value, str):
            return _json.encode_basestring_ascii(value)
        return "{" + ", ".join("%s: %s" % (_json.encode_basestring_ascii(key), _encode(item)) for key, item in value.items()) + "}"

    def _loads(text):
        return _scan(text, 0)[0]
    _json.dumps_ = _encode
    _json.loads_ = _loads

out_lock = _thread.allocate_lock()

def send(message):
    data = (_json.dumps_(message) + "\n").encode()
    with out_lock:
        view = memoryview(data)
        while view:
            view = view[os.write(1, view):]

spawn_lock = _thread.allocate_lock()
home = os.getcwd()

def spawn(argv, cwd, env, stdin_fd, output_fd):
    """posix_spawn (a vfork: no copy of this process, unlike fork) in a new session, in cwd
    (the harness's own folder for that instant, under a lock), argv[0] looked up in env's PATH
    as subprocess did; raises OSError as subprocess did when it cannot start."""
    program = argv[0]
    if "/" in program:
        candidates = [program]
    else:
        candidates = [os.path.join(folder or ".", program) for folder in env.get("PATH", os.defpath).split(os.pathsep)]
    actions = [(os.POSIX_SPAWN_DUP2, stdin_fd, 0), (os.POSIX_SPAWN_DUP2, output_fd, 1), (os.POSIX_SPAWN_DUP2, output_fd, 2)]
    first_error = None
    with spawn_lock:
        os.chdir(cwd)
        try:
            for path in candidates:
                try:
                    return os.posix_spawn(path, argv, env, file_actions=actions, setsid=True)
                except OSError as error:
                    if first_error is None or (first_error.errno == 2 and error.errno != 2):
                        first_error = error
        finally:
            os.chdir(home)
    if first_error.errno == 2:
        raise FileNotFoundError(2, os.strerror(2), program)
    raise OSError(first_error.errno, first_error.strerror, program)

class Process:
    """A child process in a new session (what subprocess.Popen(start_new_session=True) gave):
    stdin a pipe (stdin_fd) or /dev/null, stdout and stderr one pipe (stdout_fd)."""
    def __init__(self, argv, cwd, env, pipe_stdin):
        output_read, output_write = os.pipe()
        input_read, self.stdin_fd = os.pipe() if pipe_stdin else (os.open("/dev/null", os.O_RDONLY), None)
        self.returncode = None
        if hasattr(os, "posix_spawn"):
            try:
                self.pid = spawn(argv, cwd, os.environ if env is None else env, input_read, output_write)
            except BaseException:
                for fd in (input_read, output_write, output_read, self.stdin_fd):
                    if fd is not None:
                        os.close(fd)
                raise
            os.close(input_read)
            os.close(output_write)
            self.stdout_fd = output_read
            return
        error_read, error_write = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.setsid()
                os.dup2(input_read, 0)
                os.dup2(output_write, 1)
                os.dup2(output_write, 2)
                os.chdir(cwd)
                if env is None:
                    os.execvp(argv[0], argv)
                os.execvpe(argv[0], argv, env)
            except BaseException as error:
                try:
                    os.write(error_write, ("%d:%s" % (getattr(error, "errno", 0) or 0, getattr(error, "strerror", None) or error)).encode("utf-8", "replace"))
                finally:
                    os._exit(127)
        self.pid = pid
        for fd in (input_read, output_write, error_write):
            os.close(fd)
        self.stdout_fd = output_read
        failure = b""
        while True:
            data = os.read(error_read, 4096)
            if not data:
                break
            failure += data
        os.close(error_read)
        if failure:
            self.wait()
            os.close(output_read)
            if self.stdin_fd is not None:
                os.close(self.stdin_fd)
            number, _, text = failure.decode("utf-8", "replace").partition(":")
            raise OSError(int(number), text, argv[0])  # errno 2 makes a FileNotFoundError

    def _status(self, status):
        self.returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)

    def poll(self):
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = 0  # reaped elsewhere (as subprocess does)
                return self.returncode
            if pid:
                self._status(status)
        return self.returncode

    def wait(self):
        while self.returncode is None:
            try:
                self._status(os.waitpid(self.pid, 0)[1])
            except InterruptedError:
                pass
            except ChildProcessError:
                self.returncode = 0
        return self.returncode

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
            os.killpg(group, _signal.SIGKILL)
        except OSError:
            pass
        for pid in tagged(tag):
            try:
                os.kill(pid, _signal.SIGKILL)
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
        process = Process(request["argv"], request.get("cwd") or "/", env, given is not None)
    except OSError as error:
        # The command could not start (no process slot left, no such program): its own failure.
        return {"exit": 127 if isinstance(error, FileNotFoundError) else 126, "output": "cannot run %s: %s" % (request["argv"][0], error), "timedOut": False, "truncated": False}
    if given is not None:
        def feed():
            try:
                view = memoryview(given)
                while view:
                    view = view[os.write(process.stdin_fd, view):]
            except OSError:
                pass
            os.close(process.stdin_fd)
        _thread.start_new_thread(feed, ())
    output = Output(request.get("max", 65536))
    deadline = time.monotonic() + request.get("timeout", 60)
    fd = process.stdout_fd
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
    os.close(fd)
    return {"exit": 124 if timed_out else exit_code(process.returncode), "output": output.text(), "timedOut": timed_out, "truncated": output.truncated}

class Shell:
    def __init__(self):
        self.process = None
        self.cwd = "/"
        self.count = 0
        self.lock = _thread.allocate_lock()
        self.folder = "/dev/shm/.agentrl"

    def start(self, cwd):
        os.makedirs(self.folder, exist_ok=True)
        self.cwd = cwd
        self.close()
        self.process = Process(["bash", "--login"], cwd, None, True)
        self.buffer = b""
        self.write("shopt -s expand_aliases\n")
        # Wait until the shell has read its startup files (it reads them before its first
        # command): init runs after shell-start answers, so a ~/.bashrc init writes never runs here.
        ready = ("\x1eAGENTRL-READY-%s\x1e" % os.urandom(6).hex()).encode()
        self.write("printf '%s'\n" % ready.decode().replace("\x1e", "\\036"))
        fd = self.process.stdout_fd
        seen = b""
        deadline = time.monotonic() + 30
        while ready not in seen and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.25)[0]:
                data = os.read(fd, 65536)
                if not data:
                    break
                seen += data

    def write(self, text):
        view = memoryview(text.encode())
        while view:
            view = view[os.write(self.process.stdin_fd, view):]

    def close(self):
        # The pipes of a shell that ended or was killed.
        if self.process is not None:
            for fd in (self.process.stdin_fd, self.process.stdout_fd):
                try:
                    os.close(fd)
                except OSError:
                    pass

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
        fd = self.process.stdout_fd
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
                self.close()
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
                self.close()
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

# Python ignores these at its start, and an ignored signal stays ignored through exec: the
# commands get the defaults (as subprocess's restore_signals gave them; SIGXFSZ ends a command
# that passes the file size limit).
for name in ("SIGPIPE", "SIGXFSZ"):
    if hasattr(_signal, name):
        _signal.signal(getattr(_signal, name), _signal.SIG_DFL)
send({"id": 0, "ready": True})
stdin = sys.stdin.buffer
while True:
    line = stdin.readline()
    if not line:
        break
    line = line.strip()
    if line:
        request = _json.loads_(line.decode("utf-8"))
        if "stdinBytes" in request:
            request["stdinData"] = stdin.read(request.pop("stdinBytes"))
        try:
            _thread.start_new_thread(handle, (request,))
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
