"""Language proof by the profiler: the solution's own kernels must do the device work.

For a solution in a kernel language on the GPU, right after a checked call, one more call on copies of its inputs
runs under the PyTorch profiler (CUDA activity: kernel names and device times; its outputs are not used). The
candidate's process sends back every kernel's name and time (``by_name``); the trusted side tells whose each
kernel is (``kernel_origin``) from the names the language plug-in read in the solution's sources, and the
solution's own kernels make up its *share* of the call's device time (``stages``). A share of zero means no
kernel of the solution's ran while other kernels did the work (``no_dsl_kernel``); a small share is reported as
a warning, since glue work in PyTorch (allocation, a transpose) is legitimate. For Triton the ghost replay
(``dynamic.ghost_mode``) is the other half of the proof: it shows the DSL kernels' output is used. By default one
workload per solution is profiled, chosen from the run's secret seed (``EvalOptions.profile_dsl``: "one", "all"
or "off").
"""

from __future__ import annotations

from typing import Any, Callable

PROFILE_MODES = {True: "all", False: "off"}  # the older boolean form of EvalOptions.profile_dsl


def profile_mode(mode: str | bool) -> str:
    """EvalOptions.profile_dsl as the worker reads it: "one", "all" or "off" (ValueError for anything else)."""
    mode = PROFILE_MODES.get(mode, mode)
    if mode not in ("one", "all", "off"):
        raise ValueError(f"EvalOptions.profile_dsl must be one, all or off, not {mode!r}")
    return mode


#: distinct kernel names a profiled call reports (the rest are summed under one name, whose origin is "other")
MAX_KERNELS = 240
#: a kernel name is cut to this many characters (the origin patterns look at its start)
MAX_NAME = 400
REST = "(more kernels)"


def by_name(kernels: list[tuple[str, float]]) -> list[list[Any]]:
    """[name, microseconds] per distinct kernel name, longest first; past ``MAX_KERNELS`` names the rest are
    summed under ``REST``."""
    sums: dict[str, float] = {}
    for name, us in kernels:
        key = str(name)[:MAX_NAME]
        sums[key] = sums.get(key, 0.0) + float(us)
    ranked = sorted(sums.items(), key=lambda kv: -kv[1])
    out = [[n, us] for n, us in ranked[:MAX_KERNELS]]
    if len(ranked) > MAX_KERNELS:
        out.append([REST, sum(us for _, us in ranked[MAX_KERNELS:])])
    return out


def profiler_session(device_type: str = "cuda"):
    """A kineto profiling session that records the device's kernels (and host ops only on the CPU).

    It is the autograd profiler that ``torch.profiler.profile`` wraps, used directly: the wrapper's first start
    looks up ``torch._inductor``, which imports Inductor and Dynamo into a process that had not (1.5 s on the
    development machine, measured; on the H200 machine each fresh candidate paid 3.6 to 5.8 s for its
    profiled call, docs/PERFORMANCE.md)."""
    from torch.autograd import profiler as autograd_profiler

    on_cpu = device_type == "cpu"
    return autograd_profiler.profile(use_cpu=on_cpu, use_device=None if on_cpu else device_type, use_kineto=True)


class ProfilerTampered(Exception):
    """The solution's process ran a profiler of its own, or stopped the harness's during the profiled call."""


def profiler_running() -> bool:
    """Whether a PyTorch (kineto) profiler is on in this process, as torch's C++ side knows it."""
    import torch

    try:
        return bool(torch._C._autograd._profiler_enabled())
    except Exception:  # an older or newer torch without this query: no evidence either way
        return False


def profile_kernels(call: Callable[[], Any], device_type: str = "cuda") -> list[tuple[str, float]]:
    """(kernel name, device microseconds) of every GPU kernel ``call`` ran, from the PyTorch profiler (on the
    CPU, which tests use: its host ops).

    The harness never profiles outside this function, so a profiler already on (on this thread) before it starts,
    or off after ``call``, is the solution's doing (``ProfilerTampered``): a running profiler would make this
    session fail to start, and a stopped one would leave the proof without evidence. A session that the call
    stopped and started anew would hand back only what ran after the restart: where torch reports the session's
    start time, such a session gives no kernels (the proof is then unavailable, which the trusted side reports)."""
    import time

    import torch

    if profiler_running():
        raise ProfilerTampered("a profiler was already running in the solution's process")
    stopped = False
    try:
        with profiler_session(device_type) as prof:
            entered_ns = time.time_ns()
            try:
                call()
                if device_type == "cuda":
                    torch.cuda.synchronize()
            finally:
                stopped = not profiler_running()
    except Exception:
        if not stopped:
            raise
        # closing a session the solution stopped fails too: the stop is what to report
    if stopped:
        raise ProfilerTampered("the profiler was stopped during the solution's call")
    if _restarted(prof, entered_ns):
        return []
    kind = torch.autograd.DeviceType.CPU if device_type == "cpu" else torch.autograd.DeviceType.CUDA
    out = []
    for event in prof.function_events:
        if getattr(event, "device_type", None) == kind:
            out.append((event.name, float(event.time_range.end - event.time_range.start)))
    return out


