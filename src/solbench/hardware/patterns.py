"""The calibration's patterns: streaming, GEMM and FMA kernels timed on random data, one ``Measurement`` each.

Streaming buffers are several times the last-level cache so every pass comes from DRAM. On a GPU each sample is
bracketed by CUDA events queued back to back (no host sync between samples) and the median is kept; on the CPU
``time.perf_counter`` is used.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

from pydantic import BaseModel


class Measurement(BaseModel):
    pattern: str  # e.g. "read_sum", "copy", "triad", "gemm_bf16", "fma_fp32"
    unit: str  # "dram" or a roofline unit from spec.UNITS
    dtype: str | None = None
    size: str | None = None  # human-readable problem size
    bytes: float | None = None  # DRAM bytes moved per call (streaming patterns)
    flops: float | None = None  # FLOP per call (compute patterns)
    seconds: float  # median over samples
    rate: float  # bytes/s or FLOP/s, from the median
    samples: int
    iqr_over_median: float | None = None
    note: str | None = None


# ---------------------------------------------------------------- timing

def _summarise(times: list[float]) -> tuple[float, float | None]:
    med = statistics.median(times)
    if len(times) >= 4 and med > 0:
        q = statistics.quantiles(times, n=4)
        return med, (q[2] - q[0]) / med
    return med, None


def _time_cuda(fn: Callable[[], object], samples: int, warmup: int) -> list[float]:
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(samples)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(samples)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends)]


def _time_cpu(fn: Callable[[], object], samples: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(samples):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


# ---------------------------------------------------------------- Triton kernels (GPU only)

_TRITON: dict[str, object] = {}


def _triton_kernels():
    """(triad kernel, fma kernel), compiled lazily; None when Triton is unusable."""
    if "kernels" in _TRITON:
        return _TRITON["kernels"]
    try:
        import triton
        import triton.language as tl

        @triton.jit
        def triad_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
            pid = tl.program_id(0)
            offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            a = tl.load(a_ptr + offs, mask=mask)
            b = tl.load(b_ptr + offs, mask=mask)
            tl.store(c_ptr + offs, a * 0.5 + b, mask=mask)

        @triton.jit
        def fma_kernel(x_ptr, out_ptr, n_iter, BLOCK: tl.constexpr):
            pid = tl.program_id(0)
            offs = pid * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs)
            m = x * 0.5 + 0.25  # |m| < 1 keeps the chains bounded
            c = x * 0.125
            a0 = x
            a1 = x + 1.0
            a2 = x + 2.0
            a3 = x + 3.0
            a4 = x + 4.0
            a5 = x + 5.0
            a6 = x + 6.0
            a7 = x + 7.0
            for _ in range(n_iter):
                a0 = tl.fma(a0, m, c)
                a1 = tl.fma(a1, m, c)
                a2 = tl.fma(a2, m, c)
                a3 = tl.fma(a3, m, c)
                a4 = tl.fma(a4, m, c)
                a5 = tl.fma(a5, m, c)
                a6 = tl.fma(a6, m, c)
                a7 = tl.fma(a7, m, c)
            tl.store(out_ptr + offs, ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)))

        _TRITON["kernels"] = (triad_kernel, fma_kernel)
    except Exception:
        _TRITON["kernels"] = None
    return _TRITON["kernels"]


# ---------------------------------------------------------------- the patterns

class Run:
    """One calibration's device, sizes and sample counts, and what its patterns measured or skipped."""

    def __init__(self, device: str, quick: bool):
        import torch

        self.torch = torch
        self.device = device
        self.cuda = device.startswith("cuda")
        self.quick = quick
        self.measurements: list[Measurement] = []
        self.skipped: list[str] = []
        self.samples = (5 if quick else 20) if self.cuda else (3 if quick else 10)
        self.warmup = 2 if quick else 3

    def time(self, fn) -> tuple[float, float | None, int]:
        times = (_time_cuda if self.cuda else _time_cpu)(fn, self.samples, self.warmup)
        med, spread = _summarise(times)
        return med, spread, len(times)

    def stream(self, pattern: str, fn, nbytes: float, size: str, dtype: str = "fp32", note: str | None = None):
        med, spread, n = self.time(fn)
        self.measurements.append(Measurement(pattern=pattern, unit="dram", dtype=dtype, size=size, bytes=nbytes,
                                             seconds=med, rate=nbytes / med, samples=n,
                                             iqr_over_median=spread, note=note))

    def compute(self, pattern: str, unit: str, fn, flops: float, size: str, dtype: str, note: str | None = None):
        med, spread, n = self.time(fn)
        self.measurements.append(Measurement(pattern=pattern, unit=unit, dtype=dtype, size=size, flops=flops,
                                             seconds=med, rate=flops / med, samples=n,
                                             iqr_over_median=spread, note=note))

    def skip(self, pattern: str, why: str):
        self.skipped.append(f"{pattern}: {why}")


