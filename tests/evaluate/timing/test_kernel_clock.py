"""The CUPTI clock's placement of device records (evaluate.kernel_clock), on records laid out as the H200's kineto
reported them (benchmarks/probe_cupti.py): launches on the host's clock, device records on the device's."""

from hypothesis import given
from hypothesis import strategies as st

from solbench.evaluate.timing.cupti import KernelTimes, Record, Windows, spans, wide_gaps

US = 1000  # ns


def _round(calls, *, stray=None, missing_flush=None, side_late=None):
    """A round of held calls laid out in time: per call k the harness window (hold, flush) then the call.
    ``calls[k]`` lists (start_us, end_us) of the call's kernels on the device, relative to its flush's end."""
    w = Windows()
    records, launches = [], {}
    corr = iter(range(1, 10_000))
    host = 0
    device = 0
    for k, kernels in enumerate(calls):
        h0 = host
        host += 5 * US
        c_spin, c_flush = next(corr), next(corr)
        launches[c_spin], launches[c_flush] = h0 + US, h0 + 2 * US
        device = max(device, host) + 20 * US  # the hold
        if missing_flush != k:
            records.append(Record("at::cuda::spin_kernel(long)", device - 20 * US, device, c_spin))
            records.append(Record("void at::native::reduce_kernel<512, 1>", device, device + 40 * US, c_flush))
        flush_end = device + 40 * US
        c0 = host
        host += 10 * US
        for a, b in kernels:
            c = next(corr)
            launches[c] = c0 + US
            records.append(Record("triton_kernel", flush_end + a * US, flush_end + b * US, c))
        c1 = host
        w.calls.append((c0, c1))
        host += 3 * US
        c_copy = next(corr)
        launches[c_copy] = c1 + US
        end_k = flush_end + max([b for _, b in kernels] or [0]) * US
        records.append(Record("Memcpy DtoD (Device -> Device)", end_k + US, end_k + 2 * US, c_copy))
        device = end_k + 2 * US
        if stray == k:  # a launch made after the call returned (in the harness's after-window), a kernel's name
            c = next(corr)
            launches[c] = c1 + 2 * US
            records.append(Record("triton_deferred", end_k + 3 * US, end_k + 9 * US, c))
            device = end_k + 9 * US
    if side_late is not None:  # a side stream's kernel of call k that runs through the next call's hold
        k, (a, b) = side_late
        c = next(corr)
        launches[c] = w.calls[k][0] + 2 * US
        flush_end_k = [r for r in records if "reduce_kernel" in r.name][k].end
        records.append(Record("side_kernel", flush_end_k + a * US, flush_end_k + b * US, c, stream=13))
    return records, launches, w


def test_span_of_each_call_leaves_out_the_harness():
    records, launches, w = _round([[(1, 4)], [(1, 3), (4, 9)], [(2, 5)]])
    t = spans(records, launches, w)
    assert isinstance(t, KernelTimes) and t.complete
    assert t.spans_ms == [0.003, 0.008, 0.003]
    assert t.stray == 0


def test_deferred_work_is_counted_with_its_call():
    records, launches, w = _round([[(1, 4)], [(1, 3)]], stray=0)
    t = spans(records, launches, w)
    assert t.stray == 1
    assert t.spans_ms[0] > 0.003  # the deferred kernel's time is the call's (it ran before the next flush)
    assert t.spans_ms[1] == 0.002


def test_work_left_on_a_side_stream_past_the_next_hold_stays_with_its_call():
    records, launches, w = _round([[(1, 4)], [(1, 3)]], side_late=(0, (2, 50)))
    t = spans(records, launches, w)
    assert t.spans_ms[0] == 0.049  # from its first kernel to the side kernel's end
    assert t.spans_ms[1] == 0.002


def test_a_call_without_its_hold_and_flush_seen_leaves_the_round_to_events():
    records, launches, w = _round([[(1, 4)], [(1, 3)]], missing_flush=1)
    t = spans(records, launches, w)
    assert not t.complete


def test_a_call_with_no_device_record_has_no_span():
    records, launches, w = _round([[(1, 4)], []])
    assert spans(records, launches, w).spans_ms[1] is None


