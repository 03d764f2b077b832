"""What the trusted side reads about a candidate's process from outside it: its threads and its CPU time.

The kernel keeps these per thread in ``/proc/<pid>/task/<tid>/`` (``stat``'s utime and stime, ``schedstat``'s
nanoseconds on the CPU), and only using the CPU changes them, so nothing the candidate's code writes can. The
trusted worker sees the candidate from outside its PID namespace: the process the zygote forked is a waiting
parent, and the candidate's process (process 1 of the namespace) is its child. Without namespaces the forked
process is the candidate itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (read from every process's ``stat``: the kernel may not offer
    ``task/*/children``)."""
    out: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            out.append(int(entry.name))
    return out


def _ns_pid(pid: int) -> list[int]:
    """The process's ids in each PID namespace it is in (NSpid), outermost first."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return [int(x) for x in line.split()[1:]]
    except (OSError, ValueError):
        pass
    return []


def candidate_pid(forked: int) -> int | None:
    """The candidate's process as this process sees it: the one child of ``forked`` (the sandbox's waiting
    parent, ``sandbox._candidate_child``; with namespaces that child is process 1 of a new PID namespace), else
    ``forked`` itself (a process started without that parent). None when it is gone."""
    kids = _children(forked)
    for child in kids:
        ids = _ns_pid(child)
        if len(ids) >= 2 and ids[-1] == 1:
            return child
    if kids:
        return min(kids)
    return forked if Path(f"/proc/{forked}").exists() else None


def _tree(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    seen, frontier = [pid], [pid]
    while frontier:
        kids = [c for c in _children(frontier.pop()) if c not in seen]
        seen += kids
        frontier += kids
    return seen


@dataclass(frozen=True)
class Usage:
    """One reading: threads of the candidate's process, processes in its tree, CPU time of the whole tree."""

    threads: int
    processes: int
    cpu_ns: int


def _cpu_ns(pid: int) -> tuple[int, int]:
    """(threads, nanoseconds on the CPU) of one process, summed over its threads."""
    threads = total = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0, 0
    for task in tasks:
        try:
            total += int((task / "schedstat").read_text().split()[0])
            threads += 1
        except (OSError, ValueError, IndexError):
            continue
    return threads, total


def usage(pid: int, tree: bool = True) -> Usage | None:
    """The candidate's threads and CPU time now (its whole process tree's with ``tree``, a scan of /proc);
    None when the process is gone."""
    if not Path(f"/proc/{pid}").exists():
        return None
    threads, cpu = _cpu_ns(pid)
    below = _tree(pid) if tree else [pid]
    for other in below[1:]:
        cpu += _cpu_ns(other)[1]
    return Usage(threads=threads, processes=len(below), cpu_ns=cpu)


def seccomp_filters(pid: int) -> int | None:
    """How many seccomp filters the process runs under (0: none; None: unreadable), from its ``status``."""
    try:
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                      if ":" in line)
        if fields.get("Seccomp", "").strip() != "2":
            return 0
        return int(fields.get("Seccomp_filters", "1").strip())
    except (OSError, ValueError):
        return None


def wait_blocked(pid: int, limit_s: float = 0.05) -> bool:
    """Wait (spinning, at most ``limit_s``) until every thread of the process is blocked, so that a reading of
    its CPU time is exact: the kernel settles a thread's account when it stops running."""
    import time

    deadline = time.perf_counter() + limit_s
    while True:
        try:
            states = [(t / "stat").read_text().rsplit(")", 1)[1].split()[0]
                      for t in Path(f"/proc/{pid}/task").iterdir()]
        except (OSError, IndexError):
            return False
        if all(s != "R" for s in states):
            return True
        if time.perf_counter() > deadline:
            return False
