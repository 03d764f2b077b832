"""What running a job on a slot came to, as an executor reports it to the scheduler."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Literal, Protocol

from solbench.schedule.devices import Slot
from solbench.schedule.jobs import Job

#: result: an evaluation (any verdict); error: the job cannot be evaluated (a bad problem, say); lost: the slot
#: died under it (put back, counted against the job); unavailable: the slot could not start (put back uncounted,
#: the slot rests); cancelled: its submitter cancelled it; timeout: it outlived the scheduler's limit
Kind = Literal["result", "error", "lost", "unavailable", "cancelled", "timeout"]


@dataclass
class Outcome:
    kind: Kind
    evaluation: str | None = None  # the Evaluation's JSON
    solution: str | None = None  # the Solution's JSON
    message: str = ""


#: called every tick while a job runs: False ends it (cancelled, or its lease is gone)
Tick = Callable[[], bool]


def answered(msg: dict) -> Outcome:
    """A slot's answer to a job: its evaluation, or why it could not be evaluated."""
    if msg.get("type") == "result":
        return Outcome("result", evaluation=msg["evaluation"], solution=msg["solution"])
    return Outcome("error", message=str(msg.get("message") or "the slot could not evaluate it"))


def unanswered(tick: Tick, deadline: float, timeout_s: float) -> Outcome | None:
    """After a tick without an answer: cancelled (the tick says to stop), timeout (past ``deadline``, a
    ``time.monotonic()``), or None to wait on; the executor recycles the slot for either."""
    if not tick():
        return Outcome("cancelled")
    if time.monotonic() > deadline:
        return Outcome("timeout", message=f"no result within {timeout_s:.0f} s: the slot was recycled")
    return None


class Executor(Protocol):
    slots: list[Slot]

    def run(self, slot: Slot, job: Job, tick: Tick, tick_s: float, timeout_s: float) -> Outcome: ...

    def recycle(self, slot: Slot) -> None: ...

    def health(self) -> dict[str, dict]: ...

    def close(self) -> None: ...
