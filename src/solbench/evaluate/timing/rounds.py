"""Measurement mechanics: how the calls of one timing round are timed. What to time, when to stop and what the
samples mean are decided elsewhere (``stopping`` here for the trusted side's own subjects, ``cross_check`` for a
candidate, ``stats`` for the statistics).

A round is a list of call kinds: ``warm`` (run, not timed: compilation, caches, the hold's calibration),
``wall`` (timed with the stream not held, by events and by synchronised wall time) and ``held`` (a sample).

GPU protocol, per held sample: hold the stream with a spin kernel while the host enqueues the rest (so a
host-bound launch does not stretch the interval, as nvbench's blocking kernel does), read-flush a buffer of
2.5x the last-level cache (a read evicts dirty lines, so no write-back lands inside the timed kernel), record
the start event queued right behind the flush with no host synchronisation, call, check the result's type,
mark the solution's other streams, record the end event. Samples are enqueued in batches. Work on other
streams is caught by the marks and by comparing event time with synchronised wall time. CPU protocol:
wall-clock time around each call.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from solbench.evaluate.timing.cupti import NO_WINDOWS, RoundClock
from solbench.evaluate.timing.stats import converged, summarize


@dataclass
class TimingConfig:
    budget_s: float = 0.12  # per workload, after warm-up: time spent in timing rounds
    rel_target: float = 0.005  # half-width of the median's 95% CI, relative
    min_samples: int = 10
    max_samples: int = 2000
    warmup_calls: int = 2
    batch: int = 10
    cpu_budget_s: float = 0.2
    cpu_min_samples: int = 5
    cpu_rel_target: float = 0.02
    cpu_max_samples: int = 200
    graph_below_ms: float = 0.2  # also time a CUDA graph when the median is below this, or the samples are noisy
    #: the graph time is informational (``time_graph``): its replays stop at this budget or at this precision (the
    #: median's 95% interval, relative), not at the timing's
    graph_budget_s: float = 0.03
    graph_rel_target: float = 0.02
    #: hold the stream with a spin kernel before each sample, long enough for the host to enqueue the whole
    #: call and the harness's launches around it (``Hold``), so the events time the device alone even for
    #: host-bound launches (as nvbench's blocking kernel does). On the H200 it took run-to-run agreement from
    #: 45/66 to 56/57 workloads within 1% (docs/PERFORMANCE.md). Host work that depends on the inputs cannot
    #: hide in the hold: reading them back waits for the stream, and synchronised wall time is compared with
    #: event time.
    hold: bool = True
    max_hold_s: float = 0.02  # a call whose host side takes longer than this is timed with its host time
    wall_calls: int = 3
    #: what a held sample is: "cupti", the span of the call's own device records (``cupti``), or
    #: "cuda_events", the interval between events queued before and after it (about 2 us more on the H200); a
    #: round where CUPTI cannot be used or its records cannot be placed keeps its event times
    clock: str = "cupti"


@dataclass
class Round:
    """What one round measured."""

    samples_ms: list[float] = field(default_factory=list)  # one per held call, in order
    wall_ms: list[float] = field(default_factory=list)  # one per wall call: synchronised wall time
    #: event time of each wall call, taken without the hold: what the events see of a call whose launches the
    #: host paces, to compare with its synchronised wall time
    wall_event_ms: list[float] = field(default_factory=list)
    #: per held sample, how long work on other streams ran past the end event (only with a ``tails`` hook)
    unjoined_ms: list[float] = field(default_factory=list)
    #: with the CUPTI clock: the held samples' event intervals (``samples_ms`` are then the kernel spans)
    event_ms: list[float] = field(default_factory=list)
    method: str = "cuda_events"
    clock_note: str | None = None  # why a round meant for CUPTI kept its event times
    stray: int = 0  # device records of the solution's launched outside its calls (counted in their time)
    event_gaps: int = 0  # CUPTI samples whose event interval holds idle time beyond the events' own overhead


@dataclass
class Timing:
    samples_ms: list[float]
    wall_ms: list[float] = field(default_factory=list)
    graph_ms: float | None = None
    graph_error: str | None = None
    clocks: list[dict] = field(default_factory=list)
    method: str = "cuda_events"
    unjoined_ms: list[float] = field(default_factory=list)
    wall_event_ms: list[float] = field(default_factory=list)
    calls: int = 0  # every call the timing made, warm-up included
    event_ms: list[float] = field(default_factory=list)
    clock_notes: list[str] = field(default_factory=list)
    stray: int = 0
    event_gaps: int = 0
    rounds_by_clock: dict[str, int] = field(default_factory=dict)

    @property
    def median_ms(self) -> float | None:
        s = summarize(self.samples_ms)
        return s.median if s else None

    def add(self, r: Round) -> None:
        self.samples_ms += r.samples_ms
        self.wall_ms += r.wall_ms
        self.wall_event_ms += r.wall_event_ms
        self.unjoined_ms += r.unjoined_ms
        if r.method != "wall_clock":  # each held sample's event interval (a CUPTI round's own, else its samples)
            self.event_ms += r.event_ms or r.samples_ms
        self.stray += r.stray
        self.event_gaps += r.event_gaps
        if r.samples_ms:
            self.rounds_by_clock[r.method] = self.rounds_by_clock.get(r.method, 0) + 1
        if r.clock_note:
            self.clock_notes.append(r.clock_note)

    def settle_clock(self) -> None:
        """One clock for every sample: the kernel spans where every round had them, else the event times."""
        clocks = set(self.rounds_by_clock)
        if clocks in ({"cupti"}, {"wall_clock"}):
            self.method = clocks.pop()
        elif clocks:
            self.method = "cuda_events"
            self.samples_ms = list(self.event_ms)


class Flusher:
    """Evicts the last-level cache by reading a buffer several times its size."""

    def __init__(self, llc_bytes: int, device: torch.device):
        n = max(int(llc_bytes * 2.5), 64 << 20) // 4
        self.buf = torch.randn(n, device=device, dtype=torch.float32)
        self.out = torch.empty((), device=device, dtype=torch.float32)

    def __call__(self) -> None:
        torch.sum(self.buf, dim=0, out=self.out)


def clock_snapshot(index: int) -> dict | None:
    """One NVML reading of CUDA device ``index`` (hardware.telemetry), or None where NVML cannot give one."""
    try:
        from solbench.hardware.telemetry import gpu_clock_snapshot

        return gpu_clock_snapshot(index)
    except Exception:
        return None


class Hold:
    """The spin-kernel hold of one workload's timing, kept across its rounds. The spin kernel counts cycles of the
    SM clock: at NVML's maximum (else 3 GHz, above any GPU's) the cycles last at least as long as the seconds
    they stand for. It covers what the host enqueues between the spin kernel and a sample's end event: the call
    (``call_s``: calibrated on the last warm-up call, then only shortened) and the harness's own launches around
    it, the flush, the events and the stream marks (``own_s``: the least of every batch, either way). Where the
    hold covered only the call, the end event of a launch-bound call waited for the host: on an H100 host a
    1.7 us kernel read 13.4 us of events (docs/PERFORMANCE.md)."""

    def __init__(self, cfg: TimingConfig, max_sm_clock_mhz: float | None):
        self.cfg = cfg
        self.clock_hz = (float(max_sm_clock_mhz) * 1e6 if max_sm_clock_mhz else 3.0e9) if cfg.hold else 0.0
        self.call_s: float | None = None  # None until calibrated: no hold
        self.own_s = 0.0

    @property
    def cycles(self) -> int:
        if self.call_s is None:
            return 0
        return int(min(1.5 * (self.call_s + self.own_s) + 50e-6, self.cfg.max_hold_s) * self.clock_hz)

    def calibrate(self, host_s: float) -> None:
        self.call_s = host_s

    def shorten(self, hosts: list[float], owns: list[float] | None = None) -> None:
        # a warm-up call that still compiled can leave the hold far too long: a batch's median enqueue time
        # shortens it, never lengthens it (a call that blocks, on .item() or a full launch queue, also times its
        # wait on the hold, which would ratchet the hold up to its cap). The harness's own launches set their share
        # either way, by the batch's least: one of them can also wait, on a launch queue the solution filled, or
        # pause for the host's garbage collector, and either only adds time.
        if self.call_s is not None and hosts:
            self.call_s = min(self.call_s, sorted(hosts)[len(hosts) // 2])
        if owns:
            self.own_s = min(owns)


Call = Callable[[int], object]
Check = Callable[[object], None]  # raises when a result must not be touched further
After = Callable[[int, object], None]


def _nothing(*args) -> None:
    return None


def round_cuda(call: Call, kinds: list[str], flusher: Flusher, cfg: TimingConfig, hold: Hold,
               tails: Callable[[], list] | None = None, check: Check | None = None,
               after: After | None = None, prepare: Callable[[int], None] | None = None) -> Round:
    """Run one round: ``prepare(k)`` readies call k's arguments before its hold and flush, ``call(k)`` runs the
    round's call k, ``check(result)`` runs before its end event (so a result that would compute later, when it
    is touched, is refused while the timer still runs), ``after(k, result)`` after its end event. ``tails()``,
    called right after each call and before its end event, records one event on each other stream the subject
    created: one that completes after the end event shows work the call left running there, and the sample then
    runs to it."""
    check = check or _nothing
    after = after or _nothing
    prepare = prepare or _nothing
    out = Round()
    clock = RoundClock(cfg.clock == "cupti") if "held" in kinds else None
    try:
        _run_round(call, kinds, flusher, cfg, hold, tails, check, after, prepare, out, clock)
    except BaseException:
        if clock is not None:
            clock.abort()
        raise
    if clock is not None:
        clock.finish(out)
    return out


def _run_round(call, kinds, flusher, cfg, hold, tails, check, after, prepare, out: Round, clock) -> None:
    sync = torch.cuda.synchronize
    k = 0
    while k < len(kinds):
        kind = kinds[k]
        if kind == "warm":
            prepare(k)
            t0 = time.perf_counter()
            result = call(k)
            host_s = time.perf_counter() - t0
            check(result)
            sync()
            hold.calibrate(host_s)  # the last warm-up call's enqueue time (the first may still compile)
            after(k, result)
            k += 1
        elif kind == "wall":
            # synchronised wall time, with event time of the same call (no hold: the GPU waits for the host's
            # launches, as the wall clock does): catches work the events did not see
            prepare(k)
            flusher()
            sync()
            t_own = time.perf_counter()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0 = time.perf_counter()
            start.record()
            result = call(k)
            check(result)
            host_s = time.perf_counter() - t0
            marks = tails() if tails is not None else []
            end.record()
            hold.shorten([], [time.perf_counter() - t_own - host_s])  # the first held batch's share of the harness
            sync()
            out.wall_ms.append((time.perf_counter() - t0) * 1e3)
            out.wall_event_ms.append(max([start.elapsed_time(end)] + [start.elapsed_time(m) for m in marks]))
            after(k, result)
            k += 1
        else:
            batch = []
            win = clock.start() if clock is not None else NO_WINDOWS
            while k < len(kinds) and kinds[k] == "held" and len(batch) < cfg.batch:
                prepare(k)
                t_own = time.perf_counter()
                # with the CUPTI clock every held call gets a spin kernel, however short: it marks the call
                cycles = hold.cycles or (0 if win is NO_WINDOWS else 1)
                if cycles:
                    torch.cuda._sleep(cycles)
                flusher()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                win.calling()
                t0 = time.perf_counter()
                result = call(k)
                check(result)
                host = time.perf_counter() - t0
                marks = tails() if tails is not None else []
                win.called()
                end.record()
                own = time.perf_counter() - t_own - host
                after(k, result)
                batch.append((start, end, marks, host, own))
                k += 1
            sync()
            hold.shorten([b[3] for b in batch], [b[4] for b in batch])
            for s, e, marks, _, _ in batch:
                t_end = s.elapsed_time(e)
                # an idle stream's mark completes before the end event, a busy one's after it: the call's time
                # runs to whichever came last, so work left running on the solution's own streams is timed
                t_tail = max([t_end] + [s.elapsed_time(m) for m in marks])
                out.samples_ms.append(t_tail)
                if tails is not None:
                    out.unjoined_ms.append(t_tail - t_end)


def round_cpu(call: Call, kinds: list[str], cfg: TimingConfig, check: Check | None = None,
              after: After | None = None, prepare: Callable[[int], None] | None = None) -> Round:
    check = check or _nothing
    after = after or _nothing
    prepare = prepare or _nothing
    out = Round(method="wall_clock")
    for k, kind in enumerate(kinds):
        prepare(k)
        t0 = time.perf_counter()
        result = call(k)
        check(result)
        t = (time.perf_counter() - t0) * 1e3
        if kind != "warm":
            out.samples_ms.append(t)
        after(k, result)
    return out


def time_graph(call: Callable[[], object], flusher: Flusher, cfg: TimingConfig,
               max_sm_clock_mhz: float | None = None) -> float | None:
    """The median time of one call captured in a CUDA graph and replayed (launch overhead left out), an
    informational figure: replays until ``cfg.graph_rel_target`` or ``cfg.graph_budget_s``. Each replay is held
    like a timed call (``Hold``): its events time the device, not a host slower than the replay."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        call()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        call()
    torch.cuda.synchronize()
    hold = Hold(cfg, max_sm_clock_mhz)
    t0 = time.perf_counter()
    g.replay()
    hold.calibrate(time.perf_counter() - t0)
    torch.cuda.synchronize()
    samples: list[float] = []
    started = time.perf_counter()
    while time.perf_counter() - started < cfg.graph_budget_s and len(samples) < 200:
        events, hosts, owns = [], [], []
        for _ in range(cfg.batch):
            t_own = time.perf_counter()
            if hold.cycles:
                torch.cuda._sleep(hold.cycles)
            flusher()
            s = torch.cuda.Event(enable_timing=True)
            e = torch.cuda.Event(enable_timing=True)
            s.record()
            t0 = time.perf_counter()
            g.replay()
            hosts.append(time.perf_counter() - t0)
            e.record()
            owns.append(time.perf_counter() - t_own - hosts[-1])
            events.append((s, e))
        torch.cuda.synchronize()
        hold.shorten(hosts, owns)
        samples.extend(s.elapsed_time(e) for s, e in events)
        if converged(samples, cfg.graph_rel_target, cfg.min_samples):
            break
    summary = summarize(samples)
    return summary.median if summary else None
