"""The ring of timed-call slots (evaluate/boundary/ring.py): fresh inputs per slot, sentinel-filled outputs the trusted side
reads itself, and the candidate's view of a slot."""

import pytest
import torch

from solbench.evaluate.boundary import ring
from solbench.evaluate.boundary.arena import ALIGN, Arena, view
from tests.copies import Copies


def _draw(seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(4, 6, generator=g), 0.5, torch.randint(0, 9, (3,), generator=g)]


def test_every_slot_gets_its_own_draw_and_the_trusted_side_keeps_it(tmp_path):
    probe = _draw(0)
    outs = [((4, 6), torch.float32), ((3,), torch.int64), ((2,), torch.bool)]
    layout, used = ring.Layout.plan(5, probe, outs)
    tr = ring.TrustedRing(Arena(used, torch.device("cpu"), tmp_path), layout, _draw)
    tr.fill(11, 3)
    # slots hold exactly the draws of their seeds (a plain draw: one seed per set), at addresses of their own
    assert tr.key(2) == {"seed": 11, "sets": 3, "set": 2}
    for k, seed in enumerate([11, 12, 13]):
        assert torch.equal(tr.inputs_after(k)[0], _draw(seed)[0]) and tr.inputs_after(k)[1] == 0.5
    assert not torch.equal(tr.pristine[0][0], tr.pristine[1][0])
    # nothing has written an output yet: every filled slot is found unwritten
    assert tr.unwritten_slots(3) == [0, 1, 2]
    cand = ring.CandidateRing(tr.arena.buf, layout.describe(), tr.round_spec(), dps=False)
    args = cand.args(1)
    assert torch.equal(args[0], tr.pristine[1][0]) and args[1] == 0.5
    # a call's arguments are copies of its own slot: their storage reaches no other slot of the ring
    assert args[0].untyped_storage().data_ptr() != tr.arena.buf.untyped_storage().data_ptr()
    assert args[0].data_ptr() != cand.args(0)[0].data_ptr()  # and each call gets another address
    cand.prepare(1)
    cand.store(1, [torch.ones(4, 6), torch.zeros(3, dtype=torch.int64), torch.zeros(2, dtype=torch.bool)])
    assert tr.unwritten_slots(3) == [0, 2]
    assert torch.equal(tr.outputs_of(1)[0], torch.ones(4, 6))
    # a result of the wrong shape, a missing one, or the slot's own memory (written there by the solution, which
    # can reach the whole ring in its process) is refused, never left for the slot's sentinel to tell
    cand.prepare(2)
    spec = ring.slot_spec(layout.describe()["outputs"][0], 2)
    own = view(tr.arena.buf, spec)
    shifted = view(tr.arena.buf, dict(spec, offset=spec["offset"] + 4))  # the slot's bytes but its first element's
    for bad in ([torch.ones(5, 6), torch.zeros(3, dtype=torch.int64), torch.zeros(2, dtype=torch.bool)],
                [torch.ones(4, 6), None, torch.zeros(2, dtype=torch.bool)], [torch.ones(4, 6)],
                [own, torch.zeros(3, dtype=torch.int64), torch.zeros(2, dtype=torch.bool)],
                [shifted, torch.zeros(3, dtype=torch.int64), torch.zeros(2, dtype=torch.bool)]):
        with pytest.raises(ring.SlotRefused):
            cand.store(2, bad)
    assert 2 in tr.unwritten_slots(3)
    # a refill puts every output room back to its sentinel
    tr.fill(14, 3)
    assert tr.unwritten_slots(3) == [0, 1, 2]


