"""The bundled starter suite: shape of the suite, and every problem checked on its CPU workload."""

import pytest

from solbench.analysis.roofline import count_work
from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.problems.solution import load_solution
from solbench.problems.suite import select_problems

PROBLEMS = select_problems("starter")
L2 = 60 * 2**20


def test_suite_shape():
    assert len(PROBLEMS) >= 16
    families = {p.family for p in PROBLEMS}
    assert len(families) >= 6, families
    assert {"gemm", "attention", "norm", "activation", "moe", "ssm", "rope", "softmax"} <= families
    backward = [p for p in PROBLEMS if "pass:backward" in p.definition.tags]
    assert len(backward) >= 2
    assert any("precision:fp8" in p.definition.tags for p in PROBLEMS if p.family == "gemm")


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.name)
def test_problem_is_complete(problem):
    d = problem.definition
    assert d.tag_value("model"), "say which public model the sizes come from"
    assert d.description
    gpu = [w for w in problem.workloads if w.device == "gpu"]
    cpu = [w for w in problem.workloads if w.device == "cpu"]
    assert len(gpu) >= 3 and len(cpu) >= 1
    assert all(w.label for w in gpu)
    sizes = [count_work(problem, w).bytes for w in gpu]
    small = [w for w, b in zip(gpu, sizes) if b < L2 or "decode" in (w.label or "").lower()]
    assert small, "no decode-sized workload (small batch, or data that fits in the L2)"
    assert max(sizes) >= 2.5 * L2, "no workload whose data is several times the L2"
    assert any(p.name.endswith(".py") and "triton" in p.read_text() for p in problem.example_solutions)


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.name)
def test_reference_and_example_pass_on_cpu(problem):
    """The reference passes its own check (the eager baseline), and the example solution passes (Triton's
    interpreter computes its dots and casts faithfully, so no Triton example is `unsupported` on the CPU).
    Examples in a GPU-only language (CUDA C++, CuTe DSL) are `unsupported` here, with the reason, and run on the
    GPU (tests/evaluate/test_gpu.py)."""
    for path in problem.example_solutions:
        solution = load_solution(path, problem.name)
        ev = evaluate(problem, solution, EvalOptions(device="cpu", draws=2))
        if solution.language not in ("triton", "pytorch"):
            assert ev.verdict == "unsupported" and all(w.reasons == ["language_unavailable"] for w in ev.workloads)
            continue
        for w in ev.workloads:
            assert w.eager_ms is not None, f"reference failed its own check: {w.warnings}"
            assert not [x for x in w.warnings if x.startswith("reference_")]
            if problem.baseline_source:
                assert w.baseline_file_ms is not None, "baseline.py failed the correctness check"
        assert ev.verdict == "passed", [(w.uuid, w.verdict, w.message) for w in ev.workloads]
