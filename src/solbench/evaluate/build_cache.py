"""Compiled solutions' build artefacts, kept between evaluations (C++/CUDA torch extensions).

An artefact is a directory ``<root>/<key>``: the built library, ``meta.json`` (the compile time in seconds,
apart from any run time) and the build's other files, objects excepted. The key (``key``) is a sha256 of what
the binary depends on: the sources (path and content), the flags, the toolchain's ``--version`` output, torch's
version, the language's package versions and the target architecture; any change is a new key, never a stale hit.
``publish`` copies into a temporary directory beside the cache and renames it into place (the first of two
stays); a per-key ``fcntl.flock`` (``locked``) makes processes that need one key at once build it once. All of
it may be deleted at any time: a missing artefact is rebuilt.

Only the trusted side touches the shared cache (the sandbox hides it). ``Carry`` copies the artefact of the key
*it* computed into the candidate's private directory and publishes what the candidate built there under that
key; every copy opens each directory and file relative to its parent with O_NOFOLLOW, so a candidate that
swaps a directory for a link cannot make the trusted side copy anything from outside its own directory.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import stat
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

META = "meta.json"
MAX_BYTES = 512 << 20  # one artefact, copied in or out
SKIP_SUFFIXES = (".o", ".obj")  # objects are only needed to rebuild
SKIP_NAMES = ("lock",)  # torch's per-build baton
FORMAT = "solbench-build-1"
_NOFOLLOW = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # O_NONBLOCK: a FIFO never blocks us


def default_root() -> Path:
    """``<cache_root()>/build``: the runner's cache root (SOLBENCH_CACHE, else ~/.cache/solbench)."""
    return Path(os.environ.get("SOLBENCH_CACHE", Path.home() / ".cache" / "solbench")) / "build"


def key(sources: Iterable[tuple[str, str | bytes]], flags: Any, toolchain: Any, torch_version: str,
        packages: Mapping[str, str], arch: str) -> str:
    """sha256 over length-prefixed parts, so no two different inputs give the same byte stream."""
    h = hashlib.sha256()

    def put(part: str | bytes) -> None:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little") + data)

    put(FORMAT)
    for path, content in sorted(sources, key=lambda s: s[0]):
        put(path)
        put(content)
    for part in (flags, toolchain, torch_version, dict(packages), arch):
        put(json.dumps(part, sort_keys=True, default=str))
    return h.hexdigest()


def lookup(key: str, root: Path | None = None) -> Path | None:
    """The artefact's directory, or None. A directory under its key is complete: it got there by rename."""
    path = (root or default_root()) / key
    return path if (path / META).is_file() else None


