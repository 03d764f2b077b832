"""Scores: the SOL score per workload, problem aggregates, speedups and fast_p.

S = 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL)): 0.5 at the baseline, 1.0 at the
speed of light, toward 0 when slower. A time below T_SOL is physically
impossible for an honest kernel under a true lower bound: it is flagged
``below_sol`` and scored 1.0 at most. Where the baseline is within 5% of T_SOL
the bound cannot separate kernels; the workload is reported ``invalid_bound``
and not scored. An evaluation's aggregate (``aggregate``) needs every other workload scored.

``unsupported`` (nothing of the solution judged, on a workload or the whole evaluation) never counts toward a
pass: only the verdict ``passed`` does (``passed``), an evaluation with an unsupported workload has no
aggregate, and wherever a failure would stay in a denominator (fast_p, a run's mean score) an unsupported
workload or evaluation stays in it as a failure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

INVALID_BOUND_MARGIN = 0.05
#: the thresholds of an evaluation's fast_p
FAST_PS: tuple[float, ...] = (0.0, 1.0, 1.5, 2.0)


def passed(verdict: str | None) -> bool:
    """Whether a verdict counts as a pass: ``passed`` alone (never ``unsupported``)."""
    return verdict == "passed"


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
    if any(w.verdict == "unsupported" for w in workloads):
        return None
    counted = [w for w in workloads if not (passed(w.verdict) and set(w.warnings) & PROBLEM_EXCLUSIONS)]
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


def evaluation_fast_p(workloads: list, ps: tuple[float, ...] = FAST_PS) -> dict[str, float]:
    """An evaluation's ``fast_<p>``: every workload but the interpreted ones (correctness only, never timed) in
    the denominator, an unsupported or failed one never a hit; empty when no workload has a speedup."""
    timed = [w for w in workloads if not w.interpreted]
    if not any(w.speedup_vs_baseline is not None for w in timed):
        return {}
    speedups = [w.speedup_vs_baseline for w in timed]
    correct = [passed(w.verdict) for w in timed]
    out = {f"fast_{p:g}": fast_p(speedups, correct, p) for p in ps}
    return {k: v for k, v in out.items() if v is not None}


def run_mean(evaluations: list) -> float | None:
    """A run's mean SOL score over its evaluations: each its aggregate; one without an aggregate counts 0 unless
    it passed (an unsupported or failed evaluation stays in the denominator as a failure; a passing one left
    unscored, interpreted or without a bound, is left out)."""
    vals = [e.sol_score if e.sol_score is not None else 0.0 for e in evaluations
            if e.sol_score is not None or not passed(e.verdict)]
    return sum(vals) / len(vals) if vals else None
