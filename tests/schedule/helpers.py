"""Stand-ins for the scheduler's tests: job specs, evaluations, and an executor whose "devices" are threads."""

from __future__ import annotations

import threading
import time
from typing import Callable

from solbench.records.verdict import Evaluation
from solbench.schedule.devices import Slot
from solbench.schedule.jobs import Job, JobSpec
from solbench.schedule.outcome import Outcome


def spec(problem: str = "axpy", **options) -> JobSpec:
    return JobSpec(problem=problem, solution={"name": "s", "definition": problem}, options=options)


def evaluation(job: Job, slot: Slot) -> Evaluation:
    return Evaluation(problem=job.spec.problem, problem_dir="", problem_digest="p", solution=f"job-{job.id}",
                      solution_digest="s", language="pytorch", verdict="passed", device=slot.device,
                      hardware="fake", environment={"slot": slot.name})


class FakeExecutor:
    """Slots that "evaluate" by calling ``behave(slot, job)`` (default: a passed evaluation after ``delay_s``, and
    after ``gate`` opens where one is given); ``behave`` may return an Outcome, or None to go on."""

    def __init__(self, slots: list[Slot], behave: Callable[[Slot, Job], Outcome] | None = None,
                 delay_s: float = 0.0, gate: threading.Event | None = None):
        self.slots = slots
        self.behave = behave
        self.delay_s = delay_s
        self.gate = gate
        self.ran: list[tuple[str, int]] = []
        self.recycled: list[str] = []
        self.lock = threading.Lock()

    def run(self, slot: Slot, job: Job, tick, tick_s: float, timeout_s: float) -> Outcome:
        with self.lock:
            self.ran.append((slot.name, job.id))
        if self.behave is not None:
            out = self.behave(slot, job)
            if out is not None:
                return out
        deadline = time.monotonic() + self.delay_s
        while self.gate is not None and not self.gate.wait(tick_s):
            if not tick():
                self.recycle(slot)
                return Outcome("cancelled")
        while time.monotonic() < deadline:
            time.sleep(min(tick_s, max(0.0, deadline - time.monotonic())))
            if not tick():
                self.recycle(slot)
                return Outcome("cancelled")
        return Outcome("result", evaluation=evaluation(job, slot).model_dump_json(), solution="{}")

    def recycle(self, slot: Slot) -> None:
        self.recycled.append(slot.name)

    def health(self) -> dict[str, dict]:
        return {s.name: {"device": s.device} for s in self.slots}

    def close(self) -> None:
        pass


def polls_after_a_stop(queue, stop: threading.Event, obj, busy: str, idle_result, start, end) -> list[bool]:
    """Whether each poll of ``queue``'s condition began with ``stop`` set, when the stop comes while ``obj`` is in
    its ``busy`` method (patched to wait for the stop, then return ``idle_result``): ``start()``, then ``end()``
    once ``obj`` is busy. A loop that checks the stop under the condition's lock never polls after it."""
    busy_now, polls = threading.Event(), []
    real_wait = queue.changed.wait

    def in_work(*args, **kwargs):
        busy_now.set()
        stop.wait(10)
        return idle_result

    def wait(timeout=None):
        polls.append(stop.is_set())
        return real_wait(timeout)

    setattr(obj, busy, in_work)
    queue.changed.wait = wait
    start()
    assert busy_now.wait(10)
    end()
    return polls
