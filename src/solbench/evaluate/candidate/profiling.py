"""A candidate's process under cProfile, for benchmarks (``benchmarks/worker_profile.py --candidate``): where its
sandbox's environment names ``VAR`` (a folder in its private directory, set by the runner only when the benchmark
asked for it), the process profiles its commands and writes the profile there when asked to exit."""

from __future__ import annotations

import os
import time

VAR = "SOLBENCH_CANDIDATE_PROFILE"


def start():
    """A running profiler where ``VAR`` asks for one, else None."""
    if not os.environ.get(VAR):
        return None
    import cProfile

    prof = cProfile.Profile()
    prof.enable()
    return prof


def finish(prof) -> None:
    """Write ``prof`` (from ``start``) to ``VAR``'s folder, one file per process."""
    if prof is None:
        return
    prof.disable()
    where = os.environ[VAR]
    os.makedirs(where, exist_ok=True)
    prof.dump_stats(os.path.join(where, f"candidate-{os.getpid()}-{time.time_ns()}.prof"))
