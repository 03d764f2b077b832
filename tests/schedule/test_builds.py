"""A service's native builds ahead of its queued jobs (schedule/builds.py): each queued job's compiled solution is
built once, oldest first, on threads confined to the spare cores, also for jobs queued after the watch began;
a language that builds nothing and a spec that does not load get no build. A fake build stands for nvcc here;
``build_for`` is checked on the real plug-ins. Waits are on events with a generous bound."""

from __future__ import annotations

import os
import threading
import time

from solbench.problems.problem import load_problem
from solbench.problems.solution import load_solution
from solbench.schedule.builds import BuildsAhead, build_for
from solbench.schedule.jobs import Job, JobOptions, JobSpec, spec_for
from solbench.schedule.queue import JobQueue
from tests.paths import AXPY, FIXTURES
from tests.procs import running
from tests.schedule.helpers import polls_after_a_stop

WAIT_S = 60.0


def _specs() -> dict[str, JobSpec]:
    axpy = load_problem(AXPY)
    cpp = load_solution(FIXTURES / "cuda_cpp" / "axpy_cpp.json", axpy.definition)
    torch_ok = load_solution(AXPY / "solutions" / "torch_ok.py", axpy.definition)
    return {"cpp": spec_for(axpy, cpp, JobOptions()), "torch": spec_for(axpy, torch_ok, JobOptions())}


def test_a_job_gets_the_build_of_its_compiled_solution_and_no_other():
    specs = _specs()

    def job(spec: JobSpec) -> Job:
        return Job(id=1, state="queued", created=0.0, spec=spec)

    assert build_for(job(specs["cpp"]), "cpu", None) is not None
    assert build_for(job(specs["torch"]), "cpu", None) is None
    broken = specs["cpp"].model_copy(update={"problem": "no_such_problem"})
    assert build_for(job(broken), "cpu", None) is None  # its slot says why


def test_queued_jobs_are_built_once_oldest_first_on_the_spare_cores(tmp_path):
    specs = _specs()
    queue = JobQueue(tmp_path / "r.db")
    cores = {min(os.sched_getaffinity(0))}
    log: list[tuple[int, set[int]]] = []
    two = threading.Event()
    lock = threading.Lock()

    def plan(job):
        if job.spec.solution["spec"]["language"] != "cuda_cpp":
            return None

        def build():
            with lock:
                log.append((job.id, set(os.sched_getaffinity(0))))
                if len(log) == 2:
                    two.set()
        return build

    first = queue.submit([specs["cpp"], specs["torch"]])
    ahead = BuildsAhead(queue, "cpu", 1, cores, plan=plan, poll_s=0.05).start()
    try:
        later = queue.submit([specs["cpp"]])  # queued while the watch runs: built too
        assert two.wait(WAIT_S), log
        deadline = time.monotonic() + WAIT_S
        while len(ahead.built) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # a few more scans: nothing is built twice
        assert [job_id for job_id, _ in log] == [first[0], later[0]]
        assert all(c == cores for _, c in log)
        assert ahead.seen >= {first[1], later[0]}  # the PyTorch job was looked at, and nothing was built for it
    finally:
        ahead.stop()


def test_a_job_is_marked_building_until_its_build_ahead_ends_and_ready_jobs_are_claimed_meanwhile(tmp_path):
    """While the compiler runs for the first job, a slot's claim takes the job queued after it that builds nothing;
    once the build ended, the first is claimed. Marks a builds' process left behind are cleared by the next."""
    specs = _specs()
    queue = JobQueue(tmp_path / "r.db")
    started, release = threading.Event(), threading.Event()

    def plan(job):
        if job.spec.solution["spec"]["language"] != "cuda_cpp":
            return None

        def build():
            started.set()
            assert release.wait(WAIT_S)
        return build

    native, plain = queue.submit([specs["cpp"], specs["torch"]])
    queue.building(12345)  # a mark of a builds' process that died
    ahead = BuildsAhead(queue, "cpu", 1, plan=plan, poll_s=0.05).start()
    try:
        assert started.wait(WAIT_S)
        assert queue.claim("slot", 60).id == plain
        release.set()
        deadline = time.monotonic() + WAIT_S
        while native not in ahead.built and time.monotonic() < deadline:
            time.sleep(0.01)
        assert queue.claim("slot", 60).id == native
        assert queue._read("SELECT job_id FROM building") == []
    finally:
        release.set()
        ahead.stop()


