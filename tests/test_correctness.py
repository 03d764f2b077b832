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


def _tol(dtype):
    return tolerance_for(str(dtype).split(".")[-1])


def test_compare_mode_set_ignores_order_along_dim():
    from solbench.evaluate.correctness import compare

    ref = torch.arange(12).reshape(3, 4)
    got = ref.flip(-1)
    assert not compare([got], [ref], [ref], ["ids"], [torch.int64], [_tol(torch.int64)]).ok
    assert compare([got], [ref], [ref], ["ids"], [torch.int64], [_tol(torch.int64)], [{"mode": "set"}]).ok
    got[0, 0] = 99
    assert not compare([got], [ref], [ref], ["ids"], [torch.int64], [_tol(torch.int64)], [{"mode": "set"}]).ok


def test_compare_mode_fp8_within_one_step():
    from solbench.evaluate.correctness import compare

    ref = torch.tensor([1.0, 1.125, -3.0, 0.5]).to(torch.float8_e4m3fn)
    one_up = torch.tensor([1.125, 1.25, -3.25, 0.5625]).to(torch.float8_e4m3fn)  # one e4m3 step each
    two_up = torch.tensor([1.25, 1.25, -3.0, 0.5]).to(torch.float8_e4m3fn)
    mode = [{"mode": "fp8_ulp", "ulps": 1}]
    tol = [_tol(torch.float8_e4m3fn)]
    assert compare([one_up], [ref], [ref.double()], ["q"], [torch.float8_e4m3fn], tol, mode).ok
    assert not compare([two_up], [ref], [ref.double()], ["q"], [torch.float8_e4m3fn], tol, mode).ok


def test_compare_mode_indices_of_accepts_ties_and_rejects_wrong_picks():
    from solbench.evaluate.correctness import compare

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
    from solbench.evaluate.correctness import compare

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
    from solbench.evaluate.correctness import compare

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
    """DeepSeek-V3 routing: two experts with the same score; the reference keeps one, a kernel may keep the
    other. The problem's acceptor takes that, and rejects a lower-scoring expert or weights that do not follow."""
    from solbench.evaluate.correctness import Check, accept_alternative

    problem, ref_module = _deepseek()
    assert problem.definition.custom_check_entrypoint == "accept"
    torch.manual_seed(0)
    T, E = 4, 256
    logits = torch.randn(T, E)
    bias = torch.zeros(E)
    ids, w = ref_module.run(logits, bias)
    # give token 0's weakest chosen expert a twin with the same logit in its group, so one of the two is chosen
    chosen = ids[0].tolist()
    last = min(chosen, key=lambda e: float(logits[0, e]))
    group = last // 32
    twin = next(e for e in range(group * 32, group * 32 + 32) if e not in chosen)
    logits[0, twin] = logits[0, last]
    ids, w = ref_module.run(logits, bias)
    chosen = ids[0].tolist()
    assert (last in chosen) != (twin in chosen)  # exactly one of the tied pair made it
    other = twin if last in chosen else last
    swapped = sorted([e for e in chosen if e not in (twin, last)] + [other])
    alt_ids = ids.clone()
    alt_ids[0] = torch.tensor(swapped, dtype=torch.int32)
    s = torch.sigmoid(logits.double())
    alt_w = w.clone()
    alt_w[0] = (s[0, alt_ids[0].long()] / s[0, alt_ids[0].long()].sum() * 2.5).float()
    inputs = {"logits": logits, "e_score_correction_bias": bias}
    assert ref_module.accept(inputs, [alt_ids, alt_w], [ids, w]) is None
    failed = Check(verdict="incorrect_numerical", reason="topk_ids: 1 of 32 values differ")
    assert accept_alternative(failed, ref_module.accept, inputs, [alt_ids, alt_w], [ids, w]).ok
    # an expert that scores lower is not a tie
    low = ids.clone()
    lowest = int(torch.argmin(logits[0, group * 32: group * 32 + 32])) + group * 32
    low[0] = torch.tensor(sorted([e for e in chosen if e not in (twin, last)] + [lowest]), dtype=torch.int32)
    assert "not a tie" in ref_module.accept(inputs, [low, alt_w], [ids, w])
    # weights that do not follow the chosen experts' scores do not pass (here on a token routed like the
    # reference)
    off = alt_w.clone()
    off[1] = off[1].flip(0)
    assert "weights" in ref_module.accept(inputs, [alt_ids, off], [ids, w])
    # a shape or dtype failure is never reconsidered
    wrong_dtype = Check(verdict="incorrect_dtype", reason="dtype")
    assert not accept_alternative(wrong_dtype, ref_module.accept, inputs, [alt_ids, alt_w], [ids, w]).ok
