import math

import numpy as np
import pytest

from solbench.experiments.stats import (
    Arm,
    Pair,
    by_standing,
    help_harm,
    paired_lift,
    permutation_test,
    problem_lifts,
    sign_flip_pvalue,
)


def A(passed=True, speedup=None):
    return Arm(passed=passed, speedup=speedup)


FAIL = Arm(passed=False)

# 3 problems x 2 replicates. Per-arm S = 100 x share of thresholds (0, .5, 1, 2, 4) reached:
#   4.0+ -> 100, 2.0..4 -> 80, 1.0..2 -> 60, 0.5..1 -> 40, passed < 0.5 -> 20, failed -> 0.
PAIRS = [
    # a/0: skill 2.0 (80) vs solo 1.0 (60): +20; source 3.0 (tier 4) vs solo tier 3 -> above
    Pair(problem="a", replicate=0, skill=A(True, 2.0), solo=A(True, 1.0), source=A(True, 3.0)),
    # a/1: skill 1.0 (60) vs solo failed (0): +60; source failed vs solo failed -> same
    Pair(problem="a", replicate=1, skill=A(True, 1.0), solo=FAIL, source=FAIL),
    # b/0: skill failed (0) vs solo 0.4 (20): -20; source failed (0) vs tier 1 -> below
    Pair(problem="b", replicate=0, skill=FAIL, solo=A(True, 0.4), source=FAIL),
    # b/1: skill 4.0 (100) vs solo 4.5 (100): 0; source 4.0 (tier 5) vs tier 5 -> same
    Pair(problem="b", replicate=1, skill=A(True, 4.0), solo=A(True, 4.5), source=A(True, 4.0)),
    # c/0: skill 0.6 (40) vs solo 0.6 (40): 0; source 1.0 (tier 3) vs tier 2 -> above
    Pair(problem="c", replicate=0, skill=A(True, 0.6), solo=A(True, 0.6), source=A(True, 1.0)),
    # c/1: skill 3.0 (80) vs solo 0.5 (40): +40; no source arm -> unknown
    Pair(problem="c", replicate=1, skill=A(True, 3.0), solo=A(True, 0.5)),
]


def test_paired_lift_S_by_hand():
    r = paired_lift(PAIRS, "S", resamples=2000)
    # (20 + 60 - 20 + 0 + 0 + 40) / 6 = 100 / 6
    assert r.mean == pytest.approx(100 / 6)
    assert r.skill == pytest.approx((80 + 60 + 0 + 100 + 40 + 80) / 6)
    assert r.solo == pytest.approx((60 + 0 + 20 + 100 + 40 + 40) / 6)
    assert r.n_pairs == 6 and r.n_problems == 3
    assert r.lo <= r.mean <= r.hi
    # problem means are 40, -10, 20: no resample can leave [-10, 40]
    assert -10 - 1e-9 <= r.lo and r.hi <= 40 + 1e-9


def test_paired_lift_correct_and_speed_by_hand():
    c = paired_lift(PAIRS, "correct", resamples=500)
    # a: 1-1, 1-0; b: 0-1, 1-1; c: 1-1, 1-1 -> (0 + 1 - 1 + 0 + 0 + 0) / 6 = 0
    assert c.mean == pytest.approx(0.0) and c.n_pairs == 6
    s = paired_lift(PAIRS, "speed", resamples=500)
    # both passed: a/0 log(2/1), b/1 log(4/4.5), c/0 log(1), c/1 log(3/0.5) -> log(2 * 8/9 * 6) / 4 = log(32/3) / 4
    assert s.mean == pytest.approx(math.log(32 / 3) / 4)
    assert s.n_pairs == 4 and s.n_problems == 3
    with pytest.raises(ValueError):
        paired_lift(PAIRS, "sol")


