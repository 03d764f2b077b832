"""``unsupported`` never counts toward a pass in any metric (issue 21, root cause 8): not as passed, solved,
correct, fast_p or a rung of R@t, and it stays in every denominator a failure would stay in.

Each test builds evaluations whose workloads are all, or partly, ``unsupported`` and follows them through the
chain a benchmark uses: the evaluation's aggregate and fast_p, a run's mean, the agent track's graded submission
and best-so-far, its trial metrics, and the transfer experiment's arms.
"""

from solbench.records import scoring
from solbench.agents import metrics
from solbench.agents.grader import graded_from
from solbench.agents.loop import AttemptResult
from solbench.agents.scaffold import best_of
from solbench.agents.session import trial_of
from solbench.records.verdict import Evaluation, WorkloadResult
from solbench.experiments import stats, transfer


def W(uuid, verdict, score=None, speedup=None, **kw):
    return WorkloadResult(uuid=uuid, verdict=verdict, sol_score=score, speedup_vs_baseline=speedup, **kw)


def E(workloads, verdict, score="aggregate", **kw):
    ev = Evaluation(problem="p", problem_dir="/p", problem_digest="d", solution="s", solution_digest="sd",
                    language="pytorch", hardware="cpu", device="cpu", verdict=verdict, workloads=workloads, **kw)
    ev.sol_score = scoring.aggregate(workloads) if score == "aggregate" else score
    ev.fast_p = scoring.evaluation_fast_p(workloads)
    return ev


#: every workload unsupported (a cuda_cpp solution on the CPU, or one that chose to be)
ALL = [W("a", "unsupported"), W("b", "unsupported")]
#: one workload passed fast, one unsupported: if the unsupported one were dropped, this would look perfect
SOME = [W("a", "passed", score=0.9, speedup=3.0), W("b", "unsupported")]
#: the same with the unsupported workload carrying numbers it should never have had
SOME_FORGED = [W("a", "passed", score=0.9, speedup=3.0), W("b", "unsupported", score=1.0, speedup=9.0)]


def test_a_verdict_of_unsupported_is_not_a_pass():
    assert scoring.passed("passed") and not scoring.passed("unsupported") and not scoring.passed(None)


def test_an_evaluation_with_an_unsupported_workload_has_no_aggregate():
    assert scoring.aggregate(ALL) is None
    assert scoring.aggregate(SOME) is None
    assert scoring.aggregate(SOME_FORGED) is None  # not 0.95: nothing an unsupported workload holds is counted


def test_fast_p_keeps_unsupported_workloads_in_its_denominator():
    assert scoring.evaluation_fast_p(SOME) == {"fast_0": 0.5, "fast_1": 0.5, "fast_1.5": 0.5, "fast_2": 0.5}
    assert scoring.evaluation_fast_p(SOME_FORGED)["fast_2"] == 0.5  # the unsupported one's speedup is no hit
    assert scoring.evaluation_fast_p(ALL) == {}  # nothing was timed: no fast_p at all, certainly not 1
    interpreted = [W("a", "passed", speedup=None, interpreted=True), W("b", "passed", score=0.5, speedup=2.0)]
    assert scoring.evaluation_fast_p(interpreted)["fast_1"] == 1.0  # interpreted ones alone are left out


def test_a_runs_mean_counts_unsupported_evaluations_as_zero():
    runs = [E([W("a", "passed", score=0.8)], "passed"), E(ALL, "unsupported"), E(SOME, "unsupported")]
    assert scoring.run_mean(runs) == 0.8 / 3
    failed_unscored = E([W("a", "passed", interpreted=True), W("b", "runtime_error", score=0.0)], "runtime_error")
    assert failed_unscored.sol_score is None and scoring.run_mean([failed_unscored]) == 0.0
    assert scoring.run_mean([E([W("a", "passed", interpreted=True)], "passed")]) is None  # passed, unscored


