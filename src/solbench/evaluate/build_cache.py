"""Native solutions' built libraries, kept between evaluations under a key, verified on every use.

An artefact is a directory ``<root>/<key>``: the built files and ``meta.json`` with each file's sha256 and
size, the compile time and what built it. The key (``key``) is a sha256 of what the binary depends on: the
sources (path and content), the flags, the toolchain's ``--version`` output, torch's version, the language's
package versions, the target architecture and solbench's own build (its prelude, binding and allowlist); any
change is a new key, never a stale hit. Only the trusted side writes here (the sandbox hides the cache from
candidates and from the build's own sandbox): ``publish`` writes the bytes the build checked into a temporary
directory beside the cache and renames it into place (the first of two stays); ``load`` reads every file back
and checks its hash, and a file that does not match removes the entry (it is built again, never loaded).
A per-key ``fcntl.flock`` (``locked``) makes processes that need one key at once build it once. Each file is
bounded (``build.MAX_BYTES``, by apparent and allocated size) and so is the cache: past ``cache_bytes()``
the least recently used entries go (``evict``). All of it may be deleted at any time.

``Carry`` is one evaluation's use of it (``evaluate.runner``): before the candidate starts it builds or finds the
solution's library and the trusted binding (``native.build``), copies the verified bytes read-only into the
candidate's private directory and gives the candidate their paths and hashes (``SOLBENCH_BUILD_PLAN``), which
its loader checks again before it loads them (``languages.cuda_cpp``).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from solbench import caches

META = "meta.json"
SKIP_SUFFIXES = (".o", ".obj")
SKIP_NAMES = ("lock",)
PART = ".part"  # a file ``copy_files`` is writing: never copied on
FORMAT = "solbench-build-2"
CACHE_BYTES = 4 << 30  # the whole cache, unless SOLBENCH_BUILD_CACHE_BYTES says otherwise
_NOFOLLOW = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # O_NONBLOCK: a FIFO never blocks us


def default_root() -> Path:
    """``<caches.root()>/build``: the runner's cache root (SOLBENCH_CACHE, else ~/.cache/solbench)."""
    return caches.root() / "build"


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


def copy_files(src: Path, dst: Path, limit: int, skip: tuple[str, ...] = SKIP_SUFFIXES, replace: bool = True,
               below: Path | None = None) -> int:
    """Copy ``src``'s regular files into ``dst`` (no links, FIFOs or devices; nothing named in ``skip``), at most
    ``limit`` bytes of them (a file past the budget is left out); the bytes copied. Only bytes move: nothing is
    interpreted."""
    try:
        fd = _open_dir(src, below)
    except OSError:
        return 0  # nothing to copy: missing, or not a directory
    budget = [limit]
    try:
        _copy_dir(fd, Path(dst), budget, skip, replace)
    finally:
        os.close(fd)
    return limit - budget[0]


def _copy_dir(dir_fd: int, dst: Path, budget: list[int], skip: tuple[str, ...], replace: bool) -> None:
    for entry in sorted(os.scandir(dir_fd), key=lambda e: e.name):
        is_dir = entry.is_dir(follow_symlinks=False)
        if not is_dir and (entry.name in SKIP_NAMES or entry.name.endswith((*skip, PART))):
            continue
        try:
            fd = os.open(entry.name, _NOFOLLOW | (os.O_DIRECTORY if is_dir else 0), dir_fd=dir_fd)
        except OSError:
            continue  # a link, or gone
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                _copy_dir(fd, dst / entry.name, budget, skip, replace)
            elif stat.S_ISREG(st.st_mode) and (replace or not (dst / entry.name).exists()) \
                    and st.st_size <= budget[0]:
                budget[0] -= st.st_size
                dst.mkdir(parents=True, exist_ok=True)
                _copy(fd, dst / entry.name, st.st_size)
        finally:
            os.close(fd)


def _copy(fd: int, target: Path, size: int) -> None:
    """``size`` bytes at most (a file that grows while copied does not pass its budget), written beside ``target``
    and renamed into place: another evaluation copying the same directory meanwhile finds the whole file or none."""
    part = target.with_name(f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}{PART}")
    try:
        with open(part, "wb") as out:
            while size > 0:
                chunk = os.read(fd, min(size, 1 << 20))
                if not chunk:
                    break
                out.write(chunk)
                size -= len(chunk)
        os.replace(part, target)
    finally:
        if part.exists():
            part.unlink()


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




def cache_bytes() -> int:
    return bytes_from_env("SOLBENCH_BUILD_CACHE_BYTES", CACHE_BYTES)


def bytes_from_env(var: str, default: int) -> int:
    """A cache's size limit: ``var`` where it holds a number (1 MiB at least), else ``default``."""
    try:
        return max(1 << 20, int(os.environ.get(var, default)))
    except ValueError:
        return default


def _read_file(dir_fd: int, name: str, limit: int) -> bytes | None:
    """A regular file's bytes under ``dir_fd`` (no link followed), None when it is anything else or too large
    by its apparent or allocated size."""
    try:
        fd = os.open(name, _NOFOLLOW, dir_fd=dir_fd)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or max(st.st_size, st.st_blocks * 512) > limit:
            return None
        return f.read(limit + 1)


