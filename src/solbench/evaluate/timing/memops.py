"""Stream memory operations: how the trusted worker and a candidate hand an audited call over on the GPU.

A flag is a 32-bit word of device memory that both processes map (it lies in the audit's arena). ``wait`` holds
a stream's later work until the word is at least a value; ``write`` sets the word once all of a stream's earlier
work is done, behind a memory fence, so that what that work wrote is visible to whatever waited for the flag.
They are the CUDA driver's ``cuStreamWaitValue32`` and ``cuStreamWriteValue32``, called through ctypes (no
package beside torch). Interprocess events were the first choice, and work between two plain processes, but an
event opened inside the candidate's sandbox did not hold its stream on the H200 (2026-12-04): the audited
calls' outputs came back unwritten. A flag in memory both sides already share needs nothing more than the
arena.
"""

from __future__ import annotations

import ctypes
from functools import lru_cache

WAIT_GEQ = 0x0  # CU_STREAM_WAIT_VALUE_GEQ: until (int32)(*addr - value) >= 0
FLAG_BYTES = 4


class MemopsUnavailable(RuntimeError):
    """The driver offers no stream memory operations."""


@lru_cache(maxsize=1)
def driver_library() -> ctypes.CDLL:
    """The CUDA driver's library, with the argument types of the entry points the audit calls (``globaltimer``
    launches its stamp kernel through it too)."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise MemopsUnavailable(f"the CUDA driver could not be opened: {exc}") from None
    p, u32 = ctypes.c_void_p, ctypes.c_uint
    lib.cuCtxGetCurrent.argtypes = [ctypes.POINTER(p)]
    lib.cuModuleLoadData.argtypes = [ctypes.POINTER(p), ctypes.c_char_p]
    lib.cuModuleGetFunction.argtypes = [ctypes.POINTER(p), p, ctypes.c_char_p]
    lib.cuLaunchKernel.argtypes = [p, u32, u32, u32, u32, u32, u32, u32, p, ctypes.POINTER(p), ctypes.POINTER(p)]
    for fn in (lib.cuCtxGetCurrent, lib.cuModuleLoadData, lib.cuModuleGetFunction, lib.cuLaunchKernel):
        fn.restype = ctypes.c_int
    return lib


@lru_cache(maxsize=1)
def _driver() -> tuple:
    lib = driver_library()
    fns = []
    for name in ("cuStreamWaitValue32", "cuStreamWriteValue32"):
        fn = getattr(lib, name + "_v2", None) or getattr(lib, name, None)
        if fn is None:
            raise MemopsUnavailable(f"the CUDA driver has no {name}")
        fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
        fn.restype = ctypes.c_int
        fns.append(fn)
    return tuple(fns)


def check(rc: int, what: str) -> None:
    """A CUDA driver call's status: anything but success makes the audit unavailable."""
    if rc != 0:
        raise MemopsUnavailable(f"{what} failed (CUDA driver error {rc})")


def wait(stream, address: int, value: int) -> None:
    """``stream``'s later work waits until the flag at ``address`` is at least ``value``."""
    check(_driver()[0](stream.cuda_stream, address, value & 0xFFFFFFFF, WAIT_GEQ), "cuStreamWaitValue32")


def write(stream, address: int, value: int) -> None:
    """Set the flag at ``address`` to ``value`` after all of ``stream``'s earlier work."""
    check(_driver()[1](stream.cuda_stream, address, value & 0xFFFFFFFF, 0), "cuStreamWriteValue32")
