"""The GPU's audit (``audit``): each call bracketed by the trusted worker's ``%globaltimer`` stamps.

Per call, on the trusted worker's own stream: hold the device, flush the last-level cache, stamp, copy the
call's inputs into its slot and fill its output room, raise the ``go`` flag (``memops``); the candidate's
stream waits for it, calls, and raises the ``done`` flag; the trusted stream waits for that, stamps, and copies
the slot out. The inputs exist nowhere before the first stamp, so no work on them can run before the clock
starts (without MPS another process's kernels can run between two of the trusted stream's, in its time
slices); the copies and the fill are the trusted side's own share of the bracket, timed alone, and the
hand-over is calibrated against a null candidate. The hold
outlasts the candidate's host side (the trusted side measures the hand-over on the host, and a call whose host
side outlasted its hold is not counted), so the candidate's launches are queued before A completes.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from solbench.evaluate import audit_clock, memops
from solbench.evaluate.arena import view
from solbench.evaluate.ring import slot_spec

OWN_REPS = 5
FIRST_HOLD_S = 0.002
MIN_HOLD_S = 0.0003
MAX_HOLD_S = 0.02  # a call whose host side takes longer than this cannot be audited on the GPU


class GpuAudit:
    def __init__(self, sub, slots, calib):
        import torch

        self.torch = torch
        self.sub, self.slots, self.calib = sub, slots, calib
        self.dev = sub.ctx.dev
        self.stream = torch.cuda.Stream(self.dev)
        self.stamps = torch.zeros(2, dtype=torch.int64, device=self.dev)
        self.hold_s = FIRST_HOLD_S
        audit_clock.warm(self.dev)
        flags = slots.arena.buf[slots.flags:]
        flags.zero_()  # before the candidate hears of the audit: no flag is raised yet
        torch.cuda.synchronize(self.dev)
        self.go, self.done = slots.flag(0), slots.flag(1)
        try:
            memops.wait(self.stream, self.go, 0)  # a wait that holds nothing: the driver offers them
        except memops.MemopsUnavailable as exc:
            from solbench.evaluate.audit import Unaudited

            raise Unaudited(str(exc)) from None

    def _bracket(self, work) -> float:
        """The trusted stream's stamps around ``work()`` alone, in ms."""
        torch = self.torch
        with torch.cuda.stream(self.stream):
            audit_clock.stamp(self.stamps, 0)
            work()
            audit_clock.stamp(self.stamps, 1)
        self.stream.synchronize()
        return audit_clock.spans_ms(self.stamps)[0]

    def own_ms(self, probe: list[Any]) -> float:
        """The trusted side's own work inside a call's bracket, timed here alone: the copies of the inputs into the
        slot and the sentinel fill (after the first stamp, so that the inputs exist nowhere before the clock
        starts), and where the candidate returns its outputs instead of writing them, their copy into the slot."""
        torch = self.torch
        self.stream.wait_stream(torch.cuda.current_stream(self.dev))
        own = statistics.median(self._bracket(lambda: self.slots.fill(0, probe)) for _ in range(OWN_REPS))
        if self.sub.subject.get("dps", True) or not self.slots.layout.outputs:
            return own
        blocks = self.slots.layout.outputs

        def store():
            for b in blocks:
                view(self.slots.arena.buf, slot_spec(b, 1)).copy_(view(self.slots.arena.buf, slot_spec(b, 0)))

        return own + statistics.median(self._bracket(store) for _ in range(OWN_REPS))

    def call(self, k: int, s: int, inputs: list[Any], values: list[Any]):
        """Audit one call: (outputs, inputs after, bracket in ms or None when not counted)."""
        from solbench.evaluate.audit import _call

        torch = self.torch
        flusher = self.sub.ctx.flusher
        hold_s = self.hold_s
        self.stream.wait_stream(torch.cuda.current_stream(self.dev))  # the inputs were drawn there
        t_hold = time.perf_counter()
        with torch.cuda.stream(self.stream):
            audit_clock.hold(hold_s)
            flusher()
            audit_clock.stamp(self.stamps, 0)
            self.slots.fill(s, inputs)
        memops.write(self.stream, self.go, k + 1)
        _call(self.sub, k, s)
        host_s = time.perf_counter() - t_hold
        memops.wait(self.stream, self.done, k + 1)
        with torch.cuda.stream(self.stream):
            audit_clock.stamp(self.stamps, 1)
            outs, after = self.slots.take(s, values)
        self._settle(k)
        self.hold_s = min(MAX_HOLD_S, max(MIN_HOLD_S, self.hold_s if host_s < hold_s else 0.0, 2 * host_s + 1e-4))
        if host_s >= hold_s:
            return outs, after, None  # the candidate's launches may have come after the go flag: not counted
        return outs, after, audit_clock.spans_ms(self.stamps)[0]

    def _settle(self, k: int) -> None:
        """Wait for the call's bracket to end, within the candidate's time left. A candidate that answered ``ok``
        but never raised its ``done`` flag would hold the trusted stream for ever: past the limit the trusted
        side raises the flag itself, from a stream of its own, and the call is not audited."""
        torch = self.torch
        end = torch.cuda.Event()
        end.record(self.stream)
        deadline = time.monotonic() + max(1.0, self.sub._left_s())
        pause = 1e-5
        while not end.query():
            if time.monotonic() > deadline:
                rescue = torch.cuda.Stream(self.dev)
                memops.write(rescue, self.done, k + 1)
                self.stream.synchronize()
                from solbench.evaluate.audit import Unaudited

                raise Unaudited("an audited call did not end within the candidate's time limit")
            time.sleep(pause)
            pause = min(2 * pause, 1e-3)

    def finish(self, audit, warm: int) -> None:
        pass
