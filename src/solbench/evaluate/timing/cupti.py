"""Kernel time from CUPTI activity records: what the device itself ran for each timed call, on every stream.

CUDA events around a call add the launch gap before its first kernel and the event's own latency after its last
(about 2 us on the H200, docs/PERFORMANCE.md), which is most of a decode-size kernel's time. CUPTI's activity
records time the kernels themselves. The session is torch's kineto (the autograd profiler with device activity
only: ``integrity.language.profiler_session``), started around a round's held calls.

Per held call the harness notes, on the host's clock (``time.time_ns``, the clock kineto stamps its host-side
records with), the window in which each call runs (``Windows``). Then:

- the harness's own records are found by their place on the timing stream: each held call is preceded there by
  one spin kernel (the hold) and the flush (a memset and a reduction right after it), so the round's n spin
  kernels mark its n calls; copies on that stream are the harness's (the inputs into the solution's buffers,
  the output into its slot) unless launched inside a call's window. Every other record is the solution's work,
  whoever launched it and whenever: deferred launches count too (``stray``);
- a record of the solution's belongs to the last call whose flush had ended on the device when it started, so
  work left running on another stream, or launched late, is timed with the call it came from (or the next);
- a call's time is the span from the first start to the last end of its records.

A call whose records cannot be placed (no flush seen before it, no record of its own) has no kernel time; the
round then keeps its event times and says so (``KernelTimes.complete``).
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass, field
from typing import Any

#: names of the copies the harness makes around each call (inputs into the solution's buffers, its output out)
COPY_NAMES = ("Memcpy", "copy_kernel", "elementwise_kernel")
LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaMemsetAsync", "cudaMemcpyAsync", "cuMemsetD", "cuMemcpy",
            "cudaLaunchKernelExC", "cuLaunchKernelEx", "cudaGraphLaunch", "cuGraphLaunch", "cudaMemset",
            "cudaMemcpy", "cudaLaunchCooperativeKernel")


#: how far a call's event interval may exceed its kernel span before the sample counts as a wide gap: the launch
#: gap and the events' own latency (about 2.3 us at decode sizes on the H200, 1.2 us at 57 us). A wider gap is
#: device idle inside the event window (the host made the device wait inside the call, or the hold ran out
#: before the harness recorded the end event): the span, not the interval, is the kernel's time.
GAP_ABS_MS = 0.003
GAP_REL = 0.05


def wide_gaps(spans_ms: list[float], events_ms: list[float]) -> int:
    """How many samples' event intervals exceed their kernel spans by more than the events' own overhead.

    Informational: both numbers come from the candidate's process, so a forger would report them alike; a
    check between them would only catch a careless one, and it would misjudge honest calls whose event windows
    hold host time (measured: the in-place fused_add_rmsnorm at decode size, 2 us of kernel in 92 us of events)."""
    return sum(1 for s, e in zip(spans_ms, events_ms) if e - s > GAP_ABS_MS + GAP_REL * e)


@dataclass(frozen=True)
class Record:
    """One device activity record: ``start``/``end`` in ns on the device timeline as kineto reports it."""

    name: str
    start: int
    end: int
    correlation: int
    stream: int = 0


@dataclass
class KernelTimes:
    spans_ms: list[float | None]
    stray: int = 0  # records of the solution's launched outside its calls' windows (deferred work)

    @property
    def complete(self) -> bool:
        return bool(self.spans_ms) and all(s is not None for s in self.spans_ms)


@dataclass
class Windows:
    """Host-clock windows of one round's held calls, in order: from just before the solution's call to after the
    harness has checked its result ([c0, c1]). A launch inside one is that call's."""

    calls: list[tuple[int, int]] = field(default_factory=list)

    def calling(self) -> None:
        self._c0 = time.time_ns()

    def called(self) -> None:
        self.calls.append((self._c0, time.time_ns()))


class _Locator:
    """Which call's window holds a host time (the first that does), or None: by bisection where the windows follow
    one another, as calls noted in order on a clock that did not step back do, else by a scan."""

    def __init__(self, windows: list[tuple[int, int]]):
        self.windows = windows
        self.starts = [a for a, _ in windows]
        self.ordered = all(a <= b for a, b in windows) and all(b < c for (_, b), (c, _) in zip(windows, windows[1:]))

    def __call__(self, t: int) -> int | None:
        if self.ordered:
            i = bisect.bisect_right(self.starts, t) - 1
            return i if i >= 0 and t <= self.windows[i][1] else None
        for i, (a, b) in enumerate(self.windows):
            if a <= t <= b:
                return i
        return None


def spans(records: list[Record], launches: dict[int, int], windows: Windows) -> KernelTimes:
    """Each held call's kernel time (see the module's rules). ``launches`` maps a correlation id to the host time
    of the runtime or driver call that made it."""
    n = len(windows.calls)
    where = _Locator(windows.calls)
    harness, flush_end = _harness(records, launches, where, n)
    if flush_end is None:
        return KernelTimes(spans_ms=[None] * n)
    per_call: list[list[Record]] = [[] for _ in range(n)]
    stray = 0
    for r in records:
        if id(r) in harness:
            continue
        t = launches.get(r.correlation)
        if t is not None and where(t) is None:
            stray += 1
        k = bisect.bisect_right(flush_end, r.start) - 1  # the last call whose flush had ended (flush_end rises)
        if k < 0:  # before the first flush ended: a call's launch says whose it is, else the first call's
            k = (where(t) if t is not None else None) or 0
        per_call[k].append(r)
    out = [(max(r.end for r in rs) - min(r.start for r in rs)) / 1e6 if rs else None for rs in per_call]
    return KernelTimes(spans_ms=out, stray=stray)