def _restarted(prof: Any, entered_ns: int) -> bool:
    """Whether the session torch handed back began after ours had (the call stopped ours and started its own).
    Without a start time from torch there is no evidence either way."""
    try:
        start = prof.kineto_results.trace_start_ns()
    except Exception:
        return False
    return isinstance(start, int) and start > entered_ns


def _numpy_functions():
    try:
        import numpy
    except ImportError:
        return None
    from types import SimpleNamespace

    return SimpleNamespace(unique=numpy.unique, concatenate=numpy.concatenate, searchsorted=numpy.searchsorted,
                           count_nonzero=numpy.count_nonzero, uint64=numpy.uint64, asarray=numpy.asarray,
                           broadcast_to=numpy.broadcast_to)


_NUMPY = _numpy_functions()


class InterpreterStores:
    """On the CPU, where Triton's interpreter runs the kernels: the addresses the solution's kernels stored to
    during a call (plain, masked, descriptor and atomic stores), and how many elements of the call's outputs
    they cover: the CPU's account of how much of the output the DSL kernels produced. Stores into other memory (a
    scratch buffer torch never reads), a token part of the output, or one element many times count for nothing
    beyond what they cover."""

    def __init__(self) -> None:
        self.chunks: list = []
        self._saved: list = []

    def __enter__(self) -> "InterpreterStores":
        try:
            from triton.runtime.interpreter import InterpreterBuilder
        except ImportError:
            return self
        np = _NUMPY
        if np is None:
            return self
        chunks = self.chunks

        def counting(name: str, ptr_arg: int, mask_arg: int | None):
            original = getattr(InterpreterBuilder, name)

            def wrapper(builder, *args, **kwargs):
                try:
                    ptrs = np.asarray(args[ptr_arg].data).reshape(-1)
                    if mask_arg is not None and len(args) > mask_arg and args[mask_arg] is not None:
                        mask = np.broadcast_to(np.asarray(args[mask_arg].data), np.asarray(args[ptr_arg].data).shape)
                        ptrs = ptrs[mask.reshape(-1).astype(bool)]
                    chunks.append(ptrs.astype(np.uint64))
                except Exception:
                    pass
                return original(builder, *args, **kwargs)

            self._saved.append((name, original))
            setattr(InterpreterBuilder, name, wrapper)

        for name, ptr_arg, mask_arg in (("create_masked_store", 0, 2), ("create_atomic_rmw", 1, 3),
                                        ("create_atomic_cas", 0, None)):
            if hasattr(InterpreterBuilder, name):
                counting(name, ptr_arg, mask_arg)
        return self

    def __exit__(self, *exc) -> None:
        try:
            from triton.runtime.interpreter import InterpreterBuilder
        except ImportError:
            return
        for name, original in reversed(self._saved):
            setattr(InterpreterBuilder, name, original)
        self._saved.clear()

    def elements_in(self, tensors: list[Any]) -> int:
        """Elements of ``tensors`` (plain CPU tensors) that a DSL kernel stored to during the call (0 where the
        count cannot be made)."""
        try:
            return self._elements_in(tensors)
        except Exception:
            return 0

    def _elements_in(self, tensors: list[Any]) -> int:
        import torch

        np = _NUMPY  # bound when the harness loaded, before any solution could rebind numpy's functions
        if not self.chunks or np is None:
            return 0
        stored = np.unique(np.concatenate(self.chunks))
        total = 0
        for t in tensors:
            if type(t) is not torch.Tensor or t.device.type != "cpu" or not t.numel():
                continue
            size = t.element_size()
            base = t.data_ptr()
            lo, hi = np.searchsorted(stored, [base, base + t.numel() * size])
            inside = stored[lo:hi]
            total += int(np.count_nonzero((inside - np.uint64(base)) % np.uint64(size) == 0))
        return total
