"""The GPU's audit (``audit``): groups of calls bracketed by the trusted worker's ``%globaltimer`` stamps.

Per group of ``m`` calls, on the trusted worker's own stream: hold the device, stamp, copy each call's inputs
into its slot and fill its output room, flush the last-level cache, raise the ``go`` flag (``memops``); the
candidate's stream waits for it, makes the ``m`` calls one after another, each on its own slot, and raises the
``done`` flag; the trusted stream waits for that, stamps, and copies the slots out. The inputs exist nowhere
before the first stamp, so no work on them can run before the clock starts (without MPS another process's
kernels can run between two of the trusted stream's, in its time slices), and they are all in device memory,
none in the cache, when the first call starts. The copies, the fill and the flush are the trusted side's own
share of the bracket, timed alone; the hand-over between the two processes is calibrated against a null
candidate. The hand-over's noise (tens of microseconds on the H200, docs/PERFORMANCE.md) is a bracket's, so a
group of ``m`` calls divides it by ``m`` (``group_size``). The hold outlasts the candidate's host side (the
trusted side measures the hand-over on the host, and a group whose host side outlasted its hold is not counted),
so the candidate's launches are queued before the device is let go.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

from solbench.evaluate.timing import globaltimer, memops
from solbench.evaluate.timing.handover import answer, hand_over

OWN_REPS = 5
FIRST_HOLD_S = 0.002
MIN_HOLD_S = 0.0003
MAX_HOLD_S = 0.03  # a group whose host side takes longer than this cannot be audited on the GPU
HOLD_DECAY = 0.7  # after a bracket on time, the next hold is at least this share of its hold
GROUP_MS = 2.0  # the device time a group of calls aims at (by the timing's median)
MAX_GROUP = 64  # calls in one group at most
GROUP_BYTES = 8 << 30  # the slots of one group at most, in bytes (and a quarter of the device's free memory)
#: per device and group size, the host time that the trusted side's own share last took to launch
#: (``GpuAudit._reps``): a workload's first hold of it is sized from there (``_own_host``), not ``FIRST_HOLD_S``, so
#: that its reps are not launched twice, once behind a hold too short for them
_OWN_HOST: dict[str, dict[int, float]] = {}


def _own_host(key: str, m: int) -> float | None:
    """The host time the own share of ``m`` calls should take on device ``key``: what it took for as many calls or
    the fewest more, else for the most fewer, scaled to ``m`` (a batch draw's copies take about as long for any
    number of calls; other draws' copies, one per call, grow with it); None where nothing was seen."""
    seen = _OWN_HOST.get(key)
    if not seen:
        return None
    more = [g for g in seen if g >= m]
    if more:
        return seen[min(more)]
    g = max(seen)
    return seen[g] * m / g


class Unaudited(Exception):
    """The audit could not be made (the time stays unconfirmed)."""


class OutOfRoom(Unaudited):
    """The trusted side ran out of device memory for the audit's groups of ``group`` calls: the harness's limit,
    not the solution's failure (a smaller group may fit)."""

    def __init__(self, group: int):
        super().__init__(f"the trusted side ran out of device memory for the audit's groups of {group} call(s)")
        self.group = group


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is torch's out-of-memory error (the device's; the host's is ``MemoryError``)."""
    import torch

    return isinstance(exc, torch.OutOfMemoryError)


def group_size(claimed_ms: float, slot_bytes: int, free_bytes: int) -> int:
    """How many calls one bracket holds: enough for ``GROUP_MS`` of device time by the timing's median, at most
    ``MAX_GROUP`` and as many slots as ``GROUP_BYTES`` (or a quarter of the free memory) holds, at least one."""
    want = MAX_GROUP if claimed_ms <= 0 else math.ceil(GROUP_MS / claimed_ms)
    room = min(GROUP_BYTES, free_bytes // 4) // max(1, slot_bytes)
    return max(1, min(MAX_GROUP, want, room))


class GpuAudit:
    def __init__(self, sub, slots, group: int):
        import torch

        self.torch = torch
        self.sub, self.slots, self.group = sub, slots, group
        self.dev = sub.ctx.dev
        self.stream = torch.cuda.Stream(self.dev)
        self.stamps = torch.zeros(2 * OWN_REPS, dtype=torch.int64, device=self.dev)
        self.hold_s = FIRST_HOLD_S  # a group's hold: its host side holds the candidate's launches
        self.own_hold_s = FIRST_HOLD_S  # the hold of the trusted side's own share: its launches alone
        flags = slots.arena.buf[slots.flags:]
        flags.zero_()  # before the candidate hears of the audit: no flag is raised yet
        self.go, self.done = slots.flag(0), slots.flag(1)
        try:
            globaltimer.warm(self.dev)
            memops.wait(self.stream, self.go, 0)  # a wait that holds nothing: the driver offers them
        except memops.MemopsUnavailable as exc:
            raise Unaudited(str(exc)) from None

    def _reps(self, work) -> tuple[float, float]:
        """The median of ``OWN_REPS`` runs of ``work()`` in ms, and the host's time to launch them (s): each run
        between two stamps of the trusted stream, all behind one hold that outlasts their launches (as a group's
        bracket is), so that the stamps hold the device's time, not the host's. The hold is the trusted side's
        own (``own_hold_s``): a group's hold also covers the candidate's launches and its answer, tens of
        milliseconds of idle device for a large group."""
        torch = self.torch
        while True:
            t0 = time.perf_counter()
            with torch.cuda.stream(self.stream):
                globaltimer.hold(self.own_hold_s)
                for r in range(OWN_REPS):
                    globaltimer.stamp(self.stamps, 2 * r)
                    work()
                    globaltimer.stamp(self.stamps, 2 * r + 1)
            host_s = time.perf_counter() - t0
            self.stream.synchronize()
            if host_s < self.own_hold_s or self.own_hold_s >= MAX_HOLD_S:
                return statistics.median(globaltimer.spans_ms(self.stamps)), host_s
            self.own_hold_s = min(MAX_HOLD_S, 2 * host_s + 1e-4)

    def own_ms(self, sets: list[list[Any]]) -> float:
        """The trusted side's own work inside a bracket of ``len(sets)`` calls, timed here alone on input sets
        drawn as a bracket's are (one batch: the copies in are one per tensor): the copies of the inputs into the
        slots, the sentinel fill and the flush (after the first stamp, so that the inputs exist nowhere before the
        clock starts), and where the candidate returns its outputs instead of writing them, their copies into the
        slots."""
        torch = self.torch
        m = len(sets)
        self.stream.wait_stream(torch.cuda.current_stream(self.dev))

        def fill():
            self.slots.fill_group(0, sets)
            self.sub.ctx.flusher()

        key = str(self.dev)
        host_s = _own_host(key, m)
        if host_s is not None:
            self.own_hold_s = min(MAX_HOLD_S, max(MIN_HOLD_S, 2 * host_s + 1e-4))
        own, host_s = self._reps(fill)
        _OWN_HOST.setdefault(key, {})[m] = host_s
        if self.sub.subject.get("dps", True) or not self.slots.layout.outputs:
            return own
        return own + self._reps(lambda: self.slots.store_like(m))[0]

    def call(self, k: int, first: int, inputs: list[list[Any]], values: list[Any]):
        """Audit group ``k``, one call per input set on slots ``first``, ``first + 1``, ...: (outputs per call,
        inputs after per call, the bracket in ms, whether it was late: the candidate's host side outlasted the
        hold, so its launches may have come after the ``go`` flag and the bracket also holds the device's waits for
        them: an upper bound of the calls' time, not their time)."""
        torch = self.torch
        hold_s = self.hold_s
        self.stream.wait_stream(torch.cuda.current_stream(self.dev))  # the inputs were drawn there
        t_hold = time.perf_counter()
        with torch.cuda.stream(self.stream):
            globaltimer.hold(hold_s)
            globaltimer.stamp(self.stamps, 0)
            self.slots.fill_group(first, inputs)
            self.sub.ctx.flusher()
        memops.write(self.stream, self.go, k + 1)
        hand_over(self.sub, k, first, len(inputs), "queued")
        host_s = time.perf_counter() - t_hold
        answer(self.sub, k, "ok")  # the candidate's stream has ended: the trusted stream has nothing waiting
        memops.wait(self.stream, self.done, k + 1)
        with torch.cuda.stream(self.stream):
            globaltimer.stamp(self.stamps, 1)
            taken = self.slots.take_group(first, len(inputs), values)
        self._settle(k)
        # twice the host side just seen, and no shorter than a share of the last hold: one slow host side does
        # not set every later bracket's hold (a hold is device time spent on nothing)
        self.hold_s = min(MAX_HOLD_S, max(MIN_HOLD_S, HOLD_DECAY * self.hold_s if host_s < hold_s else 0.0,
                                          2 * host_s + 1e-4))
        if host_s >= MAX_HOLD_S / 2 and self.group > 1:  # the next groups smaller, so that their host side fits
            self.group = max(1, int(self.group * MAX_HOLD_S / (2 * host_s)))
        outs, after = [t[0] for t in taken], [t[1] for t in taken]
        return outs, after, globaltimer.spans_ms(self.stamps)[0], host_s >= hold_s

    def _settle(self, k: int) -> None:
        """Wait for the group's bracket to end, within the candidate's time left. A candidate that answered
        ``ok`` but never raised its ``done`` flag would hold the trusted stream for ever: past the limit the
        trusted side raises the flag itself, from a stream of its own, and the group is not audited."""
        torch = self.torch
        end = torch.cuda.Event()
        end.record(self.stream)
        with self.sub.waiting() as left_s:
            deadline = time.monotonic() + max(1.0, left_s)
            pause = 1e-5
            while not end.query():
                if time.monotonic() > deadline:
                    rescue = torch.cuda.Stream(self.dev)
                    memops.write(rescue, self.done, k + 1)
                    self.stream.synchronize()
                    raise Unaudited("an audited call did not end within the candidate's time limit")
                time.sleep(pause)
                pause = min(2 * pause, 1e-3)

    def finish(self, audit, warm: int) -> None:
        pass
