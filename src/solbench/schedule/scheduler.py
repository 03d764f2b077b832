"""The host's scheduler: every slot takes jobs from the queue, one at a time, and the scheduler alone writes
their results (``JobQueue.finish``).

One thread per slot claims the next job its device admits (by the job's estimated device memory against the
slot's), runs it on the executor, renews the job's lease every ``tick_s`` while it runs and ends it as the
executor reports: a result is stored with the job marked done; a slot lost under a job puts the job back; a job
cancelled or past ``job_timeout_s`` has its slot recycled. A job estimated larger than every slot is admitted
anywhere: its evaluation refuses the workloads that do not fit (``footprint``).

One scheduler serves a database at a time (an ``flock`` beside it); on start it puts back every job a previous
one left running.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
import traceback
from collections import Counter
from typing import Callable

from solbench.errors import UserError
from solbench.records.verdict import Evaluation
from solbench.schedule.devices import Slot
from solbench.schedule.jobs import Job
from solbench.schedule.outcome import Executor, Outcome
from solbench.schedule.queue import JobQueue

#: seconds a slot that could not start rests before it claims again (doubling up to REST_MAX_S)
REST_S = 5.0
REST_MAX_S = 300.0


class Busy(UserError):
    """Another scheduler serves the database: ``serves`` is the batch it takes ("all": a service, which runs any
    job queued there)."""

    def __init__(self, db, serves: str):
        self.serves = serves
        who = "a `solbench serve`" if serves == "all" else f"another `solbench run` ({serves})"
        super().__init__(f"{who} schedules {db}: wait for it, or use another --db")


class Scheduler:
    def __init__(self, queue: JobQueue, executor: Executor, lease_s: float = 60.0, tick_s: float = 5.0,
                 job_timeout_s: float = 4 * 3600.0, on_start: Callable[[Slot, Job], None] | None = None,
                 on_end: Callable[[Slot, Job, Outcome], None] | None = None, batch: str | None = None):
        self.queue = queue
        self.executor = executor
        self.lease_s = lease_s
        self.tick_s = tick_s
        self.job_timeout_s = job_timeout_s
        self.on_start = on_start
        self.batch = batch  # only this batch's jobs (a `solbench run`'s), where given
        self.on_end = on_end
        self.running: dict[str, Job | None] = {s.name: None for s in executor.slots}
        self.down: dict[str, float] = {}  # slot -> until when it rests (it could not start)
        self.starting: set[str] = set()  # slots whose process or actor is starting
        self.ended: Counter[str] = Counter()  # outcome kind -> jobs
        self.started = time.time()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock_fd: int | None = None
        self._largest = max((s.memory_bytes or 0 for s in executor.slots), default=0)

    # ---- life ---------------------------------------------------------------
    def start(self) -> list[int]:
        """Take the database, put back what a previous scheduler left running (and forget its builds ahead), start
        the slots' threads; returns the ids of the jobs put back."""
        self._lock_fd = os.open(f"{self.queue.path}.scheduler.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._lock_fd, 256, 0).decode(errors="replace").split()
            os.close(self._lock_fd)
            self._lock_fd = None
            raise Busy(self.queue.path, holder[1] if len(holder) > 1 else "?") from None
        os.ftruncate(self._lock_fd, 0)
        os.pwrite(self._lock_fd, f"{os.getpid()} {self.batch or 'all'}\n".encode(), 0)  # who holds it, for Busy
        back = self.queue.recover(everything=True)
        self.queue.built()  # builds ahead a previous service marked ended with it (``schedule.builds``)
        for slot in self.executor.slots:
            t = threading.Thread(target=self._serve, args=(slot,), name=f"slot-{slot.name}", daemon=True)
            t.start()
            self._threads.append(t)
        return back

    @property
    def serving(self) -> bool:
        """Whether ``start`` ran (and ``stop`` not yet)."""
        return bool(self._threads) and not self._stop.is_set()

    def stop(self) -> None:
        self._stop.set()
        self.queue.wake()
        self.executor.close()  # a job in flight is lost with its slot and put back by the next scheduler
        for t in self._threads:
            t.join(timeout=30)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> "Scheduler":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- a slot's loop ------------------------------------------------------------
    def admits(self, slot: Slot) -> Callable[[Job], bool]:
        def fits(job: Job) -> bool:
            return (slot.memory_bytes is None or job.peak_bytes <= slot.memory_bytes
                    or job.peak_bytes > self._largest)
        return fits

    def _serve(self, slot: Slot) -> None:
        rest = REST_S
        warm = getattr(self.executor, "warm", None)
        if warm is not None:  # the slot starts now, not when the first job comes: no job waits for it
            self.starting.add(slot.name)
            try:
                warm(slot)
            except Exception:
                traceback.print_exc()  # it is started again for its first job
            finally:
                self.starting.discard(slot.name)
        while not self._stop.is_set():
            try:
                job = self.queue.claim(self._owner(slot), self.lease_s, self.admits(slot), self.batch)
            except Exception:  # the database busy beyond its timeout: try again
                job = None
            if job is None:
                self.queue.idle(self._stop, 0.5)
                continue
            self.running[slot.name] = job
            try:
                kind = self._run(slot, job)
            except Exception as exc:  # solbench's own fault (a result that does not validate, the database):
                # the job is put back (its traceback to this process's log, not to the job), the slot recycled,
                # and the scheduler goes on
                traceback.print_exc()
                self.executor.recycle(slot)
                kind = "lost"
                try:
                    self.queue.requeue(job, f"the scheduler failed on it: {type(exc).__name__}")
                except Exception:
                    pass  # its lease runs out, and the next scheduler puts it back
            finally:
                self.running[slot.name] = None
            if kind == "unavailable":  # the slot's device or node is down: other slots take the work meanwhile
                self.down[slot.name] = time.time() + rest
                self._stop.wait(rest)
                rest = min(rest * 2, REST_MAX_S)
            else:
                self.down.pop(slot.name, None)
                rest = REST_S

    def _owner(self, slot: Slot) -> str:
        return f"{os.uname().nodename}:{os.getpid()}:{slot.name}"

    def _run(self, slot: Slot, job: Job) -> str:
        def tick() -> bool:
            if self._stop.is_set():
                return False
            held, cancel = self.queue.heartbeat(job, self.lease_s)
            return held and not cancel

        if self.on_start is not None:
            self.on_start(slot, job)
        out = self.executor.run(slot, job, tick, self.tick_s, self.job_timeout_s)
        if self._stop.is_set() and out.kind in ("cancelled", "lost", "unavailable"):
            return out.kind  # the scheduler is ending: the job stays running, and the next scheduler puts it back
        self._end(slot, job, out)
        return out.kind

    def _end(self, slot: Slot, job: Job, out: Outcome) -> None:
        if out.kind == "result":
            ev = Evaluation.model_validate_json(out.evaluation or "{}")
            self.queue.finish(job, ev, out.solution or "{}")
        elif out.kind in ("lost", "unavailable"):
            self.queue.requeue(job, out.message, counted=out.kind == "lost")
        elif out.kind == "cancelled":
            self.queue.end(job, "cancelled", "cancelled while it ran")
        else:  # error, timeout
            self.queue.end(job, "failed", f"{out.kind}: {out.message}")
        self.ended[out.kind] += 1
        if self.on_end is not None:
            self.on_end(slot, job, out)

    # ---- state ----------------------------------------------------------------
    def health(self) -> dict[str, dict]:
        """Each slot's state: its device, its process, the job it runs."""
        slots = self.executor.health()
        for name, job in self.running.items():
            slots.setdefault(name, {})["job"] = job.id if job is not None else None
            slots[name]["state"] = ("running" if job is not None else "starting" if name in self.starting else
                                    "down" if self.down.get(name, 0) > time.time() else "idle")
        return slots


def wait_for(queue: JobQueue, ids: list[int], progress: Callable[[Job], None] | None = None,
             poll_s: float = 0.5) -> list[Job]:
    """The jobs once every one has ended (``progress`` called as each ends)."""
    left = set(ids)
    ended: dict[int, Job] = {}
    while left:
        for job_id in sorted(left):
            job = queue.get(job_id)
            if job is not None and job.state in ("done", "failed", "cancelled"):
                ended[job_id] = job
                left.discard(job_id)
                if progress is not None:
                    progress(job)
        if left:
            with queue.changed:
                queue.changed.wait(poll_s)
    return [ended[i] for i in ids]
