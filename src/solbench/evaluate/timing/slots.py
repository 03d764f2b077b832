"""The audit's arena (``audit``): slots of the workload's layout, filled with a call's inputs and read back, and
after them the two flags of the hand-over."""

from __future__ import annotations

from typing import Any

from solbench.evaluate.boundary.arena import ALIGN, view
from solbench.evaluate.boundary.ring import Layout, copy_rows, rows, sentinel_fill, slot_spec

SLOTS = 2  # slots at least (a fresh address for consecutive calls)
FLAG_STRIDE = 256  # the go and done flags' distance in the arena (GPU)


class Slots:
    """The audit's arena: ``n`` slots of the workload's layout (``SLOTS`` at least), and after them the
    hand-over's two flags (``go`` at ``flags``, ``done`` ``FLAG_STRIDE`` bytes later)."""

    def __init__(self, sub, probe: list[Any], shapes, inplace: list[int], n: int = SLOTS):
        self.layout, used = Layout.plan(max(SLOTS, n), probe, shapes, set(inplace))
        self.flags = -(-used // ALIGN) * ALIGN
        self.arena = sub._lend(self.flags + 2 * FLAG_STRIDE)
        self.inplace = inplace
        self._views: dict[tuple[int, int], Any] = {}  # (block's id, slot) -> its tensor in the arena
        n = self.layout.n  # each tensor's slots as one view (n, *shape): a group's fill and copies out are one each
        self._in_rows = [rows(self.arena.buf, b, n) if b is not None else None for b in self.layout.inputs]
        self._out_rows = [rows(self.arena.buf, b, n) for b in self.layout.outputs]

    def at(self, block: dict[str, Any], s: int) -> Any:
        """``block``'s tensor in slot ``s`` (made once: a group's fills and reads ask for thousands)."""
        key = (id(block), s)
        got = self._views.get(key)
        if got is None:
            got = self._views[key] = view(self.arena.buf, slot_spec(block, s))
        return got

    def flag(self, which: int) -> int:
        """The device address of flag ``which`` (0: go, 1: done)."""
        return self.arena.buf.data_ptr() + self.flags + which * FLAG_STRIDE

    def fill(self, s: int, inputs: list[Any]) -> None:
        """The call's inputs into slot ``s``; its output room back to the sentinel."""
        for x, block in zip(inputs, self.layout.inputs):
            if block is not None:
                self.at(block, s).copy_(x)
        for block in self.layout.outputs:
            sentinel_fill(self.at(block, s))

    def fill_group(self, first: int, sets: list[list[Any]]) -> None:
        """``fill`` of slots ``first``, ``first + 1``, ... with one input set each: per tensor one copy where the
        slots do not wrap around and the sets' tensors are rows of one (a batch draw: ``ring.copy_rows``), and
        one sentinel fill."""
        m = len(sets)
        if first + m > self.layout.n:
            for j, inputs in enumerate(sets):
                self.fill((first + j) % self.layout.n, inputs)
            return
        for i, slots in enumerate(self._in_rows):
            if slots is not None:
                copy_rows(slots[first: first + m], [inputs[i] for inputs in sets])
        for slots in self._out_rows:
            sentinel_fill(slots[first: first + m])

    def take_group(self, first: int, m: int, values: list[Any]) -> list[tuple[list[Any], list[Any]]]:
        """``take`` of slots ``first``, ``first + 1``, ...: per tensor one copy out where they do not wrap around
        (each call's tensors are rows of it)."""
        if first + m > self.layout.n:
            return [self.take((first + j) % self.layout.n, values) for j in range(m)]
        outs = [slots[first: first + m].clone() for slots in self._out_rows]
        ins = [slots[first: first + m].clone() if slots is not None else None for slots in self._in_rows]
        taken = []
        for j in range(m):
            after = [x[j] if x is not None else v for x, v in zip(ins, values)]
            taken.append(([x[j] for x in outs] + [after[i] for i in self.inplace], after))
        return taken

    def store_like(self, m: int) -> None:
        """What a candidate that returns its outputs (not in destination-passing style) adds to a group of ``m``
        calls: one copy of each output into each of the group's slots, here from the next slot's. Never a slot
        onto itself: torch skips a copy between views of the same memory, and the group's first store would go
        unmeasured."""
        for s in range(m):
            source = (s + 1) % self.layout.n
            for block in self.layout.outputs:
                self.at(block, s).copy_(self.at(block, source))

    def take(self, s: int, values: list[Any]) -> tuple[list[Any], list[Any]]:
        """(outputs with in-place inputs appended, every input as the call left it), copied out of slot ``s``."""
        outs = [self.at(b, s).clone() for b in self.layout.outputs]
        after = [self.at(b, s).clone() if b is not None else v
                 for b, v in zip(self.layout.inputs, values)]
        return outs + [after[i] for i in self.inplace], after
