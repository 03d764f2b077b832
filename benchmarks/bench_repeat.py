"""Run-to-run agreement of kernel times, with the stream held (TimingConfig.hold, the default) and without.

Every starter example solution is evaluated twice in a row (baselines off, so nothing but the candidate's own
timing is compared), and the two medians of each workload are compared for kernels of 50 us or more. Target
(issue 2): within 1%. Run it once per mode to compare them:

    python benchmarks/bench_repeat.py --device cuda
    python benchmarks/bench_repeat.py --device cuda --no-hold
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.evaluate.timing.rounds import TimingConfig
from solbench.hardware.registry import detect
from solbench.problems.solution import load_solution
from solbench.problems.suite import select_problems


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--no-hold", dest="hold", action="store_false", help="time without the held stream")
    ap.add_argument("--suite", default="starter")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    hw = detect(args.device)
    pairs = []
    for problem in select_problems(args.suite):
        for path in problem.example_solutions:
            sol = load_solution(path, problem.name)
            runs = [evaluate(problem, sol, EvalOptions(device=args.device, hardware=hw, baselines=(),
                                                       timing=TimingConfig(hold=args.hold))) for _ in range(2)]
            for a, b in zip(runs[0].workloads, runs[1].workloads):
                if a.time_ms and b.time_ms and min(a.time_ms, b.time_ms) >= 0.05:
                    pairs.append({"problem": problem.name, "workload": a.uuid, "first_ms": a.time_ms,
                                  "second_ms": b.time_ms, "graph_ms": a.graph_ms,
                                  "rel_diff": abs(a.time_ms - b.time_ms) / min(a.time_ms, b.time_ms)})
    diffs = sorted(p["rel_diff"] for p in pairs)
    mode = "held stream" if args.hold else "stream not held"
    if not diffs:
        print(f"{mode}: no workload of 50 us or more")
        return 0
    print(f"{mode}: {sum(d <= 0.01 for d in diffs)}/{len(diffs)} workloads within 1%, median "
          f"{statistics.median(diffs):.2%}, max {diffs[-1]:.2%}")
    for p in sorted(pairs, key=lambda p: -p["rel_diff"])[:5]:
        print(f"   {p['problem']}/{p['workload']}: {p['first_ms']:.4f} vs {p['second_ms']:.4f} ms "
              f"({p['rel_diff']:.2%}; graph {p['graph_ms']})")
    if args.out:
        Path(args.out).write_text(json.dumps({"mode": mode, "pairs": pairs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
