"""The trusted side's own clock on the GPU: ``%globaltimer`` stamped by a kernel of the trusted worker's.

``%globaltimer`` is a 64-bit nanosecond timer of the device, readable from any kernel; on the H200 here it
advances in steps of 32 ns (measured with ``benchmarks/probe_trusted_clock.py --role ticks``). A stamp kernel
writes it into memory only the trusted worker holds, so nothing in a candidate's process can change a stamp.

The stamp kernel is a few lines of PTX that the CUDA driver compiles when it loads them, launched through the
driver's own entry points (ctypes, as ``memops``): no kernel compiler runs in the trusted worker, and a launch
costs microseconds of the host's time (a Triton kernel cost 0.43 s of its compiler's start per worker and about a
tenth of a millisecond per launch, inside the hold). CUDA loads kernels lazily and waits for the context to go idle
before it loads one; every kernel the audit's stream uses is therefore launched once (``warm``) before the audit
holds its stream.
"""

from __future__ import annotations

import ctypes

from solbench.evaluate.timing.memops import MemopsUnavailable, check, driver_library

#: stamp(out, i): out[i] = %globaltimer (one thread)
PTX = b"""
.version 7.0
.target sm_70
.address_size 64

.visible .entry solbench_stamp(.param .u64 out, .param .u32 i)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [i];
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r1, 8;
    add.s64 %rd4, %rd2, %rd3;
    mov.u64 %rd5, %globaltimer;
    st.global.u64 [%rd4], %rd5;
    ret;
}
\x00"""

_KERNELS: dict[int, ctypes.c_void_p] = {}  # the current CUDA context's handle -> its stamp kernel


def _kernel() -> tuple[ctypes.CDLL, ctypes.c_void_p]:
    """The driver and the stamp kernel of the calling thread's current context (loaded once per context)."""
    lib = driver_library()
    ctx = ctypes.c_void_p()
    check(lib.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
    if not ctx.value:
        raise MemopsUnavailable("no CUDA context is current on this thread")
    fn = _KERNELS.get(ctx.value)
    if fn is None:
        module, fn = ctypes.c_void_p(), ctypes.c_void_p()
        check(lib.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(PTX)), "cuModuleLoadData (the stamp kernel)")
        check(lib.cuModuleGetFunction(ctypes.byref(fn), module, b"solbench_stamp"), "cuModuleGetFunction")
        _KERNELS[ctx.value] = fn
    return lib, fn


def stamp(buf, i: int) -> None:
    """Write the device's nanosecond timer into ``buf[i]`` (int64, on the device) from the current stream."""
    import torch

    lib, fn = _kernel()
    out, idx = ctypes.c_uint64(buf.data_ptr()), ctypes.c_uint32(i)
    params = (ctypes.c_void_p * 2)(ctypes.addressof(out), ctypes.addressof(idx))
    stream = ctypes.c_void_p(torch.cuda.current_stream(buf.device).cuda_stream)
    check(lib.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, stream, params, None), "cuLaunchKernel (the stamp kernel)")


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
