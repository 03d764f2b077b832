"""Whole-suite SOL analysis time: every workload of every bundled problem, counted on fake tensors, against every
registered chip (target: under 60 s on 2 CPU cores; no real tensors are allocated); then the same read back from
the counted-work cache (``analysis/work_cache.py``) as a later process would. The cache is a temporary folder of
this run's own, so the first pass traces every workload whatever the user's cache holds."""

import os
import tempfile
import time
from collections import OrderedDict


def _pass(problems, chips, count_work, sol_time) -> int:
    n = 0
    for p in problems:
        for w in p.workloads:
            work = count_work(p, w)
            for c in chips:
                sol_time(work, c)
            n += 1
    return n


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-analysis-") as cache:
        os.environ["SOLBENCH_CACHE"] = cache
        t0 = time.perf_counter()
        from solbench.analysis import work_cache
        from solbench.analysis.roofline import count_work, sol_time
        from solbench.hardware.registry import list_hardware
        from solbench.problems.suite import select_problems

        problems = select_problems("full")
        chips = [h.ceilings() for h in list_hardware()]
        t_load = time.perf_counter() - t0
        n = _pass(problems, chips, count_work, sol_time)
        total = time.perf_counter() - t0
        print(f"{len(problems)} problems, {n} workloads x {len(chips)} chips: {total:.1f} s "
              f"(loading {t_load:.1f} s) (target: under 60 s)")
        work_cache._MEMO = OrderedDict()  # as a later process: nothing in memory, the counts on disk
        t1 = time.perf_counter()
        _pass(problems, chips, count_work, sol_time)
        print(f"the same, the counts read back from the cache: {time.perf_counter() - t1:.1f} s")


if __name__ == "__main__":
    main()
