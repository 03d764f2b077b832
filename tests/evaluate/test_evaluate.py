"""End-to-end evaluations on the CPU: verdicts for honest, wrong, crashing and hanging solutions."""

import pytest

from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.problems.solution import load_solution
from solbench.store.db import Store
from tests.paths import AXPY, SOLUTIONS


def run(problem, name, **kw):
    """Evaluate a fixture; the static scan is off unless asked for, so these tests reach the dynamic layer."""
    path = SOLUTIONS / name if (SOLUTIONS / name).exists() else AXPY / "solutions" / name
    sol = load_solution(path, problem.name)
    kw.setdefault("static_checks", False)
    store = kw.pop("store", None)
    opts = EvalOptions(device="cpu", baselines=kw.pop("baselines", ()), **kw)
    return evaluate(problem, sol, opts, store=store)


def test_honest_pytorch_solution_passes_and_is_timed(axpy, tmp_path):
    store = Store(tmp_path / "r.db")
    sol = load_solution(AXPY / "solutions" / "torch_ok.py", axpy.name)
    ev = evaluate(axpy, sol, EvalOptions(device="cpu"), store=store)
    assert ev.verdict == "passed", ev.workloads
    assert [w.uuid for w in ev.workloads] == ["axpy-small", "axpy-odd"]  # only CPU workloads, in file order
    for w in ev.workloads:
        assert w.verdict == "passed"
        assert w.time_ms is not None and w.time_ms > 0 and w.n_samples >= 3
        assert w.eager_ms is not None and w.baseline == "eager"
        assert w.sol_ms is not None and w.sol_ms > 0
        assert w.max_abs_err is not None and w.max_abs_err < 1e-5
    # stored, with raw samples, and read back identically
    again, solution_json = store.evaluation(ev.id)
    assert again.verdict == "passed" and again.workloads[0].samples_ms == ev.workloads[0].samples_ms
    assert "torch.add" in solution_json
    # the eager baseline is cached per device and software: a second evaluation measures none
    ev2 = evaluate(axpy, sol, EvalOptions(device="cpu"), store=store)
    assert ev2.workloads[0].eager_ms == ev.workloads[0].eager_ms


def test_a_workloads_checked_calls_come_back_from_one_exchange_in_one_process(axpy):
    """The draws' calls go to the candidate as one ``calls`` command (``stages.WorkloadJudging.batch``); a batch that
    broke the candidate's process would be made again call by call in a fresh one and pass all the same, so the
    evaluation must show no restart."""
    ev = run(axpy, "torch_ok.py", time_candidate=False)
    assert ev.verdict == "passed"
    assert "candidate_restarts" not in (ev.environment or {})
    assert all(w.phases.get("calls.exchange", 0) > 0 for w in ev.workloads)


@pytest.mark.parametrize("name,verdict", [
    ("wrong.py", "incorrect_numerical"),
    ("zeros.py", "incorrect_numerical"),
    ("nan.py", "incorrect_numerical"),
    ("wrong_shape.py", "incorrect_shape"),
    ("wrong_dtype.py", "incorrect_dtype"),
    ("subclass.py", "reward_hack"),
    ("raises.py", "runtime_error"),
    ("syntax_error.py", "compile_error"),
    ("import_error.py", "compile_error"),
    ("dps_partial.json", "incorrect_numerical"),
])
def test_failures_are_verdicts(axpy, name, verdict):
    ev = run(axpy, name, time_candidate=False)
    assert ev.verdict == verdict, (ev.workloads[0].message, ev.message)
    assert ev.sol_score == 0.0
    if verdict.startswith("incorrect"):
        failure = ev.workloads[0].failure
        assert failure and "seed" in failure and "worst" in failure


def test_zero_output_reason(axpy):
    ev = run(axpy, "zeros.py", time_candidate=False)
    assert "all zeros" in ev.workloads[0].message


def test_nan_reason(axpy):
    ev = run(axpy, "nan.py", time_candidate=False)
    assert "NaN" in ev.workloads[0].message