def test_paired_lift_accepts_dicts_and_handles_no_usable_pairs():
    d = [p.model_dump() for p in PAIRS]
    assert paired_lift(d, "S", resamples=100).mean == pytest.approx(100 / 6)
    r = paired_lift([Pair(problem="x", skill=FAIL, solo=FAIL)], "speed")
    assert r.mean is None and r.lo is None and r.n_pairs == 0


def test_bootstrap_is_seeded_and_reproducible():
    a = paired_lift(PAIRS, "S", resamples=3000, seed=7)
    b = paired_lift(PAIRS, "S", resamples=3000, seed=7)
    assert (a.lo, a.hi) == (b.lo, b.hi)


def test_bootstrap_degenerates_when_all_lifts_equal():
    ps = [Pair(problem=f"p{i}", replicate=r, skill=A(True, 1.0), solo=A(True, 0.6)) for i in range(5)
          for r in range(3)]  # every lift is 60 - 40 = 20
    r = paired_lift(ps, "S")
    assert r.mean == pytest.approx(20.0)
    assert r.lo == pytest.approx(20.0) and r.hi == pytest.approx(20.0)


def test_bootstrap_resamples_problems_not_trials():
    # Two problems, 50 replicates each: every pair of problem "up" has lift +1 (correct), every pair of "down" -1.
    # Resampling problems: the draw is {up, up}, {up, down} or {down, down} with probability 1/4, 1/2, 1/4, so the
    # pooled mean is +1, 0 or -1 and the 2.5% / 97.5% percentiles are exactly -1 and +1.
    # Resampling the 100 trials instead: the mean's sd is about 1/sqrt(100) = 0.1, an interval near +-0.2.
    ps = [Pair(problem="up", replicate=r, skill=A(True, 1.0), solo=FAIL) for r in range(50)]
    ps += [Pair(problem="down", replicate=r, skill=FAIL, solo=A(True, 1.0)) for r in range(50)]
    r = paired_lift(ps, "correct", resamples=4000, seed=1)
    assert r.mean == pytest.approx(0.0)
    assert r.lo == pytest.approx(-1.0) and r.hi == pytest.approx(1.0)
    # the trial-level bootstrap on the same lifts, for contrast
    lifts = np.array([1.0] * 50 + [-1.0] * 50)
    rng = np.random.default_rng(1)
    means = lifts[rng.integers(0, 100, size=(4000, 100))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    assert hi - lo < 0.6 and (r.hi - r.lo) > 3 * (hi - lo)


def test_bootstrap_of_a_hundred_problems_gives_an_interval_about_its_mean():
    rng = np.random.default_rng(0)
    ps = [Pair(problem=f"p{i}", replicate=r, skill=A(bool(rng.random() < 0.7), float(rng.lognormal())),
               solo=A(bool(rng.random() < 0.6), float(rng.lognormal()))) for i in range(100) for r in range(3)]
    r = paired_lift(ps, "S", resamples=10000)
    assert r.lo <= r.mean <= r.hi and r.n_problems == 100


def test_help_harm_counts():
    # S lifts: +20, +60, -20, 0, 0, +40
    h = help_harm(PAIRS, tol=0.0)
    assert (h["n"], h["wins"], h["ties"], h["losses"]) == (6, 3, 2, 1)
    assert h["help"] == pytest.approx(3 / 6) and h["harm"] == pytest.approx(1 / 6)
    # tol 20: only lifts > 20 win (60, 40), only lifts < -20 lose (none); -20, 0, 0, +20 tie
    h = help_harm(PAIRS, tol=20.0)
    assert (h["wins"], h["ties"], h["losses"]) == (2, 4, 0) and h["harm"] == 0.0
    # speed: a/0 +log 2 win, b/1 log(8/9) loss, c/0 0 tie, c/1 +log 6 win
    h = help_harm(PAIRS, tol=0.0, metric="speed")
    assert (h["n"], h["wins"], h["ties"], h["losses"]) == (4, 2, 1, 1)
    assert help_harm([], 0.0)["help"] is None


def test_by_standing_breakdown():
    b = by_standing(PAIRS)
    # above: a/0 (+20), c/0 (0); same: a/1 (+60), b/1 (0); below: b/0 (-20); unknown: c/1 (+40)
    assert set(b) == {"above", "same", "below", "unknown"}
    assert (b["above"]["n"], b["above"]["help"], b["above"]["harm"]) == (2, 0.5, 0.0)
    assert b["above"]["mean_lift"] == pytest.approx(10.0)
    assert (b["same"]["n"], b["same"]["help"], b["same"]["harm"]) == (2, 0.5, 0.0)
    assert b["same"]["mean_lift"] == pytest.approx(30.0)
    assert (b["below"]["n"], b["below"]["help"], b["below"]["harm"]) == (1, 0.0, 1.0)
    assert b["below"]["mean_lift"] == pytest.approx(-20.0)
    assert b["unknown"]["n"] == 1 and b["unknown"]["mean_lift"] == pytest.approx(40.0)
    # without missing sources there is no "unknown" entry, and empty standings are present with n = 0
    b = by_standing(PAIRS[:2])
    assert set(b) == {"above", "same", "below"} and b["below"]["n"] == 0 and b["below"]["help"] is None


def test_sign_flip_exact_by_hand():
    # lifts 1, 2, 3 (mean 2): of the 8 sign assignments only +++ and --- reach |mean| >= 2 -> 2/8
    assert sign_flip_pvalue([1.0, 2.0, 3.0]) == pytest.approx(2 / 8)
    # 1, 1, 1, -1 (|sum| 2): sums of four +-1 are 4 (1 way), 2 (4), 0 (6), -2 (4), -4 (1); |sum| >= 2 in 10 of 16
    assert sign_flip_pvalue([1.0, 1.0, 1.0, -1.0]) == pytest.approx(10 / 16)
    assert sign_flip_pvalue([1.0, -1.0]) == 1.0  # observed mean 0: every assignment is as extreme
    assert sign_flip_pvalue([]) == 1.0


def test_permutation_test_on_pairs():
    # three problems, all lifts positive and distinct per problem: S lifts 20, 40, 60 -> p = 2/8
    ps = [Pair(problem="x", skill=A(True, 1.0), solo=A(True, 0.6)),  # 60 - 40 = 20
          Pair(problem="y", skill=A(True, 2.0), solo=A(True, 0.6)),  # 80 - 40 = 40
          Pair(problem="z", skill=A(True, 1.0), solo=FAIL)]  # 60 - 0 = 60
    assert problem_lifts(ps) == pytest.approx({"x": 20.0, "y": 40.0, "z": 60.0})
    assert permutation_test(ps) == pytest.approx(0.25)
    # PAIRS: problem means 40, -10, 20 (mean 50/3); assignments with |s1*40 + s2*10 + s3*20| >= 50:
    # +40 -10 +20 = 50 and its negation, +40 +10 +20 = 70 and its negation -> 4/8
    assert permutation_test(PAIRS) == pytest.approx(0.5)


def test_sign_flip_monte_carlo_is_seeded():
    d = [1.0] * 20  # exact p = 2 / 2^20; Monte Carlo with 10000 draws almost surely sees no hit
    p = sign_flip_pvalue(d, resamples=10000, seed=3)
    assert p == sign_flip_pvalue(d, resamples=10000, seed=3)
    assert p == pytest.approx(1 / 10001)
    # exact and Monte Carlo agree on a mixed case
    d = [0.3, -0.1, 0.5, 0.2, -0.4, 0.6, 0.1, 0.25, -0.05, 0.15, 0.35, -0.2]
    exact = sign_flip_pvalue(d)
    mc = sign_flip_pvalue(d, resamples=20000, seed=0, exact_max=0)
    assert abs(exact - mc) < 0.02
