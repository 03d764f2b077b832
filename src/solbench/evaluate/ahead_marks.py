"""Marks of the torch.compile baselines still being compiled ahead (``compile_ahead``), which the run's own compile
of the same workload waits for.

The compiles ahead run beside the run's evaluations, not before them. Where an evaluation reaches a workload's
compile baseline while its compile ahead is still running, compiling it again in the trusted worker would take as
long and use the core that feeds the device; so the run waits for the compile ahead to end and then finds its
result in the caches. A mark is an exclusive ``flock`` on a file named for (the device's kind, the problem and its
content, the workload) in the lease folder, taken when that workload's compile ahead begins and released when it
has ended (compiled, failed or given up): a killed holder releases it too. A workload whose compile ahead has not
begun is not marked, and the run compiles it itself. A wait is bounded: past its limit the run compiles as it
always did.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time

from solbench.evaluate import lease

#: how often a waiting run looks at a mark again
POLL_S = 0.05


def problem_key(problem) -> str:
    """A problem as its marks name it: its name and, where it has one, its content's digest (two problems of one
    name, an edited copy carried to a service, are not one compile)."""
    digest = getattr(problem, "digest", None)
    return f"{problem.name}:{digest()}" if callable(digest) else str(problem.name)


def _name(device: str, problem: str, uuid: str) -> str:
    # the device's kind, not which GPU: Inductor's and Triton's caches are the host's, so a compile ahead made
    # for one GPU serves a slot on another (of the same kind: the suite's hosts have one kind of GPU)
    key = f"{device.split(':')[0]}:{problem}:{uuid}"
    return "compile-" + hashlib.sha256(key.encode()).hexdigest()[:24]


def mark(device: str, problem: str, uuid: str) -> int | None:
    """Take the mark of (``device``, ``problem``, ``uuid``; ``problem`` as ``problem_key`` names it): an open file
    holding the exclusive lock (``unmark`` releases it), its descriptor; None where another holds it (another
    process compiles the same workload ahead: its compile serves)."""
    fd = lease.lock_file(_name(device, problem, uuid))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def unmark(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)


def wait_compiled(device: str, problem: str, uuids: list[str], limit_s: float) -> float:
    """Wait until no compile ahead of ``problem``'s ``uuids`` on ``device`` is running, at most ``limit_s`` in all;
    the seconds waited."""
    began = time.monotonic()
    for uuid in uuids:
        fd = lease.lock_file(_name(device, problem, uuid))
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() - began >= limit_s:
                        return time.monotonic() - began
                    time.sleep(POLL_S)
        finally:
            os.close(fd)
    return time.monotonic() - began
