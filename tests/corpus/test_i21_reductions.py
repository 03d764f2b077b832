"""Honest reductions summed in another order than the reference's pass on every seed, and precision downgrades of
the same reductions fail (issue 21: the tolerance follows the computation's conditioning, not the reference's
luck at one element).

Every entry of tests/honest/MANIFEST-i21-reductions.json is evaluated on ``SEEDS`` seeds (``INTERPRETED_SEEDS``
for Triton entries, which Triton's interpreter runs hundreds of times slower), each with the evaluation's 5 fresh
input draws of every CPU workload, correctness only: 300 draws per entry (75 for Triton). The exploits of
tests/exploits/MANIFEST-i21-reductions.json run in tests/corpus/test_exploits.py like every other exploit.
"""

import json

import pytest

from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.problems.problem import load_problem
from solbench.problems.solution import load_solution
from tests.paths import TESTS

HONEST = json.loads((TESTS / "honest" / "MANIFEST-i21-reductions.json").read_text())
SEEDS = range(20)
INTERPRETED_SEEDS = range(5)


@pytest.mark.slow
@pytest.mark.parametrize("entry", HONEST, ids=[e["file"] for e in HONEST])
def test_honest_reduction_passes_on_every_seed(entry):
    problem = load_problem(TESTS / "exploits" / entry["problem"])
    sol = load_solution(TESTS / "honest" / entry["file"], problem.name)
    failed = []
    for seed in (INTERPRETED_SEEDS if entry["language"] == "triton" else SEEDS):
        ev = evaluate(problem, sol, EvalOptions(device="cpu", baselines=(), seed=seed, time_candidate=False))
        if ev.verdict != "passed":
            failed.append((seed, ev.verdict, ev.message))
    assert not failed, failed
