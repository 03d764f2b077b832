"""Which evaluations may run side by side on one device (``solbench run --jobs``).

Evaluations side by side share the device's memory, and a large problem's judging holds several GB per
evaluation (its inputs' copies and the float64 anchor, ``footprint``): on the H200, five evaluations of
dot_blas2 and nrm2_blas2 at once (50 and 25 GB each) ran out of memory, and the verdicts then blamed the
solutions (``out_of_memory``, ``invalid_reference``). So an evaluation starts only while the estimated peaks of
those running and its own fit in the memory the device had free when the run began, less a margin; one that
does not fit waits for others to end, and one that would not fit even alone runs alone (its own workloads are
then refused or judged by the footprint check as in a run of one).
"""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any, Callable, Sequence

from solbench.evaluate.trusted.footprint import available_bytes, footprint

#: device memory an evaluation holds beyond its footprint: the trusted worker's and the candidate's CUDA contexts
#: and allocator slack
PER_EVALUATION_BYTES = 2 * 1024 ** 3
#: the share of the free memory evaluations side by side may plan to use
USABLE_SHARE = 0.85


def peak_bytes(problem, device: str) -> int:
    """The largest footprint of ``problem``'s workloads for ``device`` (the worker judges one workload at a time),
    plus the per-evaluation overhead."""
    kind = "cpu" if device == "cpu" else "cuda"
    sizes = [footprint(problem, w.uuid).need_bytes for w in problem.workloads_for(kind)]
    return max(sizes, default=0) + PER_EVALUATION_BYTES


def budget_bytes(device: str) -> int | None:
    """What evaluations side by side may plan to hold: a share of the device's free memory now (None: unknown,
    and then only ``--jobs`` limits them)."""
    free = available_bytes(device)
    return None if free is None else int(free * USABLE_SHARE)


def run_side_by_side(tasks: Sequence[Any], sizes: Sequence[int], submit: Callable[[Any], Future], max_jobs: int,
                     budget: int | None, done: Callable[[int, Any], None] | None = None) -> list[Any]:
    """Results of ``submit(task)`` for every task, in the tasks' order; at most ``max_jobs`` at once, and a task
    starts only while the sizes of those running and its own fit in ``budget`` (or nothing else runs). Tasks
    start in order: one that waits for memory holds back those after it. ``done(index, result)`` is called as
    each ends."""
    results: list[Any] = [None] * len(tasks)
    running: dict[Future, int] = {}
    held = 0
    nxt = 0
    while nxt < len(tasks) or running:
        while nxt < len(tasks) and len(running) < max_jobs and (
                not running or budget is None or held + sizes[nxt] <= budget):
            running[submit(tasks[nxt])] = nxt
            held += sizes[nxt]
            nxt += 1
        finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
        for fut in finished:
            i = running.pop(fut)
            held -= sizes[i]
            results[i] = fut.result()
            if done is not None:
                done(i, results[i])
    return results