def _harness(records: list[Record], launches: dict[int, int], where: _Locator,
             n: int) -> tuple[set[int], list[int] | None]:
    """The harness's own records and, per held call, when its flush ended; None where the round's records do
    not show one hold and one flush per call.

    Each held call is preceded, on the timing stream, by exactly one spin kernel (the hold) and the flush (a
    memset and a reduction right after it): the n spin kernels of that stream, in order, mark the n calls, and the
    first reduction after each is its flush. Copies (inputs into the solution's buffers before the hold, the
    output into its slot after the call) are the harness's unless they were launched inside a call's window."""
    spins = sorted((r for r in records if "spin_kernel" in r.name), key=lambda r: r.start)
    if not n or len(spins) != n or len({r.stream for r in spins}) != 1:
        return set(), None
    stream = spins[0].stream
    timeline = sorted((r for r in records if r.stream == stream), key=lambda r: r.start)
    starts = [r.start for r in timeline]
    harness: set[int] = {id(r) for r in spins}
    flush_end: list[int] = []
    for k, spin in enumerate(spins):  # the records after each spin kernel and before the next, found by bisection
        end = bisect.bisect_left(starts, spins[k + 1].start) if k + 1 < n else len(timeline)
        after = timeline[bisect.bisect_left(starts, spin.end):end]
        i = next((j for j, r in enumerate(after) if "reduce_kernel" in r.name), None)
        if i is None:
            return set(), None
        harness.add(id(after[i]))
        harness.update(id(r) for r in after[:i] if "Memset" in r.name)
        flush_end.append(after[i].end)
    for r in timeline:
        if id(r) in harness or not any(p in r.name for p in COPY_NAMES):
            continue
        t = launches.get(r.correlation)
        if t is None or where(t) is None:
            harness.add(id(r))
    return harness, flush_end


def from_kineto(events: Any) -> tuple[list[Record], dict[int, int]]:
    """The device records and the launch times of a kineto result's events (``prof.kineto_results.events()``)."""
    import torch

    cuda = torch.autograd.DeviceType.CUDA
    records: list[Record] = []
    launches: dict[int, int] = {}
    for e in events:
        name = str(e.name())
        if e.device_type() == cuda:
            if e.is_user_annotation():
                continue
            records.append(Record(name, int(e.start_ns()), int(e.end_ns()), int(e.correlation_id()),
                                  int(e.device_resource_id())))
        elif name.startswith(LAUNCHES):
            launches[int(e.correlation_id())] = int(e.start_ns())
    return records, launches


class Session:
    """A round's kineto session. ``open()`` returns False where CUPTI cannot be used here (the round keeps its event
    times); a profiler already on, or one the solution stopped, is tampering (``language.ProfilerTampered``)."""

    def __init__(self) -> None:
        self.prof = None
        self.windows = Windows()
        self.error: str | None = None

    def open(self) -> bool:
        from solbench.evaluate.integrity import language

        if language.profiler_running():
            raise language.ProfilerTampered("a profiler was already running in the solution's process")
        try:
            self.prof = language.profiler_session("cuda")
            self.prof.__enter__()
        except Exception as exc:
            self.prof, self.error = None, f"{type(exc).__name__}: {str(exc)[:200]}"
            return False
        return True

    def abort(self) -> None:
        """Stop the session without reading it (the round failed)."""
        prof, self.prof = self.prof, None
        if prof is not None:
            try:
                prof.__exit__(None, None, None)
            except Exception:
                pass

    def close(self) -> KernelTimes | None:
        from solbench.evaluate.integrity import language

        if self.prof is None:
            return None
        if not language.profiler_running():
            raise language.ProfilerTampered("the profiler was stopped during timing")
        prof, self.prof = self.prof, None
        prof.__exit__(None, None, None)
        records, launches = from_kineto(prof.kineto_results.events())
        return spans(records, launches, self.windows)


class _NoWindows:
    """The windows of a round timed by events alone: nothing to note."""

    def calling(self) -> None: ...

    def called(self) -> None: ...


NO_WINDOWS = _NoWindows()


class RoundClock:
    """A round's CUPTI clock (``cupti``): opened at its first held call, read at its end. Where CUPTI
    cannot be used the round keeps its event times and notes why."""

    def __init__(self, on: bool):
        self.on = on
        self.session = None
        self.note: str | None = None

    def start(self):
        if not self.on:
            return NO_WINDOWS
        if self.session is None:
            session = Session()
            if not session.open():
                self.on, self.note = False, f"CUPTI unavailable: {session.error}"
                return NO_WINDOWS
            self.session = session
        return self.session.windows

    def finish(self, out) -> None:
        """Put the round's kernel spans in ``out`` (a ``rounds.Round``), its event times beside them."""
        if self.session is None:
            out.clock_note = self.note
            return
        times = self.session.close()
        out.event_ms = list(out.samples_ms)
        if times is None or not times.complete or len(times.spans_ms) != len(out.samples_ms):
            placed = 0 if times is None else sum(s is not None for s in times.spans_ms)
            out.clock_note = f"CUPTI records placed for {placed} of {len(out.samples_ms)} calls"
            return
        out.samples_ms = [float(s) for s in times.spans_ms]
        out.method, out.stray, out.event_gaps = "cupti", times.stray, wide_gaps(out.samples_ms, out.event_ms)

    def abort(self) -> None:
        if self.session is not None:
            self.session.abort()
