"""The evaluation's own checks, timed in-process (figures for docs/PERFORMANCE.md, "The checks' own cost").

    python benchmarks/bench_checks.py [--reps 50] [--evals 4]

- the candidate's harness check after a reply: the marks (``tamper.Harness.changed``) against a snapshot and its
  comparison, with the modules of a candidate's process loaded;
- the live-children check (``dynamic.child_processes``) with 25 threads in the process;
- one bf16 output judged: the re-checks' quick test (``elementwise.within``) against the full comparison;
- a warm evaluation of the axpy fixture on the CPU (the worker started by the first), with its phases.

Each figure is the median of its repetitions; the machine's load moves them, so compare runs made side by side.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _ms(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def harness(reps: int) -> None:
    import solbench.evaluate.candidate.process  # noqa: F401  (the harness modules a candidate's process loads)
    from solbench.evaluate.integrity import tamper

    h = tamper.Harness()
    full = _ms(lambda: tamper.tampered(h.snapshot, tamper.snapshot()), reps)
    quick = _ms(h.changed, reps)
    print(f"harness check ({len(h.snapshot)} entries): snapshot and comparison {full:.2f} ms, marks {quick:.2f} ms")


def children(reps: int) -> None:
    from solbench.evaluate.integrity import dynamic

    stop = threading.Event()
    threads = [threading.Thread(target=stop.wait) for _ in range(24)]
    for t in threads:
        t.start()
    try:
        print(f"live children, 25 threads, none alive: {_ms(dynamic.child_processes, reps):.3f} ms")
    finally:
        stop.set()


def judge(reps: int) -> None:
    import torch
    import torch.nn.functional as F

    from solbench.evaluate.verdict.correctness import compare, tolerance_for
    from solbench.evaluate.verdict.elementwise import within

    torch.set_num_threads(1)
    tol = tolerance_for("bfloat16")
    for shape in ((4, 256), (32, 2048), (64, 8192)):
        x, w = torch.randn(*shape).bfloat16(), torch.randn(shape[-1]).bfloat16()
        got = F.rms_norm(x, (shape[-1],), w, 1e-6)
        anchor = F.rms_norm(x.double(), (shape[-1],), w.double(), 1e-6)
        full = _ms(lambda: compare([got], [got], [anchor], ["y"], [torch.bfloat16], [tol]), reps)
        quick = _ms(lambda: within(got, anchor, torch.bfloat16, tol.atol, tol.rtol, tol.max_abs_error), reps)
        print(f"bf16 output {shape[0]} x {shape[1]}: full comparison {full:.3f} ms, quick test {quick:.3f} ms")


def warm(evals: int) -> None:
    from solbench.evaluate.runner import EvalOptions, evaluate
    from solbench.problems.problem import load_problem
    from solbench.problems.solution import load_solution

    axpy = ROOT / "tests" / "fixtures" / "problems" / "axpy"
    prob = load_problem(str(axpy))
    sol = load_solution(axpy / "reference.py", prob.definition)
    evaluate(prob, sol, EvalOptions(device="cpu"))  # starts the worker
    walls, phases = [], []
    for _ in range(evals):
        t0 = time.perf_counter()
        ev = evaluate(prob, sol, EvalOptions(device="cpu"))
        walls.append(time.perf_counter() - t0)
        phases.append(ev.phases)
    keys = ("timing", "timing.rounds", "timing.recheck", "timing.audit.calibration", "timing.audit", "calls",
            "compare", "inputs")
    parts = ", ".join(f"{k} {statistics.median(p.get(k, 0.0) for p in phases):.3f}" for k in keys)
    print(f"warm axpy evaluation, 2 CPU workloads: {statistics.median(walls):.2f} s ({parts})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--evals", type=int, default=4)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    harness(args.reps)
    children(args.reps)
    judge(args.reps)
    warm(args.evals)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
