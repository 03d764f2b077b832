"""Paired statistics for MetaKernelBench-style transfer experiments.

Each problem is attempted in R replicates. A replicate gives a *pair*: the skill-conditioned arm (the target
language's attempt given the skill written by the source attempt) and the target's solo arm, plus the source
attempt's solo arm, which wrote the skill. Every arm is an ``Arm`` (passed, speedup over the baseline).

Definitions:

- per-arm value, by ``metric``:
  ``"S"``: 100 x the mean over the ladder thresholds (0, 0.5, 1, 2, 4) of [passed and speedup >= t] (t = 0:
  passed), i.e. the arm's contribution to S; ``"correct"``: 1 if passed else 0; ``"speed"``: log(speedup),
  defined only for pairs where both arms passed (other pairs are left out).
- lift of a pair: skill value - solo value. The mean lift is the mean over all usable pairs.
- the interval is a cluster (problem) bootstrap percentile interval: draw as many problems as there are,
  with replacement, take every usable pair of each drawn problem, recompute the mean lift over the pooled pairs;
  the interval is the (1-level)/2 and (1+level)/2 percentiles over the resamples. Replicates of one problem
  are correlated, so resampling trials would understate the uncertainty.
- help / harm: a pair helps when its lift > tol, harms when its lift < -tol, ties otherwise; help (harm) rate
  = helps (harms) / pairs.
- standing: the source's ladder tier against the target's solo tier, where an arm's tier is the number of
  ladder thresholds it reaches (0 = failed, 1 = passed below 0.5x, ..., 5 = passed at 4x or more): "above",
  "same" or "below"; pairs without a source arm are counted as "unknown".
- the sign-flip permutation test: for problem-level mean lifts d_1..d_P, the statistic is |mean(d)|; under the
  null of no effect every d_j is as likely to be -d_j. The two-sided p-value is the share of the 2^P sign
  assignments (exact, for P <= 16) whose |mean| is >= the observed one; for larger P it is (1 + hits) / (1 + B)
  over B seeded random assignments.
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence

import numpy as np
from pydantic import BaseModel

from solbench.records import scoring
from solbench.agents.metrics import THRESHOLDS, reaches, s_contribution

METRICS = ("S", "correct", "speed")
STANDINGS = ("above", "same", "below")


class Arm(BaseModel):
    """One attempt's result. It counts as passed only when ``passed`` and its verdict, where recorded, is
    ``passed``: an ``unsupported`` best submission is a failed arm."""
    passed: bool = False
    speedup: float | None = None
    verdict: str | None = None

    @property
    def ok(self) -> bool:
        return self.passed and (self.verdict is None or scoring.passed(self.verdict))


class Pair(BaseModel):
    """One (problem, replicate): the skill arm, the target's solo arm and the source's solo arm."""
    problem: str
    replicate: int = 0
    skill: Arm
    solo: Arm
    source: Arm | None = None


class Lift(BaseModel):
    metric: str
    mean: float | None  # mean lift over usable pairs (skill - solo); for "speed", a mean log ratio
    lo: float | None  # bootstrap percentile interval
    hi: float | None
    level: float
    n_pairs: int
    n_problems: int
    skill: float | None  # the arms' mean values over the same pairs
    solo: float | None
    resamples: int
    seed: int


def _pairs(pairs: Iterable[Pair | dict]) -> list[Pair]:
    return [p if isinstance(p, Pair) else Pair.model_validate(p) for p in pairs]


def tier(a: Arm, thresholds: Sequence[float] = THRESHOLDS) -> int:
    """Number of ladder thresholds an arm reaches."""
    return sum(reaches(a.ok, a.speedup, t) for t in thresholds)


def arm_value(a: Arm, metric: str) -> float | None:
    """An arm's value under ``metric`` (see the module docstring); None where undefined."""
    if metric == "S":
        return s_contribution(a.ok, a.speedup)
    if metric == "correct":
        return 1.0 if a.ok else 0.0
    if metric == "speed":
        if a.ok and a.speedup is not None and a.speedup > 0:
            return math.log(a.speedup)
        return None
    raise ValueError(f"unknown metric {metric!r}; choose from {METRICS}")


def pair_values(p: Pair, metric: str) -> tuple[float, float] | None:
    """(skill value, solo value), or None when the pair is not usable under ``metric``."""
    s, o = arm_value(p.skill, metric), arm_value(p.solo, metric)
    return None if s is None or o is None else (s, o)


def pair_lift(p: Pair, metric: str) -> float | None:
    v = pair_values(p, metric)
    return None if v is None else v[0] - v[1]


def _by_problem(pairs: list[Pair], metric: str) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for p in pairs:
        d = pair_lift(p, metric)
        if d is not None:
            out[p.problem].append(d)
    return dict(out)


def problem_lifts(pairs: Iterable[Pair | dict], metric: str = "S") -> dict[str, float]:
    """Mean lift per problem, over its usable pairs."""
    return {k: sum(v) / len(v) for k, v in _by_problem(_pairs(pairs), metric).items()}


