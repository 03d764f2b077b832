"""End-to-end evaluations on the CPU: verdicts for honest, wrong, crashing and hanging solutions."""

import pytest

from conftest import AXPY, SOLUTIONS
from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.problems.solution import load_solution
from solbench.store.db import Store


def run(problem, name, **kw):
    path = SOLUTIONS / name if (SOLUTIONS / name).exists() else AXPY / "solutions" / name
    sol = load_solution(path, problem.name)
    opts = EvalOptions(device="cpu", baselines=kw.pop("baselines", ()), **kw)
    return evaluate(problem, sol, opts, store=kw.get("store"))


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


def test_bf16_dot_in_interpreter_is_unsupported_not_incorrect(axpy):
    ev = run(axpy, "bf16_dot_triton.py", time_candidate=False)
    assert ev.verdict == "unsupported", ev.workloads[0].message
    assert ev.workloads[0].reasons == ["interpreter_unfaithful"]


@pytest.mark.parametrize("name,reason", [("crash.py", "crash"), ("segfault.py", "crash")])
def test_crash_becomes_verdict_and_run_goes_on(axpy, name, reason):
    ev = run(axpy, name, time_candidate=False)
    # every workload gets its own verdict: a fresh worker takes the next one after a crash
    assert [w.verdict for w in ev.workloads] == ["runtime_error", "runtime_error"]
    assert all(reason in w.reasons for w in ev.workloads)


def test_hang_becomes_timeout(axpy):
    ev = run(axpy, "hang.py", time_candidate=False, workload_timeout_s=3, workloads=["axpy-small"])
    assert ev.verdict == "timeout"


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
    from conftest import FIXTURES
    from solbench.analysis.roofline import count_work
    from solbench.problems.problem import load_problem

    kv = load_problem(FIXTURES / "problems" / "kv_write")
    assert run(kv, "kv_ok.py", time_candidate=False).verdict == "passed"
    bad = run(kv, "kv_skip.py", time_candidate=False)
    assert bad.verdict == "incorrect_numerical" and bad.workloads[0].failure["worst"]["output"] == "cache"
    # the bound counts the rows written (and the new rows and slots read), not the whole cache
    work = count_work(kv, kv.workloads[0])
    assert work.bytes == 16 * 64 * 4 + 16 * 8 + 16 * 64 * 4
