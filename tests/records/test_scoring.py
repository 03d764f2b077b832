import pytest

from solbench.records.scoring import fast_p, geomean, mean, sol_score


def test_sol_score_anchors():
    assert sol_score(2.0, 2.0, 1.0, True).value == pytest.approx(0.5)  # at the baseline
    assert sol_score(1.0, 2.0, 1.0, True).value == pytest.approx(1.0)  # at the speed of light
    assert sol_score(1.5, 2.0, 1.0, True).value == pytest.approx(1 / 1.5)
    assert sol_score(11.0, 2.0, 1.0, True).value == pytest.approx(1 / 11)  # toward 0 when slower


def test_below_sol_is_flagged_and_capped():
    s = sol_score(0.5, 2.0, 1.0, True)
    assert s.value == 1.0 and "below_sol" in s.flags


def test_invalid_bound_when_baseline_near_sol():
    s = sol_score(1.5, 1.04, 1.0, True)
    assert s.value is None and "invalid_bound" in s.flags


def test_incorrect_is_zero_and_unmeasured_is_null():
    assert sol_score(1.0, 2.0, 0.5, False).value == 0.0
    assert sol_score(None, 2.0, 0.5, True).value is None


def test_aggregates():
    assert mean([None, 1.0, 0.0]) == 0.5
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert fast_p([2.0, 0.5, 3.0, None], [True, True, False, True], 1.0) == 0.25


def test_an_evaluation_with_an_unscored_workload_has_no_aggregate():
    from types import SimpleNamespace as W

    from solbench.records.scoring import aggregate

    ok = W(verdict="passed", warnings=[], sol_score=0.8)
    failed = W(verdict="runtime_error", warnings=[], sol_score=0.0)
    unsupported = W(verdict="unsupported", warnings=[], sol_score=None)
    unbounded = W(verdict="passed", warnings=["invalid_bound"], sol_score=None)
    assert aggregate([ok, failed]) == 0.4  # a failure counts, as 0
    assert aggregate([ok, unsupported]) is None  # never a mean over the rest
    assert aggregate([ok, unbounded]) == 0.8  # a workload the problem leaves unscored is left out for everyone
    assert aggregate([unbounded]) is None