def test_the_run_summary_line_counts_unsupported_as_zero(tmp_path):
    from solbench.report.table import run_summary

    line = run_summary([E([W("a", "passed", score=0.8)], "passed"), E(ALL, "unsupported")], 7, tmp_path / "db")
    assert "1 passed, 1 unsupported, 0 failed" in line and "mean SOL score 0.400" in line


def _graded(ev, n=1):
    return graded_from(ev, n)


def test_a_submission_with_an_unsupported_workload_is_not_passed_and_never_best():
    passed = _graded(E([W("a", "passed", score=0.2, speedup=1.1), W("b", "passed", score=0.2, speedup=1.1)],
                       "passed"), 1)
    for ev in (E(ALL, "unsupported"), E(SOME, "unsupported"), E(SOME_FORGED, "unsupported", score=0.95)):
        g = _graded(ev, 2)
        assert not g.passed and g.score_speedup is None
        assert best_of([passed, g]) is passed and best_of([g, passed]) is passed


def _trial(ev, sample=0, problem="p"):
    g = _graded(ev)
    res = AttemptResult(key=f"k{sample}", problem=problem, language="pytorch", model="m", replicate=sample,
                        graded=[g], best=g, submissions=1)
    return trial_of(res, None)


def test_agent_metrics_never_count_an_unsupported_best_submission():
    for ev in (E(ALL, "unsupported"), E(SOME, "unsupported")):
        trials = [_trial(ev, s) for s in range(3)]
        row = metrics.summarize(trials, by=())[0]
        assert row["n"] == 3 and row["operators"] == 1
        assert row["passed_operators"] == 0 and row["solved"] == 0.0 and row["correct"] == 0.0
        assert row["pass@1"] == 0.0 and row["R@0"] == 0.0 and row["R@1"] == 0.0 and row["S"] == 0.0
        assert row["fast_0"] == 0.0 and row["fast_1"] == 0.0
        assert row["speedup"] is None and row["tokens_per_success"] is None
        assert row["sol"] == 0.0  # counted as 0, not left out


def test_a_trial_recorded_as_unsupported_is_not_passed_even_when_marked_so():
    bad = metrics.Trial(model="m", problem="p", passed=True, verdict="unsupported", speedup=5.0, sol_score=0.9)
    good = metrics.Trial(model="m", problem="q", passed=True, verdict="passed", speedup=2.0, sol_score=0.5)
    assert not metrics.succeeded(bad) and metrics.succeeded(good)
    trials = [bad, good]
    assert metrics.correctness_rate(trials) == 0.5 and metrics.fast_p(trials, 1.0) == 0.5
    assert metrics.ladder(trials)[4.0] == 0.0 and metrics.solved_rate(trials) == 0.5
    assert metrics.mean_sol_score(trials) == 0.25 and metrics.mean_pass_at_k(trials, 1) == 0.5
    assert metrics.two_level_geomean_speedup(trials) == 2.0 and metrics.passed_operators(trials) == 1


def test_transfer_arms_with_an_unsupported_best_submission_fail():
    g = _graded(E(SOME, "unsupported"))
    res = AttemptResult(key="k", problem="p", language="pytorch", graded=[g], best=g)
    arm = transfer.arm_of(res)
    assert not arm.ok and arm.speedup is None and stats.tier(arm) == 0
    forged = stats.Arm(passed=True, speedup=4.0, verdict="unsupported")
    assert stats.arm_value(forged, "S") == 0.0 and stats.arm_value(forged, "correct") == 0.0
    assert stats.arm_value(forged, "speed") is None and stats.tier(forged) == 0
    assert not transfer.gate_allows("source_passed", res, res)
    pair = stats.Pair(problem="p", skill=forged, solo=stats.Arm(passed=True, speedup=1.0, verdict="passed"))
    assert stats.pair_lift(pair, "correct") == -1.0  # the unsupported skill arm is a failure, not left out
