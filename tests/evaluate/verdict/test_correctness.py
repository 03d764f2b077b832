import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from solbench.evaluate.verdict.correctness import compare_output, tolerance_for
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


def _tol(dtype):
    return tolerance_for(str(dtype).split(".")[-1])


def test_compare_mode_set_ignores_order_along_dim():
    from solbench.evaluate.verdict.correctness import compare

    ref = torch.arange(12).reshape(3, 4)
    got = ref.flip(-1)
    assert not compare([got], [ref], [ref], ["ids"], [torch.int64], [_tol(torch.int64)]).ok
    assert compare([got], [ref], [ref], ["ids"], [torch.int64], [_tol(torch.int64)], [{"mode": "set"}]).ok
    got[0, 0] = 99
    assert not compare([got], [ref], [ref], ["ids"], [torch.int64], [_tol(torch.int64)], [{"mode": "set"}]).ok


def test_compare_mode_fp8_within_one_step():
    from solbench.evaluate.verdict.correctness import compare

    ref = torch.tensor([1.0, 1.125, -3.0, 0.5]).to(torch.float8_e4m3fn)
    one_up = torch.tensor([1.125, 1.25, -3.25, 0.5625]).to(torch.float8_e4m3fn)  # one e4m3 step each
    two_up = torch.tensor([1.25, 1.25, -3.0, 0.5]).to(torch.float8_e4m3fn)
    mode = [{"mode": "fp8_ulp", "ulps": 1}]
    tol = [_tol(torch.float8_e4m3fn)]
    assert compare([one_up], [ref], [ref.double()], ["q"], [torch.float8_e4m3fn], tol, mode).ok
    assert not compare([two_up], [ref], [ref.double()], ["q"], [torch.float8_e4m3fn], tol, mode).ok


def test_compare_mode_indices_of_accepts_ties_and_rejects_wrong_picks():
    from solbench.evaluate.verdict.correctness import compare

    x = torch.tensor([[0.5, 3.0, 3.0, 1.0]])
    vals, idx = torch.topk(x, 2)
    tie = torch.tensor([[2, 1]])  # the same two values, picked in the other order
    wrong = torch.tensor([[1, 3]])
    modes = [None, {"mode": "indices_of", "values": "values", "input": "x", "dim": -1}]
    dts = [torch.float32, torch.int64]
    tols = [_tol(torch.float32), _tol(torch.int64)]
    anchors = [vals.double(), idx]
    assert compare([vals, tie], [vals, idx], anchors, ["values", "indices"], dts, tols, modes, {"x": x}).ok
    assert not compare([vals, wrong], [vals, idx], anchors, ["values", "indices"], dts, tols, modes, {"x": x}).ok


def test_compare_mode_indices_of_rejects_a_repeated_index():
    """Two equal values: picking the same one twice would match the values, but top-k picks each place once."""
    from solbench.evaluate.verdict.correctness import compare

    x = torch.tensor([[0.5, 3.0, 3.0, 1.0]])
    vals, idx = torch.topk(x, 2)
    twice = torch.tensor([[1, 1]])
    modes = [None, {"mode": "indices_of", "values": "values", "input": "x", "dim": -1}]
    dts = [torch.float32, torch.int64]
    tols = [_tol(torch.float32), _tol(torch.int64)]
    c = compare([vals, twice], [vals, idx], [vals.double(), idx], ["values", "indices"], dts, tols, modes, {"x": x})
    assert not c.ok and "twice" in c.reason


def test_compare_mode_indices_of_an_input_accepts_near_ties_within_its_tolerance():
    """moe_topk_softmax's ids: judged by the gating logits they pick. A router that ranks rounded probabilities
    may take the other of two logits 1e-8 apart; an expert a real margin away fails."""
    from solbench.evaluate.verdict.correctness import compare

    g = torch.tensor([[0.1, 2.0, 2.0 + 1e-7, -1.0, 1.5]], dtype=torch.float32)
    ref = torch.tensor([[2, 1]], dtype=torch.int32)  # the reference: by descending logit
    mode = [{"mode": "indices_of", "input": "gating", "dim": -1, "atol": 1e-6, "rtol": 1e-6}]
    tol = [_tol(torch.int32)]
    ok = compare([torch.tensor([[1, 2]], dtype=torch.int32)], [ref], [ref], ["ids"], [torch.int32], tol, mode,
                 {"gating": g})
    assert ok.ok
    far = compare([torch.tensor([[2, 4]], dtype=torch.int32)], [ref], [ref], ["ids"], [torch.int32], tol, mode,
                  {"gating": g})
    assert not far.ok
    # without the mode the near-tie swap is an integer mismatch
    assert not compare([torch.tensor([[1, 2]], dtype=torch.int32)], [ref], [ref], ["ids"], [torch.int32], tol,
                       None, {"gating": g}).ok