def _open_dir(path: Path, below: Path | None) -> int:
    """A descriptor of ``path``; every component under the trusted ``below`` opened without following links."""
    if below is None:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    fd = os.open(below, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in Path(path).relative_to(below).parts:
            fd, parent = os.open(part, _NOFOLLOW | os.O_DIRECTORY, dir_fd=fd), fd
            os.close(parent)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_meta(path: Path, below: Path | None = None) -> dict[str, Any]:
    """A directory's meta.json as a dict ({} when missing, not a regular file, or not a JSON object)."""
    try:
        dfd = _open_dir(path, below)
        try:
            fd = os.open(META, _NOFOLLOW, dir_fd=dfd)
        finally:
            os.close(dfd)
        with os.fdopen(fd, "rb") as f:
            meta = json.loads(f.read(1 << 16)) if stat.S_ISREG(os.fstat(fd).st_mode) else {}
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def copy_files(src: Path, dst: Path, limit: int = MAX_BYTES, skip: tuple[str, ...] = SKIP_SUFFIXES,
               replace: bool = True, below: Path | None = None) -> bool:
    """Copy ``src``'s regular files into ``dst`` (no links, FIFOs or devices; nothing named in ``skip``); False
    when some did not fit in ``limit`` bytes (those are left out). Only bytes move: nothing is interpreted."""
    try:
        fd = _open_dir(src, below)
    except OSError:
        return True  # nothing to copy: missing, or not a directory
    try:
        return _copy_dir(fd, Path(dst), [limit], skip, replace)
    finally:
        os.close(fd)


def _copy_dir(dir_fd: int, dst: Path, budget: list[int], skip: tuple[str, ...], replace: bool) -> bool:
    whole = True
    for entry in sorted(os.scandir(dir_fd), key=lambda e: e.name):
        is_dir = entry.is_dir(follow_symlinks=False)
        if not is_dir and (entry.name in SKIP_NAMES or entry.name.endswith(skip)):
            continue
        try:
            fd = os.open(entry.name, _NOFOLLOW | (os.O_DIRECTORY if is_dir else 0), dir_fd=dir_fd)
        except OSError:
            continue  # a link, or gone
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                whole = _copy_dir(fd, dst / entry.name, budget, skip, replace) and whole
            elif stat.S_ISREG(st.st_mode) and (replace or not (dst / entry.name).exists()):
                if st.st_size > budget[0]:
                    whole = False
                    continue
                budget[0] -= st.st_size
                dst.mkdir(parents=True, exist_ok=True)
                _copy(fd, dst / entry.name, st.st_size)
        finally:
            os.close(fd)
    return whole


def _copy(fd: int, target: Path, size: int) -> None:
    """``size`` bytes at most (a file that grows while copied does not pass its budget)."""
    with open(target, "wb") as out:
        while size > 0:
            chunk = os.read(fd, min(size, 1 << 20))
            if not chunk:
                break
            out.write(chunk)
            size -= len(chunk)


def publish(key: str, build_dir: Path, meta: Mapping[str, Any], root: Path | None = None,
            below: Path | None = None) -> Path | None:
    """``build_dir`` under ``key``, atomically, with ``meta`` as its meta.json; the first published stays.
    None when it is too large to keep."""
    root = root or default_root()
    root.mkdir(parents=True, exist_ok=True)
    if lookup(key, root):
        return root / key
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:16]}-", dir=root))
    try:
        if not copy_files(Path(build_dir), tmp, below=below):
            return None
        (tmp / META).write_text(json.dumps(dict(meta, key=key), indent=1, sort_keys=True) + "\n")
        try:
            os.rename(tmp, root / key)  # atomic; refused when another publish got there first
        except OSError:
            pass
        return lookup(key, root)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def locked(key: str, root: Path | None = None, timeout_s: float | None = None) -> Iterator[bool]:
    """Hold the key's lock (an flock: it dies with its holder); yields False when ``timeout_s`` passed first."""
    locks = (root or default_root()) / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    fd = os.open(locks / f"{key}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if deadline is None else fcntl.LOCK_NB))
                held = True
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    held = False
                    break
                time.sleep(0.2)
        yield held
    finally:
        os.close(fd)  # releases it


def build_once(key: str, build: Callable[[Path], Mapping[str, Any]], root: Path | None = None
               ) -> tuple[Path | None, dict[str, Any], bool]:
    """The artefact for ``key``: ``build(directory) -> meta`` runs only when no process has it or is building it
    (those wait on the key's lock). Returns (directory, meta, cached); no directory when too large to keep."""
    root = root or default_root()
    with locked(key, root):
        found = lookup(key, root)
        if found:
            return found, read_meta(found), True
        work = Path(tempfile.mkdtemp(prefix=f".build-{key[:16]}-", dir=root))
        try:
            t0 = time.perf_counter()
            meta = dict(build(work) or {})
            meta.setdefault("compile_s", round(time.perf_counter() - t0, 3))
            path = publish(key, work, meta, root)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return path, read_meta(path) if path else meta, False


class Carry:
    """One evaluation's build cache on the trusted side; inert for languages without ``build_plan``. Entering
    copies the artefact into ``<private>/build/<key>``, or takes the key's lock (evaluations of one solution at
    once build it once) and publishes the candidate's build once its meta.json appears; exiting publishes what
    is left to publish and fills ``report``."""

    def __init__(self, language: Any, solution: Any, device: str, private: Path, root: Path | None = None):
        self.root, self.private = root or default_root(), Path(private)
        has_plan = hasattr(language, "build_plan")
        self.unsupported: str | None = language.unsupported_reason(solution, device) if has_plan else None
        self.plan: dict[str, Any] | None = None
        if has_plan and not self.unsupported:
            try:
                self.plan = language.build_plan(solution, device)
            except ValueError as exc:  # malformed compile_options: nothing can be built
                self.unsupported = str(exc)
        self.key = self.plan["key"] if self.plan else None
        self.timeout_s = float(self.plan["timeout_s"]) if self.plan else 0.0
        self.dir = self.private / "build" / self.key if self.key else None
        self.env = {"SOLBENCH_BUILD_CACHE": str(self.dir), "SOLBENCH_BUILD_PLAN": json.dumps(self.plan),
                    "SOLBENCH_COMPILE_TIMEOUT_S": str(self.timeout_s)} if self.key else {}
        self.cached = self.published = False
        self.report: dict[str, Any] | None = None  # key, cached, published, compile_s (after exiting)
        self._lock: Any = None
        self._stop, self._mutex = threading.Event(), threading.Lock()
        self._watcher: threading.Thread | None = None

    def __enter__(self) -> "Carry":
        if self.key is None:
            return self
        self.dir.mkdir(parents=True, exist_ok=True)
        found = lookup(self.key, self.root)
        if found is None:  # another evaluation may be building it: wait (one compile limit at most), look again
            self._lock = locked(self.key, self.root, timeout_s=self.timeout_s + 60)
            self._lock.__enter__()
            found = lookup(self.key, self.root)
        if found is not None:
            try:  # before the candidate starts: nothing else writes there
                self.cached = copy_files(found, self.dir)
            except OSError:  # the candidate builds it again
                self.cached = False
            self._release()
        else:
            self._watcher = threading.Thread(target=self._watch, name="solbench-build-carry", daemon=True)
            self._watcher.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(0.5):
            if read_meta(self.dir, self.private):  # written last (atomically) by the candidate once built
                self._publish()
                return

    def _publish(self) -> None:
        with self._mutex:
            built = read_meta(self.dir, self.private)
            if not (self.published or self.cached or not built):
                compile_s = built.get("compile_s")
                meta = {"compile_s": float(compile_s) if isinstance(compile_s, (int, float)) else None,
                        "language": self.plan.get("language"), "arch": self.plan.get("arch"),
                        "published": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
                try:
                    self.published = publish(self.key, self.dir, meta, self.root, below=self.private) is not None
                except OSError:  # a full disk, a directory the candidate removed: nothing is published
                    pass
            self._release()

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.__exit__(None, None, None)
            self._lock = None

    def __exit__(self, *exc: Any) -> None:
        if self.key is None:
            return
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join()
        self._publish()
        compile_s = read_meta(self.dir, self.private).get("compile_s")  # the directory goes with the evaluation
        self.report = {"key": self.key[:16], "cached": self.cached, "published": self.published,
                       "compile_s": float(compile_s) if isinstance(compile_s, (int, float)) else None}
