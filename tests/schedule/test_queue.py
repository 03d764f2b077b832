"""The job queue: priorities, leases, exactly-once results, putting back and recovering."""

import time

import pytest

from solbench.schedule.devices import Slot
from solbench.schedule.queue import JobQueue
from solbench.store.db import Store
from tests.schedule.helpers import evaluation, spec

SLOT = Slot("cpu:0", "cpu")


def test_claims_follow_priority_then_age(tmp_path):
    q = JobQueue(tmp_path / "s.db")
    low = q.submit([spec(), spec()])
    high = q.submit([spec()], priority=5)
    order = [q.claim("a", 60).id for _ in range(3)]
    assert order == [high[0], low[0], low[1]] and q.claim("a", 60) is None


def test_a_job_whose_build_ahead_runs_is_taken_after_the_others_of_its_priority(tmp_path):
    """A slot takes ready jobs before one whose compiler still runs, not before a higher priority's, and takes the
    building one when nothing else is queued; once its build ended it is in its place again."""
    q = JobQueue(tmp_path / "s.db")
    native, ready, later = q.submit([spec(), spec(), spec()])
    (urgent,) = q.submit([spec()], priority=5)
    q.building(native)
    q.building(urgent)
    assert [q.claim("a", 60).id for _ in range(3)] == [urgent, ready, later]
    assert q.claim("a", 60).id == native  # nothing else queued: it waits for its build in its slot, as before
    first, second = q.submit([spec(), spec()])
    q.building(first)
    q.built(first)
    assert q.claim("a", 60).id == first
    q.building(second)
    q.built()  # every mark: the builds' process ended
    assert q.claim("a", 60).id == second and q.claim("a", 60) is None


def test_admission_skips_a_job_the_slot_cannot_hold(tmp_path):
    q = JobQueue(tmp_path / "s.db")
    big, small = q.submit([spec(), spec()], peaks=[100, 10])
    job = q.claim("a", 60, admits=lambda j: j.peak_bytes <= 50)
    assert job.id == small and q.get(big).state == "queued"


def test_a_result_is_stored_once_with_its_job(tmp_path):
    db = tmp_path / "s.db"
    q = JobQueue(db)
    (jid,) = q.submit([spec()])
    job = q.claim("a", 60)
    eid = q.finish(job, evaluation(job, SLOT), "{}")
    assert eid is not None and q.get(jid).state == "done" and q.get(jid).evaluation_id == eid
    assert q.finish(job, evaluation(job, SLOT), "{}") is None  # a second finish of the same claim stores nothing
    assert Store(db).evaluation_ids() == [eid]


def test_a_slot_that_lost_its_job_cannot_store_a_result(tmp_path):
    db = tmp_path / "s.db"
    q = JobQueue(db)
    q.submit([spec()])
    first = q.claim("a", 0.01)
    time.sleep(0.05)
    assert q.recover() == [first.id]  # its lease ran out: back in the queue
    second = q.claim("b", 60)
    assert second.id == first.id and second.attempts == 2
    assert q.finish(first, evaluation(first, SLOT), "{}") is None  # the old claim's result is dropped
    assert q.finish(second, evaluation(second, SLOT), "{}") is not None
    assert len(Store(db).evaluation_ids()) == 1


def test_a_job_lost_too_often_fails_with_why(tmp_path):
    q = JobQueue(tmp_path / "s.db", max_attempts=2)
    (jid,) = q.submit([spec()])
    assert q.requeue(q.claim("a", 60), "killed") == "queued"
    assert q.requeue(q.claim("a", 60), "killed again") == "failed"
    job = q.get(jid)
    assert job.state == "failed" and "lost 2 times" in job.error and "killed again" in job.error


def test_cancel_ends_a_queued_job_and_flags_a_running_one(tmp_path):
    q = JobQueue(tmp_path / "s.db")
    a, b = q.submit([spec(), spec()])
    running = q.claim("s", 60)
    assert q.cancel(b).state == "cancelled"
    assert q.cancel(a).cancel and q.heartbeat(running, 60) == (True, True)


def test_recover_everything_puts_back_what_a_dead_scheduler_left(tmp_path):
    db = tmp_path / "s.db"
    q = JobQueue(db)
    a, b = q.submit([spec(), spec()])
    q.claim("old", 3600)
    q.cancel(b)  # queued: ended at once
    q2 = JobQueue(db)  # a new process's queue on the same database
    assert q2.recover() == []  # the lease still holds
    assert q2.recover(everything=True) == [a] and q2.get(a).state == "queued"


def test_wait_returns_when_the_job_ends_or_the_poll_times_out(tmp_path):
    q = JobQueue(tmp_path / "s.db")
    (jid,) = q.submit([spec()])
    assert q.wait(jid, 0.05).state == "queued"
    job = q.claim("a", 60)
    q.end(job, "failed", "bad problem")
    assert q.wait(jid, 5).state == "failed"


def test_a_run_claims_only_its_own_batch(tmp_path):
    q = JobQueue(tmp_path / "s.db")
    served = q.submit([spec()])
    mine = q.submit([spec()], batch="run-7")
    assert q.claim("run", 60, batch="run-7").id == mine[0] and q.claim("run", 60, batch="run-7") is None
    assert q.claim("serve", 60).id == served[0]


def test_a_submission_retried_with_its_key_is_queued_once(tmp_path):
    q = JobQueue(tmp_path / "s.db")
    first = q.submit([spec(), spec()], token="a", key="k")
    assert q.submit([spec(), spec()], token="a", key="k") == first
    assert q.submit([spec()], token="b", key="k") != first  # another token's key is its own
    assert sum(q.counts().values()) == 3


def test_a_cancelled_job_whose_slot_is_lost_ends_cancelled(tmp_path):
    q = JobQueue(tmp_path / "s.db")
    (jid,) = q.submit([spec()])
    job = q.claim("a", 60)
    q.cancel(jid)
    assert q.requeue(job, "slot recycled for the cancel") == "cancelled" and q.get(jid).state == "cancelled"
    assert q.claim("b", 60) is None


def test_tokens_of_one_priority_take_turns(tmp_path):
    q = JobQueue(tmp_path / "s.db")
    flood = q.submit([spec() for _ in range(5)], token="a")
    few = q.submit([spec() for _ in range(2)], token="b")
    urgent = q.submit([spec()], token="c", priority=1)
    order = []
    for _ in range(8):
        job = q.claim("slot", 60)
        order.append(job.id)
        q.end(job, "failed", "done here")
        time.sleep(0.002)  # each claim a later time than the one before
    assert order[0] == urgent[0]
    assert order[1:6] == [flood[0], few[0], flood[1], few[1], flood[2]] and order[6:] == flood[3:]


def test_the_quota_is_counted_with_the_submission(tmp_path):
    from solbench.schedule.queue import QuotaExceeded

    q = JobQueue(tmp_path / "s.db")
    q.submit([spec(), spec()], token="a", quota=3)
    with pytest.raises(QuotaExceeded, match="quota of 3"):
        q.submit([spec(), spec()], token="a", quota=3)
    assert q.submit([spec()], token="a", quota=3) and q.submit([spec()] * 5, token="b", quota=5)
    assert sum(q.counts().values()) == 8