def load(key: str, root: Path | None = None, limit: int = 256 << 20) -> tuple[dict[str, Any], dict[str, bytes]] | None:
    """The entry's meta and verified files, or None. An entry whose files do not match their hashes is removed."""
    path = (root or default_root()) / key
    meta = read_meta(path)
    files = meta.get("files") if meta.get("format") == FORMAT and meta.get("key") == key else None
    if not isinstance(files, dict) or not files:
        if meta.get("verdict") is None and path.exists() and (path / META).exists():
            shutil.rmtree(path, ignore_errors=True)  # an older format, or a meta that is not ours
        return None
    out: dict[str, bytes] = {}
    try:
        dfd = _open_dir(path, None)
    except OSError:
        return None
    try:
        for name, facts in files.items():
            data = _read_file(dfd, str(name), limit) if "/" not in str(name) else None
            if data is None or not isinstance(facts, dict) or hashlib.sha256(data).hexdigest() != facts.get("sha256"):
                out = {}
                break
            out[str(name)] = data
    finally:
        os.close(dfd)
    if not out:
        shutil.rmtree(path, ignore_errors=True)
        return None
    try:
        os.utime(path / META)  # its last use, for the eviction
    except OSError:
        pass
    return meta, out


def lookup(key: str, root: Path | None = None) -> Path | None:
    """The verified entry's directory, or None."""
    return (root or default_root()) / key if load(key, root) else None


def publish(key: str, files: Mapping[str, bytes], meta: Mapping[str, Any], root: Path | None = None) -> Path | None:
    """``files`` under ``key``, atomically, with their hashes in meta.json; the first published stays. Then the
    least recently used entries go while the cache is over its bound."""
    root = root or default_root()
    root.mkdir(parents=True, exist_ok=True)
    if load(key, root):
        return root / key
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:16]}-", dir=root))
    try:
        facts = {}
        for name, data in files.items():
            (tmp / name).write_bytes(data)
            (tmp / name).chmod(0o444)
            facts[name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
        (tmp / META).write_text(json.dumps(dict(meta, key=key, format=FORMAT, files=facts), indent=1,
                                           sort_keys=True) + "\n")
        try:
            os.rename(tmp, root / key)  # atomic; refused when another publish got there first
        except OSError:
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    evict(root, cache_bytes(), keep=key)
    return root / key if (root / key / META).is_file() else None


def tree_bytes(path: Path) -> int:
    """The bytes the regular files under ``path`` take (apparent or allocated, the larger)."""
    total = 0
    for p in path.rglob("*"):
        try:
            st = p.lstat()
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            total += max(st.st_size, st.st_blocks * 512)
    return total


def evict(root: Path, limit: int, keep: str | None = None) -> list[str]:
    """Remove the least recently used entries (not ``keep``, none another process holds the lock of) until the
    cache takes at most ``limit`` bytes, and leftovers of builds killed a day ago or more. Returns the keys removed."""
    entries, total, now = [], 0, time.time()
    for p in root.iterdir() if root.is_dir() else []:
        if p.name.startswith((".build-", ".tmp-")):
            try:
                if now - p.lstat().st_mtime > 86400:
                    shutil.rmtree(p, ignore_errors=True)
            except OSError:
                pass
            continue
        if p.name.startswith(".") or not p.is_dir():
            continue
        size = tree_bytes(p)
        total += size
        try:
            used = (p / META).stat().st_mtime
        except OSError:
            used = 0.0
        entries.append((used, p.name, size))

    def remove(name: str) -> bool:
        with locked(name, root, timeout_s=0) as held:
            if held:
                shutil.rmtree(root / name, ignore_errors=True)
            return held

    return oldest_out(entries, total, limit, keep, remove)


def oldest_out(entries: list[tuple[float, str, int]], total: int, limit: int, keep: str | None,
               remove: Callable[[str], bool]) -> list[str]:
    """Entries (last used, name, bytes) of a cache taking ``total`` bytes removed, least recently used first and
    never ``keep``, until it takes at most ``limit``: ``remove(name)`` says whether one went. The names removed."""
    removed = []
    for _used, name, size in sorted(entries):
        if total <= limit:
            break
        if name != keep and remove(name):
            total -= size
            removed.append(name)
    return removed


def obtain(key: str, make: Callable[[Path], Any], meta: Mapping[str, Any], root: Path | None = None,
           wait_s: float | None = None) -> tuple[Any, dict[str, bytes] | None, bool]:
    """The files under ``key``: loaded and verified, or made by ``make(work) -> native.build.Outcome`` in a fresh
    directory of the cache's and published when the outcome has no verdict. Processes that need one key at once
    build it once (the others wait on its lock, ``wait_s`` at most). Returns (outcome or None, files, cached)."""
    root = root or default_root()
    root.mkdir(parents=True, exist_ok=True)
    with locked(key, root, timeout_s=wait_s):
        found = load(key, root)
        if found:
            return None, found[1], True
        judged = read_meta(root / key)
        if judged.get("format") == FORMAT and judged.get("key") == key and judged.get("verdict") == "reward_hack":
            from solbench.evaluate.native.build import Outcome

            return Outcome(verdict="reward_hack", reasons=list(judged.get("reasons") or []),
                           message=str(judged.get("message") or "")), None, True
        work = Path(tempfile.mkdtemp(prefix=f".build-{key[:16]}-", dir=root))
        try:
            outcome = make(work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if getattr(outcome, "verdict", None) is None and outcome.files:
            publish(key, outcome.files, dict(meta, compile_s=outcome.compile_s,
                                             published=time.strftime("%Y-%m-%dT%H:%M:%S%z")), root)
            return outcome, dict(outcome.files), False
        if getattr(outcome, "verdict", None) == "reward_hack":  # decided by the imports alone: kept, like a build
            _judged(key, outcome, root)
        return outcome, None, False


def _judged(key: str, outcome: Any, root: Path) -> None:
    """A rejected build's verdict under its key (a meta.json without files), so that it is not built again."""
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:16]}-", dir=root))
    try:
        (tmp / META).write_text(json.dumps({"key": key, "format": FORMAT, "verdict": outcome.verdict,
                                            "reasons": outcome.reasons, "message": outcome.message[:4000]}))
        try:
            os.rename(tmp, root / key)
        except OSError:
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

