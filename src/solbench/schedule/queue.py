"""The job queue, in the results database: jobs survive a restart of whatever serves them, and each result is
stored exactly once.

A slot *claims* the highest-priority queued job that its device admits (within a priority, a job whose native
build ahead is still running after the others, since its slot would only wait for the compiler (``building``),
then the token served least recently first, then the oldest job: a fair share between tokens), and holds it under a
*lease* it renews while the evaluation runs (``heartbeat``). A job whose slot died is put back (``requeue``), at
most ``max_attempts`` times before it ends ``failed`` with why; a job whose lease ran out (its scheduler died) is
put back by the next scheduler's ``recover``. ``finish`` stores the evaluation and marks the job done in one
transaction, and only while the finishing slot still holds the job: a result from a slot that lost its lease is
dropped, so no evaluation is ever stored twice, and a killed process leaves either both or neither.

The database runs in WAL mode so that readers (a service's polls, ``solbench`` commands) never block the writer.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

from solbench.records.verdict import Evaluation
from solbench.schedule.jobs import ENDED, Job, JobSpec

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    state TEXT NOT NULL,
    priority INTEGER NOT NULL DEFAULT 0,
    token TEXT,
    created REAL NOT NULL,
    started REAL,
    finished REAL,
    attempts INTEGER NOT NULL DEFAULT 0,
    owner TEXT,
    lease_until REAL,
    spec TEXT NOT NULL,
    peak_bytes INTEGER NOT NULL DEFAULT 0,
    evaluation_id INTEGER,
    error TEXT,
    cancel INTEGER NOT NULL DEFAULT 0,
    batch TEXT,
    idem TEXT
);
CREATE INDEX IF NOT EXISTS jobs_queued ON jobs(state, priority, id);
CREATE INDEX IF NOT EXISTS jobs_idem ON jobs(token, idem);
-- when each token (or '' for jobs without one) last had a job taken: tokens of one priority take turns
CREATE TABLE IF NOT EXISTS served (token TEXT PRIMARY KEY, at REAL NOT NULL);
-- the queued jobs whose native build ahead has not ended (schedule/builds.py): taken after the others of their priority
CREATE TABLE IF NOT EXISTS building (job_id INTEGER PRIMARY KEY, since REAL NOT NULL);
"""
_COLUMNS = ("id", "state", "priority", "token", "created", "started", "finished", "attempts", "owner", "spec",
            "peak_bytes", "evaluation_id", "error", "cancel", "batch")
#: how many queued jobs a claim looks through for one its device admits
CLAIM_WINDOW = 64


class QuotaExceeded(Exception):
    def __init__(self, quota: int, used: int):
        self.quota, self.used = quota, used
        super().__init__(f"quota of {quota} evaluations a day reached ({used} used)")


