"""Metrics over agent trials: pass@k, correctness, fast_p, the pass ladder and S, SOL scores, speedups and cost.

A *trial* is one attempt of one model at one problem (one sample or replicate), summarised by its best graded
submission on the held-out workloads. An *operator* (KernelGenBench's word) is the set of trials that differ
only in their sample index: the same model, language, source, family, chip and problem. Per-operator metrics
(pass@k, the two-level geometric mean, cost per success) group trials by ``operator_key``.

Definitions:

- ``pass@k`` (Chen et al. 2021, unbiased): with n samples of which c pass, 1 - C(n-c, k) / C(n, k): the chance
  that at least one of k samples drawn without replacement passes. Computed per operator, then averaged.
- correctness rate: share of trials that pass.
- ``fast_p``: share of trials that pass with speedup strictly greater than p (``solbench.records.scoring.fast_p``).
- the pass ladder R@t (MetaKernelBench): share of trials that pass with speedup >= t, for t in
  (0, 0.5, 1, 2, 4); R@0 is the pass rate. ``S`` = 100 x the mean of the ladder.
- mean SOL score: the mean of ``sol_score`` over trials, a failed trial counting 0.
- two-level geometric mean speedup (KernelGenBench): for each operator, the geometric mean of its case
  speedups in each passing trial, the best trial kept; then the geometric mean across passed operators.
- tokens (usd, wall seconds) per success: the total over all trials divided by the number of passed operators
  (an operator passes when at least one of its trials passes).

A trial passes only when its best submission passed every workload (``passed``) and its verdict, where recorded,
is ``passed`` (``succeeded``): an ``unsupported`` submission, or one with an unsupported workload, never counts
toward a pass, a rung or a success, and every trial stays in every denominator.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from pydantic import BaseModel, Field

from solbench.records import scoring

#: MetaKernelBench's ladder thresholds; 0 means "passed"
THRESHOLDS: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0, 4.0)
#: the fields ``summarize`` may group by
GROUP_KEYS: tuple[str, ...] = ("model", "language", "source", "family", "chip", "arm")
PASS_KS: tuple[int, ...] = (1, 5, 10)
FAST_PS: tuple[float, ...] = (0.0, 1.0, 2.0)


class Trial(BaseModel):
    """One attempt, scored on the held-out workloads."""
    model: str
    language: str = ""
    arm: str = ""  # an experiment's condition (solo-A, A->B, ...): trials of different arms are different operators
    source: str = ""  # where the problem comes from: "aten", "serving", "blas", "kernelbench", ...
    family: str = ""
    chip: str = ""
    problem: str
    sample: int = 0  # replicate / sample index
    passed: bool = False
    verdict: str | None = None  # the best submission's verdict over every workload, where recorded
    speedup: float | None = None  # over the baseline: geometric mean over the problem's held-out cases
    case_speedups: list[float] = Field(default_factory=list)  # per held-out case
    sol_score: float | None = None
    tokens: int = 0
    usd: float = 0.0
    wall_s: float = 0.0
    submissions: int = 0


def succeeded(t: Trial) -> bool:
    """Whether a trial counts as passed: ``passed`` and, where a verdict is recorded, the verdict ``passed``
    (``unsupported`` never counts)."""
    return t.passed and (t.verdict is None or scoring.passed(t.verdict))


def operator_key(t: Trial) -> tuple[str, ...]:
    """The operator a trial belongs to: everything but its sample index (an experiment's arms apart)."""
    return (t.model, t.language, t.source, t.family, t.chip, t.arm, t.problem)


def operators(trials: Iterable[Trial]) -> dict[tuple[str, ...], list[Trial]]:
    out: dict[tuple[str, ...], list[Trial]] = defaultdict(list)
    for t in trials:
        out[operator_key(t)].append(t)
    return dict(out)


# ---------------------------------------------------------------------------------------------------------- pass@k

def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k: 1 - C(n-c, k) / C(n, k), as the product 1 - prod_{i=n-c+1..n} (1 - k/i).

    1.0 when n - c < k (every draw of k holds a passing sample); ``ValueError`` when k > n, k < 1 or c is not
    in [0, n]."""
    if k < 1 or n < 1:
        raise ValueError(f"pass@k needs n >= 1 and k >= 1 (n={n}, k={k})")
    if k > n:
        raise ValueError(f"pass@k needs k <= n (n={n}, k={k})")
    if not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n (n={n}, c={c})")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def mean_pass_at_k(trials: Sequence[Trial], k: int) -> float | None:
    """pass@k per operator (n = its trials, c = its passing trials), averaged over operators; None when some
    operator has fewer than k trials (or there are none)."""
    ops = operators(trials)
    if not ops or any(len(ts) < k for ts in ops.values()):
        return None
    vals = [pass_at_k(len(ts), sum(succeeded(t) for t in ts), k) for ts in ops.values()]
    return sum(vals) / len(vals)


# ------------------------------------------------------------------------------------------------ per-trial rates

def reaches(passed: bool, speedup: float | None, t: float) -> bool:
    """A trial's rung test: passed, and (t == 0 or speedup >= t)."""
    if not passed:
        return False
    if t <= 0:
        return True
    return speedup is not None and speedup >= t


def s_contribution(passed: bool, speedup: float | None, thresholds: Sequence[float] = THRESHOLDS) -> float:
    """One trial's S: 100 x the share of ladder thresholds it reaches."""
    return 100.0 * sum(reaches(passed, speedup, t) for t in thresholds) / len(thresholds)


def correctness_rate(trials: Sequence[Trial]) -> float | None:
    """Share of trials that pass; None for no trials."""
    return sum(succeeded(t) for t in trials) / len(trials) if trials else None


def fast_p(trials: Sequence[Trial], p: float) -> float | None:
    """Share of trials that pass with speedup > p (``solbench.records.scoring.fast_p``); None for no trials."""
    return scoring.fast_p([t.speedup for t in trials], [succeeded(t) for t in trials], p)


def ladder(trials: Sequence[Trial], thresholds: Sequence[float] = THRESHOLDS) -> dict[float, float] | None:
    """MetaKernelBench's pass ladder: {t: R@t}, R@t = share of trials that pass with speedup >= t (t = 0: pass).
    None for no trials."""
    if not trials:
        return None
    return {float(t): sum(reaches(succeeded(x), x.speedup, t) for x in trials) / len(trials) for t in thresholds}


def s_score(lad: Mapping[float, float] | Sequence[float] | None) -> float | None:
    """S = 100 x the mean of the ladder (a mapping from ``ladder`` or its values)."""
    if lad is None:
        return None
    vals = list(lad.values()) if isinstance(lad, Mapping) else list(lad)
    return 100.0 * sum(vals) / len(vals) if vals else None


def mean_sol_score(trials: Sequence[Trial]) -> float | None:
    """Mean SOL score over trials, a failed trial counting 0; passing trials without a score are left out."""
    return scoring.mean([0.0 if not succeeded(t) else t.sol_score for t in trials])


# ------------------------------------------------------------------------------------------------ per-operator

def trial_speedup(t: Trial) -> float | None:
    """A trial's speedup: the geometric mean of its case speedups, or ``speedup`` when it has no cases."""
    if t.case_speedups:
        return scoring.geomean(t.case_speedups)
    return t.speedup if t.speedup is not None and t.speedup > 0 else None


def two_level_geomean_speedup(trials: Sequence[Trial]) -> float | None:
    """KernelGenBench's speedup: per passed operator, the best passing trial's geometric mean over its cases;
    then the geometric mean across those operators. None when no operator passed."""
    best: list[float] = []
    for ts in operators(trials).values():
        s = [v for v in (trial_speedup(t) for t in ts if succeeded(t)) if v is not None]
        if s:
            best.append(max(s))
    return scoring.geomean(best)


def passed_operators(trials: Sequence[Trial]) -> int:
    """Operators with at least one passing trial."""
    return sum(any(succeeded(t) for t in ts) for ts in operators(trials).values())


def solved_rate(trials: Sequence[Trial]) -> float | None:
    """KernelGenBench's accuracy: share of operators with at least one passing trial."""
    ops = operators(trials)
    return passed_operators(trials) / len(ops) if ops else None


def _per_success(total: float, trials: Sequence[Trial]) -> float | None:
    k = passed_operators(trials)
    return total / k if k else None


def tokens_per_success(trials: Sequence[Trial]) -> float | None:
    """Total tokens over all trials / passed operators; None when none passed."""
    return _per_success(sum(t.tokens for t in trials), trials)


def usd_per_success(trials: Sequence[Trial]) -> float | None:
    """Total US dollars over all trials / passed operators; None when none passed."""
    return _per_success(sum(t.usd for t in trials), trials)


def wall_s_per_success(trials: Sequence[Trial]) -> float | None:
    """Total wall seconds over all trials / passed operators; None when none passed."""
    return _per_success(sum(t.wall_s for t in trials), trials)


def totals(trials: Sequence[Trial]) -> dict[str, float]:
    """Sums over trials: tokens, usd, wall_s, submissions."""
    return {"tokens": sum(t.tokens for t in trials), "usd": sum(t.usd for t in trials),
            "wall_s": sum(t.wall_s for t in trials), "submissions": sum(t.submissions for t in trials)}


# ------------------------------------------------------------------------------------------------------ summary

def _fmt(x: float) -> str:
    return f"{x:g}"


def summarize(trials: Iterable[Trial], by: Sequence[str] = ("model",), ks: Sequence[int] = PASS_KS,
              ps: Sequence[float] = FAST_PS, thresholds: Sequence[float] = THRESHOLDS) -> list[dict]:
    """One row per group (``by`` any of ``GROUP_KEYS``; ``by=()`` gives one row for everything), sorted by group.

    Keys: the group fields; ``n`` (trials), ``operators``, ``passed_operators``, ``solved`` (share of operators
    passed), ``correct``, ``fast_<p>`` for p in ``ps``, ``R@<t>`` for t in ``thresholds``, ``S``, ``sol``
    (mean SOL score), ``speedup`` (two-level geometric mean), ``pass@<k>`` for k in ``ks`` (None where some
    operator has fewer than k trials), the totals ``tokens``, ``usd``, ``wall_s``, ``submissions``, and
    ``tokens_per_success``, ``usd_per_success``, ``wall_s_per_success``."""
    bad = [b for b in by if b not in GROUP_KEYS]
    if bad:
        raise ValueError(f"cannot group by {bad}; choose from {list(GROUP_KEYS)}")
    groups: dict[tuple, list[Trial]] = defaultdict(list)
    for t in trials:
        groups[tuple(getattr(t, b) for b in by)].append(t)
    rows = []
    for key in sorted(groups):
        ts = groups[key]
        lad = ladder(ts, thresholds)
        row: dict = dict(zip(by, key))
        row.update(n=len(ts), operators=len(operators(ts)), passed_operators=passed_operators(ts),
                   solved=solved_rate(ts), correct=correctness_rate(ts))
        for p in ps:
            row[f"fast_{_fmt(p)}"] = fast_p(ts, p)
        for t, r in (lad or {}).items():
            row[f"R@{_fmt(t)}"] = r
        row.update(S=s_score(lad), sol=mean_sol_score(ts), speedup=two_level_geomean_speedup(ts))
        for k in ks:
            row[f"pass@{k}"] = mean_pass_at_k(ts, k)
        row.update(totals(ts))
        row.update(tokens_per_success=tokens_per_success(ts), usd_per_success=usd_per_success(ts),
                   wall_s_per_success=wall_s_per_success(ts))
        rows.append(row)
    return rows
