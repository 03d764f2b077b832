"""scripts/run_summary.py: the latest run's evaluations from a results database, one line each, also for a run
that never finished (a GPU stage stopped at its time limit)."""

from __future__ import annotations

import subprocess
import sys

from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.problems.problem import load_problem
from solbench.problems.solution import load_solution
from solbench.store.db import Store
from tests.paths import AXPY, ROOT


def test_the_latest_run_one_line_per_evaluation(tmp_path):
    store = Store(tmp_path / "r.db")
    run_id = store.start_run("solbench run", "cpu", "cpu")
    problem = load_problem(AXPY)
    evaluate(problem, load_solution(AXPY / "solutions" / "torch_ok.py", problem.name),
             EvalOptions(device="cpu", baselines=(), time_candidate=False, workloads=["axpy-small"]),
             store=store, run_id=run_id)
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "run_summary.py"), str(tmp_path / "r.db")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"run {run_id} ") and "not finished: 1 evaluations" in lines[0]
    assert lines[1].split()[:4] == [problem.name, "torch_ok", "pytorch", "passed"]
