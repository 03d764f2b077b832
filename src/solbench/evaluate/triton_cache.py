"""A solution's Triton cache, carried from one of its evaluations to the next (``runner``).

Each evaluation gives its candidate a Triton cache in its own private directory (``TRITON_CACHE_DIR``), whose path
differs from evaluation to evaluation. Triton's file cache records a compiled kernel as a group file
(``<key>/__grp__<kernel>.json``) that names the kernel's files by absolute path, and takes a group whose files are
not all at those paths as a miss: a cache copied to another path compiles every kernel again (0.6 to 1 s per
specialization on an H100). So after the copy in, each group file is written anew with its own directory's
files (``relocate``). Nothing of the copied files is run or trusted here: a group names files only by their
plain names, in the group's own directory, or it is removed (the kernel compiles again). Only the same sources
(the solution's digest keys the stored cache) ever read what a candidate left; ``runner.carries_back`` says when it
is kept at all. The stored caches together stay within ``store_bytes()``: past it, those of the solutions least
recently evaluated go (``evict``), as a service grading thousands of solutions would otherwise fill the disk.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

from solbench.evaluate import build_cache

#: bytes of Triton cache carried from one evaluation of a solution to the next (regular files only)
MAX_CACHE_BYTES = 256 << 20
#: the largest group file read (one names a kernel's half-dozen files)
MAX_GROUP_BYTES = 1 << 16
GROUP_PREFIX = "__grp__"
#: bytes every solution's stored cache may take together, unless SOLBENCH_TRITON_CACHE_BYTES says otherwise
STORE_BYTES = 2 << 30


def carry_in(stored: Path, cache: Path) -> None:
    """The stored cache's regular files copied into the candidate's ``cache``, its groups relocated there."""
    _copy(stored, cache)
    _used(stored)
    relocate(cache)


def carry_out(cache: Path, stored: Path, below: Path) -> None:
    """The candidate's ``cache`` (under its directory ``below``: no link followed) copied back to the stored
    cache: the trusted side only moves bytes, and files already stored stay. Where that added bytes, the stored
    caches are brought back within ``store_bytes()`` (``evict``), this one kept."""
    added = _copy(cache, stored, below)
    _used(stored)
    if added:
        evict(stored.parent, store_bytes(), keep=stored.name)


def store_bytes() -> int:
    return build_cache.bytes_from_env("SOLBENCH_TRITON_CACHE_BYTES", STORE_BYTES)


def evict(root: Path, limit: int, keep: str | None = None) -> list[str]:
    """The stored caches of the solutions least recently evaluated removed (never ``keep``) until those under
    ``root`` take at most ``limit`` bytes; the names removed. A copy in from one being removed meanwhile reads
    what it opened whole, and a group whose files went is a miss (``relocate``)."""
    entries, total = [], 0
    try:
        found = [e for e in os.scandir(root) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    for e in found:
        size = build_cache.tree_bytes(Path(e.path))
        total += size
        try:
            entries.append((e.stat(follow_symlinks=False).st_mtime, e.name, size))
        except OSError:
            continue
    return build_cache.oldest_out(entries, total, limit, keep,
                                  lambda name: shutil.rmtree(root / name, ignore_errors=True) or True)


def _used(stored: Path) -> None:
    """Marks a stored cache as used now (its directory's time: what ``evict`` orders by)."""
    try:
        os.utime(stored)
    except OSError:
        pass


def _copy(src: Path, dst: Path, below: Path | None = None) -> int:
    """The bytes copied (``build_cache.copy_files``; files already there stay)."""
    try:
        return build_cache.copy_files(src, dst, MAX_CACHE_BYTES, skip=(), replace=False, below=below)
    except OSError:
        return 0


def relocate(cache: Path) -> int:
    """Each group file of ``cache`` (``<key>/__grp__*.json``) rewritten to name its files in its own directory;
    a group that names anything else, or a file not there, is removed. The number of groups kept."""
    kept = 0
    try:
        dirs = [e for e in os.scandir(cache) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return 0
    for d in dirs:
        try:
            groups = [e for e in os.scandir(d.path) if e.name.startswith(GROUP_PREFIX) and e.name.endswith(".json")]
        except OSError:
            continue
        for g in groups:
            kept += _relocated(Path(d.path), g.name)
    return kept


def _relocated(where: Path, name: str) -> bool:
    """One group file rewritten with ``where``'s paths (True), or removed (False)."""
    path = where / name
    paths = _children(path)
    if paths is not None:
        try:
            tmp = where / f".{name}{build_cache.PART}"  # never carried on, should it stay
            tmp.write_text(json.dumps({"child_paths": {c: str(where / c) for c in paths}}))
            os.replace(tmp, path)
            return True
        except OSError:
            pass
    try:
        path.unlink()
    except OSError:
        pass
    return False


def _children(path: Path) -> list[str] | None:
    """The plain file names a group file lists, each a regular file beside it; None for anything else."""
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_GROUP_BYTES:
            return None
        listed = json.loads(path.read_text()).get("child_paths")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(listed, dict) or not listed:
        return None
    names = []
    for child, old in listed.items():
        if not (isinstance(child, str) and isinstance(old, str) and _plain(child) and Path(old).name == child):
            return None
        try:
            if not stat.S_ISREG(os.lstat(path.parent / child).st_mode):
                return None
        except OSError:
            return None
        names.append(child)
    return names


def _plain(name: str) -> bool:
    """A file name with no directory in it."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\0" not in name
