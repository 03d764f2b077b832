"""Whole-suite SOL analysis time: every workload of every bundled problem, counted on fake tensors, against every
registered chip (target: under 60 s on 2 CPU cores; no real tensors are allocated)."""

import time

from solbench.analysis.roofline import count_work, sol_time
from solbench.hardware.registry import list_hardware
from solbench.problems.suite import select_problems

t0 = time.perf_counter()
problems = select_problems("full")
chips = [h.ceilings() for h in list_hardware()]
t_load = time.perf_counter() - t0
n = 0
for p in problems:
    for w in p.workloads:
        work = count_work(p, w)
        for c in chips:
            sol_time(work, c)
        n += 1
total = time.perf_counter() - t0
print(f"{len(problems)} problems, {n} workloads x {len(chips)} chips: {total:.1f} s "
      f"(loading {t_load:.1f} s) (target: under 60 s)")
