"""Honest reductions summed in another order than the reference's pass on every seed, and precision downgrades of
the same reductions fail (issue 21: the tolerance follows the computation's conditioning, not the reference's
luck at one element).

Every entry of tests/honest/MANIFEST-i21-reductions.json is evaluated once with ``DRAWS`` fresh input draws of
every CPU workload (``INTERPRETED_DRAWS`` for Triton entries, which Triton's interpreter runs hundreds of times
slower, and whose summation orders the PyTorch entries share), correctness only: 300 draws per entry (30 for
Triton), as many as 20 evaluations of 5 draws each would make (2 for Triton), without starting a worker and a
candidate for each. The honest corpus's test evaluates the PyTorch entries again as a whole (timed and audited);
the Triton entries, which the CPU does not time, only here. The exploits of
tests/exploits/MANIFEST-i21-reductions.json run in tests/corpus/test_exploits.py like every other exploit.
"""

import json

import pytest

from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.problems.problem import load_problem
from solbench.problems.solution import load_solution
from tests.paths import TESTS

HONEST = json.loads((TESTS / "honest" / "MANIFEST-i21-reductions.json").read_text())
DRAWS = 100
INTERPRETED_DRAWS = 10


@pytest.mark.slow
@pytest.mark.parametrize("entry", HONEST, ids=[e["file"] for e in HONEST])
def test_honest_reduction_passes_on_every_seed(entry):
    problem = load_problem(TESTS / "exploits" / entry["problem"])
    sol = load_solution(TESTS / "honest" / entry["file"], problem.name)
    draws = INTERPRETED_DRAWS if entry["language"] == "triton" else DRAWS
    ev = evaluate(problem, sol, EvalOptions(device="cpu", baselines=(), seed=21, draws=draws, time_candidate=False))
    assert ev.verdict == "passed", [(w.uuid, w.verdict, w.message) for w in ev.workloads if w.verdict != "passed"]