@pytest.mark.parametrize("name", ["dps_ok.json", "returning_multi_file.json", "axpy_triton.py",
                                  "named_like_a_module.json"])
def test_solution_forms_pass(axpy, name):
    ev = run(axpy, name)
    assert ev.verdict == "passed", [w.message for w in ev.workloads]


def test_triton_on_cpu_is_interpreted_and_not_scored(axpy):
    ev = run(axpy, "axpy_triton.py")
    w = ev.workloads[0]
    assert w.interpreted and w.time_ms is None and w.sol_score is None and "interpreted" in w.warnings


def test_bf16_dot_in_interpreter_is_judged(axpy):
    """Triton's interpreter computes a bf16 tl.dot faithfully once its dot is patched (languages/triton.py), so a
    bf16 dot is judged on the CPU like any other kernel; the candidate's process never decides `unsupported`."""
    ev = run(axpy, "bf16_dot_triton.py", time_candidate=False)
    assert ev.verdict == "passed", (ev.workloads[0].verdict, ev.workloads[0].message)


@pytest.mark.parametrize("name,reason", [("crash.py", "crash"), ("segfault.py", "crash")])
def test_crash_becomes_verdict_and_run_goes_on(axpy, name, reason):
    ev = run(axpy, name, time_candidate=False)
    # every workload gets its own verdict: a fresh worker takes the next one after a crash
    assert [w.verdict for w in ev.workloads] == ["runtime_error", "runtime_error"]
    assert all(reason in w.reasons for w in ev.workloads)


def test_hang_becomes_timeout(axpy):
    ev = run(axpy, "hang.py", time_candidate=False, workload_timeout_s=1, workloads=["axpy-small"])
    assert ev.verdict == "timeout"


def test_a_hang_costs_one_limit_not_one_per_workload(axpy):
    """After the first workload's limit runs out, the others are not run (``limits``): the evaluation costs one
    limit plus the start, where it used to cost a limit per workload."""
    ev = run(axpy, "hang.py", time_candidate=False, workload_timeout_s=1.5)
    assert [w.verdict for w in ev.workloads] == ["timeout", "timeout"]
    assert "timeout" in ev.workloads[0].reasons
    assert ev.workloads[1].reasons == ["not_run_after_timeout"]  # nothing of it ran: no second limit spent
    assert "axpy-small" in ev.workloads[1].message
    # asked for, the remaining workloads run anyway (and hang again)
    again = run(axpy, "hang.py", time_candidate=False, workload_timeout_s=1, run_after_timeout=True)
    assert [w.reasons for w in again.workloads] == [["timeout"], ["timeout"]]


def test_the_default_limit_follows_the_reference():
    from solbench.evaluate.verdict import limits

    assert limits.workload_limit(0.0) == limits.COMPILE_ALLOWANCE_S  # the floor: a first compile
    assert limits.workload_limit(0.01) == pytest.approx(limits.COMPILE_ALLOWANCE_S + limits.MULTIPLE * 0.01)
    assert limits.workload_limit(10.0) == limits.CEILING_S
    assert limits.workload_limit(None) == limits.CEILING_S  # no reference time: the ceiling
    assert limits.workload_limit(0.01, explicit_s=7) == 7


def test_phases_say_where_the_time_went(axpy, tmp_path):
    store = Store(tmp_path / "r.db")
    ev = run(axpy, "torch_ok.py", store=store)
    for name in ("static_scan", "stage", "worker", "analysis", "judge", "candidate_start", "inputs", "reference",
                 "calls", "compare", "timing", "timing.rounds", "timing.fill", "timing.recheck", "limit"):
        assert ev.phases.get(name, 0) > 0, (name, ev.phases)
    assert ev.phases["timing.rounds"] <= ev.phases["timing"]
    assert sum(ev.phases[k] for k in ("stage", "worker", "judge")) <= ev.elapsed_s
    w = ev.workloads[0]
    assert w.phases["timing"] > 0 and w.phases["calls"] > 0
    stored, _ = store.evaluation(ev.id)
    assert stored.phases.get("worker") == ev.phases["worker"] and stored.workloads[0].phases == w.phases


