"""CUDA C++ on the GPU: SOL-ExecBench's format (kernel.h, kernel.cu, main.cpp) built with nvcc for the present
chip, passed, and a second evaluation loaded from the build cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.problems.problem import load_problem
from solbench.problems.solution import load_solution

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parent
AXPY = ROOT / "fixtures" / "problems" / "axpy"


def test_cuda_cpp_builds_passes_and_is_cached_on_the_gpu():
    problem = load_problem(AXPY)
    solution = load_solution(ROOT / "fixtures" / "cuda_cpp" / "axpy_cuda.json", problem.definition)
    opts = dict(device="cuda", baselines=(), workloads=["axpy-small", "axpy-gpu"], profile_dsl="all")
    first = evaluate(problem, solution, EvalOptions(**opts))
    print("first:", first.verdict, first.message, first.environment.get("build"),
          [(w.uuid, w.verdict, w.time_ms) for w in first.workloads], (first.log or "")[-1500:])
    assert first.verdict == "passed", (first.message, first.log[-3000:])
    # the language proof: the profiled call's kernels are the sources' own __global__ function
    assert "language_unproven" not in first.warnings
    assert all(w.dsl_share is not None and w.dsl_share > 0.9 for w in first.workloads), first.workloads
    # built here, or by an earlier run on this machine: the artefact records its compile time either way
    assert first.environment["build"]["compile_s"] > 0
    second = evaluate(problem, solution, EvalOptions(**opts))
    print("second:", second.verdict, second.environment.get("build"), second.environment.get("candidate_ready_s"),
          [(w.uuid, w.time_ms) for w in second.workloads])
    assert second.verdict == "passed" and second.environment["build"]["cached"] is True
    assert second.environment["candidate_ready_s"] < 1.0
    assert all(w.time_ms and w.time_ms > 0 for w in second.workloads)
