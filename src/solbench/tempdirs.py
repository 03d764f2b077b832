"""Private temporary directories that never outlive their owner.

::

    with tempdirs.private_dir("solbench-agent-") as d:   # mode 700, locked by this process
        ...                                               # d.path
    tempdirs.sweep("solbench-agent-")                     # removes those whose owner is gone

A directory made by :func:`private_dir` holds an exclusive ``flock`` on itself for as long as its owner keeps it
open: the lock lives on the directory's open file description, so it goes when the owner closes it or dies in
any way (``kill -9`` included), and a process forked from the owner holds it too. :func:`sweep` removes every
directory of the prefix whose lock it can take, that is whose owner is gone; a live owner's directory is never
touched. A directory is created under a hidden name, locked, then renamed to its prefix, so a sweep running at
the same moment never sees it unlocked. Only the caller's own directories are swept, never followed links.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

__all__ = ["PrivateDir", "private_dir", "sweep"]


class PrivateDir:
    """A locked private directory; ``close()`` (or leaving the ``with`` block) removes it and drops the lock."""

    def __init__(self, path: Path, fd: int):
        self.path, self._fd = path, fd

    def close(self) -> None:
        if self._fd < 0:
            return
        _remove(self.path)
        os.close(self._fd)
        self._fd = -1

    def __enter__(self) -> "PrivateDir":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def private_dir(prefix: str, parent: str | os.PathLike | None = None) -> PrivateDir:
    """A new directory ``<parent>/<prefix>XXXXXXXX`` (default parent: the temporary directory), mode 700,
    locked by this process until it is closed."""
    parent = Path(parent or tempfile.gettempdir())
    for _ in range(100):
        hidden = Path(tempfile.mkdtemp(prefix="." + prefix, dir=parent))
        fd = os.open(hidden, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        fcntl.flock(fd, fcntl.LOCK_EX)
        final = parent / hidden.name[1:]
        if not os.path.lexists(final):
            os.rename(hidden, final)  # the lock stays with the directory, under its new name
            return PrivateDir(final, fd)
        os.close(fd)
        os.rmdir(hidden)
    raise FileExistsError(f"no free name for a {prefix} directory in {parent}")


def sweep(prefix: str, parent: str | os.PathLike | None = None) -> list[Path]:
    """Remove this user's ``<prefix>*`` directories under ``parent`` whose owner is gone; returns them."""
    parent = Path(parent or tempfile.gettempdir())
    removed, names = [], []
    with contextlib.suppress(OSError):
        names = [n for n in os.listdir(parent) if n.startswith(prefix)]
    for name in names:
        path = parent / name
        try:
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
                continue
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)  # its owner is alive
            continue
        try:
            _remove(path)
            removed.append(path)
        finally:
            os.close(fd)
    return removed


def _rmtree(path: str | Path, on_error) -> None:
    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=on_error)
    else:  # pragma: no cover - Python 3.10 and 3.11
        shutil.rmtree(path, onerror=on_error)


def _remove(path: Path) -> None:
    """Remove a directory tree, whatever permissions were left inside it (never following a link)."""
    def retry(func, p, _exc):
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(p), 0o700)
            if os.path.isdir(p) and not os.path.islink(p):
                os.chmod(p, 0o700)
                _rmtree(p, lambda *a: None)
            else:
                func(p)

    with contextlib.suppress(FileNotFoundError):
        os.chmod(path, 0o700)
        _rmtree(path, retry)
