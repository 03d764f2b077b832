"""Measurement mechanics: how one call is timed. Statistics and reporting live elsewhere.

GPU protocol, per sample: hold the stream with a spin kernel while the host
enqueues the rest (so a host-bound launch does not stretch the interval, as
nvbench's blocking kernel does), read-flush a buffer of 2.5x the last-level
cache (a read evicts dirty lines, so no write-back lands inside the timed
kernel), record the start event queued right behind the flush with no host
synchronisation, call, record the end event. Samples are enqueued in batches and collected until
the median's 95% interval is within ``rel_target`` or the budget is spent.
Work on other streams is caught by comparing event time with synchronised
wall time. CPU protocol: wall-clock time around each call.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from solbench.evaluate.stats import converged, summarize


@dataclass
class TimingConfig:
    budget_s: float = 0.12  # per workload, after warm-up
    rel_target: float = 0.005  # half-width of the median's 95% CI, relative
    min_samples: int = 10
    max_samples: int = 2000
    warmup_calls: int = 2
    batch: int = 10
    cpu_budget_s: float = 0.2
    graph_below_ms: float = 0.2  # also time a CUDA graph when the median is below this, or the samples are noisy
    #: hold the stream with a spin kernel before each sample, long enough for the host to enqueue the whole
    #: call, so the events time the device alone even for host-bound launches (as nvbench's blocking kernel
    #: does). On the H200 it took run-to-run agreement from 45/66 to 56/57 workloads within 1%
    #: (docs/PERFORMANCE.md). Host work that depends on the inputs cannot hide in the hold: reading them back
    #: waits for the stream, and synchronised wall time is compared with event time.
    hold: bool = True
    max_hold_s: float = 0.02  # a call whose host side takes longer than this is timed with its host time


@dataclass
class Timing:
    samples_ms: list[float]
    wall_ms: list[float] = field(default_factory=list)
    graph_ms: float | None = None
    graph_error: str | None = None
    clocks: list[dict] = field(default_factory=list)
    method: str = "cuda_events"
    #: per sample, how long work on other streams ran past the end event (only with a ``tails`` hook)
    unjoined_ms: list[float] = field(default_factory=list)
    #: event time of each wall-time call, taken without the hold: what the events see of a call whose launches
    #: the host paces, to compare with its synchronised wall time
    wall_event_ms: list[float] = field(default_factory=list)

    @property
    def median_ms(self) -> float | None:
        s = summarize(self.samples_ms)
        return s.median if s else None


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
    except ImportError:
        return None
    try:
        return gpu_clock_snapshot(index)
    except Exception:
        return None


Hook = Callable[[int], None]


def _nothing(k: int, *rest) -> None:
    return None


def time_cuda(call: Callable[[int], object], n_sets: int, flusher: Flusher, cfg: TimingConfig,
              graph: bool | None = None, device_index: int = 0, prepare: Hook | None = None,
              keep: Callable[[int, object], None] | None = None,
              on_last: Callable[[object], None] | None = None,
              tails: Callable[[], list] | None = None) -> Timing:
    """``prepare(k)`` runs before the flush of call k (outside the timed interval), ``keep(k, result)`` after
    its end event, ``on_last(result)`` after the last call (before any graph capture reuses the buffers).
    ``tails()``, called right after each call and before its end event, records one event on each other stream
    the subject created: one that completes after the end event shows work the call left running there, and the
    sample then runs to it."""
    prepare = prepare or _nothing
    keep = keep or _nothing
    sync = torch.cuda.synchronize
    host_s = 0.0  # how long the host took to enqueue the last warm-up call (the first may still compile)
    for i in range(cfg.warmup_calls):
        prepare(-1 - i)
        t0 = time.perf_counter()
        call(i % n_sets)
        host_s = time.perf_counter() - t0
        sync()
    snapshot = clock_snapshot(device_index)
    clocks = [snapshot] if snapshot else []
    # the spin kernel counts cycles of the SM clock: at NVML's maximum (else 3 GHz, above any GPU's), the cycles
    # last at least as long as the seconds they stand for
    max_mhz = (snapshot or {}).get("max_sm_clock_mhz")
    clock_hz = (float(max_mhz) * 1e6 if max_mhz else 3.0e9) if cfg.hold else 0.0

    def hold_for(host: float) -> int:
        return int(min(1.5 * host + 50e-6, cfg.max_hold_s) * clock_hz)

    hold_cycles = hold_for(host_s)
    samples: list[float] = []
    unjoined: list[float] = []
    started = time.perf_counter()
    k = 0
    while True:
        events = []
        hosts = []
        for _ in range(cfg.batch):
            prepare(k)
            if hold_cycles:
                torch.cuda._sleep(hold_cycles)
            flusher()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            t0 = time.perf_counter()
            result = call(k % n_sets)
            hosts.append(time.perf_counter() - t0)
            marks = tails() if tails is not None else []
            end.record()
            keep(k, result)
            events.append((start, end, marks))
            k += 1
        sync()
        # a warm-up call that still compiled can leave the hold far too long: let a batch's median enqueue time
        # shorten it, never lengthen it (a call that blocks, on .item() or a full launch queue, also times its
        # wait on the hold, which would ratchet the hold up to its cap)
        hold_cycles = min(hold_cycles, hold_for(sorted(hosts)[len(hosts) // 2]))
        for s, e, marks in events:
            t_end = s.elapsed_time(e)
            # an idle stream's mark completes before the end event, a busy one's after it: the call's time runs
            # to whichever came last, so work left running on the solution's own streams is timed either way
            t_tail = max([t_end] + [s.elapsed_time(m) for m in marks])
            samples.append(t_tail)
            if tails is not None:
                unjoined.append(t_tail - t_end)
        if converged(samples, cfg.rel_target, cfg.min_samples) or len(samples) >= cfg.max_samples:
            break
        if time.perf_counter() - started > cfg.budget_s:
            break
    snap = clock_snapshot(device_index)
    if snap:
        clocks.append(snap)
    # synchronised wall time, with event time of the same calls (no hold: the GPU waits for the host's launches,
    # as the wall clock does): catches work the events did not see (streams the tails do not know, host threads)
    wall: list[float] = []
    wall_events: list[float] = []
    for _ in range(3):
        prepare(k)
        flusher()
        sync()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        start.record()
        result = call(k % n_sets)
        marks = tails() if tails is not None else []
        end.record()
        sync()
        wall.append((time.perf_counter() - t0) * 1e3)
        wall_events.append(max([start.elapsed_time(end)] + [start.elapsed_time(m) for m in marks]))
        keep(k, result)
        k += 1
    if on_last:
        on_last(result)
    timing = Timing(samples_ms=samples, wall_ms=wall, clocks=clocks, unjoined_ms=unjoined, wall_event_ms=wall_events)
    summary = summarize(samples)
    # launch-bound calls (short, or bimodal because the host enqueues slower than the GPU runs) get a graph time
    launch_bound = summary is not None and (summary.median < cfg.graph_below_ms or summary.iqr > 0.1 * summary.median)
    if graph or (graph is None and launch_bound):
        try:
            timing.graph_ms = _time_graph(call, flusher, cfg)
        except Exception as exc:  # not every solution can be captured; that is not a failure
            timing.graph_error = f"{type(exc).__name__}: {str(exc)[:200]}"
            sync()
    return timing


def _time_graph(call: Callable[[int], object], flusher: Flusher, cfg: TimingConfig) -> float | None:
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        call(0)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        call(0)
    torch.cuda.synchronize()
    samples: list[float] = []
    started = time.perf_counter()
    while time.perf_counter() - started < cfg.budget_s / 2 and len(samples) < 200:
        events = []
        for _ in range(cfg.batch):
            flusher()
            s = torch.cuda.Event(enable_timing=True)
            e = torch.cuda.Event(enable_timing=True)
            s.record()
            g.replay()
            e.record()
            events.append((s, e))
        torch.cuda.synchronize()
        samples.extend(s.elapsed_time(e) for s, e in events)
        if converged(samples, cfg.rel_target, cfg.min_samples):
            break
    summary = summarize(samples)
    return summary.median if summary else None


def time_cpu(call: Callable[[int], object], n_sets: int, cfg: TimingConfig, prepare: Hook | None = None,
             keep: Callable[[int, object], None] | None = None,
             on_last: Callable[[object], None] | None = None) -> Timing:
    prepare = prepare or _nothing
    keep = keep or _nothing
    prepare(-1)
    call(0)
    samples: list[float] = []
    started = time.perf_counter()
    k = 0
    while len(samples) < 3 or (time.perf_counter() - started < cfg.cpu_budget_s and len(samples) < 200
                               and not converged(samples, 0.02, 5)):
        prepare(k)
        t0 = time.perf_counter()
        result = call(k % n_sets)
        samples.append((time.perf_counter() - t0) * 1e3)
        keep(k, result)
        k += 1
    if on_last:
        on_last(result)
    return Timing(samples_ms=samples, method="wall_clock")
