import math

import pytest

from solbench.agents.metrics import (
    Trial,
    correctness_rate,
    fast_p,
    ladder,
    mean_pass_at_k,
    mean_sol_score,
    pass_at_k,
    s_score,
    solved_rate,
    summarize,
    tokens_per_success,
    totals,
    two_level_geomean_speedup,
    usd_per_success,
    wall_s_per_success,
)


def T(problem="p", passed=True, speedup=None, sample=0, **kw):
    return Trial(model=kw.pop("model", "m"), problem=problem, passed=passed, speedup=speedup, sample=sample, **kw)


# ---------------------------------------------------------------------------------------------------- pass@k

def test_pass_at_k_by_hand():
    # n=10, c=3: k=1: 1 - C(7,1)/C(10,1) = 1 - 7/10 = 0.3
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    # k=5: 1 - C(7,5)/C(10,5) = 1 - 21/252 = 11/12
    assert pass_at_k(10, 3, 5) == pytest.approx(11 / 12)
    # k=10: n-c = 7 < 10, every draw of 10 holds a pass
    assert pass_at_k(10, 3, 10) == 1.0
    # k=7: 1 - C(7,7)/C(10,7) = 1 - 1/120
    assert pass_at_k(10, 3, 7) == pytest.approx(119 / 120)
    assert pass_at_k(10, 3, 8) == 1.0  # n-c = 7 < 8


def test_pass_at_k_edges():
    assert pass_at_k(10, 0, 1) == 0.0
    assert pass_at_k(10, 0, 10) == 0.0  # C(10,10)/C(10,10) = 1
    assert pass_at_k(10, 10, 1) == 1.0
    assert pass_at_k(1, 1, 1) == 1.0 and pass_at_k(1, 0, 1) == 0.0
    with pytest.raises(ValueError):
        pass_at_k(5, 2, 6)  # k > n
    with pytest.raises(ValueError):
        pass_at_k(5, 2, 0)
    with pytest.raises(ValueError):
        pass_at_k(5, 6, 1)  # c > n


def test_pass_at_k_is_stable_for_large_n():
    # C(2000, 1000) overflows a float; the product form does not. k=1 is exactly c/n.
    assert pass_at_k(2000, 3, 1) == pytest.approx(3 / 2000)
    v = pass_at_k(2000, 1, 1000)  # 1 - C(1999,1000)/C(2000,1000) = 1 - 1000/2000
    assert v == pytest.approx(0.5) and math.isfinite(v)


# ----------------------------------------------------------------------------------------- ladder, S, fast_p

FIVE = [
    T("a", True, 0.3),   # rungs: 0
    T("b", True, 1.0),   # rungs: 0, 0.5, 1 (speedup >= t)
    T("c", True, 2.5),   # rungs: 0, 0.5, 1, 2
    T("d", False, 5.0),  # failed: no rung, whatever its speedup
    T("e", True, 4.0),   # rungs: all five
]


def test_ladder_and_s_by_hand():
    lad = ladder(FIVE)
    # R@0 = 4/5, R@0.5 = 3/5 (b,c,e), R@1 = 3/5 (b: 1.0 >= 1), R@2 = 2/5 (c,e), R@4 = 1/5 (e)
    assert lad == pytest.approx({0.0: 0.8, 0.5: 0.6, 1.0: 0.6, 2.0: 0.4, 4.0: 0.2})
    # S = 100 * (0.8 + 0.6 + 0.6 + 0.4 + 0.2) / 5 = 100 * 2.6 / 5 = 52
    assert s_score(lad) == pytest.approx(52.0)
    assert s_score(list(lad.values())) == pytest.approx(52.0)
    assert ladder([]) is None and s_score(None) is None


def test_correctness_and_fast_p():
    assert correctness_rate(FIVE) == pytest.approx(0.8)
    # fast_p is strict: passed with speedup > p. p=1: c, e (b's 1.0 is not > 1) -> 2/5
    assert fast_p(FIVE, 1.0) == pytest.approx(0.4)
    assert fast_p(FIVE, 0.0) == pytest.approx(0.8)  # every passing trial with a positive speedup
    assert fast_p(FIVE, 4.0) == 0.0  # e's 4.0 is not > 4; d failed
    assert correctness_rate([]) is None and fast_p([], 1.0) is None


def test_mean_sol_score_counts_failures_as_zero():
    ts = [T(passed=True, sol_score=0.8), T(passed=False, sol_score=0.9), T(passed=True, sol_score=None),
          T(passed=True, sol_score=0.4)]
    # (0.8 + 0 + 0.4) / 3: the failed trial counts 0, the unscored passing trial is left out
    assert mean_sol_score(ts) == pytest.approx(0.4)


# ---------------------------------------------------------------------------------- two-level geomean, cost

