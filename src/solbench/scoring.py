"""Scores: the SOL score per workload, problem aggregates, speedups and fast_p.

S = 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL)): 0.5 at the baseline, 1.0 at the
speed of light, toward 0 when slower. A time below T_SOL is physically
impossible for an honest kernel under a true lower bound: it is flagged
``below_sol`` and scored 1.0 at most. Where the baseline is within 5% of T_SOL
the bound cannot separate kernels; the workload is reported ``invalid_bound``
and not scored. An evaluation's aggregate (``aggregate``) needs every other workload scored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

INVALID_BOUND_MARGIN = 0.05


@dataclass
class Score:
    value: float | None
    flags: list[str]


def sol_score(t_kernel: float | None, t_baseline: float | None, t_sol: float | None, correct: bool) -> Score:
    if not correct:
        return Score(0.0, [])
    if t_kernel is None or t_baseline is None or t_sol is None:
        return Score(None, [])
    if t_baseline <= t_sol * (1 + INVALID_BOUND_MARGIN):
        flags = ["invalid_bound"]
        if t_kernel < t_sol:
            flags.append("below_sol")
        return Score(None, flags)
    if t_kernel < t_sol:
        return Score(1.0, ["below_sol"])
    return Score(1.0 / (1.0 + (t_kernel - t_sol) / (t_baseline - t_sol)), [])


#: a passing workload the problem itself leaves unscored: it is left out of an evaluation's aggregate alike for every
#: solution
PROBLEM_EXCLUSIONS = frozenset({"invalid_bound", "no_sol_bound"})


def aggregate(workloads: list) -> float | None:
    """An evaluation's SOL score: the mean over its workloads, a failed one counting 0. It exists only when every
    workload has a score, except passing ones the problem leaves unscored (``PROBLEM_EXCLUSIONS``): a workload
    left unscored for any reason of the solution's (``unsupported``, not timed) leaves the evaluation without an
    aggregate, never with a mean over the rest."""
    counted = [w for w in workloads if not (w.verdict == "passed" and set(w.warnings) & PROBLEM_EXCLUSIONS)]
    if not counted or any(w.sol_score is None for w in counted):
        return None
    return sum(w.sol_score for w in counted) / len(counted)


def mean(values: list[float | None]) -> float | None:
    xs = [v for v in values if v is not None]
    return sum(xs) / len(xs) if xs else None


def geomean(values: list[float | None]) -> float | None:
    xs = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in xs) / len(xs)) if xs else None


def fast_p(speedups: list[float | None], correct: list[bool], p: float) -> float | None:
    """Share of workloads that are correct and faster than the baseline by more than a factor p."""
    if not speedups:
        return None
    hits = sum(1 for s, ok in zip(speedups, correct) if ok and s is not None and s > p)
    return hits / len(speedups)
