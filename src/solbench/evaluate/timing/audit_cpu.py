"""The CPU's audit (``audit``): one call per bracket, the candidate's CPU time read from outside its process
(``outside``) around the trusted side's ``go`` and the candidate's ``ok``; a process with more threads than it
had when ready, or a call that used more CPU time than its wall time allows the job's threads, is
``thread_injection``."""

from __future__ import annotations

import time
from typing import Any

from solbench.evaluate.isolation import outside
from solbench.evaluate.timing.audit_gpu import Unaudited
from solbench.evaluate.timing.handover import hand_over
from solbench.evaluate.timing.slots import Slots
from solbench.evaluate.trusted.outcomes import Rejected

#: the CPU time a call may use per allowed thread, over its wall time, before it counts as extra threads
CPU_OVER_WALL = 1.25


class CpuAudit:
    """The CPU's audit: the trusted side's wall clock around ``go`` and ``ok``; CPU time read from outside."""

    def __init__(self, sub, slots: Slots):
        self.sub, self.slots = sub, slots
        self.pid = outside.candidate_pid(sub.proc.proc.pid) if sub.proc is not None else None
        self.threads = (outside.usage(self.pid, tree=False) or outside.Usage(0, 0, 0)).threads if self.pid else 0
        self.cpu_ms: list[float] = []
        self.walls: list[float] = []

    group = 1  # one call per reading

    def own_ms(self, sets: list[list[Any]]) -> float:
        return 0.0  # the inputs are written before the clock starts: the candidate waits in ``go``'s read

    def call(self, k: int, s: int, group: list[list[Any]], values: list[Any]):
        """Audit call ``k`` (a group of one) on slot ``s``: ([outputs], [inputs after], its CPU time in ms, False:
        never late, its CPU time is the call's whatever the wait)."""
        (inputs,) = group
        self.slots.fill(s, inputs)
        u0 = outside.usage(self.pid, tree=False) if self.pid else None
        t0 = time.perf_counter()
        hand_over(self.sub, k, s)
        t1 = time.perf_counter()
        if self.pid:  # once it waits for the next ``go``, its account is settled
            outside.wait_blocked(self.pid)
        u1 = outside.usage(self.pid, tree=False) if self.pid else None
        outs, after = self.slots.take(s, values)
        self.walls.append((t1 - t0) * 1e3)
        if u0 is None or u1 is None:
            raise Unaudited("the candidate's CPU time could not be read from outside its process")
        if u1.threads > max(1, self.threads):
            raise Rejected(["thread_injection"], f"the candidate's process has {u1.threads} threads (it had "
                           f"{self.threads} when it was ready), read from outside it")
        self.cpu_ms.append((u1.cpu_ns - u0.cpu_ns) / 1e6)
        return [outs], [after], self.cpu_ms[-1], False

    def finish(self, audit, warm: int) -> None:
        threads = max(1, int(self.sub.ctx.job.get("cpu_threads") or 1))
        for cpu, wall in zip(self.cpu_ms[warm:], self.walls[warm:]):
            if cpu > wall * threads * CPU_OVER_WALL + 2.0:
                raise Rejected(["thread_injection"], f"an audited call used {cpu:.2f} ms of CPU time in {wall:.2f} "
                               f"ms with {threads} thread(s) allowed: more threads worked than allowed")
