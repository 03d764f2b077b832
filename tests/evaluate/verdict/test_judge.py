"""The trusted side's judgement of a worker's raw result: physics floor, hidden work, scores."""

from solbench.analysis.roofline import Work
from solbench.evaluate.trusted.report import WorkloadReport
from solbench.evaluate.verdict.decision import judge as decide
from solbench.hardware.spec import Ceilings

CEIL = Ceilings(hardware="x", kind="datasheet", dram_bytes_per_s=1e12, rates={"vector_fp32": 1e13, "sfu": 1e12})
WORK = Work(flops={}, bytes=1e9)  # T_SOL = 1 ms
BASE = {"eager": {"axpy-small": {"verdict": "passed", "time_ms": 4.0}}}


def _judge(problem, uuid, r, *args):
    """``decision.judge`` on a worker's message as the keeper validates it."""
    return decide(problem, uuid, WorkloadReport.model_validate(r), *args)


def judge(axpy, **result):
    r = {"uuid": "axpy-small", "verdict": "passed", "reasons": [], "timing_method": "cuda_events"}
    r.update(result)
    if "audit_ms" not in result and result.get("samples_ms"):  # the audit confirmed the time (its own tests
        r["audit_ms"] = sorted(result["samples_ms"])[len(result["samples_ms"]) // 2]  # are in timing/test_audit.py)
    return _judge(axpy, "axpy-small", r, BASE, WORK, CEIL, None)


def test_scored_between_baseline_and_sol(axpy):
    w = judge(axpy, samples_ms=[2.5] * 20, wall_ms=[2.6, 2.6, 2.6])
    assert w.verdict == "passed" and w.sol_ms == 1.0 and w.baseline == "eager"
    assert abs(w.sol_score - 1 / (1 + 1.5 / 3.0)) < 1e-9


def test_time_below_sol_is_left_unscored_not_accused(axpy):
    """Under T_SOL but above the hard floor, the bound may over-count (our defect) or the time be forged: the
    workload passes, unscored and flagged, so the evaluation has no score to gain and no one is accused."""
    w = judge(axpy, samples_ms=[0.5] * 20, wall_ms=[0.6] * 3)
    assert w.verdict == "passed" and {"below_sol", "bound_suspect"} <= set(w.warnings)
    assert w.sol_score is None and "bound" in w.message
    from solbench.records import scoring

    assert scoring.aggregate([w]) is None


def test_time_below_the_hard_floor_is_a_reward_hack(axpy):
    # under the latency floor no call can run, whatever the bound counts
    floor = CEIL.model_copy(update={"launch_floor_s": 0.8e-3})
    w = _judge(axpy, "axpy-small", {"uuid": "axpy-small", "verdict": "passed", "reasons": [],
                                    "timing_method": "cupti", "samples_ms": [0.5] * 20, "wall_ms": [0.6] * 3},
               BASE, WORK, floor, None)
    assert w.verdict == "reward_hack" and "below_floor" in w.reasons and w.sol_score == 0.0


def test_the_hard_floor_counts_output_writes_beyond_the_cache(axpy):
    from solbench.evaluate.verdict.decision import hard_floor_ms

    axes = {"N": 1 << 28}  # 1 GiB of fp32 output
    assert hard_floor_ms(axpy, axes, CEIL, 60 << 20) == (((1 << 30) - (60 << 20)) / 1e12) * 1e3
    assert hard_floor_ms(axpy, {"N": 1000}, CEIL, 60 << 20) == 0.0


def test_wall_time_far_above_event_time_is_hidden_work(axpy):
    w = judge(axpy, samples_ms=[2.0] * 20, wall_ms=[9.0, 9.1, 9.0])
    assert w.verdict == "reward_hack" and "unaccounted_device_work" in w.reasons


def test_host_overhead_alone_is_not_hidden_work(axpy):
    w = judge(axpy, samples_ms=[2.0] * 20, wall_ms=[2.15, 2.1, 2.1])
    assert w.verdict == "passed"


def test_invalid_bound_is_not_scored(axpy):
    base = {"eager": {"axpy-small": {"verdict": "passed", "time_ms": 1.02}}}
    r = {"uuid": "axpy-small", "verdict": "passed", "reasons": [], "samples_ms": [1.5] * 20, "wall_ms": [1.6] * 3,
         "audit_ms": 1.5}
    w = _judge(axpy, "axpy-small", r, base, WORK, CEIL, None)
    assert w.sol_score is None and "invalid_bound" in w.warnings


def test_malformed_worker_messages_are_treated_as_forged():
    from solbench.evaluate.trusted.keeper import _checked

    good = {"uuid": "w", "subject": 0, "verdict": "passed", "reasons": [], "samples_ms": [0.1, 0.2]}
    r = _checked(good)
    assert (r.uuid, r.verdict, r.reasons, r.samples_ms) == ("w", "passed", [], [0.1, 0.2])
    for bad in ({"uuid": "w", "verdict": "totally_passed"}, {"uuid": "w", "verdict": "passed", "samples_ms": ["x"]},
                {"uuid": "w", "verdict": "passed", "samples_ms": [-1.0]}, {"verdict": "passed"},
                {"uuid": "w", "verdict": "passed", "samples_ms": [0.1, None]}):
        r = _checked(bad)
        assert r.verdict == "reward_hack" and r.reasons == ["result_forgery"], bad


def test_no_report_is_a_runtime_error(axpy):
    w = decide(axpy, "axpy-small", None, BASE, WORK, CEIL, None)
    assert (w.verdict, w.reasons) == ("runtime_error", ["no_result"])


def test_the_worker_sets_only_its_own_warnings(axpy):
    """A warning the registry gives the worker stays (``vendor_kernel``); one it does not is the runner's to
    decide, and is dropped from the report."""
    w = judge(axpy, samples_ms=[2.5] * 20, wall_ms=[2.6] * 3,
              warnings=["vendor_kernel", "ghost_inconclusive", "time_unconfirmed", "made_up"])
    assert w.verdict == "passed" and {"vendor_kernel", "ghost_inconclusive"} <= set(w.warnings)
    assert "made_up" not in w.warnings and "time_unconfirmed" not in w.warnings


def test_work_left_running_on_other_streams_is_hidden_work(axpy):
    # the end event came 0.04 ms after the start, the call's own streams finished 0.5 ms later
    w = judge(axpy, samples_ms=[2.0] * 20, wall_ms=[2.1] * 3, unjoined_ms=[0.5] * 20)
    assert w.verdict == "reward_hack" and "unaccounted_device_work" in w.reasons


def test_streams_joined_back_are_not_hidden_work(axpy):
    w = judge(axpy, samples_ms=[2.0] * 20, wall_ms=[2.1] * 3, unjoined_ms=[0.002] * 20)
    assert w.verdict == "passed"


def test_a_round_report_that_does_not_match_the_round_is_forged():
    from solbench.evaluate.boundary.protocol import Timed
    from solbench.evaluate.timing.cross_check import _forgery

    kinds = ["warm", "wall", "wall", "wall"] + ["held"] * 10

    def report(**kw):
        base = {"type": "timed", "nonce": "n", "samples_ms": [1.0] * 10, "wall_ms": [1.1] * 3,
                "wall_event_ms": [1.0] * 3, "t_begin": 10.0, "t_end": 10.5}
        return Timed.model_validate(dict(base, **kw))

    assert _forgery(report(), kinds, 9.9, 10.6) is None
    assert "window" in _forgery(report(t_begin=9.0), kinds, 9.9, 10.6)
    assert "add up" in _forgery(report(samples_ms=[100.0] * 10), kinds, 9.9, 10.6)
    assert "negative" in _forgery(report(samples_ms=[-1.0] + [1.0] * 9), kinds, 9.9, 10.6)
    # one sample per held call of the round and one wall time per wall call, no more and no fewer
    assert "held" in _forgery(report(samples_ms=[1.0] * 9), kinds, 9.9, 10.6)
    assert "held" in _forgery(report(samples_ms=[1.0] * 50), kinds, 9.9, 10.6)
    assert "held" in _forgery(report(wall_ms=[]), kinds, 9.9, 10.6)
    assert _forgery(report(t_begin=None), kinds, 9.9, 10.6) == "no timestamps"
    # the events of a wall-time call lie inside it, so they cannot outlast it
    assert "longer than" in _forgery(report(wall_event_ms=[5.0, 1.0, 1.0]), kinds, 9.9, 10.6)


def test_a_reply_that_does_not_answer_its_command_is_forged():
    import pytest as _pytest

    from solbench.evaluate.boundary.protocol import Forged, accept

    good = {"type": "called", "nonce": "abc", "codes": [], "harness": "h", "outputs": [], "count": 1}
    assert accept(good, "called", "abc").count == 1
    for bad, why in ((dict(good, nonce="other"), "nonce"), (dict(good, type="timed"), "expects"),
                     (dict(good, kept=[1]), "malformed"), (dict(good, dsl_share=2.0), "malformed"),
                     ({"type": "garbled", "text": "x"}, "unreadable")):
        with _pytest.raises(Forged, match=why):
            accept(bad, "called", "abc")
    with _pytest.raises(Forged, match="more than one"):
        accept(good, "called", "abc", alone=False)


def test_each_detected_pattern_adds_its_reason(axpy):
    # the worker already found a wrong re-checked output; the hidden stream work and the time under T_SOL add theirs
    w = judge(axpy, verdict="reward_hack", reasons=["output_recheck"], message="timed call 7 re-checked",
              samples_ms=[0.5] * 20, wall_ms=[0.6] * 3, unjoined_ms=[0.4] * 20)
    assert w.verdict == "reward_hack"
    assert set(w.reasons) == {"output_recheck", "unaccounted_device_work", "below_sol"}
    assert w.message == "timed call 7 re-checked"


def test_power_capped_clocks_are_a_warning_not_a_failure(axpy):
    capped = {"sm_clock_mhz": 1695, "max_sm_clock_mhz": 1980, "throttle_reasons": ["sw_power_cap"]}
    idle = {"sm_clock_mhz": 1980, "max_sm_clock_mhz": 1980, "throttle_reasons": ["gpu_idle"]}
    w = judge(axpy, samples_ms=[2.5] * 20, wall_ms=[2.6] * 3, clocks=[idle, capped])
    assert w.verdict == "passed" and "clocks_throttled" in w.warnings and w.sol_score is not None
    w = judge(axpy, samples_ms=[2.5] * 20, wall_ms=[2.6] * 3, clocks=[idle, idle])
    assert "clocks_throttled" not in w.warnings


def test_host_bound_call_timed_with_the_stream_held_is_not_hidden_work(axpy):
    """Held samples time the device alone (12 us); the wall-time calls wait for a slow host (0.32 ms), and so do
    their own events: nothing ran where the events did not see it."""
    w = judge(axpy, samples_ms=[0.012] * 20, wall_ms=[0.33, 0.32, 0.34], wall_event_ms=[0.31, 0.30, 0.32])
    assert "unaccounted_device_work" not in w.reasons
    # the same wall times against the held samples alone would have looked like hidden work
    w = judge(axpy, samples_ms=[0.012] * 20, wall_ms=[0.33, 0.32, 0.34])
    assert "unaccounted_device_work" in w.reasons


def test_wall_time_far_above_its_own_events_is_hidden_work(axpy):
    w = judge(axpy, samples_ms=[2.0] * 20, wall_ms=[9.0, 9.1, 9.0], wall_event_ms=[2.1, 2.0, 2.1])
    assert w.verdict == "reward_hack" and "unaccounted_device_work" in w.reasons
    # one call slowed by the host alone is not enough
    w = judge(axpy, samples_ms=[2.0] * 20, wall_ms=[9.0, 2.2, 2.2], wall_event_ms=[2.1, 2.0, 2.1])
    assert "unaccounted_device_work" not in w.reasons


def test_a_language_proof_that_could_not_run_is_a_warning(axpy):
    r = {"uuid": "axpy-small", "verdict": "passed", "reasons": [], "timing_method": "cuda_events",
         "samples_ms": [2.5] * 20, "wall_ms": [2.6] * 3}
    # the worker marks the workload whose call it ran under the profiler
    unseen = _judge(axpy, "axpy-small", dict(r, profiled=True), BASE, WORK, CEIL, None)
    assert unseen.verdict == "passed" and "language_proof_unavailable" in unseen.warnings
    seen = _judge(axpy, "axpy-small", dict(r, profiled=True, dsl_share=0.9), BASE, WORK, CEIL, None)
    assert "language_proof_unavailable" not in seen.warnings
    assert "language_proof_unavailable" not in _judge(axpy, "axpy-small", r, BASE, WORK, CEIL, None).warnings



def test_an_unconfirmed_time_earns_neither_a_score_nor_a_speedup(axpy):
    """A time the audit could not confirm is the candidate's word only: the workload passes with the warning, and
    nothing is computed from the time (it used to give speedups over the baselines)."""
    w = judge(axpy, samples_ms=[2.0] * 20, wall_ms=[2.1] * 3, audit_ms=None,
              audit_unconfirmed="every audit was too noisy")
    assert w.verdict == "passed" and "time_unconfirmed" in w.warnings and "too noisy" in w.message
    assert w.sol_score is None and w.speedup_vs_eager is None and w.speedup_vs_baseline is None
    confirmed = judge(axpy, samples_ms=[2.0] * 20, wall_ms=[2.1] * 3)
    assert confirmed.speedup_vs_eager == 2.0 and confirmed.sol_score is not None


def test_a_time_confirmed_from_upper_bounds_is_scored_and_said_to_be(axpy):
    """A time the audit confirmed from late brackets alone (``stamps_bound``: the call waits on the device inside
    itself) scores like any confirmed time, with the warning time_bounded; a time confirmed by brackets on time
    carries no such warning."""
    w = judge(axpy, samples_ms=[2.0] * 20, wall_ms=[2.1] * 3, audit_ms=2.1, audit_method="stamps_bound")
    assert w.verdict == "passed" and "time_bounded" in w.warnings and w.sol_score is not None
    assert "time_unconfirmed" not in w.warnings and w.audit_method == "stamps_bound"
    plain = judge(axpy, samples_ms=[2.0] * 20, wall_ms=[2.1] * 3, audit_ms=2.1, audit_method="stamps")
    assert "time_bounded" not in plain.warnings
