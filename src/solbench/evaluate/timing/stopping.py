"""When to stop timing: the trusted side's plan of a workload's timing rounds, and its stopping rule.

A subject's timing is a series of rounds (``rounds.Round``). The first starts with the warm-up calls and, on
the GPU, the wall-time calls; then held samples follow, round after round, until the median's 95% interval is
within the target, the sample cap is reached or the budget (time spent in rounds after the first) is spent,
once there are ``BUDGET_FLOOR`` samples. Each round holds at most ``capacity`` calls: for a candidate, the slots of its ring of fresh inputs (``ring``). The rule runs
on the trusted side for every subject, so a candidate cannot steer where its timing ends. ``time_cuda`` and
``time_cpu`` time a trusted subject (a baseline) by it, in the trusted worker's own process.
"""

from __future__ import annotations

import itertools
import time
from typing import Callable

from solbench.evaluate.timing.rounds import (Call, Flusher, Hold, Round, Timing, TimingConfig, clock_snapshot,
                                             round_cpu, round_cuda, time_graph)
from solbench.evaluate.timing.stats import converged, summarize

RunRound = Callable[[list[str]], Round]
#: samples a timing gets even past its budget: a median of three stands against one outlier, where a ring of one
#: slot (a workload of gigabytes) pays a round per call and its warm-up and wall calls alone can spend the budget
BUDGET_FLOOR = 3


class Plan:
    """The rounds of one timing: the prefix (warm-up, wall calls), then held samples until the stopping rule, the
    sample cap or the budget. A round costs a fixed part (the ring's fill, the exchange, the re-checks) and a part
    per call: both are fitted from the rounds so far (``pace``), so that the next round spends what the budget has
    left in one round where the ring holds it, and no round is begun that the budget cannot pay a batch of."""

    def __init__(self, cfg: TimingConfig, cuda: bool, capacity: int):
        self.cfg = cfg
        self.cuda = cuda
        self.capacity = max(1, int(capacity))
        self.rel = cfg.rel_target if cuda else cfg.cpu_rel_target
        self.min_samples = cfg.min_samples if cuda else cfg.cpu_min_samples
        self.max_samples = cfg.max_samples if cuda else cfg.cpu_max_samples
        self.budget_s = cfg.budget_s if cuda else cfg.cpu_budget_s
        warm = max(1, cfg.warmup_calls) if cuda else 1
        self.prefix = ["warm"] * warm + (["wall"] * cfg.wall_calls if cuda else [])
        self.costs: list[tuple[int, float]] = []  # (calls, seconds) of each round counted against the budget
        self.first: tuple[int, float] | None = None  # the first round's (calls, seconds): not counted

    @property
    def spent_s(self) -> float:
        return sum(t for _, t in self.costs)

    def record(self, calls: int, seconds: float) -> None:
        """A round's calls and time: the first's apart (its warm-up calls compile), every later one counted
        against the budget."""
        if self.first is None:
            self.first = (calls, seconds)
        else:
            self.costs.append((calls, seconds))

    def pace(self) -> tuple[float, float] | None:
        """(seconds per round, seconds per call) of the counted rounds: a least-squares line through them where
        their sizes differ, else all of a round's time per call (no fixed part: the next round is planned no
        larger than that pace allows). Before any, the first round's time per call, its compiles included (a
        pace no later round is slower than), asked to fill half the budget; None before that."""
        if not self.costs:
            if self.first is None:
                return None
            calls, seconds = self.first
            return 0.0, 2 * seconds / max(1, calls)
        n = len(self.costs)
        mx = sum(c for c, _ in self.costs) / n
        my = self.spent_s / n
        sxx = sum((c - mx) ** 2 for c, _ in self.costs)
        if sxx > 0:
            per_call = sum((c - mx) * (t - my) for c, t in self.costs) / sxx
            fixed = my - per_call * mx
            if per_call > 0 and fixed >= 0:
                return fixed, per_call
        return 0.0, my / mx

    def next(self, timing: Timing) -> list[str] | None:
        """The next round's call kinds, or None when the timing is done."""
        have = len(timing.samples_ms)
        pace = self.pace()
        left = self.budget_s - self.spent_s
        if not self.prefix:
            if have >= self.max_samples or (have >= min(BUDGET_FLOOR, self.min_samples) and left <= 0):
                return None
            if converged(timing.samples_ms, self.rel, self.min_samples):
                return None
            if have >= self.min_samples and self.costs and left < pace[0] + pace[1] * self.cfg.batch:
                return None  # what is left of the budget would not pay for a batch
        kinds = self.prefix[:self.capacity]
        self.prefix = self.prefix[len(kinds):]
        room = self.capacity - len(kinds)
        if self.prefix or room <= 0:
            return kinds
        if have < self.min_samples:
            n = self.min_samples - have
        else:  # what the budget left allows at the pace of the rounds so far, a batch at least
            n = max(self.cfg.batch, int((left - pace[0]) / pace[1]) if pace and pace[1] > 0 else 0)
        n = max(1, min(n, room, self.max_samples - have))
        return kinds + ["held"] * n