def test_harness_names_launched_by_the_solution_count_as_its_work():
    # a copy kernel launched inside the call's own window is the solution's, whatever its name
    records, launches, w = _round([[(1, 4)]])
    c = 9999
    launches[c] = w.calls[0][0] + 3 * US
    flush_end = [r for r in records if "reduce_kernel" in r.name][0].end
    records.append(Record("Memcpy DtoD (Device -> Device)", flush_end + 5 * US, flush_end + 30 * US, c))
    assert spans(records, launches, w).spans_ms == [0.029]


def test_wide_gaps_count_idle_time_inside_the_event_window():
    # 2.3 us under a 5.1 us event interval: the events' own overhead; 20 us under: idle time inside the window
    assert wide_gaps([0.0028, 0.0100, 0.0564], [0.0051, 0.0300, 0.0576]) == 1
    assert wide_gaps([0.02], [0.01]) == 0  # a span longer than its events (work that began during the hold)


def test_the_harness_is_found_by_its_place_even_without_launch_records():
    # the hold and the flush are told apart by their place on the timing stream, not by their launch records
    records, launches, w = _round([[(1, 4)], [(1, 3)], [(2, 5)]])
    for r in records:
        if "spin_kernel" in r.name or "reduce_kernel" in r.name:
            launches.pop(r.correlation, None)
    assert spans(records, launches, w).spans_ms == [0.003, 0.002, 0.003]


def test_a_spin_kernel_of_the_solutions_own_leaves_the_round_to_events():
    records, launches, w = _round([[(1, 4)], [(1, 3)]])
    flush_end = next(r for r in records if "reduce_kernel" in r.name).end
    records.append(Record("at::cuda::spin_kernel(long)", flush_end + 5 * US, flush_end + 8 * US, 9998))
    launches[9998] = w.calls[0][0] + US
    assert not spans(records, launches, w).complete


def test_a_round_without_cupti_keeps_its_event_times_and_says_why(monkeypatch):
    from solbench.evaluate.timing import cupti
    from solbench.evaluate.timing.rounds import Round

    off = cupti.RoundClock(False)
    assert off.start() is cupti.NO_WINDOWS
    out = Round(samples_ms=[0.004, 0.005])
    off.finish(out)
    assert out.method == "cuda_events" and out.samples_ms == [0.004, 0.005] and out.clock_note is None

    def refuse(self):
        self.error = "CUPTI_ERROR_NOT_INITIALIZED"
        return False

    monkeypatch.setattr(cupti.Session, "open", refuse)
    on = cupti.RoundClock(True)
    assert on.start() is cupti.NO_WINDOWS
    out = Round(samples_ms=[0.004])
    on.finish(out)
    assert out.method == "cuda_events" and "CUPTI unavailable" in out.clock_note


def test_a_large_round_places_its_records_as_a_small_one_does():
    """A round of 300 calls (records found by bisection: placing them grew with the square of the round) gives
    each call its own kernels' span, a deferred launch counted as stray where it happened."""
    import random

    rng = random.Random(7)
    calls = [[(a, a + rng.randint(1, 9))] for a in (rng.randint(0, 5) for _ in range(300))]
    records, launches, w = _round(calls, stray=150)
    t = spans(records, launches, w)
    assert t.complete and t.stray == 1
    want = [(b - a) / 1000 for ((a, b),) in calls]
    want[150] = (calls[150][0][1] + 9 - calls[150][0][0]) / 1000  # the deferred kernel is the call's: no flush since
    assert t.spans_ms == want


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 20)), max_size=12), st.integers(-5, 700))
def test_a_host_time_is_found_in_the_first_window_that_holds_it(raw, t):
    """``_Locator``: by bisection where the windows follow one another, by a scan otherwise (a clock stepped
    back), the answer the scan gives either way."""
    from solbench.evaluate.timing.cupti import _Locator

    at, windows = 0, []
    for gap, width in raw:  # in order, most of the time; a negative gap steps the clock back
        a = at + gap - (30 if gap % 7 == 0 else 0)
        windows.append((a, a + width))
        at = a + width + 1
    scan = next((i for i, (a, b) in enumerate(windows) if a <= t <= b), None)
    assert _Locator(windows)(t) == scan
