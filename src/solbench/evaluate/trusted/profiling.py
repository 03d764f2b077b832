"""A trusted worker's jobs under cProfile, for benchmarks (``benchmarks/worker_profile.py``): where
``SOLBENCH_WORKER_PROFILE`` names a directory, each job's profile is written there, one file per job."""

from __future__ import annotations

import os
import time
from typing import Any, Callable


def profiled(serve: Callable[..., int], job_path: str, chan, zygote) -> int:
    """``serve(job_path, chan, zygote)``, profiled where ``SOLBENCH_WORKER_PROFILE`` asks for it: the profile is
    written before the job's last message (the runner may kill this worker once it has it)."""
    where = os.environ.get("SOLBENCH_WORKER_PROFILE")
    if not where:
        return serve(job_path, chan, zygote)
    import cProfile

    path = os.path.join(where, f"job-{os.getpid()}-{time.time_ns()}.prof")
    return serve(job_path, Profiling(chan, cProfile.Profile(), path), zygote)


class Profiling:
    """A job's channel that profiles the job from its first message to its last, then writes the profile (whole,
    under its final name) before sending that last message."""

    def __init__(self, chan, prof, path: str):
        self.chan, self.prof, self.path = chan, prof, path
        prof.enable()

    def send(self, **msg: Any) -> None:
        if msg.get("type") == "done":
            self.prof.disable()
            self.prof.dump_stats(self.path + ".part")
            os.replace(self.path + ".part", self.path)
        self.chan.send(**msg)
