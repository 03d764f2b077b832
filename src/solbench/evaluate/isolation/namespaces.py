"""What a candidate's process can see and touch: namespaces, a sealed filesystem, no capabilities, rlimits.

A candidate's process is set up in three steps, each in a single-threaded process (see ``sandbox``):

1. ``enter_namespaces``: new user (this user mapped to root), mount, network and PID namespaces;
2. ``seal_filesystem``, in process 1 of the new PID namespace: its own ``/proc`` (the host's knobs in it,
   ``/proc/sys`` above all, read-only); every mount read-only;
   an empty read-only tmpfs over each hidden directory (the temporary directories, which hold other
   evaluations' files and the trusted worker's; the solution cache) and an empty file over each hidden file
   (the results database); the solution's staged files mounted back read-only, its private directory mounted
   back writable and, where they lie under a hidden directory, the paths it must read (Python packages);
3. ``drop_capabilities``: the process keeps no capability in its user namespace, so it cannot remount
   anything writable or unmount what hides a path. A user namespace it makes itself sees every mount locked
   as it is (the kernel locks mounts copied into a less privileged namespace).

The private directory is then the only writable place but device nodes, the entries of its own processes in
``/proc`` (CUDA writes there) and, on the GPU, ``/dev/shm`` (``View.writable``: CUDA's IPC, through which the
candidate opens its arenas, keeps its files there; measured on the H200 machine, the import of an IPC handle
fails when /dev/shm is hidden or read-only).
``probe`` runs the same steps in a throwaway child once per zygote; where the kernel refuses one, the
evaluation says so (``environment.sandbox = "rlimits"``) and the candidate runs on rlimits alone.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 1, 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
_LOCKABLE = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
             (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME),
             (getattr(os, "ST_RELATIME", 4096), MS_RELATIME))


@dataclass
class View:
    """The filesystem a candidate sees."""

    private: str  # the only writable directory (the candidate's TMPDIR and HOME)
    staged: str  # the solution's files, read-only
    hidden: list[str] = field(default_factory=list)  # directories or files made empty
    readable: list[str] = field(default_factory=list)  # paths under a hidden directory it still reads
    #: mount points left as they are (writable): /dev/shm on the GPU, where CUDA's IPC keeps its files
    writable: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"private": self.private, "staged": self.staged, "hidden": list(self.hidden),
                "readable": list(self.readable), "writable": list(self.writable)}

    @classmethod
    def from_dict(cls, d: dict) -> "View":
        return cls(private=d["private"], staged=d["staged"], hidden=list(d.get("hidden") or []),
                   readable=list(d.get("readable") or []), writable=list(d.get("writable") or []))


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: bytes | None, target: str, fstype: bytes | None, flags: int, data: bytes | None, what: str):
    _check(_libc().mount(source, target.encode(), fstype, flags, data), f"{what} {target}")


def enter_namespaces() -> None:
    """New user (this user mapped to root), mount, network and PID namespaces. The PID namespace holds the next
    child this process forks, as its process 1."""
    uid, gid = os.getuid(), os.getgid()
    _check(_libc().unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID), "unshare")
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"0 {uid} 1")
    Path("/proc/self/gid_map").write_text(f"0 {gid} 1")


#: a process started by solbench finds its starter's process id here (``die_with_parent``)
PARENT_ENV = "SOLBENCH_PARENT"


def die_with_parent(parent: int | None = None) -> None:
    """Be killed (SIGKILL) when the thread that started this process ends. ``parent``: the process id that
    started this one, where it is set after an exec (started without a ``preexec_fn``, which runs Python in a
    forked copy of a threaded process and takes the interpreter's at-fork locks in the parent: 14 threads
    starting workers while another imported deadlocked a run): a parent that ended before the call sends no
    signal, so this process ends at once."""
    import signal

    _check(_libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def parent_from_env() -> int | None:
    """The starter's process id that ``PARENT_ENV`` gives, if any."""
    value = os.environ.get(PARENT_ENV, "")
    return int(value) if value.isdigit() else None


def _locked_flags(path: str) -> int:
    """The flags a remount inside a user namespace must keep (the outer mount locked them)."""
    st = os.statvfs(path).f_flag
    flags = 0
    for st_bit, ms_bit in _LOCKABLE:
        if st & st_bit:
            flags |= ms_bit
    return flags


#: the parts of /proc that are the host's and writable to root, kept read-only (CUDA writes to the process's own
#: entries, so /proc itself stays writable; as mapped root this process would pass /proc/sys's permission checks)
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sysvipc",
                  "/proc/pressure", "/proc/acpi", "/proc/driver", "/proc/tty")