def _ops():
    return [
        # operator A: sample 0 gm(2, 8) = 4, sample 1 gm(1, 4) = 2, sample 2 failed gm(100, 100) ignored -> best 4
        T("A", True, sample=0, case_speedups=[2.0, 8.0], tokens=100, usd=1.0, wall_s=10.0),
        T("A", True, sample=1, case_speedups=[1.0, 4.0], tokens=200, usd=2.0, wall_s=20.0),
        T("A", False, sample=2, case_speedups=[100.0, 100.0], tokens=300, usd=3.0, wall_s=30.0),
        # operator B: sample 0 gm(3, 27) = 9, sample 1 has no cases: its speedup 1.0 -> best 9
        T("B", True, sample=0, case_speedups=[3.0, 27.0], tokens=400, usd=4.0, wall_s=40.0),
        T("B", True, 1.0, sample=1, tokens=500, usd=5.0, wall_s=50.0),
        # operator C never passes: left out of the geomean, counts no success
        T("C", False, 50.0, tokens=600, usd=6.0, wall_s=60.0),
    ]


def test_two_level_geomean_keeps_best_sample_of_passed_operators():
    # geomean(4, 9) = 6
    assert two_level_geomean_speedup(_ops()) == pytest.approx(6.0)
    assert two_level_geomean_speedup([T("C", False, 50.0)]) is None


def test_per_success_costs():
    ts = _ops()
    # tokens 100+200+300+400+500+600 = 2100 over 2 passed operators (A, B)
    assert tokens_per_success(ts) == pytest.approx(1050.0)
    assert usd_per_success(ts) == pytest.approx(10.5)  # 21 / 2
    assert wall_s_per_success(ts) == pytest.approx(105.0)  # 210 / 2
    assert totals(ts)["tokens"] == 2100 and totals(ts)["wall_s"] == pytest.approx(210.0)
    assert solved_rate(ts) == pytest.approx(2 / 3)
    assert tokens_per_success([T("C", False)]) is None


# ------------------------------------------------------------------------------------------------- grouping

def _grid():
    ts = []
    # m1 on P: 4 samples, 1 pass; m1 on Q: 2 samples, both pass
    ts += [T("P", i == 0, 2.0, sample=i, model="m1", chip="h200", tokens=10) for i in range(4)]
    ts += [T("Q", True, 0.5, sample=i, model="m1", chip="mi300", tokens=10) for i in range(2)]
    # m2 on P: 5 samples, none pass
    ts += [T("P", False, None, sample=i, model="m2", chip="h200", tokens=7) for i in range(5)]
    return ts


def test_pass_at_k_is_per_operator_then_averaged():
    m1 = [t for t in _grid() if t.model == "m1"]
    # P: pass@1 = 1/4, Q: pass@1 = 2/2 = 1 -> mean 0.625 (the trial pass rate is 3/6 = 0.5)
    assert mean_pass_at_k(m1, 1) == pytest.approx(0.625)
    # P: 1 - C(3,2)/C(4,2) = 1 - 3/6 = 0.5, Q: 1 -> 0.75
    assert mean_pass_at_k(m1, 2) == pytest.approx(0.75)
    assert mean_pass_at_k(m1, 5) is None  # P and Q have fewer than 5 samples


def test_summarize_by_model():
    rows = summarize(_grid(), by=("model",))
    assert [r["model"] for r in rows] == ["m1", "m2"]
    m1, m2 = rows
    assert m1["n"] == 6 and m1["operators"] == 2 and m1["passed_operators"] == 2
    assert m1["correct"] == pytest.approx(0.5)
    assert m1["pass@1"] == pytest.approx(0.625) and m1["pass@5"] is None and m1["pass@10"] is None
    # ladder of m1: passes are P/2.0 and Q/0.5 x2. R@0 = 3/6, R@0.5 = 3/6, R@1 = 1/6, R@2 = 1/6, R@4 = 0
    assert m1["R@0"] == pytest.approx(0.5) and m1["R@1"] == pytest.approx(1 / 6) and m1["R@4"] == 0.0
    assert m1["S"] == pytest.approx(100 * (3 + 3 + 1 + 1 + 0) / 6 / 5)
    assert m1["fast_1"] == pytest.approx(1 / 6)
    assert m1["speedup"] == pytest.approx(1.0)  # geomean(2.0, 0.5)
    assert m1["tokens_per_success"] == pytest.approx(30.0)  # 60 tokens / 2 operators
    assert m2["n"] == 5 and m2["correct"] == 0.0 and m2["pass@5"] == 0.0 and m2["pass@10"] is None
    assert m2["speedup"] is None and m2["tokens_per_success"] is None and m2["tokens"] == 35


def test_summarize_by_several_keys_and_errors():
    rows = summarize(_grid(), by=("model", "chip"))
    assert [(r["model"], r["chip"], r["n"]) for r in rows] == [("m1", "h200", 4), ("m1", "mi300", 2),
                                                                 ("m2", "h200", 5)]
    (everything,) = summarize(_grid(), by=())
    assert everything["n"] == 11 and everything["operators"] == 3
    with pytest.raises(ValueError):
        summarize(_grid(), by=("problem",))
