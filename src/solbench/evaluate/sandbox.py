"""The candidate's sandbox: how its process is started, limited, talked to and killed.

The trusted worker starts one candidate process per solution (and a new one
after a crash), forked from a zygote that has imported torch, or else from a
fresh interpreter. Where the OS allows, the process runs in new user, PID,
mount and network namespaces, with the solution's staged files bind-mounted
read-only, so every process it starts dies with it and it has no network;
elsewhere rlimits alone apply (docs/SECURITY.md). Commands go to it and replies
come back as JSON lines over two pipes; a reply that does not come in time, or
a process that ends, is reported as :class:`CandidateGone`.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

UNSHARE = ["unshare", "--user", "--map-root-user", "--net", "--pid", "--fork", "--mount-proc", "--kill-child"]
_unshare_ok: bool | None = None


def namespaces_available() -> bool:
    """Whether this machine lets us start a process in new user, PID and network namespaces."""
    global _unshare_ok
    if _unshare_ok is None:
        try:
            r = subprocess.run(UNSHARE + ["true"], capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
            _unshare_ok = r.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _unshare_ok = False
    return _unshare_ok


@dataclass
class SandboxSpec:
    staged: str  # the solution's files (mounted read-only inside the namespaces)
    workdir: str  # the evaluation's directory: the process's cwd, where arenas live
    env: dict[str, str]  # the complete (scrubbed) environment
    device: str
    mode: str = "auto"  # "auto": namespaces where available; "none": rlimits only
    max_file_bytes: int = 4 << 30
    max_address_space_bytes: int = 64 << 30  # CPU only: CUDA reserves more address space than any sane limit

    @property
    def namespaced(self) -> bool:
        return self.mode == "auto" and namespaces_available()


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
    zygote: "Zygote | None" = None
    proc: Any = None
    isolation: str = "rlimits"  # what the running process got: "namespaces" or "rlimits"
    _buf: bytes = b""
    _cmd: Any = None
    _reply_fd: int = -1

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
        self._buf = b""

    def _popen(self, cmd_r: int, reply_w: int) -> subprocess.Popen:
        argv = [sys.executable, "-m", "solbench.evaluate.candidate", str(cmd_r), str(reply_w)]
        if self.spec.namespaced:
            # every process the candidate starts dies with it; no network; its own files mounted read-only
            remount = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'
            argv = UNSHARE + ["sh", "-c", remount, "sh", self.spec.staged] + argv
        with open(self.log_path, "ab") as log:
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    pass_fds=(cmd_r, reply_w), cwd=self.spec.workdir, env=self.spec.env,
                                    start_new_session=True, preexec_fn=self._limits)

    def _limits(self) -> None:
        _apply_limits(self.spec.device, self.spec.max_file_bytes, self.spec.max_address_space_bytes)

    def request(self, msg: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send one command, wait for its one-line reply."""
        if self.proc is None:
            raise CandidateGone("crash", "the candidate's process is not running")
        try:
            self._cmd.write(json.dumps(msg) + "\n")
            self._cmd.flush()
        except (BrokenPipeError, OSError):
            pass  # the process is gone: reported below when its reply never comes
        return self._reply(timeout_s)

    def _reply(self, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buf:
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
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            msg = json.loads(line.decode(errors="replace"))
        except json.JSONDecodeError:
            msg = None
        if not isinstance(msg, dict):
            return {"type": "garbled", "text": line[:200].decode(errors="replace")}
        return msg

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
        return f"the candidate's process ended ({why}); log tail: {self.log_tail(800)}"

    def log_tail(self, n: int) -> str:
        return read_tail(self.log_path, n)

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            self._cmd.write(json.dumps({"op": "exit"}) + "\n")
            self._cmd.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass
        end_process(self.proc, 2, self._cmd.close, lambda: os.close(self._reply_fd))
        self.proc = None


def read_tail(path: Path, n: int) -> str:
    """The last ``n`` characters of a log file ("" when there is none)."""
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


def end_process(proc: Any, grace_s: float, *closers) -> None:
    """Close our ends of its pipes, give it ``grace_s`` to exit, then kill its whole session."""
    for closer in closers:
        try:
            closer()
        except OSError:
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


# ---- the zygote: candidate processes forked from one that has already imported torch ----------------------
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
PR_SET_PDEATHSIG = 1


class Zygote:
    """A process that has imported torch and Triton (no CUDA context yet) and forks candidate processes.

    Importing torch takes seconds (about 4 s on the H200 machine); a fork takes milliseconds. The trusted
    worker starts the zygote before it creates its own CUDA context, and asks it for one candidate process
    per solution. Each one is set up as the ``unshare`` command would: new user, mount, network and PID
    namespaces, the staged solution mounted read-only, a private /proc, the process group killed as one.
    """

    def __init__(self, namespaces: bool):
        import socket

        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:  # the zygote
            parent.close()
            try:
                _zygote_serve(child, namespaces)
            finally:
                os._exit(0)
        child.close()
        self.pid = pid
        self.sock = parent
        # the zygote tries the isolation once: where the kernel refuses a step, candidates run on rlimits alone
        # (and evaluations say so) rather than failing to start
        self.namespaces = self.sock.recv(1) == b"1"

    def spawn(self, spec: SandboxSpec, cmd_r: int, reply_w: int, log_fd: int) -> int:
        """Fork a candidate process with these pipes; returns its process id (also its process group)."""
        import socket

        msg = json.dumps({"staged": spec.staged, "workdir": spec.workdir, "env": spec.env, "device": spec.device,
                          "namespaces": self.namespaces and spec.namespaced, "max_file_bytes": spec.max_file_bytes,
                          "max_address_space_bytes": spec.max_address_space_bytes}).encode()
        socket.send_fds(self.sock, [len(msg).to_bytes(4, "little") + msg], [cmd_r, reply_w, log_fd])
        data = b""
        while not data.endswith(b"\n"):
            chunk = self.sock.recv(64)
            if not chunk:
                raise OSError("the zygote is gone")
            data += chunk
        return int(data)

    def close(self) -> None:
        try:
            self.sock.close()
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (OSError, ChildProcessError):
            pass


def _zygote_serve(sock, namespaces: bool) -> None:
    import socket

    _close_fds_but({sock.fileno()})  # nothing of the trusted worker's (its result pipe above all) stays open
    try:  # the imports a candidate needs, paid once
        import torch  # noqa: F401

        import solbench.evaluate.arena  # noqa: F401
        import solbench.evaluate.candidate  # noqa: F401
        import solbench.evaluate.integrity.dynamic  # noqa: F401
        import solbench.evaluate.integrity.rotation  # noqa: F401
        import solbench.evaluate.timing  # noqa: F401
        if os.environ.get("SOLBENCH_WORKER_DEVICE", "cpu") != "cpu":
            # not on the CPU: there TRITON_INTERPRET must be set before Triton is first imported
            try:
                import triton  # noqa: F401
            except ImportError:
                pass
    except Exception:
        pass
    sock.sendall(b"1" if namespaces and _probe_isolation() else b"0")
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    while True:
        try:
            head, fds, _, _ = socket.recv_fds(sock, 4, 8)
        except OSError:
            return
        if len(head) < 4:
            return
        n = int.from_bytes(head, "little")
        body = b""
        while len(body) < n:
            chunk = sock.recv(n - len(body))
            if not chunk:
                return
            body += chunk
        spec = json.loads(body)
        pid = os.fork()
        if pid == 0:
            sock.close()
            code = 1
            try:
                code = _candidate_child(spec, *fds)
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        sock.sendall(f"{pid}\n".encode())


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


def _libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        import ctypes

        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _enter_namespaces() -> None:
    """In a single-threaded process: new user (this user mapped to root), mount, network and PID namespaces.
    The PID namespace holds the next child this process forks, as its process 1."""
    uid, gid = os.getuid(), os.getgid()
    _check(_libc().unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID), "unshare")
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"0 {uid} 1")
    Path("/proc/self/gid_map").write_text(f"0 {gid} 1")


