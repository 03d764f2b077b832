"""Harness cost and repeatability on the starter suite (figures go to docs/PERFORMANCE.md).

Run after `solbench run --db DB` has evaluated the suite once (first compiles,
baselines measured and cached). This script evaluates every example solution
again against the same database, so baselines come from the cache and Triton's
and Inductor's caches are warm: what is left is the steady-state cost of an
evaluation. It reports

- seconds per solution and per workload (a least-squares fit of
  elapsed = fixed + per_workload * workloads over all evaluations), against the
  targets of 3.75 s per solution and 0.25 s per workload;
- run-to-run agreement of the kernel medians between the two evaluations, for
  kernels of 50 us or more, against the 1% target.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.hardware.registry import detect
from solbench.problems.solution import load_solution
from solbench.problems.suite import select_problems
from solbench.store.db import Store


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return my - slope * mx, slope


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    store = Store(args.db)
    previous: dict[tuple[str, str, str], float] = {}
    for eid in store.evaluation_ids():
        ev, _ = store.evaluation(eid)
        for w in ev.workloads:
            if w.time_ms:
                previous[(ev.problem, ev.solution, w.uuid)] = w.time_ms
    hw = detect(args.device)
    points = []
    rows = []
    agreement = []
    t_all = time.perf_counter()
    for problem in select_problems("starter"):
        for path in problem.example_solutions:
            sol = load_solution(path, problem.name)
            ev = evaluate(problem, sol, EvalOptions(device=args.device, hardware=hw), store=store)
            n = len(ev.workloads)
            points.append((n, ev.elapsed_s))
            rows.append({"problem": problem.name, "solution": sol.name, "workloads": n, "elapsed_s": ev.elapsed_s,
                         "verdict": ev.verdict})
            for w in ev.workloads:
                before = previous.get((problem.name, sol.name, w.uuid))
                if before and w.time_ms and min(before, w.time_ms) >= 0.05:
                    agreement.append({"problem": problem.name, "workload": w.uuid, "first_ms": before,
                                      "second_ms": w.time_ms,
                                      "rel_diff": abs(w.time_ms - before) / min(w.time_ms, before)})
    total = time.perf_counter() - t_all
    fixed, per_workload = fit(points) if len(points) > 1 else (float("nan"), float("nan"))
    n_workloads = sum(p[0] for p in points)
    diffs = sorted(a["rel_diff"] for a in agreement)
    result = {
        "device": hw.name,
        "date": time.strftime("%Y-%m-%d"),
        "solutions": len(points),
        "workloads": n_workloads,
        "total_s": total,
        "mean_s_per_solution": total / max(len(points), 1),
        "mean_s_per_workload": total / max(n_workloads, 1),
        "fit_fixed_s_per_solution": fixed,
        "fit_s_per_workload": per_workload,
        "repeat_pairs_ge_50us": len(diffs),
        "repeat_within_1pct": sum(d <= 0.01 for d in diffs),
        "repeat_median_rel_diff": statistics.median(diffs) if diffs else None,
        "repeat_max_rel_diff": diffs[-1] if diffs else None,
        "per_solution": rows,
        "agreement": agreement,
    }
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"{'solutions':28s} {len(points)}  workloads {n_workloads}  total {total:.1f} s")
    print(f"{'mean per solution':28s} {result['mean_s_per_solution']:.2f} s   (target <= 3.75 s)")
    print(f"{'fit: fixed per solution':28s} {fixed:.2f} s")
    print(f"{'fit: per workload':28s} {per_workload:.3f} s (target <= 0.25 s)")
    if diffs:
        print(f"{'repeat agreement >= 50 us':28s} {result['repeat_within_1pct']}/{len(diffs)} within 1%, "
              f"median {result['repeat_median_rel_diff']:.2%}, max {result['repeat_max_rel_diff']:.2%}")
        worst = sorted(agreement, key=lambda a: -a["rel_diff"])[:5]
        for a in worst:
            print(f"   {a['problem']}/{a['workload']}: {a['first_ms']:.4f} vs {a['second_ms']:.4f} ms ({a['rel_diff']:.2%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