def mount_proc() -> None:
    """This PID namespace's own /proc, with the host's knobs in it read-only."""
    _mount(b"proc", "/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None, "mount")
    for path in PROC_READ_ONLY:
        if os.path.exists(path):
            _mount(path.encode(), path, None, MS_BIND | MS_REC, None, "bind")
            _read_only(path)


def _unescape(field_: str) -> str:
    # /proc/self/mountinfo escapes space, tab, newline and backslash as octal
    out, i = [], 0
    while i < len(field_):
        if field_[i] == "\\" and i + 3 < len(field_) and field_[i + 1:i + 4].isdigit():
            out.append(chr(int(field_[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field_[i])
            i += 1
    return "".join(out)


def mount_points() -> list[str]:
    """Every mount point of this mount namespace, parents before children."""
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        parts = line.split()
        if len(parts) > 4:
            points.append(_unescape(parts[4]))
    return sorted(set(points), key=lambda p: (p.count("/"), p))


def _under(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root + "/") or root == "/"


def _read_only(point: str) -> None:
    _mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _locked_flags(point), None, "remount read-only")


def seal_filesystem(view: View) -> None:
    """In process 1 of a new PID namespace (after ``enter_namespaces``): see the module's docstring."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE, None, "make private")
    mount_proc()
    hidden = [os.path.realpath(p) for p in view.hidden if os.path.lexists(p)]
    hidden_dirs = sorted({p for p in hidden if os.path.isdir(p)}, key=len)
    # a hidden directory inside another is already hidden by the outer one
    hidden_dirs = [d for i, d in enumerate(hidden_dirs) if not any(_under(d, o) for o in hidden_dirs[:i])]
    hidden_files = [p for p in hidden if not os.path.isdir(p) and not any(_under(p, d) for d in hidden_dirs)]
    keep = [(os.path.realpath(view.staged), "ro"), (os.path.realpath(view.private), "rw")]
    keep += [(os.path.realpath(p), "ro") for p in view.readable if os.path.exists(p)]
    # what stays visible is opened before anything hides it, and mounted back from these descriptors
    handles = [(path, mode, os.open(path, os.O_PATH)) for path, mode in keep]
    keep_writable = {os.path.realpath(p) for p in view.writable}
    for point in mount_points():
        if _under(point, "/proc") and point != "/":
            continue  # this namespace's own /proc, mounted above: it shows only its own processes
        if point in keep_writable:
            continue
        try:
            _read_only(point)
        except OSError:
            if os.path.exists(point) and os.access(point, os.W_OK):
                raise  # a writable mount left writable would break the guarantee
    for d in hidden_dirs:
        _mount(b"tmpfs", d, b"tmpfs", MS_NOSUID | MS_NODEV, b"size=64k,mode=755", "hide")
    for path, mode, fd in handles:
        if any(_under(path, d) for d in hidden_dirs):
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.makedirs(path, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                open(path, "a").close()
        _mount(f"/proc/self/fd/{fd}".encode(), path, None, MS_BIND | MS_REC, None, "mount back")
        flags = MS_REMOUNT | MS_BIND | _locked_flags(path)
        _mount(None, path, None, flags | (MS_RDONLY if mode == "ro" else 0), None, f"mount back {mode}")
        os.close(fd)
    if hidden_files:
        # an empty file of the private directory, mounted read-only over each hidden file, then unlinked
        empty = os.path.join(os.path.realpath(view.private), f".solbench-empty-{os.getpid()}")
        open(empty, "w").close()
        for f in hidden_files:
            _mount(empty.encode(), f, None, MS_BIND, None, "hide")
            _mount(None, f, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _locked_flags(f), None, "hide read-only")
        os.unlink(empty)
    for d in hidden_dirs:
        _read_only(d)


def drop_capabilities() -> None:
    """Keep no capability: none effective, permitted, inheritable or ambient, an empty bounding set, and no way
    to gain one through exec (no_new_privs)."""
    libc = _libc()
    try:
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        last = 40
    for cap in range(last + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    header = Header(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3: two data structs
    data = (Data * 2)()
    _check(libc.capset(ctypes.byref(header), data), "capset")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")


def capabilities_left() -> int:
    """This process's effective capability mask (0 once ``drop_capabilities`` ran)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return -1


def isolate(view: View) -> None:
    """Steps 2 and 3, in process 1 of the new PID namespace."""
    seal_filesystem(view)
    drop_capabilities()


def probe() -> bool:
    """Whether this process can isolate a child the way candidates are isolated (a trial run in a child): the
    staged directory read-only, the private one writable, a hidden directory empty and read-only."""
    import shutil
    import tempfile

    root = tempfile.mkdtemp(prefix="solbench-probe-")
    try:
        staged, private, other = (os.path.join(root, n) for n in ("solution", "tmp", "other"))
        for d in (staged, private, other):
            os.mkdir(d)
        Path(other, "secret").write_text("x")
        view = View(private=private, staged=staged, hidden=[root])
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                enter_namespaces()
                inner = os.fork()
                if inner == 0:
                    ok = False
                    try:
                        isolate(view)
                        ok = (_writable(private) and not _writable(staged) and not _writable(root)
                              and not _opens_for_write("/proc/sys/kernel/hostname")
                              and not _opens_for_write("/proc/sysrq-trigger")
                              and not os.path.exists(os.path.join(other, "secret")) and capabilities_left() == 0)
                    except BaseException:
                        ok = False
                    os._exit(0 if ok else 1)
                _, status = os.waitpid(inner, 0)
                code = os.waitstatus_to_exitcode(status)
            except BaseException:
                code = 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status) == 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _opens_for_write(path: str) -> bool:
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
    except OSError:
        return False
    return True


def _writable(directory: str) -> bool:
    path = os.path.join(directory, ".solbench-probe")
    try:
        with open(path, "w"):
            pass
    except OSError:
        return False
    os.unlink(path)
    return True


_isolation_ok: bool | None = None


def namespaces_available() -> bool:
    """Whether this machine lets us isolate a candidate as ``namespaces`` does (new user, PID, mount and network
    namespaces, a sealed filesystem, no capabilities): a trial run in a fresh interpreter, once per process."""
    global _isolation_ok
    if _isolation_ok is None:
        try:
            r = subprocess.run([sys.executable, "-c", "import sys; from solbench.evaluate.isolation.namespaces import probe; "
                                "sys.exit(0 if probe() else 1)"], capture_output=True, timeout=30,
                               stdin=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=_package_parent()))
            _isolation_ok = r.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _isolation_ok = False
    return _isolation_ok


def _package_parent() -> str:
    return str(Path(__file__).resolve().parents[3])
