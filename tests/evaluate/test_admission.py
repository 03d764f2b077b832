"""Evaluations side by side (``solbench run --jobs``) start only while their estimated device memory fits."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from solbench.evaluate import admission
from solbench.evaluate.trusted.footprint import footprint
from solbench.problems.problem import load_problem
from tests.paths import AXPY


def _run(sizes, max_jobs, budget):
    """Tasks that each hold their size for a moment; returns the results and the most ever held at once."""
    lock = threading.Lock()
    state = {"held": 0, "most": 0, "running": 0, "most_running": 0}

    def work(i):
        with lock:
            state["held"] += sizes[i]
            state["running"] += 1
            state["most"] = max(state["most"], state["held"])
            state["most_running"] = max(state["most_running"], state["running"])
        time.sleep(0.02)
        with lock:
            state["held"] -= sizes[i]
            state["running"] -= 1
        return f"r{i}"

    seen = []
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = admission.run_side_by_side(list(range(len(sizes))), sizes, lambda i: pool.submit(work, i),
                                             max_jobs, budget, done=lambda i, r: seen.append(i))
    return results, state, seen


def test_side_by_side_only_while_memory_fits():
    # dot_blas2-like: two of 50 GB and two of 25 GB against 120 GB usable; small ones beside them
    gb = 10 ** 9
    sizes = [50 * gb, 50 * gb, 25 * gb, 25 * gb, 3 * gb, 3 * gb, 2 * gb]
    results, state, seen = _run(sizes, max_jobs=5, budget=120 * gb)
    assert results == [f"r{i}" for i in range(len(sizes))]  # in the tasks' order, every one
    assert sorted(seen) == list(range(len(sizes)))
    assert state["most"] <= 120 * gb and state["most_running"] <= 5


def test_a_task_larger_than_the_budget_runs_alone_and_jobs_still_bound():
    gb = 10 ** 9
    results, state, _ = _run([200 * gb, 1 * gb, 1 * gb], max_jobs=2, budget=100 * gb)
    assert results == ["r0", "r1", "r2"] and state["most"] == 200 * gb  # alone, never beside another
    _, state, _ = _run([1] * 6, max_jobs=3, budget=None)  # memory unknown: --jobs alone bounds them
    assert state["most_running"] <= 3


def test_the_estimate_is_the_largest_workloads_footprint_plus_the_contexts():
    problem = load_problem(AXPY)
    largest = max(footprint(problem, w.uuid).need_bytes for w in problem.workloads_for("cuda"))
    assert admission.peak_bytes(problem, "cuda") == largest + admission.PER_EVALUATION_BYTES
    assert admission.budget_bytes("cpu") is None or admission.budget_bytes("cpu") > 0
