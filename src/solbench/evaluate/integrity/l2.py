"""The persisting-L2 guard: no L2 set-aside survives into a timing phase, and none may appear during one.

Hopper and Ampere GPUs can set aside part of L2 for "persisting" accesses (a stream's access-policy window);
lines held that way survive the harness's cache flush, so a kernel that reads them looks faster than HBM
allows. PyTorch exposes no control for it, so the guard calls the CUDA runtime that torch itself loaded:
before each timing phase it resets persisting lines (`cudaCtxResetPersistingL2Cache`) and sets the set-aside
size to zero (`cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0)`); after the phase it reads the limit
again, and a non-zero value means the solution made a set-aside of its own (`persisting_l2`). Where the runtime
cannot be found (the CPU, an unusual build) the guard is inactive and says so.
"""

from __future__ import annotations

import ctypes
import os

LIMIT_PERSISTING_L2 = 0x06  # cudaLimitPersistingL2CacheSize


def loaded_cudart(maps: str = "/proc/self/maps") -> str | None:
    """The path of the CUDA runtime library this process has loaded, if any."""
    try:
        with open(maps) as f:
            for line in f:
                path = line.rstrip("\n").split(maxsplit=5)[-1] if "/" in line else ""
                if os.path.basename(path).startswith("libcudart.so"):
                    return path
    except OSError:
        pass
    return None


class L2Guard:
    def __init__(self) -> None:
        self.lib = None
        path = loaded_cudart()
        if path:
            try:
                self.lib = ctypes.CDLL(path)  # the already-loaded library: the same runtime and context as torch's
            except OSError:
                self.lib = None

    @property
    def active(self) -> bool:
        return self.lib is not None

    def reset(self) -> bool:
        """Drop persisting lines and the set-aside; True when both calls succeeded."""
        if self.lib is None:
            return False
        try:
            a = self.lib.cudaCtxResetPersistingL2Cache()
            b = self.lib.cudaDeviceSetLimit(ctypes.c_int(LIMIT_PERSISTING_L2), ctypes.c_size_t(0))
            return a == 0 and b == 0
        except (AttributeError, OSError):
            return False

    def set_aside_bytes(self) -> int | None:
        """The persisting-L2 set-aside now in force (None when it cannot be read)."""
        if self.lib is None:
            return None
        value = ctypes.c_size_t(0)
        try:
            rc = self.lib.cudaDeviceGetLimit(ctypes.byref(value), ctypes.c_int(LIMIT_PERSISTING_L2))
        except (AttributeError, OSError):
            return None
        return int(value.value) if rc == 0 else None