def test_replay_reproduces_a_failure(axpy, tmp_path):
    store = Store(tmp_path / "r.db")
    sol = load_solution(SOLUTIONS / "wrong.py", axpy.name)
    ev = evaluate(axpy, sol, EvalOptions(device="cpu", baselines=(), time_candidate=False), store=store)
    stored, _ = store.evaluation(ev.id)
    failure = stored.workloads[0].failure
    replay = evaluate(axpy, sol, EvalOptions(device="cpu", baselines=(), time_candidate=False, seed=stored.seed,
                                             workloads=[stored.workloads[0].uuid]))
    assert replay.workloads[0].failure["seed"] == failure["seed"]
    assert replay.workloads[0].failure["worst"] == failure["worst"]


def test_in_place_inputs_are_judged_like_outputs():
    from tests.paths import FIXTURES

    from solbench.analysis.roofline import count_work
    from solbench.problems.problem import load_problem

    kv = load_problem(FIXTURES / "problems" / "kv_write")
    ok = run(kv, "kv_ok.py")  # timed too: the re-check of timed calls must handle a call that returns nothing
    assert ok.verdict == "passed" and ok.workloads[0].time_ms, ok.workloads[0].message
    bad = run(kv, "kv_skip.py", time_candidate=False)
    assert bad.verdict == "incorrect_numerical" and bad.workloads[0].failure["worst"]["output"] == "cache"
    # the bound counts the rows written (and the new rows and slots read), not the whole cache
    work = count_work(kv, kv.workloads[0])
    assert work.bytes == 16 * 64 * 4 + 16 * 8 + 16 * 64 * 4


@pytest.mark.parametrize("name,reason", [
    ("phase_switch.py", "output_recheck"),
    ("mutate_input.py", "input_mutation"),
    ("patch_timer.py", "harness_tamper"),
    ("decoy_triton.py", "dsl_work_low"),  # the interpreter saw its kernel store nothing (the ghost would follow)
])
def test_dynamic_checks_catch_exploits(axpy, name, reason):
    ev = run(axpy, name, workloads=["axpy-small"])
    assert ev.verdict == "reward_hack", (ev.workloads[0].verdict, ev.workloads[0].message)
    assert reason in ev.workloads[0].reasons, ev.workloads[0].reasons


def test_a_reward_hack_costs_one_workload_not_all_of_them(axpy):
    """Once the trusted worker catches a solution as a reward hack, its remaining workloads are not run: they get
    ``reward_hack`` with ``not_run_after_reward_hack``, naming the workload it was caught on; asked for, they run
    and are judged on their own."""
    ev = run(axpy, "mutate_input.py", time_candidate=False)
    assert [w.verdict for w in ev.workloads] == ["reward_hack", "reward_hack"]
    assert "input_mutation" in ev.workloads[0].reasons
    assert ev.workloads[1].reasons == ["not_run_after_reward_hack"]  # nothing of it ran
    assert ev.workloads[0].uuid in ev.workloads[1].message and ev.workloads[1].time_ms is None
    again = run(axpy, "mutate_input.py", time_candidate=False, run_after_reward_hack=True)
    assert all("input_mutation" in w.reasons for w in again.workloads), [w.reasons for w in again.workloads]


def test_a_sealed_cpu_candidate_cannot_start_a_thread(axpy):
    """Behind the static scan, the CPU candidate's system-call filter refuses the thread that would fill the
    output after the clock (thread_injection where the filter is unavailable)."""
    ev = run(axpy, "background_thread.py", workloads=["axpy-small"])
    w = ev.workloads[0]
    if ev.environment.get("seccomp"):
        assert w.verdict == "runtime_error" and "can't start new thread" in (w.message or ""), (w.verdict, w.message)
    else:
        assert w.verdict == "reward_hack" and "thread_injection" in w.reasons


