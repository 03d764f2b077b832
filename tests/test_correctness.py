import pytest
import torch

from solbench.evaluate.correctness import compare_output, tolerance_for
from solbench.problems.definition import Tolerance


def check(got, ref, anchor=None, dtype=None, tol=None):
    dtype = dtype or ref.dtype
    anchor = ref.double() if anchor is None else anchor
    return compare_output("o", got, ref, anchor, dtype, tol or tolerance_for(str(dtype).split(".")[-1]))


def test_exact_passes_and_small_error_passes():
    ref = torch.randn(1000)
    assert check(ref.clone(), ref).ok
    assert check(ref * (1 + 1e-6), ref).ok


def test_fp32_needs_about_1e4_relative():
    ref = torch.randn(1000)
    assert not check(ref * (1 + 1e-3), ref).ok


def test_bf16_tolerance_and_matched_ratio():
    ref = torch.randn(10000).bfloat16()
    got = ref.clone()
    got[:50] += 1.0  # 0.5% wrong: within the 0.99 matched ratio
    assert check(got, ref).ok
    got[:200] += 1.0  # 2% wrong
    c = check(got, ref)
    assert not c.ok and c.verdict == "incorrect_numerical" and "required" in c.reason


def test_reference_rounding_widens_allowance_per_element():
    anchor = torch.randn(100, dtype=torch.float64)
    ref = (anchor + 0.01).float()  # the reference itself is off by 0.01
    got = (anchor + 0.015).float()
    assert check(got, ref, anchor).ok
    got = (anchor + 0.05).float()
    assert not check(got, ref, anchor).ok


@pytest.mark.parametrize("bad,verdict", [
    (lambda r: r[:-1], "incorrect_shape"),
    (lambda r: r.double(), "incorrect_dtype"),
    (lambda r: r.as_subclass(type("Sub", (torch.Tensor,), {})), "incorrect_dtype"),
    (lambda r: torch.zeros_like(r), "incorrect_numerical"),
    (lambda r: torch.where(torch.arange(r.numel()) == 3, float("inf"), r), "incorrect_numerical"),
])
def test_failures(bad, verdict):
    ref = torch.randn(100)
    assert check(bad(ref), ref).verdict == verdict


def test_integers_exact():
    ref = torch.arange(10)
    got = ref.clone()
    got[4] = 99
    c = check(got, ref, anchor=ref)
    assert not c.ok and c.worst["index"] == [4] and c.worst["got"] == 99


def test_error_cap():
    ref = torch.randn(1000)
    got = ref.clone()
    got[0] += 5
    tol = Tolerance(atol=1e-5, rtol=1e-4, matched_ratio=0.99, max_abs_error=1.0)
    c = check(got, ref, tol=tol)
    assert not c.ok and "cap" in c.reason


def test_layered_tolerance():
    t = tolerance_for("bfloat16", Tolerance(atol=1e-6), None)
    assert t.atol == 1e-6 and t.rtol == 1.6e-2
    assert tolerance_for("float32", tf32=True).rtol > tolerance_for("float32").rtol
