"""The torch.compile baselines compiled ahead beside a run (evaluate/compile_ahead.py, ahead_marks.py): which
problems it compiles, the pool with a fake compile (all at once up to its workers, each thread on the spare cores
with a worker of its own, a failure left to the run, the run's order, the marks an evaluation waits on), the main
job's evaluations beside them and the runner's wait for one running, and on the CPU for real: the run's own compile
of the baseline then writes nothing new to Inductor's cache (a hit). Waits are on events with a generous bound,
never on the machine's speed."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from solbench.evaluate import ahead_marks, compile_ahead
from solbench.evaluate.baselines import harness_digest
from solbench.evaluate.compile_ahead import Ahead, plan
from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.evaluate.trusted import keeper
from solbench.problems.problem import load_problem
from solbench.problems.solution import load_solution
from solbench.store.db import Store
from tests.paths import AXPY

WAIT_S = 60.0


def _axpy():
    return load_problem(AXPY)


def test_the_plan_names_each_problem_once_and_only_compile_baselines_the_store_lacks(tmp_path):
    axpy = _axpy()
    on_gpu = EvalOptions(device="cuda")
    assert [(a.problem.name, a.uuids) for a in plan([axpy, axpy], on_gpu)] == [
        (axpy.name, [w.uuid for w in axpy.workloads_for("cuda")])]
    assert plan([axpy], EvalOptions(device="cpu")) == []  # the CPU's default baselines compile nothing
    assert plan([axpy], EvalOptions(device="cuda", baselines=("eager",))) == []
    assert [a.uuids for a in plan([axpy], EvalOptions(device="cpu", baselines=("compile",)))] == [
        [w.uuid for w in axpy.workloads_for("cpu")]]

    store = Store(tmp_path / "r.db")
    first, second = [w.uuid for w in axpy.workloads_for("cpu")]
    compiled = EvalOptions(device="cpu", baselines=("eager", "compile"))
    store.put_baseline(axpy.digest(), first, "cpu", f"torch=x;harness={harness_digest()};hold", "compile",
                       "passed", 0.01, [0.01])
    store.put_baseline(axpy.digest(), second, "cpu", "torch=x;harness=stale", "compile", "passed", 0.01, [0.01])
    store.put_baseline(axpy.digest(), second, "cpu", f"torch=x;harness={harness_digest()}", "eager", "passed", 0.01,
                       [0.01])
    # measured by this harness: not compiled again; a stale harness's, or another kind's, are
    assert [a.uuids for a in plan([axpy], compiled, store)] == [[second]]
    fresh = EvalOptions(device="cpu", baselines=("compile",), use_baseline_cache=False)
    assert [a.uuids for a in plan([axpy], fresh, store)] == [[first, second]]


def test_the_pool_compiles_each_workload_side_by_side_on_the_spare_cores_with_a_worker_per_thread(monkeypatch):
    retired: list[str] = []
    monkeypatch.setattr(keeper, "retire_judge", lambda key, grace_s=5.0: retired.append(key))
    both_running = threading.Barrier(2, timeout=WAIT_S)  # passes only while two compiles run at once
    seen: list[tuple[str, str, set[int]]] = []
    lock = threading.Lock()
    cores = {min(os.sched_getaffinity(0))}

    def fake(unit: Ahead, opts: EvalOptions, key: str) -> dict[str, str]:
        (uuid,) = unit.uuids  # one workload at a time
        if uuid in ("a", "b"):  # two workloads of one problem, compiled at once
            both_running.wait()
        if uuid == "d":
            raise RuntimeError("out of memory beside the others")
        with lock:
            seen.append((uuid, key, set(os.sched_getaffinity(0))))
        return {uuid: "passed"}

    aheads = [Ahead(SimpleNamespace(name="p0"), ["a", "b"]), Ahead(SimpleNamespace(name="p1"), ["c"]),
              Ahead(SimpleNamespace(name="p2"), ["d"])]
    done, finished = [], []
    result = compile_ahead.compile_ahead(aheads, EvalOptions(device="cuda"), 2, cores,
                                         done=lambda unit, v: (done.append(unit.uuids[0]), finished.append(unit)),
                                         one=fake)
    assert result == {"p0": {"a": "passed", "b": "passed"}, "p1": {"c": "passed"}, "p2": {}}
    assert sorted(done) == ["a", "b", "c", "d"]
    assert all(u.seconds is not None and u.seconds >= 0 for u in finished)  # each one's time, the failed one's too
    keys = {k for _, k, _ in seen}
    assert len(keys) == 2 and all(k.startswith("cuda" + compile_ahead.KEY) for k in keys)
    assert all(c == cores for _, _, c in seen)
    assert set(retired) == keys  # every worker ahead retired at the end
    assert compile_ahead.compile_ahead([], EvalOptions(device="cuda"), 4) == {}


def test_the_compiles_start_in_the_runs_order_and_an_evaluation_waits_only_for_one_running(monkeypatch, tmp_path):
    """With one thread the compiles start in the run's order (the first problem's are the first an evaluation
    needs); ``start`` returns at once, and a workload is marked while its compile ahead runs: a wait for one whose
    compile has ended, or has not begun, returns at once (the run compiles the latter itself); one for a running
    compile returns when it ends, or at the wait's limit."""
    monkeypatch.setenv("SOLBENCH_LEASE_DIR", str(tmp_path))
    monkeypatch.setattr(keeper, "retire_judge", lambda key, grace_s=5.0: None)
    ran, began_b, release = [], threading.Event(), threading.Event()

    def fake(unit: Ahead, opts: EvalOptions, key: str) -> dict[str, str]:
        ran.append(unit.uuids[0])
        if unit.uuids[0] == "b":
            began_b.set()
            assert release.wait(WAIT_S)
        return {unit.uuids[0]: "passed"}

    aheads = [Ahead(SimpleNamespace(name="first"), ["a", "b"]), Ahead(SimpleNamespace(name="second"), ["c"])]
    running = compile_ahead.start(aheads, EvalOptions(device="cpu"), 1, one=fake)
    assert running is not None and began_b.wait(WAIT_S)  # under way: "b" waits for the release
    assert ahead_marks.wait_compiled("cpu", "first", ["a"], WAIT_S) < WAIT_S  # a's compile has ended
    assert ahead_marks.wait_compiled("cpu", "first", ["b"], 0.2) >= 0.2  # b's runs: the wait ran to its limit
    assert ahead_marks.wait_compiled("cpu", "second", ["c"], WAIT_S) < WAIT_S  # c's has not begun
    assert ahead_marks.wait_compiled("cpu", "other", ["b"], WAIT_S) < WAIT_S  # another problem's b is not marked
    release.set()
    assert ahead_marks.wait_compiled("cpu", "first", ["b"], WAIT_S) < WAIT_S
    assert running.wait() == {"first": {"a": "passed", "b": "passed"}, "second": {"c": "passed"}}
    assert ran == ["a", "b", "c"]
    assert compile_ahead.start([], EvalOptions(device="cpu"), 1, one=fake) is None


