"""The candidate's sandbox: how its process is started, limited, talked to and killed.

The trusted worker starts one candidate process per solution (and a new one after a crash), forked from the
zygote (``zygote``), or else from a fresh interpreter (``python -m solbench.evaluate.isolation.sandbox``). Either way the
process sets itself up in ``_candidate_child``: where the OS allows, new user, PID, mount and network namespaces
and a sealed filesystem with no capabilities (``namespaces``), so every process it starts dies with it, it has no
network and it writes nowhere but its own directory; elsewhere rlimits alone apply (docs/SECURITY.md). Commands
go to it and replies come back as JSON lines over two pipes; a reply that does not come in time, or a process that
ends, is reported as :class:`CandidateGone`.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from solbench.evaluate.isolation.namespaces import namespaces_available

#: the longest reply line the trusted side reads; a longer one is not a reply (``garbled``)
MAX_REPLY_BYTES = 8 << 20
#: what a runtime prints when the system-call filter refuses it a thread (docs/SECURITY.md), and what we add
SEALED_MARKS = ("Thread creation failed: Operation not permitted", "can't start new thread")
SEALED_HINT = (" after a thread it asked for was refused: on the CPU, and for compiled languages, a candidate runs on "
               "the threads the harness gave it and starts none of its own")


@dataclass
class SandboxSpec:
    staged: str  # the solution's files (mounted read-only inside the namespaces)
    workdir: str  # the evaluation's private directory: the process's cwd, its TMPDIR and HOME, where arenas live
    env: dict[str, str]  # the complete (scrubbed) environment
    device: str
    hidden: list[str] = field(default_factory=list)  # paths made empty inside the namespaces (namespaces.View)
    readable: list[str] = field(default_factory=list)  # paths under a hidden one it must still read
    writable: list[str] = field(default_factory=list)  # mount points left writable (namespaces.View)
    mode: str = "auto"  # "auto": namespaces where available; "none": rlimits only
    max_file_bytes: int = 4 << 30
    max_address_space_bytes: int = 64 << 30  # CPU only: CUDA reserves more address space than any sane limit

    @property
    def namespaced(self) -> bool:
        return self.mode == "auto" and namespaces_available()

    def view(self) -> dict[str, Any]:
        from solbench.evaluate.isolation.namespaces import View

        return View(private=self.workdir, staged=self.staged, hidden=self.hidden, readable=self.readable,
                    writable=self.writable).to_dict()

    def to_dict(self) -> dict[str, Any]:
        return {"view": self.view(), "workdir": self.workdir, "env": self.env, "device": self.device,
                "max_file_bytes": self.max_file_bytes, "max_address_space_bytes": self.max_address_space_bytes}


class CandidateGone(Exception):
    """The candidate's process did not answer: ``why`` is "timeout" or "crash"."""

    def __init__(self, why: str, detail: str):
        super().__init__(f"{why}: {detail}")
        self.why = why
        self.detail = detail


