"""Variant pairs: problems with working example solutions in two languages (Triton and CUDA C++), so that each
can be posed as a pair of variants that differ only in the language (MetaKernelBench's design).

Every starter problem and 33 more of the full suite have both (the languages issue asks 30); on the CPU the
Triton example of each passes through the interpreter (the starter suite's own test covers the starter problems), and the CUDA C++
one loads and is `unsupported` with the reason. On the GPU both pass (`solbench run --suite full --check-only`
in scripts/gpu-check.sh, and the starter suite's bundled examples).
"""

from __future__ import annotations

import pytest

from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.problems.solution import load_solution
from solbench.problems.suite import select_problems

FULL = select_problems("full")
STARTER = {p.name for p in select_problems("starter")}


def _languages(problem) -> set[str]:
    return {load_solution(path, problem.definition).language for path in problem.example_solutions}


PAIRED = [p for p in FULL if {"triton", "cuda_cpp"} <= _languages(p)]


def test_every_starter_problem_and_thirty_more_are_variant_pairs():
    paired = {p.name for p in PAIRED}
    assert STARTER <= paired, sorted(STARTER - paired)
    assert len(paired - STARTER) >= 30, sorted(paired - STARTER)


@pytest.mark.parametrize("problem", [p for p in PAIRED if p.name not in STARTER], ids=lambda p: p.name)
def test_the_triton_example_of_a_pair_passes_on_the_cpu(problem):
    [cpu] = [w.uuid for w in problem.workloads_for("cpu")][:1] or [None]
    assert cpu is not None, "a problem needs a CPU workload"
    for path in problem.example_solutions:
        solution = load_solution(path, problem.definition)
        ev = evaluate(problem, solution, EvalOptions(device="cpu", draws=1, baselines=(), workloads=[cpu],
                                                     time_candidate=False))
        if solution.language == "triton":
            assert ev.verdict == "passed", [(w.uuid, w.verdict, w.message) for w in ev.workloads]
        else:  # CUDA C++ needs the GPU: said so, never an error
            assert ev.verdict == "unsupported" and ev.workloads[0].reasons == ["language_unavailable"]