def test_a_stopped_run_kills_its_workers_starts_no_further_compile_and_leaves_no_mark(monkeypatch, tmp_path):
    monkeypatch.setenv("SOLBENCH_LEASE_DIR", str(tmp_path))
    retired: list[str] = []
    monkeypatch.setattr(keeper, "retire_judge", lambda key, grace_s=5.0: retired.append(key))
    other = ahead_marks.mark("cpu", "p", "z")  # another run compiling p / z ahead: a second mark is not taken
    assert other is not None and ahead_marks.mark("cpu", "p", "z") is None

    def never(unit, opts, key):
        raise AssertionError("compiled beside another process's compile ahead of the same workload")

    assert compile_ahead.compile_marked(Ahead(SimpleNamespace(name="p"), ["z"]), EvalOptions(device="cpu"), "k",
                                        never) == {}
    ahead_marks.unmark(other)
    on_one = ahead_marks.mark("cuda:1", "p", "z")  # a mark is the device kind's: the caches are the host's
    assert on_one is not None and ahead_marks.mark("cuda", "p", "z") is None
    ahead_marks.unmark(on_one)
    started, release, ran = threading.Event(), threading.Event(), []

    def fake(unit: Ahead, opts: EvalOptions, key: str) -> dict[str, str]:
        ran.append(unit.uuids[0])
        started.set()
        assert release.wait(WAIT_S)  # as a killed worker's job would, it returns
        return {}

    running = compile_ahead.start([Ahead(SimpleNamespace(name="p"), ["a", "b", "c"])], EvalOptions(device="cpu"),
                                  1, one=fake)
    assert started.wait(WAIT_S)
    stopper = threading.Thread(target=running.stop)
    stopper.start()
    assert running.stopped.wait(WAIT_S)  # stopped while a runs
    release.set()
    stopper.join(WAIT_S)
    assert not stopper.is_alive()
    assert ran == ["a"]  # b and c never began
    assert retired and set(retired) == {"cpu" + compile_ahead.KEY + "0"}  # the thread's worker killed
    assert ahead_marks.wait_compiled("cpu", "p", ["a", "b", "c"], WAIT_S) < WAIT_S