def test_a_service_builds_ahead_in_a_process_of_its_own_that_ends_with_it(tmp_path):
    """``start_apart``: the builds run in another process, in a session of its own, report each build ended, and
    end when asked (``stop_apart``: SIGTERM, on which they cancel their builds and kill their own group, no
    traceback), and by themselves when the process that started them is killed with SIGKILL."""
    import signal
    import subprocess
    import sys

    from solbench.schedule import builds

    specs = _specs()
    db, log = tmp_path / "r.db", tmp_path / "builds.log"
    queue = JobQueue(db)
    ids = queue.submit([specs["torch"], specs["cpp"]])
    proc = builds.start_apart(db, "cpu", 1, {min(os.sched_getaffinity(0))}, log)
    try:
        assert os.getsid(proc.pid) == proc.pid != os.getpid()
        deadline = time.monotonic() + 5 * WAIT_S  # the C++ build itself, cold where the machine's cache lacks it
        while f"job {ids[1]}" not in log.read_text() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        text = log.read_text()
        assert f"build ahead ended: job {ids[1]}" in text and f"job {ids[0]}\n" not in text, text
    finally:
        builds.stop_apart(proc)
    assert proc.returncode == -signal.SIGKILL  # its own kill of its group, or the fallback's
    assert "Traceback" not in log.read_text(), log.read_text()
    # a parent killed with SIGKILL once its builds run: they notice within a few of their polls
    orphan_log = tmp_path / "orphan.log"
    starter = ("import os, signal, sys, time\nfrom pathlib import Path\nfrom solbench.schedule import builds\n"
               "p = builds.start_apart(sys.argv[1], 'cpu', 1, set(), sys.argv[2])\nprint(p.pid, flush=True)\n"
               "while 'builds ahead:' not in Path(sys.argv[2]).read_text():\n    time.sleep(0.05)\n"
               "os.kill(os.getpid(), signal.SIGKILL)\n")
    ran = subprocess.run([sys.executable, "-c", starter, str(db), str(orphan_log)], capture_output=True, text=True,
                         timeout=5 * WAIT_S)
    assert ran.returncode == -signal.SIGKILL, ran.stderr
    pid = int(ran.stdout)
    try:
        deadline = time.monotonic() + WAIT_S
        while running(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not running(pid)
    finally:
        if running(pid):
            os.killpg(pid, signal.SIGKILL)



def test_the_builds_watch_never_starts_a_poll_once_the_stop_is_set(tmp_path):
    """As a scheduler's slot: a watch that was scanning when the stop notified the queue sees the stop before it
    waits, instead of sleeping out a poll (half a second of every service's end)."""
    queue = JobQueue(tmp_path / "q.db")
    ahead = BuildsAhead(queue, "cpu", 1, plan=lambda job: None, poll_s=0.5)
    polls = polls_after_a_stop(queue, ahead._stop, ahead, "scan", 0, ahead.start, ahead.stop)
    assert not any(polls), polls


def test_the_compile_baselines_of_queued_jobs_are_compiled_ahead_each_workload_once(tmp_path, monkeypatch):
    """Two jobs of one problem and options (planned once) and a third with other options: each (problem, workload)
    the jobs' evaluations will compile is compiled once, on a worker of the build thread's that is retired after it
    (a service keeps no CUDA context for it)."""
    from solbench.evaluate.trusted import keeper

    retired: list[str] = []
    monkeypatch.setattr(keeper, "retire_judge", lambda key, grace_s=5.0: retired.append(key))
    specs = _specs()
    queue = JobQueue(tmp_path / "r.db")
    compiled: list[tuple[str, str]] = []
    lock, three = threading.Lock(), threading.Event()

    planned = []

    def compiles(job):
        planned.append(job.id)
        problem = "other" if job.spec.options.draws == 3 else "axpy"

        def unit(uuid):
            def compile_one(key):
                with lock:
                    compiled.append((problem, uuid, key))
                    if len(compiled) == 3:
                        three.set()
            return compile_one
        return [(problem, u, unit(u)) for u in ("w1", "w2")][: 1 if problem == "other" else 2]

    three_draws = specs["torch"].model_copy(update={"options": JobOptions(draws=3)})
    ids = queue.submit([specs["torch"], specs["cpp"], three_draws])
    ahead = BuildsAhead(queue, "cpu", 1, plan=lambda job: None, compiles=compiles, poll_s=0.05).start()
    try:
        assert three.wait(WAIT_S), compiled
        time.sleep(0.2)  # a few more scans: nothing is compiled twice
        assert sorted((p, u) for p, u, _ in compiled) == [("axpy", "w1"), ("axpy", "w2"), ("other", "w1")]
        key = "cpu#compile-ahead-service-0"
        assert {k for _, _, k in compiled} == {key} and retired.count(key) == 3
        assert planned == [ids[0], ids[2]]  # the C++ job's problem and options were planned with the first
    finally:
        ahead.stop()


def test_a_jobs_compiles_ahead_are_those_its_evaluation_will_compile(tmp_path):
    from solbench.evaluate.baselines import harness_digest
    from solbench.store.db import Store

    axpy = load_problem(AXPY)
    torch_ok = load_solution(AXPY / "solutions" / "torch_ok.py", axpy.definition)
    uuids = [w.uuid for w in axpy.workloads_for("cpu")]

    def job(**options) -> Job:
        return Job(id=1, state="queued", created=0.0, spec=spec_for(axpy, torch_ok, JobOptions(**options)))

    store = Store(tmp_path / "r.db")
    assert [(p, u) for p, u, _ in _compiles(job(baselines=["eager", "compile"]), store)] == [
        (f"{axpy.name}:{axpy.digest()}", u) for u in uuids]  # a problem named with its content
    assert _compiles(job(), store) == []  # the CPU's default baselines compile nothing
    assert _compiles(job(baselines=["eager", "compile"], check_only=True), store) == []
    store.put_baseline(axpy.digest(), uuids[0], "cpu", f"torch=x;harness={harness_digest()}", "compile", "passed",
                       0.01, [0.01])
    assert [u for _, u, _ in _compiles(job(baselines=["eager", "compile"]), store)] == uuids[1:]  # measured
    broken = job(baselines=["compile"]).spec.model_copy(update={"problem": "no_such_problem"})
    assert _compiles(Job(id=2, state="queued", created=0.0, spec=broken), store) == []


def _compiles(job, store):
    from solbench.schedule.builds import compiles_for

    return compiles_for(job, "cpu", store)
