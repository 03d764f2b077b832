"""Held-out shapes: drawn per run from the axis ranges, valid, reproducible, and recorded with the results."""

from solbench.analysis.heldout import draw_heldout
from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.problems.problem import load_problem
from solbench.problems.solution import load_solution
from solbench.problems.suite import select_problems
from tests.paths import AXPY


def test_draws_are_new_valid_and_reproducible():
    p = load_problem(AXPY)
    a = draw_heldout(p, 3, seed=11, device="cpu")
    b = draw_heldout(p, 3, seed=11, device="cpu")
    c = draw_heldout(p, 3, seed=12, device="cpu")
    assert [w.axes for w in a] == [w.axes for w in b] and [w.axes for w in a] != [w.axes for w in c]
    public = [w.axes for w in p.workloads]
    for w in a:
        assert w.axes not in public and w.uuid.startswith("heldout-")
        assert 1 <= w.axes["N"] <= 2 * 4097  # near the CPU workloads, within the declared range
        assert w.inputs == p.workloads[0].inputs or w.inputs == p.workloads[1].inputs  # scalars kept
    assert sum(w.axes["N"] % 2 for w in a + c) >= 3  # mostly odd sizes


def test_every_bundled_problem_yields_heldout_shapes():
    for p in select_problems("starter"):
        for device in ("cpu", "gpu"):
            drawn = draw_heldout(p, 2, seed=5, device=device)
            assert len(drawn) == 2, (p.name, device)


def test_heldout_workloads_are_evaluated_and_recorded(axpy):
    sol = load_solution(AXPY / "solutions" / "torch_ok.py", axpy.name)
    ev = evaluate(axpy, sol, EvalOptions(device="cpu", baselines=(), heldout=2, time_candidate=False))
    held = [w for w in ev.workloads if w.uuid.startswith("heldout-")]
    assert len(held) == 2 and all(w.verdict == "passed" and w.axes for w in held)
    assert len(ev.workloads) == 4
