"""Dynamic checks around a candidate's calls: threads and processes left working after a call returns (in the
candidate's process, as evidence) and inputs changed behind the reference's back (on the trusted side).

The harness snapshot is ``tamper``, the ghost replay ``ghost``, result types ``calls.not_plain``.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import torch


# ---- threads and processes ------------------------------------------------------------
def _defined_in(obj: Any, staged: str) -> bool:
    code = getattr(obj, "__code__", None)
    if code is not None and code.co_filename.startswith(staged):
        return True
    func = getattr(obj, "__func__", None)
    if func is not None:
        return _defined_in(func, staged)
    cls = obj if isinstance(obj, type) else None
    if cls is not None:
        module = __import__("sys").modules.get(cls.__module__)
        return bool(module and getattr(module, "__file__", "") and module.__file__.startswith(staged))
    return False


def candidate_threads(before: set[int], staged: str) -> list[str]:
    """Live Python threads started since ``before`` whose code is the candidate's own."""
    found = []
    for t in threading.enumerate():
        if t.ident in before or not t.is_alive():
            continue
        targets = [getattr(t, "_target", None), getattr(t, "function", None), type(t)]
        run = type(t).run
        if run is not threading.Thread.run:
            targets.append(run)
        if any(x is not None and _defined_in(x, staged) for x in targets):
            found.append(t.name)
    return found


def thread_idents() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.ident is not None}


#: waitid's option for children of any kind (whatever signal they end with), which Python does not name
_WALL = 0x40000000


def child_processes() -> list[int]:
    """Live children of this process (any thread's). Where the kernel says there are no children at all (one
    ``waitid`` that neither waits nor reaps: the common case), that is the answer; otherwise every thread's
    children are read from /proc and the zombies left out."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WSTOPPED | os.WCONTINUED | os.WNOHANG | os.WNOWAIT | _WALL)
    except ChildProcessError:
        return []
    except OSError:  # an option this kernel refuses: read /proc
        pass
    kids: list[int] = []
    task_dir = Path(f"/proc/{os.getpid()}/task")
    try:
        for task in task_dir.iterdir():
            try:
                text = (task / "children").read_text().split()
            except OSError:
                continue
            kids.extend(int(x) for x in text)
    except OSError:
        return []
    alive = []
    for pid in kids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.append(pid)
    return alive


# ---- inputs and outputs -----------------------------------------------------------------------
def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))


def mutated_inputs(pristine: list[Any], used: list[Any], names: list[str], allowed: set[str]) -> list[str]:
    """Inputs (other than declared in-place ones) whose contents differ from their pristine copies."""
    changed = []
    for name, p, u in zip(names, pristine, used):
        if name in allowed or not isinstance(p, torch.Tensor):
            continue
        if not isinstance(u, torch.Tensor) or not _same_bits(p, u):
            changed.append(name)
    return changed
