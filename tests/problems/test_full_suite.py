"""The full suite: sources, families, sizes from named models, workload coverage, held-out shapes. (The starter
suite's own checks are in test_suite.py; correctness of every reference and the degenerate-task filter are in
tests/evaluate/test_degenerate.py; every workload's bound on every chip in tests/analysis/test_analysis.py, its
speed in benchmarks/bench_analysis.py.)"""

import collections

import pytest

from solbench.analysis.heldout import draw_heldout
from solbench.problems.suite import select_problems

FULL = select_problems("full")


def test_sources_families_and_passes():
    sources = collections.Counter(t for p in FULL for t in p.definition.tag_value("source"))
    assert {"aten", "serving", "blas"} <= set(sources), sources
    families = collections.Counter(p.family for p in FULL)
    assert len(families) >= 8, families
    largest, count = families.most_common(1)[0]
    assert count <= 0.2 * len(FULL), f"family {largest} is {count} of {len(FULL)} problems"
    backward = [p.name for p in FULL if "pass:backward" in p.definition.tags]
    assert len(backward) >= 2
    names = [p.name for p in FULL]
    assert len(names) == len(set(names)), "problem names must be unique"


@pytest.mark.parametrize("problem", [p for p in FULL if "suite:full" in p.definition.tags], ids=lambda p: p.name)
def test_full_suite_problem_is_complete(problem):
    d = problem.definition
    assert d.tag_value("source") and d.tag_value("model") and d.tag_value("family"), d.tags
    assert d.description
    gpu = [w for w in problem.workloads if w.device == "gpu"]
    assert len(gpu) >= 3 and any(w.device == "cpu" for w in problem.workloads)
    assert all(w.label for w in gpu)
    for device in ("cpu", "gpu"):
        assert len(draw_heldout(problem, 2, seed=3, device=device)) == 2, device
