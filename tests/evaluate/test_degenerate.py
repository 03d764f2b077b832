"""The degenerate-task filter over the whole bundled suite (CPU workloads), and on a fixture that must trip it."""

import pytest

from solbench.evaluate.degenerate import check_problem
from solbench.problems.problem import load_problem
from solbench.problems.suite import select_problems
from tests.paths import AXPY, FIXTURES


def test_filter_catches_a_degenerate_problem():
    found = check_problem(load_problem(FIXTURES / "problems" / "vocab_softmax_loose"))
    codes = {f.code for f in found}
    assert "constant_output" in codes  # zeros pass an atol of 1e-2 when every probability is ~1e-5
    assert "insensitive_input" in codes  # `unused` does not matter


def test_filter_passes_an_honest_problem():
    assert check_problem(load_problem(AXPY)) == []


@pytest.mark.parametrize("problem", select_problems("full"), ids=lambda p: p.name)
def test_bundled_problem_is_not_degenerate(problem):
    found = check_problem(problem, "cpu")
    assert not found, [f"{f.workload}: {f.code}: {f.detail}" for f in found]


@pytest.mark.parametrize("problem", select_problems("full"), ids=lambda p: p.name)
def test_reference_passes_its_own_check_on_cpu(problem):
    from solbench.evaluate.degenerate import reference_self_check

    for w in problem.workloads_for("cpu"):
        assert reference_self_check(problem, w) is None, w.uuid


def test_self_check_flags_a_downcasting_reference(tmp_path):
    import json

    from solbench.evaluate.degenerate import reference_self_check

    (tmp_path / "definition.json").write_text(json.dumps({
        "name": "downcast", "axes": {"N": {"type": "var"}},
        "inputs": {"x": {"shape": ["N"], "dtype": "float32"}},
        "outputs": {"y": {"shape": ["N"], "dtype": "float32"}}}))
    (tmp_path / "reference.py").write_text("def run(x):\n    return x.float() * 2\n")
    (tmp_path / "workload.jsonl").write_text('{"uuid": "w", "axes": {"N": 8}, "inputs": {}}\n')
    p = load_problem(tmp_path)
    assert "downcasts" in reference_self_check(p, p.workloads[0])
    (tmp_path / "reference.py").write_text("def run(x):\n    return (x * 2)[:-1]\n")
    p = load_problem(tmp_path)
    assert "shape" in reference_self_check(p, p.workloads[0])
