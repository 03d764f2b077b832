"""The audit's slots (``timing/slots.py``) on the CPU: a call's inputs in and outputs out, and the stores a
returning candidate adds to a group, which the GPU audit times as the trusted side's own share."""

from __future__ import annotations

import torch

from solbench.evaluate.timing.slots import SLOTS, Slots
from tests.copies import Copies


class _Arena:
    def __init__(self, nbytes: int):
        self.buf = torch.zeros(nbytes, dtype=torch.uint8)


class _Sub:
    def _lend(self, nbytes: int) -> _Arena:
        return _Arena(nbytes)


def _slots(n: int) -> Slots:
    probe = [torch.ones(5, 3), 2.0]
    return Slots(_Sub(), probe, [((5,), torch.float32)], [], n)


def _mark_outputs(slots: Slots) -> None:
    for s in range(slots.layout.n):
        slots.at(slots.layout.outputs[0], s).fill_(float(s))


def test_a_slot_takes_a_calls_inputs_and_its_output_room_goes_back_to_the_sentinel():
    slots = _slots(3)
    x = torch.arange(15, dtype=torch.float32).reshape(5, 3)
    _mark_outputs(slots)
    slots.fill(1, [x, 2.0])
    outs, after = slots.take(1, [None, 2.0])
    assert torch.equal(after[0], x) and after[1] == 2.0
    assert torch.isnan(outs[0]).all()  # the sentinel: nothing written yet
    assert slots.at(slots.layout.outputs[0], 0).eq(0.0).all()  # the other slots untouched
    assert slots.at(slots.layout.inputs[0], 1) is slots.at(slots.layout.inputs[0], 1)  # one view per slot


def test_a_returning_candidates_stores_are_copied_into_every_slot_of_the_group():
    for m in (1, 2, 4):
        slots = _slots(m)
        n = slots.layout.n
        assert n == max(SLOTS, m)
        _mark_outputs(slots)
        slots.store_like(m)
        # each of the m slots received the next slot's output, in turn: a real copy, the first slot's included
        # (a copy of a slot onto itself is skipped by torch, and a group's first store went unmeasured)
        want = [float(s) for s in range(n)]
        for s in range(m):
            want[s] = want[(s + 1) % n]
        assert [slots.at(slots.layout.outputs[0], s)[0].item() for s in range(n)] == want, m
        assert want[0] == 1.0  # slot 0 holds slot 1's output, whatever the group's size


def test_a_groups_sets_go_into_their_slots_and_come_out_as_each_slots_own():
    """``fill_group`` and ``take_group``, a batch draw's sets in one copy per tensor (and one sentinel fill), as
    ``fill`` and ``take`` slot by slot would leave them; a group that wraps around the slots goes slot by slot."""
    batch = torch.randn(6, 5, 3)
    sets = [[batch[j], 2.0] for j in range(4)]
    for first in (0, 2, 3):  # 3 + 4 > 6 slots: wraps around
        slots = _slots(6)
        _mark_outputs(slots)
        with Copies() as seen:
            slots.fill_group(first, sets)
        assert seen.n == (1 if first + 4 <= 6 else 4), first
        taken = slots.take_group(first, 4, [None, 2.0])
        for j, (outs, after) in enumerate(taken):
            s = (first + j) % 6
            assert torch.equal(after[0], batch[j]) and after[1] == 2.0
            assert torch.isnan(outs[0]).all()  # the sentinel, in every slot of the group
            assert torch.equal(slots.take(s, [None, 2.0])[1][0], batch[j])
        untouched = [s for s in range(6) if (s - first) % 6 >= 4]
        assert all(slots.at(slots.layout.outputs[0], s).eq(float(s)).all() for s in untouched)
