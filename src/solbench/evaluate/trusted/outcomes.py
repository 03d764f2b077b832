"""What the trusted worker learns from a subject (``subjects``): a call (``Called``), a timing (``Timed``), a
timing ended with a verdict (``Rejected``), and which timed calls it re-checks, picked from a secret."""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass, field
from typing import Any

from solbench.evaluate.integrity import kernel_origin

#: re-checked calls per round, picked at random among the round's timed calls, the round's last one beside
RECHECKS_GPU = 5
#: on the CPU every timed call is re-checked while a workload's outputs hold fewer elements than this; larger ones
#: are picked like the GPU's (a re-check of 67 million elements costs seconds on the CPU: the reference, its
#: float64 anchor and the comparison)
RECHECK_ALL_BELOW = 1 << 22


@dataclass
class Called:
    """One call of a subject: its outputs, its inputs as the call left them, and what went wrong."""

    outputs: list[Any] | None = None
    inputs_after: list[Any] | None = None
    codes: list[str] = field(default_factory=list)
    failed: dict[str, Any] | None = None
    lost: bool = False  # the subject's process (or CUDA context) cannot go on
    peak_memory_bytes: int | None = None  # device memory the call allocated beyond its inputs, at its peak
    account: Any = None  # with profiling: kernel_origin.Account, device time by whose kernels ran
    dsl_stores: int | None = None  # on the CPU: elements the solution's DSL kernels stored during the call
    message: str | None = None

    @property
    def dsl_share(self) -> float | None:
        """With profiling: the solution's own kernels' share of the call's device time."""
        return self.account.share(kernel_origin.OWN) if self.account is not None else None


@dataclass
class Timed:
    """One timing of a subject: the measurement and what went wrong."""

    timing: Any = None  # timing.Timing; None where the timing failed or its report was rejected
    codes: list[str] = field(default_factory=list)
    failed: dict[str, Any] | None = None
    lost: bool = False
    message: str | None = None
    rechecked: int = 0  # timed calls re-checked against the reference
    failure: dict[str, Any] | None = None  # the re-check that failed: call, seed, worst element
    audit: dict[str, Any] | None = None  # the trusted side's confirmation of the time (``audit.Audit.record``)


class Rejected(Exception):
    """Ends a candidate's timing with a verdict (reason codes, a message)."""

    def __init__(self, codes: list[str], message: str, failure: dict[str, Any] | None = None):
        super().__init__(message)
        self.codes = codes
        self.message = message
        self.failure = failure


def picks(rng: random.Random, calls: list[int], cuda: bool, elements: int = 0) -> list[int]:
    """Which of a round's timed calls are re-checked: on the CPU all of them for outputs of fewer than
    ``RECHECK_ALL_BELOW`` ``elements``, otherwise ``RECHECKS_GPU`` at random and the round's last one."""
    if not calls:
        return []
    if (not cuda and elements < RECHECK_ALL_BELOW) or len(calls) <= RECHECKS_GPU + 1:
        return list(calls)
    chosen = set(rng.sample(calls[:-1], RECHECKS_GPU))
    chosen.add(calls[-1])
    return sorted(chosen)


def secret_rng() -> random.Random:
    return random.Random(secrets.randbits(64))


