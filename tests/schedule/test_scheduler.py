"""The scheduler's logic on fake devices: jobs spread over slots, lost slots, cancels, limits, admission,
restarts."""

import threading

import pytest

from solbench.errors import UserError
from solbench.schedule.devices import Slot
from solbench.schedule.outcome import Outcome
from solbench.schedule.queue import JobQueue
from solbench.schedule.scheduler import Scheduler, wait_for
from solbench.store.db import Store
from tests.schedule.helpers import FakeExecutor, polls_after_a_stop, spec

TWO = [Slot("fake:0", "cpu", None, 100), Slot("fake:1", "cpu", None, 1000)]


def test_jobs_spread_over_both_devices_and_each_is_stored_once(tmp_path):
    db = tmp_path / "s.db"
    q = JobQueue(db)
    ex = FakeExecutor(TWO, delay_s=0.05)
    ids = q.submit([spec() for _ in range(12)])
    with Scheduler(q, ex, tick_s=0.01):
        jobs = wait_for(q, ids)
    assert all(j.state == "done" for j in jobs)
    assert {slot for slot, _ in ex.ran} == {"fake:0", "fake:1"}
    stored = Store(db).evaluation_ids()
    assert sorted(stored) == sorted(j.evaluation_id for j in jobs) and len(stored) == 12


def test_a_job_whose_slot_dies_runs_again_elsewhere_once(tmp_path):
    db = tmp_path / "s.db"
    q = JobQueue(db)
    died = []

    def behave(slot, job):
        if not died:  # the first job's slot dies under it
            died.append(slot.name)
            return Outcome("lost", message="killed")
        return None

    ex = FakeExecutor(TWO, behave)
    (jid,) = q.submit([spec()])
    with Scheduler(q, ex, tick_s=0.01):
        (job,) = wait_for(q, [jid])
    assert job.state == "done" and job.attempts == 2 and len(Store(db).evaluation_ids()) == 1


def test_a_job_that_kills_every_slot_fails_after_its_attempts(tmp_path):
    q = JobQueue(tmp_path / "s.db", max_attempts=3)
    ex = FakeExecutor(TWO, lambda slot, job: Outcome("lost", message="segfault in the slot"))
    (jid,) = q.submit([spec()])
    with Scheduler(q, ex, tick_s=0.01):
        (job,) = wait_for(q, [jid])
    assert job.state == "failed" and job.attempts == 3 and "segfault" in job.error


def test_cancelling_a_running_job_recycles_its_slot_only(tmp_path):
    q = JobQueue(tmp_path / "s.db")
    started = threading.Event()

    def behave(slot, job):
        started.set()
        return None

    ex = FakeExecutor(TWO[:1], behave, delay_s=60)
    (jid,) = q.submit([spec()])
    with Scheduler(q, ex, tick_s=0.01):
        assert started.wait(10)
        q.cancel(jid)
        (job,) = wait_for(q, [jid])
    assert job.state == "cancelled" and ex.recycled == ["fake:0"]


def test_a_job_past_its_limit_fails_and_the_next_one_runs(tmp_path):
    q = JobQueue(tmp_path / "s.db")
    ex = FakeExecutor(TWO[:1], lambda slot, job: Outcome("timeout", message="hung") if job.id == 1 else None)
    ids = q.submit([spec(), spec()])
    with Scheduler(q, ex, tick_s=0.01):
        first, second = wait_for(q, ids)
    assert first.state == "failed" and first.error.startswith("timeout") and second.state == "done"


def test_an_error_is_reported_not_retried(tmp_path):
    q = JobQueue(tmp_path / "s.db")
    ex = FakeExecutor(TWO, lambda slot, job: Outcome("error", message="unknown problem 'nope'"))
    (jid,) = q.submit([spec("nope")])
    with Scheduler(q, ex, tick_s=0.01):
        (job,) = wait_for(q, [jid])
    assert job.state == "failed" and job.attempts == 1 and "unknown problem" in job.error


def test_a_job_goes_to_a_device_with_memory_for_it(tmp_path):
    q = JobQueue(tmp_path / "s.db")
    ex = FakeExecutor(TWO, delay_s=0.02)
    ids = q.submit([spec() for _ in range(6)], peaks=[500] * 6)  # fits fake:1 (1000) only
    huge = q.submit([spec()], peaks=[10 ** 6])  # fits nothing: admitted anywhere, its evaluation refuses it
    with Scheduler(q, ex, tick_s=0.01):
        wait_for(q, ids + huge)
    assert {slot for slot, jid in ex.ran if jid in ids} == {"fake:1"}
    assert [jid for _, jid in ex.ran].count(huge[0]) == 1


def test_one_scheduler_per_database(tmp_path):
    q = JobQueue(tmp_path / "s.db")
    with Scheduler(q, FakeExecutor(TWO)):
        with pytest.raises(UserError, match="a `solbench serve` schedules"):
            Scheduler(JobQueue(tmp_path / "s.db"), FakeExecutor(TWO)).start()


def test_a_new_scheduler_finishes_what_a_stopped_one_left_running(tmp_path):
    db = tmp_path / "s.db"
    q = JobQueue(db)
    started = threading.Event()
    ex = FakeExecutor(TWO[:1], lambda s, j: started.set(), delay_s=60)
    (jid,) = q.submit([spec()])
    sched = Scheduler(q, ex, tick_s=0.01)
    sched.start()
    assert started.wait(10)
    sched.stop()  # as if it died: the job is left running
    assert q.get(jid).state == "running"
    with Scheduler(JobQueue(db), FakeExecutor(TWO), tick_s=0.01) as again:
        (job,) = wait_for(again.queue, [jid])
    assert job.state == "done" and job.attempts == 2 and len(Store(db).evaluation_ids()) == 1


def test_a_slot_that_cannot_start_rests_and_its_job_is_not_charged(tmp_path):
    q = JobQueue(tmp_path / "s.db", max_attempts=1)
    tried = threading.Event()

    def behave(slot, job):
        if slot.name == "fake:0":
            tried.set()
            return Outcome("unavailable", message="node gone")
        tried.wait(30)  # the working slot waits until the broken one has tried a job
        return None

    ex = FakeExecutor(TWO, behave)
    ids = q.submit([spec() for _ in range(3)])
    with Scheduler(q, ex, tick_s=0.01) as sched:
        jobs = wait_for(q, ids)
        assert sched.health()["fake:0"]["state"] == "down"
    assert all(j.state == "done" and j.attempts == 1 for j in jobs)


def test_a_result_that_does_not_validate_puts_the_job_back_and_the_slot_goes_on(tmp_path):
    q = JobQueue(tmp_path / "s.db", max_attempts=2)
    ex = FakeExecutor(TWO[:1], lambda slot, job: Outcome("result", evaluation="{not json", solution="{}")
                      if job.id == 1 else None)
    ids = q.submit([spec(), spec()])
    with Scheduler(q, ex, tick_s=0.01):
        bad, good = wait_for(q, ids)
    assert bad.state == "failed" and "scheduler failed" in bad.error and good.state == "done"
    assert ex.recycled.count("fake:0") == 2


def test_an_idle_slot_never_starts_a_poll_once_the_stop_is_set(tmp_path):
    """The stop notifies the queue's condition once: a slot that was claiming a job then (not yet waiting) must
    see the stop before it waits, not sleep out a poll (half a second of every service's and run's end)."""
    q = JobQueue(tmp_path / "s.db")
    sched = Scheduler(q, FakeExecutor(TWO), tick_s=0.01)
    polls = polls_after_a_stop(q, sched._stop, q, "claim", None, sched.start, sched.stop)
    assert not any(polls), polls