@dataclass
class _Forked:
    """A candidate process forked by the zygote: enough of Popen's interface for CandidateProcess."""

    pid: int
    returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                state = "gone"
            if state in ("Z", "X", "gone"):
                self.returncode = -1
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        deadline = time.monotonic() + (timeout if timeout is not None else 1e9)
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("candidate", timeout)
            time.sleep(0.01)
        return self.returncode

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@dataclass
class CandidateProcess:
    spec: SandboxSpec
    log_path: Path
    zygote: Any = None  # a zygote.Zygote, or None: a fresh interpreter
    proc: Any = None
    isolation: str = "rlimits"  # what the running process got: "namespaces" or "rlimits"
    _buf: bytearray = field(default_factory=bytearray)
    _cmd: Any = None
    _reply_fd: int = -1
    _stray: bool = False  # a line came between the last two commands (``send``)

    def start(self) -> None:
        cmd_r, cmd_w = os.pipe()
        reply_r, reply_w = os.pipe()
        self.proc = None
        if self.zygote is not None:
            log = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                self.proc = _Forked(self.zygote.spawn(self.spec, cmd_r, reply_w, log))
                self.isolation = "namespaces" if self.spec.namespaced and self.zygote.namespaces else "rlimits"
            except OSError:
                self.zygote = None  # the zygote is gone: a fresh interpreter from here on (slower, as safe)
            finally:
                os.close(log)
        if self.proc is None:
            self.proc = self._popen(cmd_r, reply_w)
            self.isolation = "namespaces" if self.spec.namespaced else "rlimits"
        os.close(cmd_r)
        os.close(reply_w)
        self._cmd = os.fdopen(cmd_w, "w", buffering=1)
        self._reply_fd = reply_r
        self._buf = bytearray()

    def _popen(self, cmd_r: int, reply_w: int) -> subprocess.Popen:
        """A fresh interpreter that sets itself up as a zygote's child does (``python -m
        solbench.evaluate.isolation.sandbox``), then imports torch inside its sandbox."""
        spec = dict(self.spec.to_dict(), namespaces=self.spec.namespaced, parent=os.getpid())
        argv = [sys.executable, "-m", "solbench.evaluate.isolation.sandbox", json.dumps(spec), str(cmd_r), str(reply_w)]
        with open(self.log_path, "ab") as log:
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    pass_fds=(cmd_r, reply_w), cwd=self.spec.workdir, env=self.spec.env)

    def request(self, msg: dict[str, Any], timeout_s: float) -> tuple[dict[str, Any], bool]:
        """Send one command, wait for its one-line reply: (the reply, whether it came alone)."""
        self.send(msg)
        return self.receive(timeout_s)

    def send(self, msg: dict[str, Any]) -> None:
        """The first half of ``request``: one command sent (its reply read by ``receive``)."""
        if self.proc is None:
            raise CandidateGone("crash", "the candidate's process is not running")
        self._drain()  # anything written between exchanges is a line no command asked for
        self._stray = bool(self._buf)
        self._buf.clear()
        self.send_line(json.dumps(msg))

    def receive(self, timeout_s: float) -> tuple[dict[str, Any], bool]:
        """The second half of ``request``: the command's one-line reply, and whether it came alone."""
        stray = self._stray
        line = self.read_line(timeout_s)
        self._drain()
        try:
            reply = json.loads(line.decode(errors="replace")) if line is not None else None
        except json.JSONDecodeError:
            reply = None
        if not isinstance(reply, dict):
            text = "a reply longer than the limit" if line is None else line[:200].decode(errors="replace")
            reply = {"type": "garbled", "text": text}
        return reply, not (stray or self._buf)

    def send_line(self, text: str) -> None:
        """One command line (a process that is gone shows when its reply never comes)."""
        try:
            self._cmd.write(text + "\n")
            self._cmd.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def _drain(self) -> None:
        """Read what is already waiting on the reply pipe, without blocking (at most the reply limit)."""
        while len(self._buf) <= MAX_REPLY_BYTES:
            ready, _, _ = select.select([self._reply_fd], [], [], 0)
            if not ready:
                return
            chunk = os.read(self._reply_fd, 1 << 20)
            if not chunk:
                return
            self._buf += chunk

    def read_line(self, timeout_s: float) -> bytes | None:
        """The next reply line without its newline; None for a line over ``MAX_REPLY_BYTES`` (the rest of the
        pipe is then out of step, and the caller treats the reply as forged)."""
        deadline = time.monotonic() + timeout_s
        searched = 0
        while True:
            end = self._buf.find(b"\n", searched)
            if end >= 0:
                line = bytes(self._buf[:end])
                del self._buf[:end + 1]
                return line
            searched = len(self._buf)
            if searched > MAX_REPLY_BYTES:
                self._buf.clear()
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CandidateGone("timeout", f"no answer within {timeout_s:.0f} s")
            ready, _, _ = select.select([self._reply_fd], [], [], min(remaining, 0.5))
            if ready:
                chunk = os.read(self._reply_fd, 1 << 20)
                if not chunk:
                    raise CandidateGone("crash", self._ended())
                self._buf += chunk
            elif self.proc.poll() is not None:
                raise CandidateGone("crash", self._ended())

    def _ended(self) -> str:
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        code = self.proc.returncode
        if isinstance(self.proc, _Forked):
            why = "not a child of this process: exit status unknown"
        else:
            why = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        tail = self.log_tail(800)
        hint = SEALED_HINT if any(m in tail for m in SEALED_MARKS) else ""
        return f"the candidate's process ended ({why}){hint}; log tail: {tail}"

    def log_tail(self, n: int) -> str:
        return read_tail(self.log_path, n)

    def stop(self, grace_s: float = 2.0) -> None:
        """Ask the process to exit, give it ``grace_s``, then kill its session (0: a process that hangs, or
        that broke the protocol, is killed at once: it would only spend the grace)."""
        if self.proc is None:
            return
        if grace_s > 0:
            try:
                self._cmd.write(json.dumps({"op": "exit"}) + "\n")
                self._cmd.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass
        end_process(self.proc, grace_s, self._cmd.close, lambda: os.close(self._reply_fd))
        self.proc = None