def _mount_private(staged: str) -> None:
    """In process 1 of the new PID namespace: private mounts, its own /proc, ``staged`` read-only."""
    libc = _libc()
    _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount private")
    _check(libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount /proc")
    path = staged.encode()
    _check(libc.mount(path, path, None, MS_BIND | MS_REC, None), "bind staged")
    # a remount inside a user namespace must keep the flags the outer mount locked
    st = os.statvfs(staged).f_flag
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY
    for st_bit, ms_bit in ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
                           (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME),
                           (getattr(os, "ST_RELATIME", 4096), MS_RELATIME)):
        if st & st_bit:
            flags |= ms_bit
    _check(libc.mount(None, path, None, flags, None), "remount staged read-only")


def _probe_isolation() -> bool:
    """Whether this process can isolate a child the way candidates are isolated (a trial run in a child)."""
    import tempfile

    staged = tempfile.mkdtemp(prefix="solbench-probe-")
    try:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                _enter_namespaces()
                inner = os.fork()
                if inner == 0:
                    try:
                        _mount_private(staged)
                        os._exit(0 if not os.access(staged, os.W_OK) or _read_only(staged) else 1)
                    except BaseException:
                        os._exit(1)
                _, status = os.waitpid(inner, 0)
                code = os.waitstatus_to_exitcode(status)
            except BaseException:
                code = 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status) == 0
    finally:
        import shutil

        shutil.rmtree(staged, ignore_errors=True)


def _read_only(path: str) -> bool:
    try:
        with open(os.path.join(path, "probe"), "w"):
            return False
    except OSError:
        return True


def _candidate_child(spec: dict[str, Any], cmd_r: int, reply_w: int, log_fd: int) -> int:
    """In the zygote's fresh child: isolate, then become the candidate's process. Returns an exit code."""
    os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    _close_fds_but({cmd_r, reply_w})
    if spec["namespaces"]:
        _enter_namespaces()
    pid = os.fork()  # with namespaces, the child is process 1 of the new PID namespace
    if pid:
        for fd in (cmd_r, reply_w):
            os.close(fd)
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status) & 0xFF
    _check(_libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl")  # dies with its parent
    if spec["namespaces"]:
        _mount_private(spec["staged"])
    _apply_limits(spec["device"], int(spec["max_file_bytes"]), int(spec["max_address_space_bytes"]))
    os.chdir(spec["workdir"])
    os.environ.clear()
    os.environ.update(spec["env"])
    import tempfile

    tempfile.tempdir = None  # the zygote's cached choice would outlive the new TMPDIR
    from solbench.evaluate import candidate

    sys.argv = ["solbench.evaluate.candidate", str(cmd_r), str(reply_w)]
    code = 3
    try:
        code = candidate.main(cmd_r, reply_w)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0
    except BaseException:
        import traceback

        traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    return code
