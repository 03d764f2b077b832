"""The trusted side's own clock on the GPU: ``%globaltimer`` stamped by a kernel of the trusted worker's.

``%globaltimer`` is a 64-bit nanosecond timer of the device, readable from any kernel; on the H200 here it
advances in steps of 32 ns (measured with ``benchmarks/probe_trusted_clock.py --role ticks``). A stamp kernel
writes it into memory only the trusted worker holds, so nothing in a candidate's process can change a stamp.

CUDA loads kernels lazily and waits for the context to go idle before it loads one; every kernel the audit's
stream uses is therefore launched once (``warm``) before the audit holds its stream.
"""

from __future__ import annotations

_STAMP = None


def _kernel():
    global _STAMP
    if _STAMP is None:
        import triton
        import triton.language as tl

        @triton.jit
        def stamp(out, i):
            z = tl.zeros([1], tl.int32)
            t = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [z], dtype=tl.int64,
                                          is_pure=False, pack=1)
            tl.store(out + i + tl.arange(0, 1), t)

        _STAMP = stamp
    return _STAMP


def stamp(buf, i: int) -> None:
    """Write the device's nanosecond timer into ``buf[i]`` (int64, on the device) from the current stream."""
    _kernel()[(1,)](buf, i)


def hold(seconds: float) -> None:
    """Hold the current stream for at least ``seconds`` (the spin counts cycles of a clock no faster than 3 GHz,
    so it lasts at least as long at any clock)."""
    import torch

    torch.cuda._sleep(max(1, int(seconds * 3.0e9)))


def warm(device) -> None:
    """Launch each kernel of the audit once, so none is loaded while the stream is held."""
    import torch

    buf = torch.zeros(2, dtype=torch.int64, device=device)
    stamp(buf, 0)
    hold(1e-6)
    torch.cuda.synchronize(device)


def spans_ms(stamps) -> list[float]:
    """Per pair (start, end) of stamps, the interval in milliseconds."""
    v = stamps.tolist()
    return [(v[2 * k + 1] - v[2 * k]) / 1e6 for k in range(len(v) // 2)]