def read_tail(path: Path, n: int) -> str:
    """The last ``n`` characters of a log file ("" when there is none)."""
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


def end_process(proc: Any, grace_s: float, *closers) -> None:
    """Close our ends of its pipes, give it ``grace_s`` to exit, then kill its whole session. A closer that fails
    is passed over: a signal handler that ends the process may have interrupted a write to the same pipe
    (``RuntimeError``: a re-entrant call of the buffered file), and the kill ends it anyway."""
    for closer in closers:
        try:
            closer()
        except (OSError, RuntimeError, ValueError):
            pass
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    kill_session(proc)


def kill_session(proc: Any) -> None:
    """Kill a process started with its own session, and anything it left in that session."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _apply_limits(device: str, max_file_bytes: int, max_address_space_bytes: int) -> None:
    """No core files, bounded file sizes, and on the CPU bounded memory (a GPU context needs a large address
    space)."""
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))
    if device == "cpu":
        resource.setrlimit(resource.RLIMIT_AS, (max_address_space_bytes, max_address_space_bytes))


def _close_fds_but(keep: set[int]) -> None:
    """Close every descriptor above stderr except ``keep``."""
    for fd in range(3, _max_fd()):
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _max_fd() -> int:
    try:
        return max(int(x) for x in os.listdir("/proc/self/fd")) + 1
    except (OSError, ValueError):
        return 1024


def _candidate_child(spec: dict[str, Any], cmd_r: int, reply_w: int, log_fd: int) -> int:
    """In the zygote's fresh child (or a fresh interpreter): isolate, then become the candidate's process.
    Returns an exit code."""
    from solbench.evaluate.isolation import namespaces

    os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    namespaces.die_with_parent(spec.get("parent"))  # set for a fresh interpreter: its starter may have ended
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    if log_fd >= 0:
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
    _close_fds_but({cmd_r, reply_w})
    if spec["namespaces"]:
        namespaces.enter_namespaces()
    pid = os.fork()  # with namespaces, the child is process 1 of the new PID namespace
    if pid:
        for fd in (cmd_r, reply_w):
            os.close(fd)
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status) & 0xFF
    namespaces.die_with_parent()
    if spec["namespaces"]:
        namespaces.isolate(namespaces.View.from_dict(spec["view"]))
    _apply_limits(spec["device"], int(spec["max_file_bytes"]), int(spec["max_address_space_bytes"]))
    os.chdir(spec["workdir"])
    os.environ.clear()
    os.environ.update(spec["env"])
    sys.dont_write_bytecode = True  # the worker caches its bytecode; a candidate forked from it writes none
    import tempfile

    tempfile.tempdir = None  # the zygote's cached choice would outlive the new TMPDIR
    from solbench.evaluate.candidate import process

    sys.argv = ["solbench-candidate"]  # nothing of the harness's plumbing (its descriptors) in plain sight
    code = 3
    try:
        code = process.main(cmd_r, reply_w)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    except BaseException:
        import traceback

        traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    return code


if __name__ == "__main__":  # a candidate from a fresh interpreter (no zygote): python -m solbench.evaluate.isolation.sandbox
    _spec, _cmd, _reply = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    os._exit(_candidate_child(_spec, _cmd, _reply, -1))
