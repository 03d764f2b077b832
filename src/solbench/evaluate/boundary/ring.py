"""The ring of timed-call slots: fresh inputs for every timed call, and outputs the trusted side reads itself.

For each round of a candidate's timing the trusted worker fills ``capacity`` slots of an arena it owns, one
per call of the round: slot k holds input set k of the round's draw (``make_input_sets``: each set fresh in
every random element, generated on the device in one batch) and room for the outputs, pre-filled with a
sentinel (NaN, the integer maximum, the byte 2 for booleans). Call k of the round is given slot k's inputs, and
its outputs go into slot k: the candidate's harness copies them there right after the call's end event (a
destination-passing solution's from the harness's own buffers it wrote). The harness copies slot k's inputs into
buffers of its own before call k, so no call can see another slot through its arguments. The trusted side keeps
a pristine copy of every input it hands out, checks after the round that every call left an output, picks the
calls it re-checks from its own secret, and judges them from its pristine copies and from what it reads out of
the slots. No call shares its values with another, so a cache keyed on pointers or values, or on values up to a
scale, never hits.

Layout: tensor by tensor, each tensor's slots side by side at an aligned stride, so a tensor's slots are one
strided view (``rows``) and the round's sentinel fill and written check are one kernel per tensor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from solbench.evaluate.boundary.arena import ALIGN, dtype_from_name, nbytes_for, raw_nbytes

MAX_SLOTS_GPU = 64
#: on the CPU: up to ``MAX_SLOTS_CPU`` slots while the ring and its pristine copies stay within ``RING_BYTES_CPU``
#: (a small workload's rounds: each exchange with the candidate paid for more calls), and up to
#: ``SLOTS_CPU_LARGE`` within ``RING_BYTES_CPU_LARGE`` (a large workload's)
MAX_SLOTS_CPU = 32
RING_BYTES_CPU = 1 << 30
SLOTS_CPU_LARGE = 8
RING_BYTES_CPU_LARGE = 4 << 30
BOOL_SENTINEL = 2  # a byte no honest boolean holds


def sentinel_fill(x: torch.Tensor) -> None:
    """What a slot's output room holds before a call writes it."""
    if x.dtype == torch.bool:
        x.view(torch.uint8).fill_(BOOL_SENTINEL)
    elif x.is_floating_point():
        x.fill_(float("nan"))
    else:
        x.fill_(torch.iinfo(x.dtype).max)


def unwritten(rows: torch.Tensor) -> torch.Tensor:
    """Per slot (row), whether the output room still holds the sentinel everywhere (bool rows: anywhere)."""
    flat = rows.reshape(rows.shape[0], -1)
    if flat.shape[1] == 0:
        return torch.zeros(rows.shape[0], dtype=torch.bool, device=rows.device)
    if rows.dtype == torch.bool:
        return (flat.view(torch.uint8) == BOOL_SENTINEL).any(dim=1)
    if rows.is_floating_point():
        return torch.isnan(flat).all(dim=1)
    return (flat == torch.iinfo(rows.dtype).max).all(dim=1)


#: device memory a round's ring may hold, its pristine copies included: the candidate and the reference need room
RING_BYTES_GPU = 8 << 30