def _buffer(torch, n: int, dtype, device):
    """A streaming pattern's buffer, every page written: random values on a GPU (whose memory may compress what
    repeats), one value on the CPU, whose bandwidth no value changes (a CPU's random fill of a 256 MiB buffer
    took a second, longer than the pattern it feeds)."""
    x = torch.empty(n, dtype=dtype, device=device)
    return x.fill_(0.5) if x.device.type == "cpu" else x.uniform_(-1.0, 1.0)


def streaming(run: Run, llc_bytes: int) -> None:
    torch = run.torch
    dev = run.device
    if run.cuda:
        free, _ = torch.cuda.mem_get_info()
        want = max(4 * llc_bytes, 256 << 20) if run.quick else max(8 * llc_bytes, 1 << 30)
        nbytes = int(min(want, free // 10))
    else:
        want = max(2 * llc_bytes, 32 << 20) if run.quick else max(4 * llc_bytes, 128 << 20)
        nbytes = int(min(want, 1 << 30))
    n = max(nbytes // 4, 1 << 16)
    nbytes = n * 4
    size = f"{nbytes / 2**20:.0f} MiB per buffer ({nbytes / max(llc_bytes, 1):.1f} x LLC)"
    a = _buffer(torch, n, torch.float32, dev)
    b = _buffer(torch, n, torch.float32, dev)
    c = torch.empty_like(a)

    run.stream("read_sum", lambda: torch.sum(a), nbytes, size, note="torch.sum, reads one buffer")
    run.stream("copy", lambda: c.copy_(a), 2 * nbytes, size, note="torch copy_, bytes = read + write")
    run.stream("triad_2r1w", lambda: torch.add(a, b, out=c), 3 * nbytes, size, note="torch.add(a, b, out=c)")

    kernels = _triton_kernels() if run.cuda else None
    if run.cuda and kernels is not None:
        triad_kernel, _ = kernels
        for block, warps in ((1024, 4), (8192, 8)):
            grid = (triton_cdiv(n, block),)
            fn = (lambda blk=block, w=warps, g=grid: triad_kernel[g](a, b, c, n, BLOCK=blk, num_warps=w))
            try:
                run.stream(f"triton_triad_block{block}", fn, 3 * nbytes, size,
                           note=f"Triton 2-read-1-write, {block} elements per program")
            except Exception as e:  # pragma: no cover - depends on the GPU stack
                run.skip(f"triton_triad_block{block}", f"{type(e).__name__}: {e}")
    elif run.cuda:
        run.skip("triton_triad", "Triton unavailable")
    del a, b, c

    # large-block variant: one buffer pair several times bigger, copied in one call
    scale = 2 if run.quick else 4
    if run.cuda:
        free, _ = torch.cuda.mem_get_info()
        big = min(n * scale, int(free // 10 // 4))
    else:
        big = min(n * scale, (1 << 30) // 4)
    if big > n:
        x = _buffer(torch, big, torch.float32, dev)
        y = torch.empty_like(x)
        run.stream("copy_large", lambda: y.copy_(x), 2 * big * 4, f"{big * 4 / 2**20:.0f} MiB per buffer",
                   note="torch copy_ of a larger buffer, bytes = read + write")
        del x, y
    if run.cuda:
        torch.cuda.empty_cache()


def triton_cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def gemms(run: Run) -> None:
    torch = run.torch
    dev = run.device
    if run.cuda:
        n = 4096 if run.quick else 8192
        sizes = {"bf16": n, "fp16": n, "tf32": n, "fp32": n, "fp8": n}
    else:
        n = 384 if run.quick else 1024
        sizes = {"fp32": n, "bf16": n // 2 if run.quick else n, "fp16": n // 2 if run.quick else n // 2}

    def matmul_case(tag: str, unit: str, dtype, precision: str | None = None):
        m = sizes[tag]
        a = torch.randn(m, m, dtype=dtype, device=dev) / m**0.25
        b = torch.randn(m, m, dtype=dtype, device=dev) / m**0.25
        c = torch.empty(m, m, dtype=dtype, device=dev)
        old = torch.get_float32_matmul_precision()
        try:
            if precision:
                torch.set_float32_matmul_precision(precision)
            run.compute(f"gemm_{tag}", unit, lambda: torch.matmul(a, b, out=c), 2.0 * m**3,
                        f"{m}x{m}x{m}", tag,
                        note=("fp32 with TF32 allowed" if tag == "tf32" else
                              "fp32 with TF32 off" if tag == "fp32" else None))
        finally:
            torch.set_float32_matmul_precision(old)

    matmul_case("bf16", "tensor_bf16", torch.bfloat16)
    matmul_case("fp16", "tensor_bf16", torch.float16)
    matmul_case("fp32", "vector_fp32", torch.float32, "highest")
    if run.cuda:
        matmul_case("tf32", "tensor_tf32", torch.float32, "high")
    else:
        run.skip("gemm_tf32", "no TF32 on the CPU")

    if not run.cuda:
        run.skip("gemm_fp8", "not timed on the CPU")
        return
    fp8 = getattr(torch, "float8_e4m3fn", None)
    cap = torch.cuda.get_device_capability(torch.device(dev))
    if fp8 is None or not hasattr(torch, "_scaled_mm") or cap < (8, 9):
        run.skip("gemm_fp8", f"no fp8 support (capability {cap[0]}.{cap[1]})")
        return
    m = sizes["fp8"]
    try:
        a = torch.randn(m, m, device=dev).clamp_(-2, 2).to(fp8)
        b = torch.randn(m, m, device=dev).clamp_(-2, 2).to(fp8).t()  # column-major, as _scaled_mm wants
        one = torch.ones((), device=dev, dtype=torch.float32)
        fn = lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)  # noqa: E731
        fn()
        run.compute("gemm_fp8", "tensor_fp8", fn, 2.0 * m**3, f"{m}x{m}x{m}", "fp8",
                    note="torch._scaled_mm e4m3 x e4m3 -> bf16, per-tensor scales")
    except Exception as e:  # pragma: no cover - depends on the GPU stack
        run.skip("gemm_fp8", f"{type(e).__name__}: {e}")


def fma(run: Run, sm_count: int) -> None:
    torch = run.torch
    dev = run.device
    kernels = _triton_kernels() if run.cuda else None
    if run.cuda and kernels is not None:
        _, fma_kernel = kernels
        # one element per thread and 8 independent chains measured best on the H200 (58 of 67 TFLOP/s)
        block, warps = 128, 4
        programs = max(sm_count, 1) * 64
        n_iter = 2048 if run.quick else 8192
        x = torch.rand(programs * block, device=dev)
        out = torch.empty_like(x)
        fn = lambda: fma_kernel[(programs,)](x, out, n_iter, BLOCK=block, num_warps=warps)  # noqa: E731
        try:
            run.compute("fma_fp32", "vector_fp32", fn, 2.0 * 8 * n_iter * programs * block,
                        f"{programs} programs x {block} lanes x {n_iter} iterations x 8 chains", "fp32",
                        note="Triton kernel, 8 independent FMA chains per element")
            return
        except Exception as e:  # pragma: no cover - depends on the GPU stack
            run.skip("fma_fp32 (triton)", f"{type(e).__name__}: {e}")
    # torch fallback: a chain of addcmul on a cache-resident buffer
    n = 1 << 20 if not run.cuda else 1 << 22
    reps = 8 if run.quick else 32
    a = torch.rand(n, device=dev) * 0.5 + 0.25
    b = torch.rand(n, device=dev) * 0.125
    acc = torch.rand(n, device=dev)

    def chain():
        for _ in range(reps):
            torch.addcmul(b, acc, a, out=acc)

    run.compute("fma_fp32_addcmul", "vector_fp32", chain, 2.0 * n * reps, f"{reps} x addcmul on {n} fp32",
                "fp32", note="torch.addcmul chain (includes per-call overhead and cache traffic)")
