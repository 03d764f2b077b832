"""Where a timing round's host time goes on this GPU: one process, the harness's own round (``rounds.round_cuda``
with its hold, flush and CUPTI clock) around a small kernel, rounds of several sizes, with and without CUPTI.

    python benchmarks/probe_round_cost.py [--repeats 5] [--elements 4096]

Per round size and clock: the round's wall time, per held sample, and of it the kineto session's start, its stop
and the reading of its records (``cupti.Session``), medians over the repeats. No candidate process: the exchange
and the harness check that a candidate's round adds are ``probe_call_cost``'s.
"""

from __future__ import annotations

import argparse
import statistics
import time
from contextlib import contextmanager


def _timed(store: dict[str, list[float]], key: str):
    def wrap(fn):
        def inner(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                store.setdefault(key, []).append((time.perf_counter() - t0) * 1e3)
        return inner
    return wrap


@contextmanager
def _instrumented(store: dict[str, list[float]]):
    """The CUPTI session's start, stop and record reading timed in ``store`` (ms per round)."""
    from solbench.evaluate.timing import cupti

    saved = cupti.Session.open, cupti.Session.close, cupti.from_kineto, cupti.spans
    cupti.Session.open = _timed(store, "open")(saved[0])
    cupti.Session.close = _timed(store, "close")(saved[1])
    cupti.from_kineto = _timed(store, "records")(saved[2])
    cupti.spans = _timed(store, "spans")(saved[3])
    try:
        yield
    finally:
        cupti.Session.open, cupti.Session.close, cupti.from_kineto, cupti.spans = saved


def main() -> None:
    import torch

    from solbench.evaluate.timing import rounds
    from solbench.hardware.telemetry import gpu_clock_snapshot

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--elements", type=int, default=4096)
    args = ap.parse_args()
    dev = torch.device("cuda")
    x = torch.randn(args.elements, device=dev)
    y = torch.empty_like(x)
    flusher = rounds.Flusher(torch.cuda.get_device_properties(dev).L2_cache_size, dev)
    snap = gpu_clock_snapshot(0) or {}

    def call(_k: int):
        return torch.mul(x, 2.0, out=y)

    print(f"{'clock':<12}{'held':>6}{'round ms':>10}{'per sample':>12}{'open':>8}{'close':>8}{'records':>9}"
          f"{'spans':>7}{'hold us':>9}{'median us':>11}")
    for clock in ("cupti", "cuda_events"):
        for held in (10, 64, 256):
            cfg = rounds.TimingConfig(clock=clock, batch=10)
            hold = rounds.Hold(cfg, snap.get("max_sm_clock_mhz"))
            rounds.round_cuda(call, ["warm", "warm", "wall"] + ["held"] * 10, flusher, cfg, hold)  # warm, calibrated
            store: dict[str, list[float]] = {}
            walls, medians = [], []
            with _instrumented(store):
                for _ in range(args.repeats):
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    r = rounds.round_cuda(call, ["held"] * held, flusher, cfg, hold)
                    torch.cuda.synchronize()
                    walls.append((time.perf_counter() - t0) * 1e3)
                    medians.append(statistics.median(r.samples_ms) * 1e3)
            med = {k: statistics.median(v) for k, v in store.items()}
            wall = statistics.median(walls)
            hold_us = hold.cycles / hold.clock_hz * 1e6 if hold.clock_hz else 0.0
            print(f"{clock:<12}{held:>6}{wall:>10.2f}{wall / held:>12.3f}{med.get('open', 0):>8.2f}"
                  f"{med.get('close', 0):>8.2f}{med.get('records', 0):>9.2f}{med.get('spans', 0):>7.2f}"
                  f"{hold_us:>9.1f}{statistics.median(medians):>11.2f}", flush=True)


if __name__ == "__main__":
    main()
