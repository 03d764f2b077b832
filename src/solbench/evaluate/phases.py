"""Where an evaluation's time went: named phases, in seconds, summed over their occurrences.

The runner records its own (``stage``, ``static_scan``, ``analysis``, ``worker``: the candidate's job on the
trusted worker, ``baselines``, ``judge``, ``store``); the trusted worker records the candidate's start and, per
workload, ``limit`` (the reference call that sets the workload's time limit), ``inputs``, ``reference`` (the
reference and its float64 anchor), ``calls`` (the candidate's checked calls, its ghost replay and profiled call
included), ``compare``, and ``timing`` with, inside it, ``timing.fill`` (the ring's fresh inputs),
``timing.rounds`` (the candidate's timed rounds, sent and answered), ``timing.recheck`` and ``timing.graph``.
A phase nested in another (``timing.fill`` in ``timing``) is counted in both. ``eval --json`` and the database
hold them (``Evaluation.phases``, ``WorkloadResult.phases``).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator


class Phases:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - t0)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + float(seconds)

    def merge(self, other: dict[str, float] | None) -> None:
        for name, s in (other or {}).items():
            if isinstance(s, (int, float)):
                self.add(str(name), s)

    def take(self) -> dict[str, float]:
        """The phases so far, rounded to the microsecond, and a fresh start."""
        out = {k: round(v, 6) for k, v in self.seconds.items()}
        self.seconds = {}
        return out