def test_an_interruption_starts_no_further_compile(monkeypatch):
    monkeypatch.setattr(keeper, "retire_judge", lambda key, grace_s=5.0: None)
    ran = []

    def fake(unit: Ahead, opts: EvalOptions, key: str) -> dict[str, str]:
        ran.append(unit.uuids[0])
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        compile_ahead.compile_ahead([Ahead(SimpleNamespace(name="p"), ["a", "b", "c"])], EvalOptions(device="cuda"),
                                    1, one=fake)
    assert ran == ["a"]


def _fx_entries(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in (root / "fxgraph").rglob("*") if p.is_file()} \
        if (root / "fxgraph").exists() else set()


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_the_runs_own_compile_of_the_baseline_is_a_cache_hit_after_the_compile_ahead(tmp_path, monkeypatch, device):
    """The crux: the worker ahead and the run's own trusted worker compile the same graph under the same key
    (the run's compile adds no entry to Inductor's cache, where a miss would write one)."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    keeper.retire_judge(device)  # the device's worker starts again, with this cache in its environment
    try:
        axpy = _axpy()
        uuid = axpy.workloads_for(device)[0].uuid
        opts = EvalOptions(device=device, baselines=("compile",), workloads=[uuid])
        assert compile_ahead.compile_ahead([Ahead(axpy, [uuid])], opts, 1) == {axpy.name: {uuid: "passed"}}
        warm = _fx_entries(tmp_path / "inductor")
        assert warm, "the compile ahead wrote nothing to Inductor's cache"
        assert not list((tmp_path / "inductor").rglob("*.best_config"))  # nothing tuned: nothing ran
        ev = evaluate(axpy, load_solution(AXPY / "solutions" / "torch_ok.py", axpy.definition), opts,
                      store=Store(tmp_path / "r.db"))
        assert ev.workloads[0].compile_ms is not None, ev.workloads[0]
        assert _fx_entries(tmp_path / "inductor") == warm
    finally:
        keeper.retire_judge(device)


def test_a_compile_ahead_compiles_only_under_no_lease_and_a_bounded_time(monkeypatch):
    import contextlib

    from solbench.evaluate import lease
    from solbench.evaluate.trusted.keeper import WorkerOutcome
    from solbench.evaluate.trusted.report import WorkloadReport

    held, sent = [], []

    @contextlib.contextmanager
    def hold(device, exclusive=True):
        held.append((device, exclusive))
        yield

    def run_worker(job, startup_s, workload_s, workdir, key=None, env=None):
        sent.append((job, workload_s, key, env))
        return WorkerOutcome(results={(0, u): WorkloadReport.failed(u, "passed", []) for _, u in job["pairs"]})

    monkeypatch.setattr(lease, "hold", hold)
    monkeypatch.setattr(keeper, "run_worker", run_worker)
    axpy = _axpy()
    uuid = axpy.workloads_for("cuda")[0].uuid
    assert compile_ahead.compile_one(Ahead(axpy, [uuid]), EvalOptions(device="cuda"), "k") == {uuid: "passed"}
    (job, limit, key, env), = sent
    assert held == [] and limit == compile_ahead.AHEAD_LIMIT_S and key == "k"  # no device work: no lease
    assert env == compile_ahead.AHEAD_ENV and job["subjects"] == [{"kind": "compile"}]
    assert job["compile_only"] is True and job["draws"] == 1 and job["time"] is False
    assert job["pairs"] == [[0, uuid]]


def test_a_runs_compile_baseline_waits_for_a_running_compile_ahead_and_no_other_baseline_does(monkeypatch, tmp_path):
    """The runner's baselines (``runner._baselines``): while the workload's compile ahead runs (its mark held
    here), the compile baseline's job is not sent; once it ends, it is. A job of the eager baseline alone does not
    wait."""
    from solbench.evaluate import runner
    from solbench.evaluate.trusted.keeper import WorkerOutcome
    from solbench.evaluate.trusted.report import WorkloadReport

    monkeypatch.setenv("SOLBENCH_LEASE_DIR", str(tmp_path))
    sent: list[list[dict]] = []

    def run_worker(job, startup_s, workload_s, workdir, key=None, env=None):
        sent.append(job["subjects"])
        return WorkerOutcome(results={(i, u): WorkloadReport.failed(u, "passed", [])
                                      for i in range(len(job["subjects"])) for _, u in job["pairs"]})

    monkeypatch.setattr(keeper, "run_worker", run_worker)
    axpy = _axpy()
    uuid = axpy.workloads_for("cpu")[0].uuid
    mark = ahead_marks.mark("cpu", ahead_marks.problem_key(axpy), uuid)  # its compile ahead runs
    try:
        runner._baselines(axpy, [uuid], EvalOptions(device="cpu", baselines=("eager",)), 1, {}, tmp_path, None)
        assert sent == [[{"kind": "eager"}]]  # no compile asked for: no wait
        compiled = threading.Thread(target=runner._baselines, args=(
            axpy, [uuid], EvalOptions(device="cpu", baselines=("compile",)), 1, {}, tmp_path, None))
        compiled.start()
        compiled.join(0.5)
        assert compiled.is_alive() and len(sent) == 1  # waiting for the compile ahead
    finally:
        ahead_marks.unmark(mark)
    compiled.join(WAIT_S)
    assert not compiled.is_alive() and sent[-1] == [{"kind": "compile"}]


def test_the_main_job_evaluates_while_its_compiles_ahead_run(monkeypatch, tmp_path):
    """``run`` in turn (the README's main job) with a spare core: the first evaluation begins while the compile ahead
    is still running (it waits for that evaluation to begin: a barrier before the evaluations would hold it to its
    limit), and the run ends with the compiles ahead stopped."""
    import functools

    from solbench import cli_run
    from solbench.evaluate import runner
    from solbench.evaluate.native import pool as build_pool

    monkeypatch.setenv("SOLBENCH_LEASE_DIR", str(tmp_path))
    core = min(os.sched_getaffinity(0))
    monkeypatch.setattr(build_pool, "slot_split", lambda slots=1: ({core}, {core}))
    monkeypatch.setattr(build_pool, "solution_builds", lambda jobs, device, store: [None] * len(jobs))
    monkeypatch.setattr(build_pool, "confine", lambda cores: None)
    monkeypatch.setattr(keeper, "retire_judge", lambda key, grace_s=5.0: None)
    evaluating, overlapped = threading.Event(), []

    def fake_compile(unit, opts, key):
        overlapped.append(evaluating.wait(WAIT_S))
        return {unit.uuids[0]: "passed"}

    def fake_evaluate(problem, solution, opts, store=None, run_id=None):
        evaluating.set()
        return problem.name

    axpy = _axpy()
    monkeypatch.setattr(compile_ahead, "plan", lambda problems, opts, store=None: [Ahead(axpy, ["w"])])
    monkeypatch.setattr(compile_ahead, "start", functools.partial(compile_ahead.start, one=fake_compile))
    monkeypatch.setattr(runner, "evaluate", fake_evaluate)
    progress = SimpleNamespace(add_task=lambda *a, **k: 0, update=lambda *a, **k: None,
                               advance=lambda *a, **k: None)
    out = cli_run._in_turn([(axpy, AXPY / "solutions" / "torch_ok.py")], dict(device="cpu"), None, 1, "cpu", None,
                           progress, 0)
    assert out == [axpy.name] and overlapped == [True]


def test_a_failing_progress_callback_stops_no_compile(monkeypatch, tmp_path):
    monkeypatch.setenv("SOLBENCH_LEASE_DIR", str(tmp_path))
    monkeypatch.setattr(keeper, "retire_judge", lambda key, grace_s=5.0: None)

    def done(unit, verdicts):
        raise RuntimeError("the terminal went away")

    def fake(unit, opts, key):
        return {unit.uuids[0]: "passed"}

    assert compile_ahead.compile_ahead([Ahead(SimpleNamespace(name="p"), ["a", "b"])], EvalOptions(device="cpu"), 1,
                                       done=done, one=fake) == {"p": {"a": "passed", "b": "passed"}}