def test_moe_router_selecting_on_probabilities_passes(tmp_path):
    """The Hugging Face formulation (softmax, then torch.topk on the probabilities) is a correct router."""
    from solbench.evaluate.runner import EvalOptions, evaluate
    from solbench.problems.problem import load_problem
    from solbench.problems.solution import load_solution

    problem = load_problem("moe_topk_softmax")
    ev = evaluate(problem, load_solution(problem.directory / "baseline.py", problem.name),
                  EvalOptions(device="cpu", baselines=()))
    assert ev.verdict == "passed", [(w.uuid, w.verdict, w.message) for w in ev.workloads]


def _deepseek():
    from solbench.problems.modules import module_from_source
    from solbench.problems.problem import load_problem

    problem = load_problem("deepseek_v3_grouped_topk_srv2")
    module = module_from_source(problem.reference_source, "ds_ref_test", problem.directory / "reference.py")
    return problem, module


def test_grouped_router_accepts_a_tie_broken_the_other_way_and_nothing_else():
    """DeepSeek-V3 routing. Where two experts, or two groups, tie, a kernel may route the other way: the
    candidate's answer is the reference's own on inputs nudged by 1e-7 to break the tie the other way. The same
    move across a real gap (a nudge of 1e-2) is not a tie and fails, and so do weights that do not follow."""
    from solbench.evaluate.verdict.correctness import Check, accept_alternative

    problem, ref_module = _deepseek()
    assert problem.definition.custom_check_entrypoint == "accept"
    torch.manual_seed(0)
    T, E = 4, 256
    bias = torch.zeros(E)
    failed = Check(verdict="incorrect_numerical", reason="topk_ids differ")

    def judge(logits, candidate_logits):
        inputs = {"logits": logits, "e_score_correction_bias": bias}
        return ref_module.accept(inputs, list(ref_module.run(candidate_logits, bias)), list(ref_module.run(logits, bias)))

    # an expert tie: token 0's weakest chosen expert gets a twin in its group
    logits = torch.randn(T, E)
    ids, _ = ref_module.run(logits, bias)
    chosen = ids[0].tolist()
    last = min(chosen, key=lambda e: float(logits[0, e]))
    twin = next(e for e in range(last // 32 * 32, last // 32 * 32 + 32) if e not in chosen)
    logits[0, twin] = logits[0, last]
    ref_ids, _ = ref_module.run(logits, bias)
    out = last if last in ref_ids[0].tolist() else twin
    nudged = logits.clone()
    nudged[0, out] -= 1e-6  # the other of the pair wins
    assert not torch.equal(ref_module.run(nudged, bias)[0], ref_ids)
    assert judge(logits, nudged) is None
    inputs = {"logits": logits, "e_score_correction_bias": bias}
    assert accept_alternative(failed, ref_module.accept, inputs, list(ref_module.run(nudged, bias)),
                              list(ref_module.run(logits, bias))).ok
    # across a real gap it is no tie: both of the pair pushed down, so a clearly weaker expert comes in
    far = logits.clone()
    far[0, [last, twin]] -= 1.0
    assert "beyond a tie" in judge(logits, far)

    # a group tie, built by hand in token 1: groups 0-2 clearly kept, groups 3 and 4 tie exactly for the last
    # place, group 5 is a real step below, the rest far below
    logits[1] = -4.0
    for g, top in ((0, 4.0), (1, 4.0), (2, 4.0), (3, 2.0), (4, 2.0), (5, 1.0)):
        logits[1, g * 32: g * 32 + 2] = top
    ref_ids, _ = ref_module.run(logits, bias)
    kept = {e // 32 for e in ref_ids[1].tolist()}
    assert {0, 1, 2} <= kept and len(kept & {3, 4}) == 1
    won = 3 if 3 in kept else 4
    nudged = logits.clone()
    nudged[1, won * 32: won * 32 + 2] -= 1e-6  # the other group wins
    assert {e // 32 for e in ref_module.run(nudged, bias)[0][1].tolist()} == {0, 1, 2, 7 - won}
    assert judge(logits, nudged) is None
    far = logits.clone()
    far[1, 3 * 32: 3 * 32 + 2] -= 5.0
    far[1, 4 * 32: 4 * 32 + 2] -= 5.0  # now group 5 wins the last place
    assert {e // 32 for e in ref_module.run(far, bias)[0][1].tolist()} == {0, 1, 2, 5}
    assert "group" in judge(logits, far)

    # inside one kept group, an expert a real step below one left out: token 2, groups 0-3 kept
    logits[2] = -4.0
    for g in range(4):
        logits[2, g * 32: g * 32 + 2] = 4.0
    logits[2, 2] = 3.0  # group 0's third expert
    ids, w = ref_module.run(logits, bias)
    assert ids[2].tolist() == [0, 1, 32, 33, 64, 65, 96, 97]
    bad = ids.clone()
    bad[2] = torch.tensor([0, 2, 32, 33, 64, 65, 96, 97], dtype=torch.int32)  # expert 2 in place of expert 1
    sg = torch.sigmoid(logits.double())
    bad_w = w.clone()
    bad_w[2] = (sg[2, bad[2].long()] / sg[2, bad[2].long()].sum() * 2.5).float()
    inputs = {"logits": logits, "e_score_correction_bias": bias}
    assert "an expert it leaves out" in ref_module.accept(inputs, [bad, bad_w], [ids, w])

    # weights that do not follow the chosen experts' scores
    ids, w = ref_module.run(logits, bias)
    off = w.clone()
    off[3] = off[3] * 1.1
    assert "weights" in ref_module.accept({"logits": logits, "e_score_correction_bias": bias}, [ids, off], [ids, w])
    # a shape or dtype failure is never reconsidered
    wrong_dtype = Check(verdict="incorrect_dtype", reason="dtype")
    assert not accept_alternative(wrong_dtype, ref_module.accept, inputs, [ids, w], [ids, w]).ok


def test_compare_mode_indices_of_rejects_an_approximate_sort():
    """Indices from a sort on truncated keys pick values a rounding step off: not ties, so they fail."""
    from solbench.evaluate.verdict.correctness import compare

    torch.manual_seed(1)
    x = torch.randn(1, 4096)
    vals, idx = torch.sort(x, dim=-1, stable=True)
    coarse = (x.view(torch.int32) & ~0xFF).view(torch.float32)  # keys with the low 8 bits dropped
    approx = torch.sort(coarse, dim=-1, stable=True).indices
    assert not torch.equal(approx, idx)
    modes = [None, {"mode": "indices_of", "values": "values", "input": "x", "dim": -1}]
    dts, tols = [torch.float32, torch.int64], [_tol(torch.float32), _tol(torch.int64)]
    got_vals = torch.gather(x, 1, approx)
    assert not compare([vals, approx], [vals, idx], [vals.double(), idx], ["values", "indices"], dts, tols, modes,
                       {"x": x}).ok
    assert not compare([got_vals, approx], [vals, idx], [vals.double(), idx], ["values", "indices"], dts, tols,
                       modes, {"x": x}).ok


def test_acceptor_is_not_asked_about_outputs_of_the_wrong_dtype():
    from solbench.evaluate.verdict.correctness import Check, accept_alternative

    asked = []
    ref = [torch.zeros(2, dtype=torch.int32), torch.zeros(2)]
    failed = Check(verdict="incorrect_numerical", reason="ids differ")
    got = [torch.ones(2, dtype=torch.int32), torch.zeros(2, dtype=torch.float64)]  # second output: float64
    assert not accept_alternative(failed, lambda *a: asked.append(a), {}, got, ref,
                                  [torch.int32, torch.float32]).ok and not asked
    got[1] = torch.zeros(2)
    assert accept_alternative(failed, lambda *a: None, {}, got, ref, [torch.int32, torch.float32]).ok


def test_beam_search_accepts_tied_candidates_in_another_order_and_nothing_else():
    """Tokens of one beam that share a bf16 logit tie exactly; a kernel may keep or order them the other way.
    A pick beyond a tie, a repeated pair, or scores that do not follow the ids fail."""
    from solbench.evaluate.verdict.correctness import Check, accept_alternative
    from solbench.problems.modules import module_from_source
    from solbench.problems.problem import load_problem

    problem = load_problem("beam_search_step_srv2")
    assert problem.definition.custom_check_entrypoint == "accept"
    ref = module_from_source(problem.reference_source, "beam_ref_test", problem.directory / "reference.py")
    B, W, V = 3, 4, 64
    torch.manual_seed(0)
    logits = (torch.randn(B, W, V) * 2).round().to(torch.bfloat16)  # whole numbers: many exact ties per beam
    beam = torch.rand(B, W) * 3
    inputs = {"logits": logits, "beam_scores": beam}
    scores, ids = ref.run(logits, beam)
    # the same step with ties broken towards the higher (beam, token) index
    cand = (torch.log_softmax(logits.float(), -1) + beam[..., None]).reshape(B, W * V)
    alt = (W * V - 1) - cand.flip(-1).topk(2 * W, dim=-1).indices
    assert not torch.equal(alt, ids)  # the ties do change the answer
    alt_scores = cand.gather(1, alt)
    assert ref.accept(inputs, [alt_scores, alt], [scores, ids]) is None
    failed = Check(verdict="incorrect_numerical", reason="flat_ids differ")
    assert accept_alternative(failed, ref.accept, inputs, [alt_scores, alt], [scores, ids]).ok
    # the worst candidate of a request in place of its 2W-th best
    worse = ids.clone()
    worse[0, -1] = cand[0].argmin()
    assert cand[0, ids[0, -1]] - cand[0].min() > 1.0
    assert "beyond a tie" in ref.accept(inputs, [cand.gather(1, worse), worse], [scores, ids])
    twice = ids.clone()
    twice[0, 1] = twice[0, 0]
    assert "twice" in ref.accept(inputs, [cand.gather(1, twice), twice], [scores, ids])
    assert "scores" in ref.accept(inputs, [alt_scores + 1e-3, alt], [scores, ids])


# ---- the conditioning slack (issue 21): the tolerance follows the computation, not the reference's luck --------

def _sum_case():
    """Rows [big, small, -big]: summed as (big - big) + small the fp32 reference lands on the anchor; summed as
    (big + small) - big, an honest order, it is off by a rounding of big, far beyond atol + rtol * |small|."""
    gen = torch.Generator().manual_seed(3)
    big = (torch.rand(64, generator=gen) * 1e4 + 1e4).float()
    small = (torch.rand(64, generator=gen) + 0.05).float()
    x = torch.stack([big, small, -big], dim=1)
    ref = (x[:, 0] + x[:, 2]) + x[:, 1]
    other = (x[:, 0] + x[:, 1]) + x[:, 2]
    return x, ref, other


def _compare(got, ref, x, anchor_of, f64):
    from solbench.evaluate.verdict.correctness import compare

    return compare([got], [ref], [f64(x)], ["out"], [got.dtype], [tolerance_for(str(got.dtype).split(".")[-1])],
                   None, {"x": x}, anchor_of=anchor_of)


def test_another_summation_order_passes_where_the_reference_was_lucky():
    x, ref, other = _sum_case()
    f64 = lambda t: t.double().sum(-1)  # noqa: E731
    assert torch.equal(ref.double(), f64(x))  # the reference's luck: exact at every element
    assert not _compare(other, ref, x, None, f64).ok  # the plain test rejects an honest order
    c = _compare(other, ref, x, lambda xs: [f64(xs[0])], f64)
    assert c.ok, c.reason


def test_the_slack_is_the_terms_magnitudes_and_no_more():
    from solbench.evaluate.verdict.correctness import SLACK, conditioning

    x, ref, other = _sum_case()
    (s,) = conditioning(lambda xs: [xs[0].double().sum(-1)], [x], [x.double().sum(-1)], [None])
    l1 = x.double().abs().sum(-1)
    ratio = s / l1
    assert 0.7 < float(ratio.median()) < 1.4 and float(ratio.min()) > 0.05 and float(ratio.max()) < 20
    # an error of many times the slack still fails: a wrong answer is not excused by a large sum of magnitudes
    wrong = other + (50 * SLACK * 2.0 ** -24 * l1).float()
    assert not _compare(wrong, ref, x, lambda xs: [xs[0].double().sum(-1)], lambda t: t.double().sum(-1)).ok


@pytest.mark.parametrize("downgrade", ["bf16", "fp16", "tf32"])
def test_a_precision_downgrade_of_a_product_still_fails(downgrade):
    gen = torch.Generator().manual_seed(5)
    a, b = torch.randn(48, 256, generator=gen) * 3, torch.randn(256, 40, generator=gen) * 3
    a[:, 3] *= 40  # an outlier channel: large terms that cancel
    ref = a @ b
    if downgrade == "tf32":
        r = lambda t: ((t.contiguous().view(torch.int32) + 0x1000) & -8192).view(torch.float32)  # noqa: E731
        got = r(a) @ r(b)
    else:
        dt = torch.bfloat16 if downgrade == "bf16" else torch.float16
        got = (a.to(dt).float() @ b.to(dt).float())
    from solbench.evaluate.verdict.correctness import compare

    c = compare([got], [ref], [a.double() @ b.double()], ["c"], [torch.float32], [tolerance_for("float32")], None,
                {"a": a, "b": b}, anchor_of=lambda xs: [xs[0].double() @ xs[1].double()])
    assert not c.ok and "with the computation's conditioning" in c.reason


def test_the_estimate_is_made_only_when_the_plain_test_fails():
    x, ref, _ = _sum_case()
    calls = []

    def anchor_of(xs):
        calls.append(1)
        return [xs[0].double().sum(-1)]

    assert _compare(ref.clone(), ref, x, anchor_of, lambda t: t.double().sum(-1)).ok and not calls
    bad = ref.clone()
    bad[0] = float("nan")  # not a rounding question: no estimate either
    assert not _compare(bad, ref, x, anchor_of, lambda t: t.double().sum(-1)).ok and not calls


def test_integer_outputs_stay_exact_and_integral_inputs_unperturbed():
    from solbench.evaluate.verdict.correctness import compare, conditioning

    idx = torch.arange(6).float()  # positions held as floats: exact data
    seen = []

    def anchor_of(xs):
        seen.append(xs[0].clone())
        return [xs[0].to(torch.int64)]

    ref = idx.to(torch.int64)
    got = ref.clone()
    got[2] += 1
    assert not compare([got], [ref], [ref], ["i"], [torch.int64], [tolerance_for("int64")], None, {"p": idx},
                       anchor_of=anchor_of).ok
    conditioning(anchor_of, [idx], [idx.double()], [None])
    assert seen and all(torch.equal(s, idx.double()) for s in seen)


def test_a_reference_that_cannot_run_perturbed_gives_no_slack():
    x, ref, other = _sum_case()

    def fails(xs):
        raise RuntimeError("no")

    c = _compare(other, ref, x, fails, lambda t: t.double().sum(-1))
    assert not c.ok and "conditioning" not in c.reason


def test_unit_roundoff_follows_the_arithmetic():
    from solbench.evaluate.verdict.correctness import unit_roundoff

    assert unit_roundoff(torch.float32, tolerance_for("float32")) == 2.0 ** -24
    assert unit_roundoff(torch.bfloat16, tolerance_for("bfloat16")) == 2.0 ** -24  # fp32 accumulation
    assert unit_roundoff(torch.float64, tolerance_for("float64")) == 2.0 ** -53
    assert unit_roundoff(torch.float32, tolerance_for("float32", tf32=True)) == 2.0 ** -11
    layered = tolerance_for("float32", Tolerance(unit_roundoff=2.0 ** -8))
    assert unit_roundoff(torch.float32, layered) == 2.0 ** -8


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_chunks_give_the_statistics_of_the_whole_output(dtype, monkeypatch):
    """The CPU reads an output in chunks (verdict/elementwise.py): counts, maxima, NaN/Inf and the worst element
    (the first of the largest excess, a NaN or an infinite one before any finite) are those of one pass."""
    from solbench.evaluate.verdict import elementwise as ew

    gen = torch.Generator().manual_seed(3)
    anchor = torch.randn(4001, generator=gen, dtype=torch.float64) * 10
    ref = anchor.to(dtype).to(torch.float64)
    got = (anchor + torch.randn(4001, generator=gen, dtype=torch.float64) * 1e-3).to(dtype)
    anchor[[5, 900]] = float("inf")
    got[[5, 1200, 3999]] = float("inf")  # equal to the anchor at 5; infinite where it is finite at 1200 and 3999
    anchor[2500] = float("nan")
    got[[17, 3000]] = float("nan")
    spread = torch.rand(4001, generator=gen, dtype=torch.float64)
    for s in (None, spread):
        monkeypatch.setattr(ew, "CPU_CHUNK", 1 << 30)
        whole = ew.elementwise(got, ref, anchor, 1e-5, 1e-4, s, 0.5)
        for chunk in (1, 7, 1000, 4000):
            monkeypatch.setattr(ew, "CPU_CHUNK", chunk)
            part = ew.elementwise(got, ref, anchor, 1e-5, 1e-4, s, 0.5)
            for k in ("n", "n_ok", "bad_special", "max_abs", "max_rel", "worst_i", "worst", "anchor_nonzero",
                      "got_nonzero"):
                assert repr(getattr(part, k)) == repr(getattr(whole, k)), (chunk, k)  # repr: NaN equals NaN
    assert whole.bad_special == 4 and whole.n == 4001


def test_a_device_comparison_is_chunked_so_its_temporaries_fit():
    """On a device the comparison runs in chunks too, of at most 2^26 elements: a billion-element fp32 output (an
    embedding's gradient table) compared in one chunk held a dozen 8.4 GB float64 temporaries and ran an 80 GB
    H100 out of memory; a chunk's float64 temporary is 512 MiB."""
    from solbench.evaluate.verdict import elementwise as ew

    on_device = torch.empty(1 << 30, dtype=torch.float32, device="meta")
    assert ew.CPU_CHUNK <= ew.chunk_for(on_device) <= 1 << 26
    assert ew.chunk_for(torch.empty(4)) == ew.CPU_CHUNK



@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), dtype=st.sampled_from([torch.float32, torch.bfloat16, torch.float16]),
       noise=st.sampled_from([0.0, 1e-7, 1e-5, 1e-3, 1e-1]), special=st.sampled_from([None, "nan", "inf", "zeros"]),
       n=st.integers(1, 300))
def test_the_quick_path_agrees_with_the_full_comparison(seed, dtype, noise, special, n):
    """Where the anchor-only test passes an output (``errors_within``), the full elementwise statistics pass it
    too, with the same largest errors; ``compare_output`` reports those, and its verdict is the full one's."""
    from solbench.evaluate.verdict.elementwise import elementwise, errors_within

    g = torch.Generator().manual_seed(seed)
    anchor = torch.randn(n, generator=g, dtype=torch.float64)
    ref = anchor.to(dtype)
    got = (anchor * (1 + noise * torch.randn(n, generator=g, dtype=torch.float64))).to(dtype)
    if special == "nan":
        got[n // 2] = float("nan")
    elif special == "inf":
        anchor[n // 2] = float("inf")
    elif special == "zeros":
        got.zero_()
    tol = tolerance_for(str(dtype).removeprefix("torch."))
    quick = errors_within(got, anchor, dtype, tol.atol, tol.rtol, tol.max_abs_error)
    full = elementwise(got, ref, anchor, tol.atol, tol.rtol, None, 0.0)
    c = compare_output("o", got, ref, anchor, dtype, tol)
    if quick is not None:
        assert full.n_ok == full.n and not full.bad_special and (full.got_nonzero or not full.anchor_nonzero)
        assert quick == (full.max_abs, full.max_rel) and c.ok
        assert (c.max_abs_err, c.max_rel_err) == quick
    else:  # the full comparison decided, as it always did
        assert (c.max_abs_err == full.max_abs or math.isnan(full.max_abs)) and not (c.ok and special == "nan")
