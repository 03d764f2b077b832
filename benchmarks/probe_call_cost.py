"""Where a checked call's exchange goes on this machine: the candidate's tamper snapshot, a CUDA arena's
allocation, IPC export and attach, and the copies and synchronisations around a call (no candidate process:
each piece timed on its own, medians over repeats).

    python benchmarks/probe_call_cost.py
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
import time


def _med(fn, n: int = 20) -> float:
    xs = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        xs.append(time.perf_counter() - t0)
    return statistics.median(xs) * 1e3


def _child(conn) -> None:
    import torch

    from solbench.evaluate.boundary import arena as arena_mod

    torch.cuda.init()
    times = []
    while True:
        handle = conn.recv()
        if handle is None:
            break
        t0 = time.perf_counter()
        buf = arena_mod.attach(handle)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        del buf
        conn.send(True)
    conn.send(statistics.median(times) * 1e3)


def main() -> None:
    import torch
    import triton  # noqa: F401

    import solbench.evaluate.boundary.ring as ring
    import solbench.evaluate.candidate.process  # noqa: F401  (the harness modules a candidate process holds)
    import solbench.evaluate.timing.rounds  # noqa: F401
    from solbench.evaluate.boundary import arena as arena_mod
    from solbench.evaluate.integrity import tamper

    dev = torch.device("cuda")
    x = torch.randn(1 << 20, device=dev)
    torch.cuda.synchronize()
    print(f"tamper.snapshot (entries {len(tamper.snapshot())}): {_med(tamper.snapshot):.2f} ms")
    base = tamper.snapshot()
    print(f"tamper.tampered vs baseline: {_med(lambda: tamper.tampered(base)):.2f} ms")
    print(f"torch.cuda.synchronize (idle): {_med(torch.cuda.synchronize, 50) :.3f} ms")
    print(f"own_copy of a 4 MB input + sync: {_med(lambda: (ring.own_copy(x, 3), torch.cuda.synchronize())):.3f} ms")
    print(f"sentinel_fill 4 MB + sync: {_med(lambda: (ring.sentinel_fill(torch.empty_like(x)), torch.cuda.synchronize())):.3f} ms")

    def lend():
        a = arena_mod.Arena(8 << 20, dev, "/tmp")
        a.put(x)
        torch.cuda.synchronize()
        return a

    print(f"Arena(8 MB) + put + sync (trusted side, IPC export): {_med(lend):.2f} ms")
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    p = ctx.Process(target=_child, args=(child,))
    p.start()
    rounds = []
    for _ in range(15):
        a = lend()
        t0 = time.perf_counter()
        parent.send(a.handle)
        parent.recv()
        rounds.append(time.perf_counter() - t0)
        a.close()
    parent.send(None)
    attach_ms = parent.recv()
    p.join(30)
    print(f"attach in another process (median, first excluded): {attach_ms:.2f} ms; "
          f"send + attach + reply round trip: {statistics.median(rounds[1:]) * 1e3:.2f} ms "
          f"(first {rounds[0] * 1e3:.1f} ms)")


if __name__ == "__main__":
    main()