def measure(run: RunRound, cfg: TimingConfig, cuda: bool, capacity: int,
            graph: Callable[[], float | None] | None = None, want_graph: bool | None = None) -> Timing:
    """Time a subject in rounds until the plan says stop; then, on the GPU, a CUDA-graph time for launch-bound
    calls (short, or bimodal because the host enqueues slower than the GPU runs) where ``graph`` is given."""
    plan = Plan(cfg, cuda, capacity)
    timing = Timing(samples_ms=[], method="cuda_events" if cuda else "wall_clock")
    while True:
        kinds = plan.next(timing)
        if kinds is None:
            break
        t0 = time.perf_counter()
        r = run(kinds)
        took = time.perf_counter() - t0
        timing.add(r)
        timing.calls += len(kinds)
        plan.record(len(kinds), took)
    timing.settle_clock()
    s = summarize(timing.samples_ms)
    launch_bound = s is not None and (s.median < cfg.graph_below_ms or s.iqr > 0.1 * s.median)
    if cuda and graph is not None and (want_graph or (want_graph is None and launch_bound)):
        try:
            timing.graph_ms = graph()
        except Exception as exc:  # not every solution can be captured; that is not a failure
            timing.graph_error = f"{type(exc).__name__}: {str(exc)[:200]}"
    return timing


def time_cuda(call: Callable[[int], object], n_sets: int, flusher: Flusher, cfg: TimingConfig,
              graph: bool | None = None, device_index: int = 0) -> Timing:
    """Time a trusted callable on the GPU, ``call(i)`` running it on input set ``i % n_sets``: rounds until the
    stopping rule (``measure``) ends them, NVML clock readings around them, a graph time where it applies."""
    snap = clock_snapshot(device_index)
    hold = Hold(cfg, (snap or {}).get("max_sm_clock_mhz"))
    one = _cycling(call, n_sets)
    timing = measure(lambda kinds: round_cuda(one, kinds, flusher, cfg, hold), cfg, True, cfg.max_samples,
                     graph=lambda: time_graph(lambda: call(0), flusher, cfg, (snap or {}).get("max_sm_clock_mhz")),
                     want_graph=graph)
    end = clock_snapshot(device_index)
    timing.clocks = [c for c in (snap, end) if c]
    return timing


def time_cpu(call: Callable[[int], object], n_sets: int, cfg: TimingConfig) -> Timing:
    """Time a trusted callable on the CPU (see ``time_cuda``)."""
    one = _cycling(call, n_sets)
    return measure(lambda kinds: round_cpu(one, kinds, cfg), cfg, False, cfg.cpu_max_samples)


def _cycling(call: Callable[[int], object], n_sets: int) -> Call:
    """A round's call k as ``call`` on the next of ``n_sets`` input sets, in turn across rounds."""
    counter = itertools.count(1)
    return lambda _k: call(next(counter) % n_sets)
