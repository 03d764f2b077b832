"""The external agent's sandbox: the same kind a candidate runs in (``solbench.evaluate.isolation.namespaces``).

``start`` runs ``python -m solbench.agents.jail`` (the *launcher*) in a session of its own. The launcher enters new
user, mount, network and PID namespaces, brings up the loopback interface of its network namespace and forks
*process 1* of the PID namespace, which

1. seals the filesystem (``namespaces.seal_filesystem``): every mount read-only; an empty tmpfs over every
   top-level directory but the system's own (``SYSTEM``), over the temporary directories, the user's home, and
   over solbench's state that the caller names (the results database, solbench's caches, the run's secret); the
   attempt's *box* (workspace, HOME, TMPDIR) mounted back writable, its *run* directory (the sockets to the
   grader and the model proxy) read-only, and the Python installation read-only (``./submit`` runs in it);
2. puts a private writable tmpfs over ``/tmp`` and ``/dev/shm``, for tools that write there whatever TMPDIR says,
   and an empty file over every hidden file inside a directory shown read-only (a daemon's socket);
3. listens on ``127.0.0.1:PORT`` of its own network namespace and relays every connection to the model proxy's
   Unix socket in the run directory (the network namespace has no other interface: nothing else is reachable);
4. makes itself undumpable, drops every capability, then forks the agent, which starts a session of its own,
   takes a candidate's rlimits on core dumps and file size (``_limit``) and executes the agent's command with the
   environment it is given;
5. reaps whatever ends, and when the agent ends, reports its exit status and exits: the kernel then kills every
   process left in the PID namespace, the agent's daemonised (``setsid``) children included.

Both the launcher and process 1 die with their parent (``PR_SET_PDEATHSIG``), so a killed solbench process takes
the agent's whole tree with it. The launcher reports on a status pipe: ``ready``, ``error <why>`` or
``exit <code>`` (negative: the agent was killed by that signal).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from solbench.evaluate.isolation import namespaces

#: the model proxy's port on the agent's own loopback interface
PORT = 4141
#: top-level directories the agent sees (read-only); every other one is hidden
SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "opt", "nix", "snap", "dev", "proc", "sys")
#: where a daemon's socket may lie in sight of the agent
SOCKET_DIRS = ("/dev", "/etc", "/opt")
PR_SET_DUMPABLE = 4
_TMPFS = b"size=256m,mode=1777"
#: the largest file the agent may write (RLIMIT_FSIZE, as a candidate's); ``max_file_bytes`` in the spec overrides
MAX_FILE_BYTES = 4 << 30


class SandboxError(RuntimeError):
    """The sandbox could not be set up (one line)."""


def _under(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return path == root or root == "/" or path.startswith(root + "/")


def sockets(roots: list[str]) -> list[str]:
    """Every Unix socket file under ``roots`` (links not followed): each is a way out of a network namespace."""
    found, stack = [], list(roots)
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for e in entries:
                try:
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                    elif not e.is_file(follow_symlinks=False) and not e.is_symlink() and stat.S_ISSOCK(
                            e.stat(follow_symlinks=False).st_mode):
                        found.append(e.path)
                except OSError:
                    continue
    return found


def view_paths(private: list[str], read: list[str] = ()) -> tuple[list[str], list[str]]:
    """What the agent cannot see (``hidden``) and what it reads under a hidden directory (``readable``).
    ``private``: solbench's state (the database and its side files, the caches, the secret's directory);
    ``read``: directories the user asks to show (an agent CLI installed in a home directory). A ``read`` path
    that holds a private one, a temporary directory or the home directory is refused (``ValueError``). The Unix
    sockets under ``SOCKET_DIRS`` and the ``read`` directories are hidden: connecting to one needs no network
    (the software trees, /usr and the Python installation, are not searched: they hold none)."""
    tops = [f"/{n}" for n in os.listdir("/") if n not in SYSTEM]
    home = os.path.expanduser("~")
    temps = {tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"}
    system = [f"/{n}" for n in SYSTEM]
    # a home or temporary directory at / or above a system directory (HOME=/, say) cannot be hidden whole
    kept = {p for p in (*temps, home) if not any(_under(d, os.path.realpath(p)) for d in system)}
    hidden = {p for p in tops if os.path.isdir(p) and not os.path.islink(p)} | kept | set(private)
    must = [os.path.realpath(p) for p in (*private, *kept)]
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    python = prefixes | {os.path.dirname(os.path.realpath(sys.executable))}
    readable = {p for p in python if not any(_under(m, p) for m in must)}
    for p in read:
        real = os.path.realpath(p)
        clash = [m for m in must if _under(m, real)]
        if clash:
            raise ValueError(f"{p} cannot be shown to the agent: it holds {clash[0]}, which solbench hides")
        readable.add(real)
    shown = [d for d in SOCKET_DIRS if os.path.isdir(d)] + [os.path.realpath(p) for p in read]
    hidden.update(sockets(shown))
    return sorted(os.path.realpath(p) for p in hidden), sorted(readable)


def start(spec: dict, stdout, stderr) -> tuple[subprocess.Popen, int]:
    """Start the launcher for ``spec`` (box, run, workspace, argv, env, hidden, readable, api: the proxy socket's
    name in the run directory or None); returns the process and the read end of its status pipe."""
    spec_r, spec_w = os.pipe()
    status_r, status_w = os.pipe()
    env = {"PATH": os.environ.get("PATH", os.defpath), "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
           "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        proc = subprocess.Popen([sys.executable, "-m", "solbench.agents.jail", str(spec_r), str(status_w)],
                                stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, pass_fds=(spec_r, status_w),
                                env=env, cwd="/", start_new_session=True)
    finally:
        os.close(spec_r)
        os.close(status_w)
    with contextlib.suppress(BrokenPipeError), open(spec_w, "w") as f:
        f.write(json.dumps({**spec, "parent": os.getpid()}))
    return proc, status_r


def read_status(fd: int, timeout_s: float | None) -> str | None:
    """The next line of the status pipe (``None`` at its end or after ``timeout_s``)."""
    buf = b""
    while not buf.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], timeout_s)
        if not ready:
            return None
        chunk = os.read(fd, 1)
        if not chunk:
            return buf.decode(errors="replace").strip() or None
        buf += chunk
    return buf.decode(errors="replace").strip()


def relay(listener: socket.socket, target: str) -> None:
    """Accept TCP connections on ``listener`` and pipe each to the Unix socket ``target``, until it is closed."""
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_pair, args=(conn, target), daemon=True).start()


def _pair(conn: socket.socket, target: str) -> None:
    up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        up.connect(target)
    except OSError:
        conn.close()
        up.close()
        return
    back = threading.Thread(target=_copy, args=(up, conn), daemon=True)
    back.start()
    _copy(conn, up)
    back.join()
    conn.close()
    up.close()


def _copy(src: socket.socket, dst: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := src.recv(1 << 16):
            dst.sendall(data)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


# ---- inside: the launcher and process 1 -----------------------------------------------------------------------


def _loopback_up() -> None:
    import fcntl
    import struct

    siocgifflags, siocsifflags, iff_up, iff_running = 0x8913, 0x8914, 0x1, 0x40
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        got = fcntl.ioctl(s, siocgifflags, struct.pack("16sH22x", b"lo", 0))
        flags = struct.unpack("16sH22x", got)[1]
        fcntl.ioctl(s, siocsifflags, struct.pack("16sH22x", b"lo", flags | iff_up | iff_running))


def _fresh_tmp(keep: list[tuple[str, str]]) -> None:
    """A private writable tmpfs over /tmp and /dev/shm; ``keep`` (path, "rw"|"ro") mounted back where below."""
    handles = [(path, mode, os.open(path, os.O_PATH)) for path, mode in keep]
    points = [p for p in ("/tmp", "/dev/shm") if os.path.isdir(p)]
    for point in points:
        namespaces._mount(b"tmpfs", point, b"tmpfs", namespaces.MS_NOSUID | namespaces.MS_NODEV, _TMPFS, "tmpfs")
    for path, mode, fd in handles:
        if any(_under(path, p) for p in points):
            os.makedirs(path, exist_ok=True)
            namespaces._mount(f"/proc/self/fd/{fd}".encode(), path, None, namespaces.MS_BIND | namespaces.MS_REC,
                             None, "mount back")
            if mode == "ro":
                namespaces._read_only(path)
        os.close(fd)


def _cover(files: list[str], box: str) -> None:
    """An empty read-only file over each of ``files``: the hidden files inside a directory that was shown."""
    if not files:
        return
    empty = os.path.join(box, f".solbench-empty-{os.getpid()}")
    open(empty, "w").close()
    for f in files:
        namespaces._mount(empty.encode(), f, None, namespaces.MS_BIND, None, "hide")
        namespaces._read_only(f)
    os.unlink(empty)


def _launcher(spec_fd: int, status_fd: int) -> int:
    with open(spec_fd) as f:
        spec = json.load(f)
    status = open(status_fd, "w", buffering=1)  # noqa: SIM115 (inherited by process 1, which reports on it)
    try:
        namespaces.die_with_parent()
        if os.getppid() != spec["parent"]:  # the parent died before the line above: nothing to run for
            return 1
        namespaces.enter_namespaces()
        _loopback_up()
    except OSError as e:
        status.write(f"error the agent's namespaces: {e}\n")
        return 1
    init = os.fork()
    if init == 0:
        code = 1
        try:
            code = _init(spec, status)
        finally:
            os._exit(code)
    signal.signal(signal.SIGTERM, lambda *_: _signal(init, signal.SIGTERM))
    os.waitpid(init, 0)
    return 0


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, sig)


def _init(spec: dict, status) -> int:
    """Process 1 of the agent's PID namespace."""
    try:
        namespaces.die_with_parent()
        view = namespaces.View(private=spec["box"], staged=spec["run"], hidden=spec["hidden"],
                              readable=spec["readable"])
        namespaces.seal_filesystem(view)
        _fresh_tmp([(os.path.realpath(spec["box"]), "rw"), (os.path.realpath(spec["run"]), "ro")]
                   + [(p, "ro") for p in spec["readable"] if os.path.exists(p)])
        _cover([h for h in spec["hidden"] if os.path.lexists(h) and not os.path.isdir(h)
                and any(_under(h, r) for r in spec["readable"])], spec["box"])
        listener = socket.create_server(("127.0.0.1", spec["port"])) if spec.get("api") else None
        namespaces._check(namespaces._libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")
        namespaces.drop_capabilities()
        run_fd = os.open(spec["run"], os.O_PATH)
    except OSError as e:
        status.write(f"error the agent's sandbox: {e}\n")
        return 1
    status.write("ready\n")
    agent = os.fork()
    if agent == 0:
        _exec(spec, keep=(0, 1, 2))
    if listener is not None:
        target = f"/proc/self/fd/{run_fd}/{spec['api']}"
        threading.Thread(target=relay, args=(listener, target), daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: _signal(-agent, signal.SIGTERM))
    while True:
        try:
            pid, st = os.waitpid(-1, 0)
        except ChildProcessError:
            return 0
        if pid == agent:
            status.write(f"exit {os.waitstatus_to_exitcode(st)}\n")
            return 0


def _exec(spec: dict, keep: tuple[int, ...]) -> None:
    """In the agent's process: a session of its own, no inherited descriptor but stdio, default signals, exec."""
    try:
        os.setsid()
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        for fd in [int(x) for x in os.listdir("/proc/self/fd")]:
            if fd not in keep:
                with contextlib.suppress(OSError):
                    os.close(fd)
        _limit(int(spec.get("max_file_bytes") or MAX_FILE_BYTES))
        os.chdir(spec["workspace"])
        os.execvpe(spec["argv"][0], spec["argv"], spec["env"])
    except BaseException as e:  # noqa: BLE001 (reported on the agent's stderr, which the log keeps)
        with contextlib.suppress(OSError):
            os.write(2, f"solbench: cannot start the agent: {e}\n".encode())
    os._exit(127)


def _limit(max_file_bytes: int) -> None:
    """The rlimits a candidate gets that do not break an agent's runtime: no core dumps (its memory holds its
    model key), no file larger than ``max_file_bytes``. Its memory is not limited: a runtime like Node reserves far
    more address space than it uses, so RLIMIT_AS would stop it (the tmpfs over /tmp is bounded, 256 MB)."""
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))


if __name__ == "__main__":
    sys.exit(_launcher(int(sys.argv[1]), int(sys.argv[2])))
