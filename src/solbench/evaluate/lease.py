"""The device lease: one timed evaluation at a time on a device, across every thread and process of the host.

Timing is exclusive on its GPU. ``hold(device)`` takes an exclusive ``flock`` on a file named for the physical
GPU (its CUDA_VISIBLE_DEVICES entry, so that a scheduler's slots pinned to different GPUs never wait for each
other, and two ``solbench`` processes on one GPU always do); the lock lives on the open file description, so a
holder killed in any way releases it, and separate opens conflict even within one process, so threads (an
agent experiment's attempts) wait for each other the same way. An evaluation that only checks holds the lease
shared: such evaluations run side by side (``run --jobs``), never beside a timed one.

On the CPU the lease is per process (a lock): attempts of one experiment take turns, while separate processes
(the test suite's, a scheduler's CPU slots) run side by side, since CPU times judge correctness and compare
solutions only within one run.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
import tempfile
import threading
from pathlib import Path
from typing import Iterator

_cpu = threading.Lock()


def lease_name(device: str) -> str | None:
    """The lease file's name for ``device`` (None: the CPU, whose lease is this process's lock)."""
    if not device.startswith("cuda"):
        return None
    from solbench.hardware.telemetry import visible_entry

    index = int(device.split(":")[1]) if ":" in device else 0
    entry = visible_entry(index)
    return "gpu-" + re.sub(r"[^A-Za-z0-9_.-]", "_", entry if entry is not None else str(index))


def lease_dir() -> Path:
    """Where lease files live: shared by every user of the host's temporary directory."""
    return Path(os.environ.get("SOLBENCH_LEASE_DIR") or tempfile.gettempdir()) / "solbench-leases"


def lock_file(name: str, folder: Path | None = None) -> int:
    """The lease file, opened read-only (enough for ``flock``, and for another user's file): created where
    missing, never through a link. A folder that is a link, or not this user's or root's, is not used: then
    this user's own (``solbench-leases-<uid>``), which keeps evaluations of this user apart but not of others.
    ``folder``: ``lease_dir()`` unless given."""
    folder = folder or lease_dir()
    try:
        folder.mkdir(mode=0o1777, parents=True, exist_ok=True)
        st = os.lstat(folder)
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode) or st.st_uid not in (0, os.getuid()):
            raise PermissionError(f"{folder} is not a lease folder to trust")
        if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) != 0o1777:
            dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            try:
                os.fchmod(dfd, 0o1777)  # every user of the host leases the same GPUs
            finally:
                os.close(dfd)
        path = folder / f"{name}.lock"
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o444)
    except OSError:
        own = folder.with_name(f"{folder.name}-{os.getuid()}")
        own.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(own / f"{name}.lock", os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o400)
    return fd


@contextlib.contextmanager
def hold(device: str, exclusive: bool = True) -> Iterator[None]:
    """Hold ``device``'s lease for the block: exclusive for an evaluation that times, shared for one that only
    checks (several such run side by side, never beside a timed one)."""
    name = lease_name(device)
    if name is None:
        with _cpu if exclusive else contextlib.nullcontext():
            yield
        return
    fd = lock_file(name)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)
