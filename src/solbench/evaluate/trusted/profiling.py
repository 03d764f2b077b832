"""A trusted worker's jobs under cProfile, for benchmarks (``benchmarks/worker_profile.py``): where
``SOLBENCH_WORKER_PROFILE`` names a directory, each job's profile is written there, one file per job. Where
``candidate.profiling.VAR`` names one in the runner's environment, each candidate's process profiles itself in its
private directory and the runner copies its profiles there (``candidate_env``, ``collect_candidates``)."""

from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any, Callable

from solbench.evaluate.candidate.profiling import VAR

#: the environment entry naming where a worker writes its jobs' profiles
WORKER_VAR = "SOLBENCH_WORKER_PROFILE"
#: the largest candidate profile copied out of a sandbox
MAX_PROFILE_BYTES = 64 << 20


def profiled(serve: Callable[..., int], job_path: str, chan, zygote) -> int:
    """``serve(job_path, chan, zygote)``, profiled where ``SOLBENCH_WORKER_PROFILE`` asks for it: the profile is
    written before the job's last message (the runner may kill this worker once it has it)."""
    where = os.environ.get(WORKER_VAR)
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


def candidate_env(private: Path) -> dict[str, str]:
    """The candidate's environment entry that has it profile itself (into ``private``'s ``profiles`` folder),
    where the runner's environment asks for candidates' profiles; else nothing."""
    return {VAR: str(private / "profiles")} if os.environ.get(VAR) else {}


def collect_candidates(private: Path) -> int:
    """Copy the candidates' profiles out of ``private`` (regular files, no link followed, each at most
    ``MAX_PROFILE_BYTES``) into the folder the runner's environment names; how many were copied."""
    into = os.environ.get(VAR)
    folder = private / "profiles"
    if not into or folder.is_symlink() or not folder.is_dir():
        return 0
    copied = 0
    Path(into).mkdir(parents=True, exist_ok=True)
    for p in sorted(folder.iterdir()):
        try:
            st = p.lstat()
            if stat.S_ISREG(st.st_mode) and st.st_size <= MAX_PROFILE_BYTES and p.name.endswith(".prof"):
                shutil.copyfile(p, Path(into) / p.name, follow_symlinks=False)
                copied += 1
        except OSError:
            continue
    return copied