def test_destination_passing_calls_write_their_slot_directly(tmp_path):
    layout, used = ring.Layout.plan(2, _draw(0), [((4, 6), torch.float32)])
    tr = ring.TrustedRing(Arena(used, torch.device("cpu"), tmp_path), layout, _draw)
    tr.fill(1, 2)
    cand = ring.CandidateRing(tr.arena.buf, layout.describe(), tr.round_spec(), dps=True)
    x, scale, idx, out = cand.args(0)
    torch.mul(x, scale, out=out)
    assert tr.unwritten_slots(2) == [0, 1]  # written to the call's own buffer, copied into its slot after it
    cand.store(0, [])
    assert tr.unwritten_slots(2) == [1]
    assert torch.equal(tr.outputs_of(0)[0], tr.pristine[0][0] * 0.5)


def test_a_draw_of_several_sets_fills_the_ring_in_one_batch(tmp_path):
    """A workload's draw gives the round's sets in one call (``make_input_sets``); the ring keeps each set as
    drawn, and a set's key names its batch."""
    asked = []

    class Draw:
        def __call__(self, seed):
            raise AssertionError("a draw with sets is asked for the round's sets at once")

        def sets(self, seed, count):
            asked.append((seed, count))
            return [_draw(seed * 100 + j) for j in range(count)]

    layout, used = ring.Layout.plan(4, _draw(0), [((4, 6), torch.float32)])
    tr = ring.TrustedRing(Arena(used, torch.device("cpu"), tmp_path), layout, Draw())
    tr.fill(7, 4)
    assert asked == [(7, 4)]
    assert torch.equal(tr.inputs_after(3)[0], _draw(703)[0]) and tr.key(3) == {"seed": 7, "sets": 4, "set": 3}
    tr.fill(8, 1)
    assert tr.key(0) == {"seed": 8}  # one set: the draw of its seed (what a replay redraws)


def test_sentinels_are_found_and_partial_writes_are_not_unwritten():
    x = torch.empty(3, 4)
    ring.sentinel_fill(x)
    assert bool(ring.unwritten(x).all())
    x[1, 0] = 1.0
    assert ring.unwritten(x).tolist() == [True, False, True]
    b = torch.empty(2, 3, dtype=torch.bool)
    ring.sentinel_fill(b)
    b[0] = True
    assert ring.unwritten(b).tolist() == [False, True]


def test_capacity_is_bounded_by_memory_and_by_the_cap():
    cpu = torch.device("cpu")
    assert ring.capacity(1 << 10, cpu, 1 << 10) == ring.MAX_SLOTS_CPU == 32  # small: rounds of 32 calls
    assert ring.capacity(50 << 20, cpu, 50 << 20) == 10  # 100 MB a slot: what 1 GiB holds
    assert ring.capacity(400 << 20, cpu, 400 << 20) == 5  # 800 MB a slot: what 4 GiB holds, up to 8
    assert ring.capacity(3 << 30, cpu, 0) == 1


def test_a_calls_arguments_are_dense_copies_at_a_shifting_offset_of_the_harness_buffer(tmp_path):
    """The candidate's views made once per round (``offsets``, ``rows``) give each call what a view made from the
    slot's description would: a dense tensor of the slot's shape and dtype holding the slot's values, at offset
    ``(7k + 3) mod OFFSETS`` aligned units into a buffer of the harness's own, for every kind of tensor."""

    def draw(seed):
        g = torch.Generator().manual_seed(seed)
        return [torch.randn(3, 5, generator=g).to(torch.bfloat16), torch.tensor(seed * 1.5),
                torch.rand(7, generator=g) > 0.5, torch.randint(0, 9, (2, 0, 3), generator=g)]

    outs = [((3, 5), torch.float32), ((), torch.int32)]
    layout, used = ring.Layout.plan(4, draw(0), outs)
    tr = ring.TrustedRing(Arena(used, torch.device("cpu"), tmp_path), layout, draw)
    tr.fill(3, 4)
    for dps in (False, True):
        cand = ring.CandidateRing(tr.arena.buf, layout.describe(), tr.round_spec(), dps=dps)
        for k in range(4):
            args = cand.args(k)
            assert len(args) == 4 + (2 if dps else 0)
            for got, want in zip(args, tr.pristine[k] + [torch.empty(s, dtype=d) for s, d in outs]):
                assert got.shape == want.shape and got.dtype == want.dtype and got.is_contiguous()
                shift = ((k * 7 + 3) % ring.CandidateRing.OFFSETS) * ALIGN
                assert got.storage_offset() * got.element_size() == shift
            assert all(torch.equal(g, w) for g, w in zip(args[:4], tr.pristine[k]))
            if dps:  # the output room the call gets holds the sentinel, never another call's result
                assert torch.isnan(args[4]).all() and int(args[5]) == torch.iinfo(torch.int32).max
            cand.store(k, [torch.full((3, 5), float(k)), torch.tensor(k, dtype=torch.int32)] if not dps else [])
        assert tr.unwritten_slots(4) == ([0, 1, 2, 3] if dps else [])
        if not dps:
            assert all(torch.equal(tr.outputs_of(k)[0], torch.full((3, 5), float(k))) for k in range(4))
        tr.fill(5, 4)


