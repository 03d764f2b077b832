"""What a candidate leaves in its Triton cache reaches the next evaluation of the same sources only from a run
whose seed was drawn fresh and that drew no held-out workload: under a fixed seed (an agent's attempt, a
service's seed group) a cached file could replay outputs for the same inputs, and a held-out workload's shapes
are secret."""

import uuid

import pytest

from solbench.evaluate.runner import EvalOptions, evaluate
from tests.conftest import inline_solution

# a candidate that notes the shapes it was called with in its cache, and fails loudly once it finds a note an
# earlier evaluation (another candidate process: each imports the solution afresh) left
NOTING = """
import os, uuid, torch
ME = uuid.uuid4().hex
def run(x, y, alpha):
    d = os.environ.get("TRITON_CACHE_DIR")
    note = os.path.join(d, "seen-" + ME + ".txt")
    earlier = [f for f in os.listdir(d) if f.startswith("seen-")] if os.path.isdir(d) else []
    if any(f != os.path.basename(note) for f in earlier):
        raise RuntimeError("seen before: " + " ".join(earlier))
    os.makedirs(d, exist_ok=True)
    with open(note, "a") as f:
        f.write(str(tuple(x.shape)) + " ")
    return y + alpha * x
"""


def _twice(axpy, **kw):
    # sources of their own (a cache is kept per sources' digest): what another test or run left is not theirs
    sol = inline_solution(axpy, "noting", NOTING + f"# {uuid.uuid4().hex}\n")
    opts = dict(device="cpu", baselines=(), static_checks=False, time_candidate=False, draws=1, **kw)
    first = evaluate(axpy, sol, EvalOptions(**opts))
    return first, evaluate(axpy, sol, EvalOptions(**opts))


@pytest.mark.parametrize("kw", [{"seed": 1234}, {"heldout": 1}], ids=["fixed_seed", "heldout"])
def test_nothing_is_carried_from_a_run_under_a_given_seed_or_with_held_out_workloads(axpy, kw):
    first, second = _twice(axpy, **kw)
    assert first.verdict == "passed" and second.verdict == "passed", second.message


def test_a_fresh_runs_cache_is_carried_to_the_next(axpy):
    first, second = _twice(axpy)
    assert first.verdict == "passed"
    assert second.verdict == "runtime_error" and "seen before" in (second.message or "")
