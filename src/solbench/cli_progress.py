"""``solbench run``'s progress: rich's bars on a terminal; in a log (a batch system's, CI's, a redirected
stderr), where the bars would show only once the run has ended, one line per step instead.

A line says the time since the run started, the bar's name, where it stands and what it works on now, so that a
run stopped by a time limit leaves in its log the step it was in::

    [   12 s] native builds 3/17, about 56 s left
    [  148 s] solbench run on cuda (h100-sxm) 0/35 (now: rmsnorm / triton)
    [  157 s] solbench run on cuda (h100-sxm) 1/35 (ended: rmsnorm / triton), about 306 s left

A bar's time left is its steps' mean so far times the steps left, counted from its first named step (the run's
first evaluation), or from its start where no step is named.

Steps that run side by side (the compiles ahead) name the one that ended and its time::

    [   64 s] torch.compile baselines ahead 89/92 (ended: rmsnorm / rmsnorm-llama31-8b-decode-t1 in 12 s)
"""

from __future__ import annotations

import time
from typing import Any


class LogProgress:
    """The part of ``rich.progress.Progress`` that ``run`` uses (``add_task``, ``update``, ``advance``), as lines
    printed to ``console``; the context manager does nothing."""

    clock = staticmethod(time.monotonic)

    def __init__(self, console) -> None:
        self.console = console
        self.t0 = self.clock()
        self.tasks: dict[int, dict[str, Any]] = {}

    def __enter__(self) -> "LogProgress":
        return self

    def __exit__(self, *exc) -> None:
        return None

    def add_task(self, description: str, total: float | None = None, **_: Any) -> int:
        task = len(self.tasks)
        self.tasks[task] = {"name": description, "now": "", "total": total, "completed": 0, "since": self.clock(),
                            "named": False}
        return task

    def update(self, task: int, description: str | None = None, advance: float = 0, ended: str | None = None,
               **_: Any) -> None:
        """``ended``: what the step that ended was, where the bar's description does not say it (steps that
        run side by side: a bar keeps its rich name, the line names the step); rich keeps it as a field."""
        t = self.tasks[task]
        if description is not None:
            t["now"] = "" if description == t["name"] else description
            if t["now"] and not t["named"] and not t["completed"]:  # its first step begins: count from here
                t["since"], t["named"] = self.clock(), True
        t["completed"] += advance
        if ended is not None:
            t["now"] = ended
        over = bool(advance) and (description is None or ended is not None)
        self._line(t, ended=over)
        if over:
            t["now"] = ""  # nothing is under way in it until the next step is named

    def advance(self, task: int, advance: float = 1) -> None:
        self.update(task, advance=advance)

    def _line(self, t: dict[str, Any], ended: bool) -> None:
        done = f"{t['completed']:g}" + (f"/{t['total']:g}" if t["total"] is not None else "")
        now = f" ({'ended' if ended else 'now'}: {t['now']})" if t["now"] else ""
        at = self.clock()
        self.console.print(f"[{at - self.t0:5.0f} s] {t['name']} {done}{now}{_left(t, at)}", markup=False,
                           highlight=False)


def _left(t: dict[str, Any], at: float) -> str:
    """", about N s left" for a bar with steps done and steps to do, else nothing."""
    total, completed = t["total"], t["completed"]
    if total is None or not 0 < completed < total:
        return ""
    return f", about {(at - t['since']) / completed * (total - completed):.0f} s left"


def run_progress(console, quiet: bool):
    """Bars on an interactive terminal (none when ``quiet``), lines in a log (``LogProgress``)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    if not quiet and not console.is_interactive:
        return LogProgress(console)
    return Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                    TimeElapsedColumn(), TimeRemainingColumn(), console=console, disable=quiet)
