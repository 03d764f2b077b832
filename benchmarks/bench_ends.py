"""What a cold command, a hung candidate and a stop cost on the CPU (figures for docs/PERFORMANCE.md).

    python benchmarks/bench_ends.py [--runs 3] [--src DIR]

- a cold ``solbench eval`` of the axpy fixture (``--device cpu``, its own process each time), alternating runs
  whose counted work is kept (``analysis/work_cache.py``) with runs whose ``work`` folder is emptied first;
- a candidate that hangs, under a 1 s limit on one workload: the evaluation's time and its phases;
- SIGTERM to ``solbench eval`` while its candidate spins in a call: the signal to the command's end.

``--src`` measures another tree's ``src`` (an older commit's, checked out with ``git worktree``) with this
script. Each process has a cache folder of its own under a temporary directory, so the user's is not touched.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AXPY = ROOT / "tests" / "fixtures" / "problems" / "axpy"
HANG = ROOT / "tests" / "fixtures" / "solutions" / "hang.py"
SPIN = "def run(x, y, alpha):\n    while True:\n        alpha = alpha + 0.0\n"


def _env(src: Path, cache: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(src), SOLBENCH_CACHE=str(cache))


def cold_eval(src: Path, runs: int, tmp: Path) -> None:
    cache = tmp / "cache"
    argv = [sys.executable, "-m", "solbench", "eval", "--problem", str(AXPY), "--solution",
            str(AXPY / "solutions" / "torch_ok.py"), "--device", "cpu", "--db", str(tmp / "r.db")]
    subprocess.run(argv, env=_env(src, cache), stdin=subprocess.DEVNULL, capture_output=True, check=True)
    times: dict[str, list[float]] = {"kept": [], "emptied": []}
    for _ in range(runs):
        for mode in times:
            if mode == "emptied":
                shutil.rmtree(cache / "work", ignore_errors=True)
            t0 = time.perf_counter()
            subprocess.run(argv, env=_env(src, cache), stdin=subprocess.DEVNULL, capture_output=True, check=True)
            times[mode].append(time.perf_counter() - t0)
    for mode, ts in times.items():
        print(f"cold eval, counted work {mode}: median {statistics.median(ts):.2f} s "
              f"({', '.join(f'{t:.2f}' for t in ts)})")


def hung(src: Path, tmp: Path) -> None:
    code = ("import json, time\n"
            "from solbench.evaluate.runner import EvalOptions, evaluate\n"
            "from solbench.problems.problem import load_problem\n"
            "from solbench.problems.solution import load_solution\n"
            f"p = load_problem({str(AXPY)!r})\n"
            "evaluate(p, load_solution(p.directory / 'solutions' / 'torch_ok.py', p.name), "
            "EvalOptions(device='cpu', baselines=()))\n"
            f"sol = load_solution({str(HANG)!r}, p.name)\n"
            "for _ in range(2):\n"
            "    t0 = time.perf_counter()\n"
            "    ev = evaluate(p, sol, EvalOptions(device='cpu', baselines=(), static_checks=False, "
            "time_candidate=False, workload_timeout_s=1.0, workloads=['axpy-small']))\n"
            "    print(json.dumps([ev.verdict, time.perf_counter() - t0, ev.phases.get('calls.exchange')]))\n")
    out = subprocess.run([sys.executable, "-c", code], env=_env(src, tmp / "cache"), stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, check=True).stdout.split("\n")
    for line in filter(None, out):
        print(f"a hung candidate, 1 s limit, one workload: {line}  (verdict, evaluation s, exchange s)")


def stop(src: Path, tmp: Path, runs: int) -> None:
    sol = tmp / "spin.py"
    sol.write_text(SPIN)
    took = []
    for _ in range(runs):
        proc = subprocess.Popen([sys.executable, "-m", "solbench", "eval", "--problem", str(AXPY), "--solution",
                                 str(sol), "--device", "cpu", "--db", str(tmp / "s.db")],
                                env=_env(src, tmp / "cache"), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        time.sleep(8)  # the candidate is in its spinning call by now (a cold start takes 3 to 4 s here)
        t0 = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
        took.append(time.perf_counter() - t0)
    print(f"SIGTERM during a candidate's call to the end of `eval`: {', '.join(f'{t:.2f}' for t in took)} s "
          f"(exit {proc.returncode})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--src", type=Path, default=ROOT / "src")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-ends-") as d:
        tmp = Path(d)
        cold_eval(args.src.resolve(), args.runs, tmp)
        hung(args.src.resolve(), tmp)
        stop(args.src.resolve(), tmp, args.runs)


if __name__ == "__main__":
    main()
