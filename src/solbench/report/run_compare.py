"""Two runs side by side (``solbench compare RUN_A RUN_B``): for each solution both ran (by problem and
solution name), each workload's time in B against A with a significance test on the raw samples, the solution's
geometric-mean ratio over its workloads, and the runs' geometric mean over the solutions both timed.

The test is Mann-Whitney's U on the two sets of samples (two-sided, the normal approximation with the tie
correction): no assumption on the samples' distribution, which for kernel times is skewed. A change counts where
p < ``ALPHA`` and the medians differ by more than ``NOISE`` (a significant change of 0.1% is not one a reader
acts on)."""

from __future__ import annotations

import math
from typing import Any

ALPHA = 0.01
NOISE = 0.02


def mann_whitney_p(a: list[float], b: list[float]) -> float | None:
    """Two-sided p-value of Mann-Whitney's U for samples ``a`` and ``b`` (None: too few to test)."""
    n1, n2 = len(a), len(b)
    if n1 < 3 or n2 < 3:
        return None
    ranked = sorted([(x, 0) for x in a] + [(x, 1) for x in b])
    ranks = [0.0] * len(ranked)
    ties = 0.0
    i = 0
    while i < len(ranked):
        j = i
        while j + 1 < len(ranked) and ranked[j + 1][0] == ranked[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        t = j - i + 1
        ties += t ** 3 - t
        i = j + 1
    r1 = sum(r for r, (_, side) in zip(ranks, ranked) if side == 0)
    u = r1 - n1 * (n1 + 1) / 2
    n = n1 + n2
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = (abs(u - n1 * n2 / 2) - 0.5) / math.sqrt(var)
    return max(0.0, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2))))


def _geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def workload_change(a: Any, b: Any) -> dict[str, Any]:
    """One workload in run A (``a``) and run B (``b``): the ratio of medians, the p-value, the call."""
    ta, tb = a.time_ms, b.time_ms
    ratio = tb / ta if ta and tb else None
    p = mann_whitney_p(list(a.samples_ms or []), list(b.samples_ms or []))
    call = ("-" if ratio is None else
            "faster" if p is not None and p < ALPHA and ratio < 1 - NOISE else
            "slower" if p is not None and p < ALPHA and ratio > 1 + NOISE else "same")
    return {"workload": a.uuid, "a_ms": ta, "b_ms": tb, "ratio": ratio, "p": p, "call": call,
            "a_verdict": a.verdict, "b_verdict": b.verdict}


def compare_runs(a: list[Any], b: list[Any]) -> dict[str, Any]:
    """``a``, ``b``: the two runs' evaluations. Rows per solution both ran, and the runs' summary."""
    by_b = {(e.problem, e.solution): e for e in b}
    rows = []
    for ea in a:
        eb = by_b.get((ea.problem, ea.solution))
        if eb is None:
            continue
        wb = {w.uuid: w for w in eb.workloads}
        changes = [workload_change(w, wb[w.uuid]) for w in ea.workloads if w.uuid in wb]
        ratios = [c["ratio"] for c in changes if c["ratio"]]
        calls = {c["call"] for c in changes} - {"-"}
        rows.append({"problem": ea.problem, "solution": ea.solution, "a_verdict": ea.verdict,
                     "b_verdict": eb.verdict, "a_sol": ea.sol_score, "b_sol": eb.sol_score,
                     "ratio": _geomean(ratios), "workloads": changes,
                     "call": ("mixed" if {"faster", "slower"} <= calls else "faster" if "faster" in calls else
                              "slower" if "slower" in calls else "same" if calls else "-")})
    timed = [r["ratio"] for r in rows if r["ratio"]]
    return {"rows": rows, "geomean_ratio": _geomean(timed), "timed": len(timed),
            "only_a": sorted({(e.problem, e.solution) for e in a} - {(e.problem, e.solution) for e in b}),
            "only_b": sorted({(e.problem, e.solution) for e in b} - {(e.problem, e.solution) for e in a}),
            "alpha": ALPHA, "noise": NOISE}
