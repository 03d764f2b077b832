"""The ring of timed-call slots: fresh inputs for every timed call, and outputs the trusted side reads itself.

For each round of a candidate's timing the trusted worker fills ``capacity`` slots of an arena it owns, one
per call of the round: slot k holds an input set drawn independently (``make_inputs`` with a seed of its own,
generated on the device) and room for the outputs, pre-filled with a sentinel (NaN, the integer maximum, the
byte 2 for booleans). Call k of the round is given slot k's inputs (at slot k's addresses) and writes its
outputs into slot k: destination-passing solutions directly, others through the candidate's harness right
after the call's end event. The trusted side keeps a pristine copy of every input it hands out, checks after
the round that every call left an output, picks the calls it re-checks from its own secret, and judges them
from its pristine copies and from what it reads out of the slots. No call shares its values with another, so a
cache keyed on pointers or values, or on values up to a scale, never hits.

Layout: tensor by tensor, each tensor's slots side by side at an aligned stride, so a tensor's slots are one
strided view (``rows``) and the round's sentinel fill and written check are one kernel per tensor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from solbench.evaluate.arena import ALIGN, dtype_from_name, nbytes_for, raw_nbytes, view

MAX_SLOTS_GPU = 64
MAX_SLOTS_CPU = 8
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


def capacity(slot_bytes: int, device: torch.device, pristine_bytes: int) -> int:
    """How many slots a round gets: a quarter of the device's free memory at most (no more than 32 GiB) for
    the arena and the pristine copies together, and never more than the cap for the device."""
    per_slot = max(1, slot_bytes + pristine_bytes)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        budget = min(free // 4, 32 << 30)
        return max(1, min(MAX_SLOTS_GPU, budget // per_slot))
    return max(1, min(MAX_SLOTS_CPU, (4 << 30) // per_slot))


@dataclass
class Layout:
    """Where each tensor's slots lie in the arena (trusted side; sent to the candidate as ``describe()``)."""

    n: int
    inputs: list[dict[str, Any] | None]  # per input: {offset, stride, shape, dtype}, None for a plain value
    outputs: list[dict[str, Any]]

    @staticmethod
    def plan(n: int, inputs: list[Any], outputs: list[tuple[tuple[int, ...], torch.dtype]]) -> tuple["Layout", int]:
        used = 0
        ins: list[dict[str, Any] | None] = []
        outs: list[dict[str, Any]] = []
        for x in inputs:
            if not isinstance(x, torch.Tensor):
                ins.append(None)
                continue
            stride = nbytes_for(x.shape, x.dtype) or ALIGN
            ins.append({"offset": used, "stride": stride, "shape": list(x.shape),
                        "dtype": str(x.dtype).removeprefix("torch.")})
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


class TrustedRing:
    """The trusted side's ring for one workload: fills rounds, keeps the pristine inputs, reads the slots."""

    def __init__(self, arena, layout: Layout, draw: Callable[[int], list[Any]]):
        self.arena = arena
        self.layout = layout
        self.draw = draw  # seed -> one fresh input set (on the device)
        self.pristine: list[list[Any]] = []
        self.values: list[list[Any]] = []  # per slot, the plain (non-tensor) inputs
        self.seeds: list[int] = []

    def fill(self, seeds: list[int]) -> None:
        """Fresh inputs in the first ``len(seeds)`` slots, every output room of the ring back to the sentinel."""
        self.pristine, self.values, self.seeds = [], [], list(seeds)
        for k, seed in enumerate(seeds):
            drawn = self.draw(seed)
            for x, block in zip(drawn, self.layout.inputs):
                if block is not None:
                    view(self.arena.buf, slot_spec(block, k)).copy_(x)
            self.pristine.append(drawn)
            self.values.append([None if isinstance(x, torch.Tensor) else x for x in drawn])
        for block in self.layout.outputs:
            sentinel_fill(rows(self.arena.buf, block, self.layout.n))

    def round_spec(self) -> list[list[dict[str, Any]]]:
        """Per filled slot, its plain values (tensors travel in the layout)."""
        return [[{"value": v} if v is not None else {"slot": True} for v in vals] for vals in self.values]

    def unwritten_slots(self, used: int) -> list[int]:
        """Slots among the first ``used`` whose output room a call never wrote."""
        bad = torch.zeros(used, dtype=torch.bool, device=self.arena.buf.device)
        for block in self.layout.outputs:
            bad |= unwritten(rows(self.arena.buf, block, self.layout.n)[:used])
        return [int(i) for i in torch.nonzero(bad).flatten().tolist()]

    def outputs_of(self, k: int) -> list[torch.Tensor]:
        return [view(self.arena.buf, slot_spec(b, k)).clone() for b in self.layout.outputs]

    def inputs_after(self, k: int) -> list[Any]:
        """Slot ``k``'s inputs as the call left them (plain values as they were given)."""
        out = []
        for block, value in zip(self.layout.inputs, self.values[k]):
            out.append(view(self.arena.buf, slot_spec(block, k)).clone() if block is not None else value)
        return out


class CandidateRing:
    """The candidate's side of a round: slot k's arguments, and a result stored into slot k."""

    def __init__(self, buf: torch.Tensor, layout: dict[str, Any], values: list[list[dict[str, Any]]], dps: bool):
        self.buf = buf
        self.inputs = layout["inputs"]
        self.outputs = layout["outputs"]
        self.values = values
        self.dps = dps

    def args(self, k: int) -> list[Any]:
        xs = [view(self.buf, slot_spec(b, k)) if b is not None else v.get("value")
              for b, v in zip(self.inputs, self.values[k])]
        if self.dps:
            xs += [view(self.buf, slot_spec(b, k)) for b in self.outputs]
        return xs

    def store(self, k: int, produced: list[Any]) -> None:
        """Copy a returned result into slot k (a destination-passing call wrote it there already). The result
        was checked to be plain tensors before its end event; a tensor of the wrong shape or dtype is not
        copied, so the slot keeps its sentinel and the trusted side finds the call's output missing."""
        if self.dps:
            return
        for x, b in zip(produced, self.outputs):
            dst = view(self.buf, slot_spec(b, k))
            if type(x) is torch.Tensor and tuple(x.shape) == tuple(dst.shape) and x.dtype == dst.dtype:
                dst.copy_(x)