class JobQueue:
    """The queue of one database; safe to share between threads (one connection, one lock)."""

    def __init__(self, path: str | Path, max_attempts: int = 3):
        from solbench.store.db import Store

        Store(path).close()  # the results tables, created or brought up to date
        self.path = Path(path)
        self.max_attempts = max_attempts
        self._lock = threading.RLock()
        self.conn = sqlite3.connect(str(path), timeout=60, check_same_thread=False, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.executescript(SCHEMA)
        # reads on a connection of their own: a poll never waits behind a writer waiting for the database
        self._reader = sqlite3.connect(str(path), timeout=60, check_same_thread=False)
        self._read_lock = threading.Lock()
        self.changed = threading.Condition()  # notified after every change (idle slots and `wait` wait on it)

    def close(self) -> None:
        self.conn.close()
        self._reader.close()

    def wake(self) -> None:
        """Wake every thread waiting on ``changed`` (``idle``, ``wait``)."""
        with self.changed:
            self.changed.notify_all()

    def idle(self, stop: threading.Event, seconds: float) -> None:
        """Wait up to ``seconds`` for a change, unless ``stop`` is set: a stop set before the lock is taken is seen
        here, one set after wakes the wait (its setter calls ``wake``)."""
        with self.changed:
            if not stop.is_set():
                self.changed.wait(seconds)

    def _read(self, query: str, args: tuple | list = ()) -> list[tuple]:
        with self._read_lock:
            return self._reader.execute(query, args).fetchall()

    def _transaction(self) -> "_Tx":
        return _Tx(self)

    # ---- submitting ------------------------------------------------------------
    def submit(self, specs: list[JobSpec], priority: int = 0, token: str | None = None,
               peaks: list[int] | None = None, batch: str | None = None, key: str | None = None,
               quota: int = 0) -> list[int]:
        """Queue ``specs``; their ids. ``key``: the submission's idempotency key: a submission the same token
        already made with it gets the ids it got then, and nothing is queued twice. ``quota``: the token's jobs in
        any 24 hours (0: no limit), counted in the same transaction (``QuotaExceeded``)."""
        now = time.time()
        with self._transaction() as c:
            if key is not None:
                known = [r[0] for r in c.execute("SELECT id FROM jobs WHERE token IS ? AND idem=? ORDER BY id",
                                                 (token, key))]
                if known:
                    return known
            if quota:
                used = c.execute("SELECT COUNT(*) FROM jobs WHERE token IS ? AND created >= ?",
                                 (token, now - 86400)).fetchone()[0]
                if used + len(specs) > quota:
                    raise QuotaExceeded(quota, used)
            ids = [int(c.execute(
                "INSERT INTO jobs (state, priority, token, created, spec, peak_bytes, batch, idem) "
                "VALUES (?,?,?,?,?,?,?,?)",
                ("queued", priority, token, now, spec.model_dump_json(), (peaks or [0] * len(specs))[i], batch,
                 key)).lastrowid) for i, spec in enumerate(specs)]
        return ids

    def submitted(self, token: str | None, key: str) -> list[int]:
        """The jobs a submission with idempotency ``key`` queued for ``token`` (none: not submitted yet)."""
        return [r[0] for r in self._read("SELECT id FROM jobs WHERE token IS ? AND idem=? ORDER BY id", (token, key))]

    def cancel(self, job_id: int) -> Job | None:
        """Cancel a queued job at once; a running one is flagged, and its slot ends it (``Scheduler``)."""
        with self._transaction() as c:
            c.execute("UPDATE jobs SET state='cancelled', finished=? WHERE id=? AND state='queued'",
                      (time.time(), job_id))
            c.execute("UPDATE jobs SET cancel=1 WHERE id=? AND state='running'", (job_id,))
        return self.get(job_id)

    # ---- running ---------------------------------------------------------------
    def claim(self, owner: str, lease_s: float, admits: Callable[[Job], bool] = lambda j: True,
              batch: str | None = None) -> Job | None:
        """The next queued job ``admits`` takes (of ``batch`` only, where given), now running on ``owner`` under a
        lease of ``lease_s``."""
        with self._transaction() as c:
            # within a priority, jobs whose build ahead runs last, then the token served least recently first (a fair
            # share between tokens), then age
            cols = ", ".join(f"j.{c}" for c in _COLUMNS)
            rows = c.execute(f"SELECT {cols} FROM jobs j LEFT JOIN served t ON t.token = COALESCE(j.token, '') "
                             "LEFT JOIN building b ON b.job_id = j.id "
                             "WHERE j.state='queued' " + ("AND j.batch=? " if batch is not None else "")
                             + "ORDER BY j.priority DESC, b.job_id IS NOT NULL, t.at IS NOT NULL, t.at, j.id "
                             "LIMIT ?",
                             ((batch,) if batch is not None else ()) + (CLAIM_WINDOW,)).fetchall()
            job = next((j for j in map(_job, rows) if admits(j)), None)
            if job is None:
                return None
            now = time.time()
            c.execute("UPDATE jobs SET state='running', owner=?, attempts=attempts+1, started=?, lease_until=? "
                      "WHERE id=?", (owner, now, now + lease_s, job.id))
            c.execute("INSERT OR REPLACE INTO served VALUES (?, ?)", (job.token or "", now))
        return self.get(job.id)

    # ---- builds ahead ------------------------------------------------------------
    def building(self, job_id: int) -> None:
        """``job_id``'s native build ahead has begun (or is queued for a build thread): a claim takes the other jobs
        of its priority first, whose slots need not wait for a compiler."""
        with self._transaction() as c:
            c.execute("INSERT OR REPLACE INTO building VALUES (?, ?)", (job_id, time.time()))

    def built(self, job_id: int | None = None) -> None:
        """``job_id``'s build ahead has ended, built or not; None: every job's (the builds' process starts or
        ends, and a build it left unfinished will be its evaluation's)."""
        with self._transaction() as c:
            if job_id is None:
                c.execute("DELETE FROM building")
            else:
                c.execute("DELETE FROM building WHERE job_id=?", (job_id,))

    def heartbeat(self, job: Job, lease_s: float) -> tuple[bool, bool]:
        """Renew ``job``'s lease: (still held by its owner, cancel asked)."""
        with self._transaction() as c:
            held = c.execute("UPDATE jobs SET lease_until=? WHERE id=? AND owner=? AND attempts=? AND "
                             "state='running'", (time.time() + lease_s, job.id, job.owner, job.attempts)).rowcount
            cancel = c.execute("SELECT cancel FROM jobs WHERE id=?", (job.id,)).fetchone()
        return bool(held), bool(cancel and cancel[0])

    def finish(self, job: Job, evaluation: Evaluation, solution_json: str) -> int | None:
        """Store ``evaluation`` and mark ``job`` done, in one transaction, if its slot still holds it (else
        None: the job was put back or cancelled meanwhile, and this result is dropped)."""
        from solbench.store.db import insert_evaluation

        with self._transaction() as c:
            if not self._held(c, job):
                return None
            eid = insert_evaluation(c, evaluation, solution_json, job.spec.run_id)
            c.execute("UPDATE jobs SET state='done', finished=?, evaluation_id=?, lease_until=NULL WHERE id=?",
                      (time.time(), eid, job.id))
        return eid

    def end(self, job: Job, state: str, error: str) -> bool:
        """End ``job`` without an evaluation (``failed``: it cannot be evaluated; ``cancelled``)."""
        with self._transaction() as c:
            if not self._held(c, job):
                return False
            c.execute("UPDATE jobs SET state=?, finished=?, error=?, lease_until=NULL WHERE id=?",
                      (state, time.time(), error[:2000], job.id))
        return True

    def requeue(self, job: Job, why: str, counted: bool = True) -> str:
        """Put back a job whose slot was lost: queued again, or ``failed`` after ``max_attempts`` (``counted``
        False: the attempt is not the job's, its slot never started)."""
        with self._transaction() as c:
            if not self._held(c, job):
                return "gone"
            if c.execute("SELECT cancel FROM jobs WHERE id=?", (job.id,)).fetchone()[0]:
                c.execute("UPDATE jobs SET state='cancelled', finished=?, error=?, lease_until=NULL WHERE id=?",
                          (time.time(), "cancelled while it ran", job.id))
                return "cancelled"
            if not counted:
                c.execute("UPDATE jobs SET attempts=attempts-1 WHERE id=?", (job.id,))
            elif job.attempts >= self.max_attempts:
                c.execute("UPDATE jobs SET state='failed', finished=?, error=?, lease_until=NULL WHERE id=?",
                          (time.time(), f"lost {job.attempts} times; last: {why}"[:2000], job.id))
                return "failed"
            c.execute("UPDATE jobs SET state='queued', owner=NULL, lease_until=NULL, error=? WHERE id=?",
                      (why[:2000], job.id))
        return "queued"

    def recover(self, everything: bool = False) -> list[int]:
        """Put back the running jobs whose lease ran out (``everything``: all running jobs, for a scheduler that
        holds the database alone); cancelled ones end."""
        with self._transaction() as c:
            cond = "state='running'" + ("" if everything else " AND lease_until < ?")
            args = () if everything else (time.time(),)
            rows = c.execute(f"SELECT {', '.join(_COLUMNS)} FROM jobs WHERE {cond}", args).fetchall()
        back = []
        for job in map(_job, rows):
            if job.cancel:
                self.end(job, "cancelled", "cancelled while its scheduler was down")
            elif self.requeue(job, "its scheduler ended while it ran") == "queued":
                back.append(job.id)
        return back

    def _held(self, c: sqlite3.Connection, job: Job) -> bool:
        row = c.execute("SELECT state, owner, attempts FROM jobs WHERE id=?", (job.id,)).fetchone()
        return row is not None and row[0] == "running" and row[1] == job.owner and row[2] == job.attempts

    # ---- reading ---------------------------------------------------------------
    def get(self, job_id: int) -> Job | None:
        rows = self._read(f"SELECT {', '.join(_COLUMNS)} FROM jobs WHERE id=?", (job_id,))
        return _job(rows[0]) if rows else None

    def wait(self, job_id: int, timeout_s: float) -> Job | None:
        """The job once it has ended, or as it is after ``timeout_s`` (a long poll)."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            job = self.get(job_id)
            left = deadline - time.monotonic()
            if job is None or job.state in ENDED or left <= 0:
                return job
            with self.changed:
                self.changed.wait(min(left, 0.5))  # another process's changes are seen by polling

    def counts(self) -> dict[str, int]:
        return dict(self._read("SELECT state, COUNT(*) FROM jobs GROUP BY state"))

    def jobs(self, state: str | None = None, token: str | None = None, limit: int = 100) -> Iterator[Job]:
        q, args = f"SELECT {', '.join(_COLUMNS)} FROM jobs WHERE 1=1", []
        if state:
            q, args = q + " AND state=?", args + [state]
        if token:
            q, args = q + " AND token=?", args + [token]
        return map(_job, self._read(q + " ORDER BY id DESC LIMIT ?", args + [limit]))


class _Tx:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on an error) under the queue's lock; waiters are
    notified after a commit."""

    def __init__(self, q: JobQueue):
        self.q = q

    def __enter__(self) -> sqlite3.Connection:
        self.q._lock.acquire()
        try:
            self.q.conn.execute("BEGIN IMMEDIATE")
        except BaseException:
            self.q._lock.release()
            raise
        return self.q.conn

    def __exit__(self, kind, exc, tb) -> None:
        try:
            self.q.conn.execute("ROLLBACK" if kind else "COMMIT")
        finally:
            self.q._lock.release()
        if kind is None:
            self.q.wake()


def _job(row: tuple) -> Job:
    d = dict(zip(_COLUMNS, row))
    d["spec"] = JobSpec.model_validate(json.loads(d["spec"]))
    d["cancel"] = bool(d["cancel"])
    return Job.model_validate(d)
