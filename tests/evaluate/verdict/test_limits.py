"""A workload's time limit (``evaluate.limits``): native runs follow the reference's call time; interpreted runs
(Triton's interpreter on the CPU) allow for the interpreter's measured slowdown, under a bound of their own."""

import pytest

from solbench.evaluate.verdict import limits


def test_native_limit_follows_the_reference():
    assert limits.workload_limit(0.0) == limits.COMPILE_ALLOWANCE_S
    assert limits.workload_limit(0.01) == pytest.approx(limits.COMPILE_ALLOWANCE_S + limits.MULTIPLE * 0.01)
    assert limits.workload_limit(10.0) == limits.CEILING_S
    assert limits.workload_limit(None) == limits.CEILING_S


def test_interpreted_limit_allows_for_the_interpreter():
    # rmsnorm at 2048 x 8192 through the interpreter: 7 calls of about 57 s each against a 0.25 s reference call
    # (measured here), 400 s in all: over the native ceiling, within the interpreted limit
    t_ref = 0.25
    assert limits.workload_limit(t_ref) < 400 <= limits.workload_limit(t_ref, interpreted=True)
    for t in (0.0, 1e-4, 1e-3, 0.01, 0.1, 1.0, None):
        assert limits.workload_limit(t, interpreted=True) >= limits.workload_limit(t)
    assert limits.workload_limit(0.001, interpreted=True) == pytest.approx(
        limits.COMPILE_ALLOWANCE_S + limits.MULTIPLE * limits.INTERPRETER_SLOWDOWN * 0.001)


def test_interpreted_limit_is_bounded():
    assert limits.workload_limit(100.0, interpreted=True) == limits.INTERPRETED_CEILING_S
    assert limits.workload_limit(None, interpreted=True) == limits.INTERPRETED_CEILING_S
    assert limits.OUTER_CEILING_S >= max(limits.CEILING_S, limits.INTERPRETED_CEILING_S)
    assert limits.workload_limit(0.5, explicit_s=7, interpreted=True) == 7  # the user's limit wins
