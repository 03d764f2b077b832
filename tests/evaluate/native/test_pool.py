"""The build pool of ``solbench run`` (evaluate/native/pool.py) with fake builds and a fake device: builds start in
the order their evaluations come, no more at once than its workers, later builds run while earlier evaluations
do, a job still building yields its turn, and each build thread keeps to the cores the evaluation leaves, at a
lower priority. Every wait is on an event (with a generous bound), never on the machine's speed."""

import os
import subprocess
import sys
import threading

import pytest

from solbench.evaluate.native import pool as pool_module
from solbench.evaluate.native.pool import BuildPool, available_cores, confine, split_cores

WAIT_S = 60.0  # a bound on waits for events that a correct pool sets at once


def test_the_evaluation_keeps_the_lowest_cores_and_builds_get_the_rest():
    assert split_cores(set(range(16))) == ({0, 1, 2, 3}, set(range(4, 16)))
    assert split_cores({3, 5, 7, 9, 11, 13, 15, 17}) == ({3, 5, 7, 9}, {11, 13, 15, 17})
    assert split_cores({0, 1}) == ({0, 1}, set())  # too few to split: no pool
    assert split_cores(set(range(7))) == (set(range(7)), set())


def test_builds_start_in_the_order_of_their_evaluations_and_no_more_than_the_workers_at_once():
    started, running, most = [], [0], [0]
    lock = threading.Lock()
    gates = [threading.Event() for _ in range(6)]

    def build(i):
        def run():
            with lock:
                started.append(i)
                running[0] += 1
                most[0] = max(most[0], running[0])
            assert gates[i].wait(WAIT_S)
            with lock:
                running[0] -= 1
            return f"lib{i}"
        return run

    builds = [build(0), None, build(2), build(3), build(4), build(5)]
    with BuildPool(builds, 2) as pool:
        for i, gate in enumerate(gates):
            gate.set()
            assert pool.ready(i, timeout=WAIT_S) == (None if i == 1 else f"lib{i}")
    assert started == [0, 2, 3, 4, 5] and most[0] <= 2


def test_later_builds_run_while_an_earlier_evaluation_does():
    """The fake device's evaluation of job 0 waits until job 1's build has started: it returns only because the
    pool builds ahead, and job 1's build ends only after the evaluation has let it."""
    build1_started, evaluation0_done = threading.Event(), threading.Event()
    log = []

    def build0():
        log.append("build 0")

    def build1():
        build1_started.set()
        assert evaluation0_done.wait(WAIT_S)
        log.append("build 1")

    def evaluate(i):
        log.append(f"evaluate {i}")
        if i == 0:
            assert build1_started.wait(WAIT_S), "job 1 was not being built during job 0's evaluation"
            evaluation0_done.set()

    with BuildPool([build0, build1], 2) as pool:
        for i in range(2):
            pool.ready(i, timeout=WAIT_S)
            evaluate(i)
    assert log == ["build 0", "evaluate 0", "build 1", "evaluate 1"]


def test_a_job_still_building_yields_its_turn_to_a_later_one_that_is_ready():
    """Jobs 0 and 2 build (job 0's build ends only once job 3 has been evaluated, job 2's only once job 0's has),
    jobs 1 and 3 build nothing: the order is 1, 3, then 0 once its build ends, then 2. With no worker every job
    keeps its place."""
    evaluated = {i: threading.Event() for i in range(4)}

    def build(after: int):
        def run():
            assert evaluated[after].wait(WAIT_S)
        return run

    order = []
    with BuildPool([build(3), None, build(0), None], 2) as pool:
        for i in pool.ready_first():
            pool.ready(i, timeout=WAIT_S)
            order.append(i)
            evaluated[i].set()
    assert order == [1, 3, 0, 2]
    with BuildPool([lambda: None, None, lambda: None], 0) as pool:
        assert list(pool.ready_first()) == [0, 1, 2]


def test_a_failed_build_is_left_to_the_evaluation():
    def broken():
        raise RuntimeError("the compiler crashed")

    with BuildPool([broken, lambda: "ok"], 1) as pool:
        assert pool.ready(0, timeout=WAIT_S) is None and pool.ready(1, timeout=WAIT_S) == "ok"


