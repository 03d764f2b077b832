"""A timed call's re-check (``stages.WorkloadJudging.recheck``): judged against the reference's own call alone,
else the fp64 anchor alone, where that suffices, with both only where neither does, and never a different verdict
for it."""

import contextlib

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from solbench.evaluate.verdict.correctness import compare, tolerance_for
from solbench.evaluate.verdict.elementwise import within
from solbench.evaluate.verdict.stages import WorkloadJudging


def _outputs(seed: int, dtype: str, ref_off: float, got_off: float, bad: int, special: str | None,
             near_ref: bool = False):
    """An anchor, a reference ``ref_off`` from it and an output ``got_off`` from it (``near_ref``: from the
    reference), ``bad`` elements of the output off by 1 and one NaN or Inf in it, or all of it zeros (``special``)."""
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, dtype)
    anchor = torch.randn(200, generator=g, dtype=torch.float64)
    ref = (anchor + ref_off * torch.randn(200, generator=g, dtype=torch.float64)).to(dt)
    got = ((ref.double() if near_ref else anchor) + got_off * torch.randn(200, generator=g, dtype=torch.float64)).to(dt)
    got[:bad] += 1.0
    if special in ("nan", "inf"):
        got[seed % 200] = float(special)
    elif special == "zeros":
        got.zero_()
    return dt, anchor, ref, got


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**31), dtype=st.sampled_from(["float32", "bfloat16", "float16"]),
       ref_off=st.floats(0, 0.05), got_off=st.floats(0, 0.05), bad=st.integers(0, 40),
       special=st.sampled_from([None, "nan", "inf", "zeros", "anchor_inf"]), cap=st.sampled_from([None, 0.01]))
def test_what_passes_against_the_anchor_alone_passes_the_full_check(seed, dtype, ref_off, got_off, bad, special,
                                                                     cap):
    dt, anchor, ref, got = _outputs(seed, dtype, ref_off, got_off, bad, special)
    if special == "anchor_inf":
        anchor[seed % 200] = float("inf")
    tol = [tolerance_for(dtype).model_copy(update={"max_abs_error": cap})]
    quick = within(got, anchor, dt, tol[0].atol, tol[0].rtol, cap)
    strict = compare([got], [anchor], [anchor], ["o"], [dt], tol)
    full = compare([got], [ref], [anchor], ["o"], [dt], tol)
    assert full.ok or not strict.ok
    assert strict.ok or not quick


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**31), dtype=st.sampled_from(["float32", "bfloat16", "float16"]),
       ref_off=st.floats(0, 0.05), got_off=st.floats(0, 0.05), bad=st.integers(0, 40),
       special=st.sampled_from([None, "nan", "inf", "zeros", "ref_zeros", "ref_nan", "ref_inf"]),
       rtol=st.sampled_from([None, 0.5, 1.0]))
def test_what_passes_against_the_reference_alone_passes_the_full_check(seed, dtype, ref_off, got_off, bad, special,
                                                                        rtol):
    dt, anchor, ref, got = _outputs(seed, dtype, ref_off, got_off, bad, special, near_ref=True)
    if special == "ref_zeros":  # the reference rounds a tiny answer to zeros, an all-zero output matches it
        anchor.mul_(1e-30)
        ref.zero_()
        got.zero_()
    elif special in ("ref_nan", "ref_inf"):  # the reference's narrower arithmetic ran out of range
        ref[seed % 200] = float(special.removeprefix("ref_"))
        got[seed % 200] = ref[seed % 200]
    base = tolerance_for(dtype)
    tol = [base if rtol is None else base.model_copy(update={"rtol": rtol})]
    quick = within(got, ref, dt, tol[0].atol, tol[0].rtol, None, nonzero=True)
    full = compare([got], [ref], [anchor], ["o"], [dt], tol)
    assert full.ok or not quick


class _Ctx:
    """The reference ``fn`` (``own``: what its own call returns, where that differs from ``fn``'s answer),
    counting its own calls and its float64 ones."""

    def __init__(self, fn, own=None):
        self.fn, self.own = fn, own or fn
        self.reference_calls = self.anchor_calls = 0

    def anchor_of(self, given):
        self.anchor_calls += 1
        return [self.fn(*[x.double() for x in given])]

    def own_of(self, given):
        self.reference_calls += 1
        return [self.own(*given)]

    def reference_of(self, given, anchor=None, ref=None):
        return ref or self.own_of(given), anchor if anchor is not None else self.anchor_of(given)