def cluster_bootstrap(sums: np.ndarray, counts: np.ndarray, resamples: int = 10000, seed: int = 0,
                      level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of a pooled mean, resampling clusters: cluster j holds ``counts[j]`` values summing
    to ``sums[j]``; each resample draws len(sums) clusters with replacement (multinomial weights) and takes
    sum(w * sums) / sum(w * counts)."""
    sums, counts = np.asarray(sums, float), np.asarray(counts, float)
    P = len(sums)
    rng = np.random.default_rng(seed)
    w = rng.multinomial(P, np.full(P, 1.0 / P), size=resamples).astype(float)  # (B, P)
    stats = (w @ sums) / (w @ counts)
    lo, hi = np.percentile(stats, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def paired_lift(pairs: Iterable[Pair | dict], metric: str = "S", resamples: int = 10000, seed: int = 0,
                level: float = 0.95) -> Lift:
    """Mean lift (skill - solo) over usable pairs under ``metric``, with a problem-level cluster bootstrap
    percentile interval (see the module docstring). Fields are None when no pair is usable."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose from {METRICS}")
    if resamples < 1:
        raise ValueError("resamples must be >= 1")
    ps = _pairs(pairs)
    vals = [v for v in (pair_values(p, metric) for p in ps) if v is not None]
    groups = _by_problem(ps, metric)
    common = {"metric": metric, "level": level, "n_pairs": len(vals), "n_problems": len(groups),
              "resamples": resamples, "seed": seed}
    if not vals:
        return Lift(mean=None, lo=None, hi=None, skill=None, solo=None, **common)
    keys = sorted(groups)
    sums = np.array([sum(groups[k]) for k in keys])
    counts = np.array([len(groups[k]) for k in keys])
    mean = float(sums.sum() / counts.sum())
    lo, hi = cluster_bootstrap(sums, counts, resamples, seed, level)
    lo, hi = min(lo, mean), max(hi, mean)  # guard float rounding when every lift is equal
    return Lift(mean=mean, lo=lo, hi=hi, skill=sum(v[0] for v in vals) / len(vals),
                solo=sum(v[1] for v in vals) / len(vals), **common)


def help_harm(pairs: Iterable[Pair | dict], tol: float = 0.0, metric: str = "S") -> dict:
    """Per usable pair: win (lift > tol), tie (|lift| <= tol), loss (lift < -tol).

    Returns n, wins, ties, losses, help (= wins / n), harm (= losses / n) and mean_lift; rates and the mean are
    None for no pairs."""
    lifts = [d for d in (pair_lift(p, metric) for p in _pairs(pairs)) if d is not None]
    n = len(lifts)
    wins = sum(d > tol for d in lifts)
    losses = sum(d < -tol for d in lifts)
    return {"n": n, "wins": wins, "ties": n - wins - losses, "losses": losses,
            "help": wins / n if n else None, "harm": losses / n if n else None,
            "mean_lift": sum(lifts) / n if n else None}


def standing(p: Pair) -> str:
    """The source's tier against the target's solo tier: "above", "same", "below" ("unknown" without a source)."""
    if p.source is None:
        return "unknown"
    s, o = tier(p.source), tier(p.solo)
    return "above" if s > o else "below" if s < o else "same"


def by_standing(pairs: Iterable[Pair | dict], tol: float = 0.0, metric: str = "S") -> dict[str, dict]:
    """``help_harm`` within each standing: {"above": ..., "same": ..., "below": ...}, plus "unknown" when some
    pair has no source arm. Each entry has n, wins, ties, losses, help, harm and mean_lift."""
    groups: dict[str, list[Pair]] = {k: [] for k in STANDINGS}
    for p in _pairs(pairs):
        groups.setdefault(standing(p), []).append(p)
    return {k: help_harm(v, tol, metric) for k, v in groups.items()}


def sign_flip_pvalue(lifts: Sequence[float], resamples: int = 10000, seed: int = 0, exact_max: int = 16) -> float:
    """Two-sided sign-flip permutation p-value for problem-level mean lifts (see the module docstring).
    Exact over all 2^P sign assignments for P <= ``exact_max``, Monte Carlo ((1 + hits) / (1 + B)) otherwise.
    1.0 for no lifts."""
    d = np.asarray(list(lifts), float)
    P = len(d)
    if P == 0:
        return 1.0
    obs = abs(d.mean())
    eps = 1e-12 * max(1.0, float(np.abs(d).max()))
    if P <= exact_max:
        bits = (np.arange(2 ** P)[:, None] >> np.arange(P)) & 1
        stats = np.abs(((1 - 2 * bits) * d).mean(axis=1))
        return float((stats >= obs - eps).mean())
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(resamples, P))
    hits = int((np.abs((signs * d).mean(axis=1)) >= obs - eps).sum())
    return (1 + hits) / (1 + resamples)


def permutation_test(pairs: Iterable[Pair | dict], metric: str = "S", resamples: int = 10000, seed: int = 0,
                     exact_max: int = 16) -> float:
    """``sign_flip_pvalue`` on the problem-level mean lifts of ``pairs`` under ``metric``."""
    return sign_flip_pvalue(list(problem_lifts(pairs, metric).values()), resamples, seed, exact_max)