def test_rows_of_one_batch_are_copied_in_one_and_anything_else_row_by_row():
    """``copy_rows``: the rows of one batch (``stacked``, found by base, dtype, shape, strides and address) go into
    the slots in one copy, one tensor given to every slot too; anything else, views that are not the batch's
    rows in order among them, row by row, with the same values."""
    batch = torch.randn(6, 4, 3)
    rows = [batch[j] for j in range(1, 5)]
    src = ring.stacked(rows)
    assert src is not None and src.data_ptr() == batch[1].data_ptr() and src.shape == (4, 4, 3)
    assert ring.stacked(rows[:1]).shape == (1, 4, 3)
    other = torch.randn(6, 4, 3)
    wrong = [[rows[1], rows[0]], [rows[0], rows[1].clone()], [rows[0], other[2]], [rows[0], rows[2]],
             [batch[0, :, :2], batch[1, :, :2]], [batch[0].t(), batch[1].t()],
             [batch[0].view(torch.int32), batch[1].view(torch.int32)], [0.5, 0.5]]
    for xs in wrong:
        assert ring.stacked(xs) is None, xs
    for xs, copies in [(rows, 1), ([rows[2]] * 4, 1), ([rows[1], rows[0], rows[3], rows[2]], 4),
                       ([batch[j].t() for j in range(4)], 4)]:
        dst = torch.full((4, *xs[0].shape), float("nan"))
        with Copies() as seen:
            ring.copy_rows(dst, xs)
        assert seen.n == copies, xs
        assert all(torch.equal(dst[j], x) for j, x in enumerate(xs))


def test_a_workloads_draw_of_several_sets_is_filled_in_one_copy_per_tensor(tmp_path):
    """A workload's draw of a round's sets (``make_input_sets``) gives each tensor input's sets as rows of one
    batch: the trusted ring's fill is one copy per tensor input, whatever the round's length, and each slot holds
    its own set."""
    from solbench.problems.inputs import make_input_sets
    from solbench.problems.problem import load_problem

    problem = load_problem("rmsnorm")
    w = problem.workloads[0]
    d = problem.definition
    sets = make_input_sets(d, w, 5, 6, "cpu")
    tensors = [i for i, x in enumerate(sets[0]) if isinstance(x, torch.Tensor)]
    assert tensors and all(ring.stacked([s[i] for s in sets]) is not None for i in tensors)

    class Draw:
        def __call__(self, seed):
            return make_input_sets(d, w, seed, 1, "cpu")[0]

        def sets(self, seed, count):
            return make_input_sets(d, w, seed, count, "cpu")

    layout, used = ring.Layout.plan(8, sets[0], [((4,), torch.float32)])
    tr = ring.TrustedRing(Arena(used, torch.device("cpu"), tmp_path), layout, Draw())
    with Copies() as seen:
        tr.fill(5, 6)
    assert seen.n == len(tensors)
    for k in range(6):
        after = tr.inputs_after(k)
        assert all(torch.equal(after[i], sets[k][i]) for i in tensors)