def test_without_workers_nothing_is_built_ahead():
    calls = []
    with BuildPool([lambda: calls.append(1)], 0) as pool:
        assert pool.ready(0) is None
    assert calls == []


def test_build_threads_keep_to_the_builds_cores_and_the_runner_keeps_its_own():
    mine = available_cores()
    theirs = {max(mine)}
    seen = []
    with BuildPool([lambda: seen.append(os.sched_getaffinity(0))], 1, theirs) as pool:
        pool.ready(0, timeout=WAIT_S)
    assert seen == [theirs] and list(pool.pinned.values()) == [theirs]
    assert available_cores() == mine  # only the build thread was confined


def test_builds_and_their_compilers_run_niced_and_the_runner_keeps_its_priority():
    """A build thread's niceness, and a process it starts (as a build starts its jail and compilers)."""
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    seen = []

    def build():
        child = subprocess.run([sys.executable, "-c", "import os; print(os.nice(0))"], capture_output=True,
                               text=True, timeout=WAIT_S, stdin=subprocess.DEVNULL)
        seen.append((os.getpriority(os.PRIO_PROCESS, threading.get_native_id()), int(child.stdout)))

    with BuildPool([build], 1, None) as pool:
        pool.ready(0, timeout=WAIT_S)
    want = max(mine, pool_module.BUILD_NICE)
    assert seen == [(want, want)]
    assert os.getpriority(os.PRIO_PROCESS, 0) == mine  # the runner's own thread is left as it was


def test_the_runner_pins_itself_and_is_restored():
    before = available_cores()
    one = {min(before)}
    try:
        confine(one)
        assert available_cores() == one
    finally:
        confine(before)
    assert available_cores() == before


@pytest.mark.parametrize("empty", [set(), None])
def test_no_cores_named_confines_nothing(empty):
    seen = []
    with BuildPool([lambda: seen.append(os.sched_getaffinity(0))], 1, empty) as pool:
        pool.ready(0, timeout=WAIT_S)
    assert seen == [available_cores()]


def test_a_running_process_and_everything_below_it_are_confined_to_the_evaluations_cores():
    """The trusted worker started before the cores were split, and the processes it started (its zygote): each of
    their threads keeps to the evaluation's cores from then on, and what they start later inherits it."""
    import subprocess
    import sys

    from solbench.evaluate.native.pool import pin_processes

    child = ("import subprocess, sys, threading, time\n"
             "threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n"
             "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
             "print(g.pid, flush=True)\ntime.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        grandchild = int(proc.stdout.readline())
        one = {min(os.sched_getaffinity(0))}
        assert pin_processes(proc.pid, one) >= 3  # the child's two threads at least, and its own child
        tids = os.listdir(f"/proc/{proc.pid}/task") + os.listdir(f"/proc/{grandchild}/task")
        assert tids and all(os.sched_getaffinity(int(t)) == one for t in tids)
        assert pin_processes(2 ** 22 + 7, one) == 0  # a process that ended meanwhile: nothing, no error
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()


def test_an_interrupted_run_kills_the_builds_in_flight_and_starts_no_other(tmp_path):
    """A real jailed ninja whose one step would take 300 s (``sleep``): a Ctrl-C in the run's body leaves the pool
    at once, the build a failed one (killed), the build queued behind it never started."""
    import time

    from solbench.evaluate.native.build import run_jailed
    from solbench.evaluate.native.toolchain import tool

    if tool("ninja") is None:
        pytest.skip("ninja is not installed")
    out, src = tmp_path / "out", tmp_path / "src"
    out.mkdir()
    src.mkdir()
    started = out / "started"
    (out / "build.ninja").write_text(f"rule slow\n  command = touch {started} && sleep 300\n"
                                     "build never: slow\n")
    codes, queued = [], threading.Event()

    def slow():
        codes.append(run_jailed(out, src, None, time.monotonic() + 600, [])[0])

    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with BuildPool([slow, queued.set], 1):
            deadline = time.monotonic() + WAIT_S
            while not started.exists():
                assert time.monotonic() < deadline, "the build never started"
                time.sleep(0.01)
            raise KeyboardInterrupt
    assert time.monotonic() - began < 200  # not the 300 s of the step
    assert len(codes) == 1 and codes[0] != 0 and not queued.is_set()