@pytest.mark.parametrize("name,rule", [
    ("background_thread.py", "static:threading"),
    ("patch_timer.py", "static:monkeypatching"),
    ("leave_child.py", "static:subprocess"),
])
def test_static_rejects_before_anything_runs(axpy, name, rule):
    ev = run(axpy, name, static_checks=True)
    assert ev.verdict == "reward_hack" and rule in ev.reasons, (ev.reasons, ev.findings)
    assert all(w.verdict == "reward_hack" and w.time_ms is None for w in ev.workloads)
    assert ev.findings and ev.message


def test_honest_solutions_pass_the_static_scan(axpy):
    for name in ("axpy_triton.py", "dps_ok.json", "returning_multi_file.json"):
        ev = run(axpy, name, static_checks=True, time_candidate=False)
        assert ev.verdict == "passed", (name, ev.findings)


def test_the_candidate_runs_with_the_trusted_workers_cpu_threads(axpy):
    """Both processes get the same torch thread count (EvalOptions.cpu_threads), so CPU times compare."""
    from tests.conftest import inline_solution

    src = ("import torch\n\ndef run(x, y, alpha):\n"
           "    return alpha * x + y if torch.get_num_threads() == 1 else x\n")
    ev = evaluate(axpy, inline_solution(axpy, "threads", src),
                  EvalOptions(device="cpu", baselines=(), workloads=["axpy-small"], time_candidate=False))
    assert ev.verdict == "passed", ev.workloads[0].message
    assert ev.environment["cpu_threads"] == 1


def test_a_workload_too_large_for_the_device_is_refused_up_front(axpy, monkeypatch):
    from solbench.evaluate.trusted import footprint

    # axpy-small needs about 68 kB to judge, axpy-odd about 280 kB
    monkeypatch.setattr(footprint, "available_bytes", lambda device: 100_000)
    ev = run(axpy, "torch_ok.py", time_candidate=False)
    small, odd = ev.workloads
    assert odd.verdict == "unsupported" and odd.reasons == ["too_large_for_device"]
    assert "GB" in odd.message and "free" in odd.message
    assert small.verdict == "passed"


def test_a_trusted_worker_killed_for_memory_says_so(axpy):
    """The OOM killer's SIGKILL of the trusted worker is reported as such, with the workload's sizes."""
    import os
    import signal
    import threading
    import time

    from solbench.evaluate.trusted import keeper

    def kill_when_busy():
        for _ in range(200):
            judge = keeper._JUDGES.get("cpu")
            if judge is not None and judge.jobs and judge.alive():
                time.sleep(1.0)
                os.kill(judge.proc.pid, signal.SIGKILL)
                return
            time.sleep(0.05)

    keeper.retire_judge("cpu")
    killer = threading.Thread(target=kill_when_busy)
    killer.start()
    ev = run(axpy, "hang.py", time_candidate=False, workload_timeout_s=20, workloads=["axpy-small"])
    killer.join()
    w = ev.workloads[0]
    assert w.verdict == "runtime_error" and {"out_of_memory", "trusted_worker_killed"} <= set(w.reasons), w
    assert "needs" in w.message and "GB" in w.message


def test_a_candidate_on_a_named_gpu_sees_that_gpu_alone(tmp_path, monkeypatch):
    """The candidate's environment pins it to the GPU its trusted worker is pinned to (``keeper.pinned``): with
    ``cuda:1`` it would otherwise run on the first GPU while the worker times the second."""
    from solbench.evaluate.runner import _sandbox

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    build = type("Build", (), {"env": {}})()
    assert _sandbox(EvalOptions(device="cuda:1"), None, tmp_path, build)["env"]["CUDA_VISIBLE_DEVICES"] == "1"
    assert "CUDA_VISIBLE_DEVICES" not in _sandbox(EvalOptions(device="cpu"), None, tmp_path, build)["env"]
