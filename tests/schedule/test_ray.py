"""Slots as Ray actors on a local Ray instance (CPU): real evaluations come back to the driver's database, and a
job whose actor is killed runs again on an actor and is stored once."""

import os
import shutil
import tempfile
import signal
from pathlib import Path

import pytest

from solbench.schedule.queue import JobQueue
from solbench.schedule.scheduler import Scheduler, wait_for
from solbench.store.db import Store
from tests.schedule.test_local import _evaluating, _running, _spec

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow


def test_ray_actors_evaluate_and_a_killed_one_loses_no_job(tmp_path, monkeypatch):
    from solbench.schedule.ray_executor import RayExecutor

    tmp = Path(tempfile.mkdtemp(prefix="sbray"))  # short: Ray's sockets live under it (AF_UNIX paths <= 107 bytes)
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    db = tmp_path / "s.db"
    queue = JobQueue(db)
    ex = RayExecutor(cpu_slots=2)
    try:
        assert [s.name for s in ex.slots] == ["ray-cpu:0", "ray-cpu:1"]
        with Scheduler(queue, ex, tick_s=0.2) as sched:
            wait_for(queue, queue.submit([_spec(), _spec()]))
            (victim,) = queue.submit([_spec()])
            name = _running(sched, victim)
            pid = ex.pid(next(s for s in ex.slots if s.name == name))
            _evaluating(tmp)
            os.kill(pid, signal.SIGKILL)
            (job,) = wait_for(queue, [victim])
    finally:
        ex.close()
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    assert job.state == "done" and job.attempts == 2 and "died" in (job.error or "")
    assert Store(db).evaluation(job.evaluation_id)[0].verdict == "passed"
    assert len(Store(db).evaluation_ids()) == 3