def capacity(slot_bytes: int, device: torch.device, pristine_bytes: int) -> int:
    """How many slots a round gets: on the GPU an eighth of the device's free memory at most (no more than
    ``RING_BYTES_GPU``) for the arena and the pristine copies together, on the CPU as ``MAX_SLOTS_CPU`` says,
    and never more than the cap."""
    per_slot = max(1, slot_bytes + pristine_bytes)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        budget = min(free // 8, RING_BYTES_GPU)
        return max(1, min(MAX_SLOTS_GPU, budget // per_slot))
    small, large = RING_BYTES_CPU // per_slot, min(SLOTS_CPU_LARGE, RING_BYTES_CPU_LARGE // per_slot)
    return max(1, min(MAX_SLOTS_CPU, max(small, large)))


@dataclass
class Layout:
    """Where each tensor's slots lie in the arena (trusted side; sent to the candidate as ``describe()``)."""

    n: int
    inputs: list[dict[str, Any] | None]  # per input: {offset, stride, shape, dtype}, None for a plain value
    outputs: list[dict[str, Any]]

    @staticmethod
    def plan(n: int, inputs: list[Any], outputs: list[tuple[tuple[int, ...], torch.dtype]],
             inplace: set[int] = frozenset()) -> tuple["Layout", int]:
        """``inplace``: the positions of the inputs a call updates in place (copied back after each call)."""
        used = 0
        ins: list[dict[str, Any] | None] = []
        outs: list[dict[str, Any]] = []
        for i, x in enumerate(inputs):
            if not isinstance(x, torch.Tensor):
                ins.append(None)
                continue
            stride = nbytes_for(x.shape, x.dtype) or ALIGN
            ins.append({"offset": used, "stride": stride, "shape": list(x.shape),
                        "dtype": str(x.dtype).removeprefix("torch."), "inplace": i in inplace})
            used += stride * n
        for shape, dtype in outputs:
            stride = nbytes_for(shape, dtype) or ALIGN
            outs.append({"offset": used, "stride": stride, "shape": list(shape),
                         "dtype": str(dtype).removeprefix("torch.")})
            used += stride * n
        return Layout(n=n, inputs=ins, outputs=outs), used

    def describe(self) -> dict[str, Any]:
        return {"n": self.n, "inputs": self.inputs, "outputs": self.outputs}


def slot_spec(block: dict[str, Any], k: int) -> dict[str, Any]:
    """Slot ``k`` of one tensor's block, as an arena slot description."""
    return {"offset": int(block["offset"]) + k * int(block["stride"]), "shape": block["shape"],
            "dtype": block["dtype"]}


def rows(buf: torch.Tensor, block: dict[str, Any], n: int) -> torch.Tensor:
    """All ``n`` slots of one tensor's block as one tensor of shape (n, *shape)."""
    dtype = dtype_from_name(block["dtype"])
    raw = raw_nbytes(block["shape"], dtype)
    stride = int(block["stride"])
    off = int(block["offset"])
    region = buf[off: off + stride * n].view(n, stride)[:, :raw]
    return region.view(dtype).view(n, *[int(s) for s in block["shape"]])


def stacked(xs: list[Any]) -> torch.Tensor | None:
    """``xs`` as one tensor of shape (len(xs), *shape) without a copy, where they are consecutive rows of one tensor
    (one input of a batch draw's sets: ``make_input_sets``), or a single tensor as one row; else None. A row is
    found by its base, dtype, shape, strides and address, never by its values."""
    x0 = xs[0] if xs else None
    if type(x0) is not torch.Tensor:
        return None
    if len(xs) == 1:
        return x0.unsqueeze(0)
    base = x0._base
    if base is None or base.dtype != x0.dtype or base.dim() != x0.dim() + 1 or base.shape[1:] != x0.shape \
            or base.stride()[1:] != x0.stride() or base.stride(0) <= 0:
        return None
    step = base.stride(0) * base.element_size()
    first, off = divmod(x0.data_ptr() - base.data_ptr(), step)
    if off or first < 0 or first + len(xs) > base.shape[0]:
        return None
    at = x0.data_ptr()
    for j, x in enumerate(xs):
        if type(x) is not torch.Tensor or x._base is not base or x.dtype != x0.dtype or x.shape != x0.shape \
                or x.stride() != x0.stride() or x.data_ptr() != at + j * step:
            return None
    return base[first: first + len(xs)]


def copy_rows(dst: torch.Tensor, xs: list[Any]) -> None:
    """``xs[j]`` into row j of ``dst`` (slots of one tensor, ``rows``): one copy where they are rows of one tensor
    (``stacked``) or one and the same tensor, else one per row."""
    src = stacked(xs)
    if src is None and all(x is xs[0] for x in xs):
        src = xs[0].unsqueeze(0).expand(len(xs), *xs[0].shape)
    if src is not None:
        dst.copy_(src)
        return
    for row, x in zip(dst, xs):
        row.copy_(x)


def draw_sets(draw: Callable[[int], list[Any]], seed: int, count: int) -> list[list[Any]]:
    """``count`` fresh input sets of the draw of ``seed``: ``draw.sets(seed, count)`` where the draw has it (a
    workload's draw, ``make_input_sets``), else ``draw`` of ``count`` seeds."""
    many = getattr(draw, "sets", None)
    if many is not None:
        return many(seed, count)
    return [draw(seed + j) for j in range(count)]


def set_key(seed: int, count: int, k: int) -> dict[str, int]:
    """Where input set ``k`` of a draw of ``count`` sets came from, for a failure's record (``draw_sets``)."""
    return {"seed": seed} if count == 1 else {"seed": seed, "sets": count, "set": k}


class TrustedRing:
    """The trusted side's ring for one workload: fills rounds, keeps the pristine inputs, reads the slots."""

    def __init__(self, arena, layout: Layout, draw: Callable[[int], list[Any]]):
        self.arena = arena
        self.layout = layout
        self.draw = draw  # seed -> one fresh input set (on the device); ``draw_sets`` for several
        self.pristine: list[list[Any]] = []
        self.values: list[list[Any]] = []  # per slot, the plain (non-tensor) inputs
        self.seed, self.count = 0, 0
        # each tensor's slots as one view (n, *shape), made once: a round's fill reads and writes by index
        self._in_rows = [rows(arena.buf, b, layout.n) if b is not None else None for b in layout.inputs]
        self._out_rows = [rows(arena.buf, b, layout.n) for b in layout.outputs]

    def key(self, k: int) -> dict[str, int]:
        """Where slot ``k``'s inputs came from (``set_key``)."""
        return set_key(self.seed, self.count, k)

    def fill(self, seed: int, count: int) -> None:
        """Fresh inputs in the first ``count`` slots (one draw of ``count`` sets), every output room of the ring
        back to the sentinel."""
        sets = draw_sets(self.draw, seed, count)
        self.pristine, self.seed, self.count = sets, seed, count
        self.values = [[None if isinstance(x, torch.Tensor) else x for x in drawn] for drawn in sets]
        for i, slots in enumerate(self._in_rows):
            if slots is not None:
                copy_rows(slots[:count], [drawn[i] for drawn in sets])
        for slots in self._out_rows:
            sentinel_fill(slots)

    def round_spec(self) -> list[list[dict[str, Any]]]:
        """Per filled slot, its plain values (tensors travel in the layout)."""
        return [[{"value": v} if v is not None else {"slot": True} for v in vals] for vals in self.values]

    def unwritten_slots(self, used: int) -> list[int]:
        """Slots among the first ``used`` whose output room a call never wrote."""
        bad = torch.zeros(used, dtype=torch.bool, device=self.arena.buf.device)
        for slots in self._out_rows:
            bad |= unwritten(slots[:used])
        return [int(i) for i in torch.nonzero(bad).flatten().tolist()]

    def outputs_of(self, k: int) -> list[torch.Tensor]:
        return [slots[k].clone() for slots in self._out_rows]

    def inputs_after(self, k: int) -> list[Any]:
        """Slot ``k``'s inputs as the call left them (plain values as they were given)."""
        return [slots[k].clone() if slots is not None else value for slots, value in zip(self._in_rows, self.values[k])]


class SlotRefused(ValueError):
    """A call's output that cannot go into its slot: not a tensor of the slot's shape and dtype (nor a number for a
    one-element slot), or the slot's own memory."""


def stored(x: Any, dst: torch.Tensor) -> None:
    """Copy output ``x`` into its slot ``dst``, or refuse it (``SlotRefused``). An output that is the slot's own
    memory was written there by the solution rather than returned by the call (its copy, which the audit's
    calibration counts, would be skipped), so it is refused like one of the wrong shape: the call's result must be
    the call's."""
    if type(x) is torch.Tensor and tuple(x.shape) == tuple(dst.shape) and x.dtype == dst.dtype:
        if x.numel() and _overlap(x, dst):
            raise SlotRefused("an output in the harness's own slot, not one the call made")
        dst.copy_(x)
    elif type(x) in (int, float, bool) and dst.numel() == 1:
        dst.fill_(x)
    else:
        what = f"{tuple(x.shape)} {x.dtype}" if isinstance(x, torch.Tensor) else type(x).__name__
        raise SlotRefused(f"an output of {what} where the slot holds {tuple(dst.shape)} {dst.dtype}")


def store_into(slots: list[torch.Tensor], produced: list[Any]) -> None:
    """A call's outputs into their slots (``stored`` each), or refused (``SlotRefused``), missing ones included."""
    if len(produced) < len(slots):
        raise SlotRefused(f"{len(produced)} outputs where the call has {len(slots)}")
    for x, dst in zip(produced, slots):
        stored(x, dst)


def _overlap(x: torch.Tensor, dst: torch.Tensor) -> bool:
    """Whether ``x``'s bytes (any strides; torch's are never negative) and ``dst``'s (a dense slot) meet."""
    if x.device != dst.device:
        return False
    lo = x.data_ptr()
    hi = lo + (sum((n - 1) * st for n, st in zip(x.shape, x.stride())) + 1) * x.element_size()
    start = dst.data_ptr()
    return lo < start + dst.numel() * dst.element_size() and start < hi


def own_copy(x: Any, k: int) -> Any:
    """A copy of ``x`` in a buffer of the candidate's own with room for ``CandidateRing.OFFSETS`` offsets, at
    offset k: a checked call's inputs look like a timed call's (same storage size, shifting addresses)."""
    if not isinstance(x, torch.Tensor):
        return x
    raw = raw_nbytes(x.shape, x.dtype)
    buf = torch.empty(nbytes_for(x.shape, x.dtype) + CandidateRing.OFFSETS * ALIGN, dtype=torch.uint8,
                      device=x.device)
    off = ((k * 7 + 3) % CandidateRing.OFFSETS) * ALIGN
    dst = buf[off: off + raw].view(x.dtype).view(x.shape)
    with torch._C.DisableTorchFunction():
        dst.copy_(x)
    return dst


def offsets(block: dict[str, Any], device: torch.device) -> torch.Tensor:
    """A buffer of the candidate's own for one tensor of ``block``, with room for ``CandidateRing.OFFSETS``
    aligned offsets, seen as one view of shape (OFFSETS, *shape): row j is the tensor at offset j (rows overlap;
    each is dense, as a view made from the slot's description would be)."""
    dtype = dtype_from_name(block["dtype"])
    shape = [int(s) for s in block["shape"]]
    buf = torch.empty(int(block["stride"]) + CandidateRing.OFFSETS * ALIGN, dtype=torch.uint8, device=device)
    dense = torch.empty(shape, dtype=dtype, device="meta").stride()
    return buf.view(dtype).as_strided([CandidateRing.OFFSETS, *shape], [ALIGN // dtype.itemsize, *dense])


class CandidateRing:
    """The candidate's side of a round. Before call k (outside its timed interval) ``prepare(k)`` copies slot k's
    inputs into buffers of the candidate's own, at one of ``OFFSETS`` shifting offsets, so the call sees no other
    slot through its arguments' storage (no later call's inputs, no other call's output room) and gets a new
    address each time; after its end event ``store(k, ...)`` copies its outputs into slot k. The slots and the
    offsets are views made once per round (``rows``, ``offsets``): a timed call's harness then pays one index per
    tensor, not a view built from its description (on the CPU machine 60 of a sample's 130 us of host time)."""

    OFFSETS = 61  # distinct offsets per buffer (prime, so offsets and slots do not cycle together)

    def __init__(self, buf: torch.Tensor, layout: dict[str, Any], values: list[list[dict[str, Any]]], dps: bool):
        self.buf = buf
        self.inputs = layout["inputs"]
        self.outputs = layout["outputs"]
        self.values = values
        self.dps = dps
        n = int(layout["n"])
        self._in_rows = [rows(buf, b, n) if b is not None else None for b in self.inputs]
        self._out_rows = [rows(buf, b, n) for b in self.outputs]
        self._in = [offsets(b, buf.device) if b is not None else None for b in self.inputs]
        self._out = [offsets(b, buf.device) for b in self.outputs] if dps else []
        self._current: tuple[int, list[Any], list[Any]] = (-1, [], [])

    def prepare(self, k: int) -> None:
        at = (k * 7 + 3) % self.OFFSETS
        args = []
        for src, v, st in zip(self._in_rows, self.values[k], self._in):
            if src is None:
                args.append(v.get("value"))
                continue
            dst = st[at]
            dst.copy_(src[k])
            args.append(dst)
        outs = []
        for st in self._out:
            dst = st[at]
            sentinel_fill(dst)
            outs.append(dst)
        self._current = (k, args, outs)

    def args(self, k: int) -> list[Any]:
        if self._current[0] != k:
            self.prepare(k)
        _, args, outs = self._current
        return args + outs

    def store(self, k: int, produced: list[Any]) -> None:
        """Copy call k's outputs into slot k: a destination-passing call's buffers, or the returned result (checked
        to be plain tensors before its end event). Anything else is refused (``stored``): the slot's sentinel is no
        proof that nothing wrote there, since code in this process can reach the whole ring. In-place inputs go
        back too."""
        _, args, outs = self._current
        store_into([dst[k] for dst in self._out_rows], outs if self.dps else produced)
        for x, b, src in zip(args, self.inputs, self._in_rows):  # in-place inputs as the call left them: part of
            if b is not None and b.get("inplace"):  # its result
                src[k].copy_(x)
