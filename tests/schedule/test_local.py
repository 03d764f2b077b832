"""Slots as processes of this host, evaluating for real on two CPU "devices": a slot killed with SIGKILL under a
job is replaced, and its job runs again and is stored once; the other slot goes on."""

import os
import signal
import time
from pathlib import Path

import pytest

from solbench.problems.problem import load_problem
from solbench.problems.solution import load_solution
from solbench.schedule.devices import Slot
from solbench.schedule.jobs import JobOptions, spec_for
from solbench.schedule.local import LocalExecutor
from solbench.schedule.queue import JobQueue
from solbench.schedule.scheduler import Scheduler, wait_for
from solbench.store.db import Store
from tests.paths import AXPY

pytestmark = pytest.mark.slow


def _spec():
    problem = load_problem(AXPY)
    return spec_for(problem, load_solution(AXPY / "solutions" / "torch_ok.py", problem.definition),
                    JobOptions(draws=2))


def _running(sched, job_id, timeout_s=120):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for name, job in sched.running.items():
            if job is not None and job.id == job_id:
                return name
        time.sleep(0.01)
    raise TimeoutError(f"job {job_id} never ran")


def _evaluating(tmp: Path, timeout_s=120):
    """Wait until an evaluation's directory exists under ``tmp``: a slot has the job and evaluates it."""
    deadline = time.monotonic() + timeout_s
    while not any(tmp.glob("solbench-eval-*")):
        assert time.monotonic() < deadline, "no evaluation started"
        time.sleep(0.005)


def test_a_slot_killed_under_a_job_is_replaced_and_the_job_stored_once(tmp_path, monkeypatch):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))  # the slots' evaluations make their directories here
    db = tmp_path / "s.db"
    queue = JobQueue(db)
    slots = [Slot("cpu:0", "cpu"), Slot("cpu:1", "cpu")]
    ex = LocalExecutor(slots, db, tmp_path / "logs")
    with Scheduler(queue, ex, tick_s=0.2) as sched:
        warm = queue.submit([_spec(), _spec()])
        wait_for(queue, warm)  # both slots started and warm
        (victim,) = queue.submit([_spec()])
        name = _running(sched, victim)
        pid = ex.pid(next(s for s in slots if s.name == name))
        _evaluating(tmp)
        os.kill(pid, signal.SIGKILL)
        (job,) = wait_for(queue, [victim])
        assert ex.health()[name]["restarts"] == 1
    assert job.state == "done" and job.attempts == 2 and "ended" in (job.error or "")
    ev, _ = Store(db).evaluation(job.evaluation_id)
    assert ev.verdict == "passed" and len(Store(db).evaluation_ids()) == 3
