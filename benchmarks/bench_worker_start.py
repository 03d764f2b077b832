"""How long until a fresh candidate process is ready (forked from the zygote, sandboxed, device context, the
solution's import; no kernel compilation), with and without the namespace sandbox. Target (issue 3): under 3 s.

Also prints the cold start of the persistent trusted worker (Python, torch, zygote, CUDA context), paid once per
device and run, and the whole one-workload evaluation once the trusted worker is up.

Usage: python benchmarks/bench_worker_start.py [--device cpu|cuda] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from solbench.evaluate.isolation.namespaces import namespaces_available
from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.problems.problem import load_problem
from solbench.problems.solution import load_solution

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    problem = load_problem(ROOT / "tests" / "fixtures" / "problems" / "axpy")
    sol = load_solution(ROOT / "tests" / "fixtures" / "problems" / "axpy" / "solutions" / "torch_ok.py", problem.name)
    workload = next(w.uuid for w in problem.workloads if w.runs_on(args.device))
    modes = ["auto", "none"] if namespaces_available() else ["none"]
    for mode in modes:
        ready, total = [], []
        for i in range(args.repeats + 1):
            ev = evaluate(problem, sol, EvalOptions(device=args.device, baselines=(), time_candidate=False,
                                                    workloads=[workload], sandbox=mode))
            if i == 0 and mode == modes[0]:
                print(f"{args.device} trusted worker cold start to first candidate ready: "
                      f"{ev.environment['worker_ready_s']:.2f} s (paid once per device and run)")
                continue
            ready.append(ev.environment["candidate_ready_s"])
            total.append(ev.elapsed_s)
        label = "namespaces" if mode == "auto" else "no namespaces"
        print(f"{args.device} {label:14s} candidate ready median {statistics.median(ready):.3f} s "
              f"(min {min(ready):.3f}, max {max(ready):.3f}); whole one-workload evaluation median "
              f"{statistics.median(total):.2f} s over {len(ready)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