def _judging(dtype: torch.dtype, fn=lambda x: x * 3, own=None):
    j = object.__new__(WorkloadJudging)  # the stages a re-check uses, on a context of its own
    j.ctx = _Ctx(fn, own)
    j.names, j.dtypes, j.modes = ["y"], [dtype], [None]
    j.tols = [tolerance_for(str(dtype).removeprefix("torch."))]
    j.input_names, j.inplace = ["x"], []
    j.ph = lambda name: contextlib.nullcontext()
    j.ctx.accept = None
    return j


def test_a_right_output_is_rechecked_without_a_float64_call():
    j = _judging(torch.float32)
    x = torch.randn(64)
    for _ in range(3):
        assert j.recheck([x * 3], [x], [x.clone()]) is None
    assert (j.ctx.reference_calls, j.ctx.anchor_calls) == (3, 0)


def test_an_output_right_against_the_anchor_alone_passes_and_later_rechecks_start_there():
    # the reference's own call rounds away from the exact answer by more than the tolerance: the output, exact,
    # fails against it alone, passes against the anchor, and the workload's next re-checks skip the reference
    j = _judging(torch.float32, own=lambda x: x * 3 * (1 + 1e-3))
    x = torch.randn(64) + 4
    assert j.recheck([x * 3], [x], [x.clone()]) is None
    assert (j.ctx.reference_calls, j.ctx.anchor_calls) == (1, 1)
    assert j.recheck([x * 3], [x], [x.clone()]) is None
    assert (j.ctx.reference_calls, j.ctx.anchor_calls) == (1, 2)


def test_a_wrong_output_still_costs_the_full_check_and_fails_it():
    j = _judging(torch.float32)
    x = torch.randn(64)
    bad = j.recheck([x * 3 + 1], [x], [x.clone()])
    assert bad is not None and bad[0] == "output_recheck"
    assert j.ctx.reference_calls == 1  # the full check reuses the reference's outputs of the first test


def test_an_all_zero_output_is_not_passed_by_a_reference_that_rounded_to_zeros():
    # the reference's own arithmetic lost a tiny answer; the full check decides against the anchor's
    j = _judging(torch.float32, own=lambda x: torch.zeros_like(x))
    x = torch.full((64,), 1e-3)
    bad = j.recheck([torch.zeros(64)], [x], [x.clone()])
    assert bad is not None and bad[0] == "output_recheck" and j.ctx.anchor_calls == 1


def test_a_tolerance_the_implication_does_not_cover_starts_from_the_anchor():
    # with a cap on the absolute error or an rtol above 1, passing against the reference implies nothing
    for update in ({"max_abs_error": 0.5}, {"rtol": 2.0}):
        j = _judging(torch.float32)
        j.tols = [j.tols[0].model_copy(update=update)]
        x = torch.randn(64)
        assert j.recheck([x * 3], [x], [x.clone()]) is None
        assert (j.ctx.reference_calls, j.ctx.anchor_calls) == (0, 1)


def test_integer_outputs_are_always_held_against_the_reference():
    j = _judging(torch.int64, fn=lambda x: x.argmax().view(1))
    x = torch.randn(64)
    assert j.recheck([x.argmax().view(1)], [x], [x.clone()]) is None
    assert (j.ctx.reference_calls, j.ctx.anchor_calls) == (1, 1)


def test_a_mutated_input_is_still_found():
    j = _judging(torch.float32)
    x = torch.randn(64)
    after = x.clone()
    after[0] += 1
    bad = j.recheck([x * 3], [x], [after])
    assert bad is not None and bad[0] == "input_mutation"


def test_the_quick_test_reads_every_chunk_of_a_large_output():
    from solbench.evaluate.verdict.elementwise import CPU_CHUNK

    anchor = torch.randn(2 * CPU_CHUNK + 5, dtype=torch.float64)
    got = anchor.float()
    assert within(got, anchor, torch.float32, 1e-5, 1e-4, None)
    bad = got.clone()
    bad[-1] += 1.0  # in the last chunk only
    assert not within(bad, anchor, torch.float32, 1e-5, 1e-4, None)
    assert not compare([bad], [anchor], [anchor], ["o"], [torch.float32], [tolerance_for("float32")]).ok
    zeros = torch.zeros_like(got)
    tiny = torch.full_like(anchor, 1e-7)  # within atol of zero everywhere, but not all zero
    assert not within(zeros, tiny, torch.float32, 1e-5, 1e-4, None)
