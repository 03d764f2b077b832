"""Shared buffers between the trusted worker and the candidate's process.

The trusted side owns an arena (a flat byte buffer), places the tensors it lends
the candidate in it (inputs) and reserves slots for what it wants back (outputs,
inputs after the call, kept timed calls). The candidate's process attaches to
the arena and reads and writes only through the slot descriptions it is sent.
On the GPU the arena is device memory shared by CUDA IPC and allocated from a
memory pool of its own, so the IPC mapping (which covers the whole allocation)
never reaches memory holding the trusted side's pristine inputs or reference
outputs. On the CPU it is a memory-mapped file in the evaluation's directory.

Only tensors travel this way; every other message is a line of JSON, and the
trusted side never unpickles anything the candidate's process sends.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import pickle
import tempfile
import warnings
from typing import Any

import torch

ALIGN = 256

_pool = None


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def dtype_from_name(name: str) -> torch.dtype:
    dt = getattr(torch, name.removeprefix("torch."), None)
    if not isinstance(dt, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return dt


def nbytes_of(x: Any) -> int:
    return _align(x.numel() * x.element_size()) if isinstance(x, torch.Tensor) else 0


def raw_nbytes(shape, dtype: torch.dtype) -> int:
    """Bytes of a dense tensor of this shape and dtype (no alignment)."""
    return int(torch.Size(shape).numel()) * dtype.itemsize


def nbytes_for(shape, dtype: torch.dtype) -> int:
    return _align(raw_nbytes(shape, dtype))


@contextlib.contextmanager
def _ipc_pool_context(device: torch.device):
    """Allocate on ``device`` from a pool that holds nothing but arenas (torch.cuda.MemPool where this torch has
    it). The pool is entered with ``device`` current: torch enters it for the current device only, so an arena on
    another device (``--device cuda:1``) would come from the trusted side's own pool, where its IPC mapping, which
    covers a whole segment, could reach the trusted side's tensors."""
    global _pool
    with torch.cuda.device(device):
        if not hasattr(torch.cuda, "MemPool") or not hasattr(torch.cuda, "use_mem_pool"):
            torch.cuda.empty_cache()  # at least no cached block of the trusted side's is split for the arena
            yield
            return
        if _pool is None:
            _pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(_pool):
            yield


def held_bytes() -> int:
    """Bytes of the arenas' pool still allocated, once torch has freed every arena whose mapping was handed back
    (``torch.cuda.ipc_collect``). Where no arena is open, that is memory a candidate's process never handed back:
    torch frees an arena lent by CUDA IPC only once every process that mapped it has closed its mapping, which a
    process killed, or one whose CUDA context was lost, never does; the memory then stays with this process for as
    long as it lives. Read from the allocator, not from anything the candidate says. 0 on the CPU (an arena is a
    mapped file there) and where the pool cannot be read."""
    if _pool is None:
        return 0
    try:
        torch.cuda.ipc_collect()
        segments = torch.cuda.memory_snapshot(_pool.id)
    except Exception:  # an allocator that cannot describe one pool: nothing is known to be held
        return 0
    ours = [seg for seg in segments if tuple(seg.get("segment_pool_id") or _pool.id) == tuple(_pool.id)]
    return sum(int(block.get("size", 0)) for segment in ours for block in segment.get("blocks", ())
               if block.get("state") == "active_allocated")


def _mapped_file(nbytes: int, directory: str | os.PathLike) -> tuple[torch.Tensor, str]:
    """A new file of ``nbytes`` in ``directory`` (the candidate's own, which it can write), mapped through the
    descriptor that created it: the path is never opened again on this side, so a link the candidate renames over
    it (a race between the file's creation and its mapping) leads nowhere. ``mkstemp`` creates it exclusively,
    following no link."""
    fd, path = tempfile.mkstemp(dir=str(directory), prefix="arena-")
    try:
        os.ftruncate(fd, nbytes)
        mapped = mmap.mmap(fd, nbytes, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
    with warnings.catch_warnings():  # a writable mapping: torch's warning about read-only buffers does not apply
        warnings.simplefilter("ignore")
        return torch.frombuffer(mapped, dtype=torch.uint8), path


class Arena:
    """A byte buffer the trusted side lends to the candidate's process (trusted side)."""

    def __init__(self, nbytes: int, device: torch.device, directory: str | os.PathLike):
        nbytes = max(_align(nbytes), ALIGN)
        self.used = 0
        self.path: str | None = None
        self._handle: dict[str, Any] | None = None
        if device.type == "cuda":
            with _ipc_pool_context(device):
                self.buf = torch.empty(nbytes, dtype=torch.uint8, device=device)
        else:
            self.buf, self.path = _mapped_file(nbytes, directory)
            self._handle = {"kind": "file", "nbytes": nbytes, "path": self.path}

    @property
    def handle(self) -> dict[str, Any]:
        """What the candidate's process attaches with. On the GPU the buffer is exported by CUDA IPC when first
        asked for, once: torch counts every export as a mapping to be handed back, so an arena exported and never
        sent would stay allocated for good (``held_bytes``)."""
        if self._handle is None:
            from torch.multiprocessing.reductions import reduce_tensor

            self._handle = {"kind": "cuda_ipc", "nbytes": self.buf.numel(),
                            "payload": pickle.dumps(reduce_tensor(self.buf)).hex()}
        return self._handle

    def reserve(self, shape, dtype: torch.dtype) -> dict[str, Any]:
        n = nbytes_for(shape, dtype)
        if self.used + n > self.buf.numel():
            raise ValueError("arena too small")
        spec = {"offset": self.used, "dtype": str(dtype).removeprefix("torch."), "shape": list(shape)}
        self.used += n
        return spec

    def put(self, x: Any) -> dict[str, Any]:
        """Copy a tensor in (or describe a plain value) and return its slot description."""
        if not isinstance(x, torch.Tensor):
            return {"value": x}
        spec = self.reserve(x.shape, x.dtype)
        self.view(spec).copy_(x)
        return spec

    def view(self, spec: dict[str, Any]) -> torch.Tensor:
        return view(self.buf, spec)

    def close(self) -> None:
        del self.buf
        if self.path:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        else:  # a closed CUDA arena's export is never sent again
            self._handle = None


def attach(handle: dict[str, Any]) -> torch.Tensor:
    """The arena's bytes as a tensor (candidate side)."""
    if handle["kind"] == "cuda_ipc":
        rebuild, args = pickle.loads(bytes.fromhex(handle["payload"]))
        return rebuild(*args)
    if handle["kind"] == "file":
        return torch.from_file(handle["path"], shared=True, size=int(handle["nbytes"]), dtype=torch.uint8)
    raise ValueError(f"unknown arena kind {handle['kind']!r}")


def view(buf: torch.Tensor, spec: dict[str, Any]) -> Any:
    if "value" in spec:
        return spec["value"]
    dtype = dtype_from_name(spec["dtype"])
    shape = [int(s) for s in spec["shape"]]
    n = raw_nbytes(shape, dtype)
    off = int(spec["offset"])
    if off < 0 or off + n > buf.numel():
        raise ValueError("slot outside the arena")
    return buf[off: off + n].view(dtype).view(shape)
