"""A candidate's checked calls (evaluate/trusted/checked.py): the arena they share, and a workload's calls in one
exchange, read call by call, ended at a verdict, refused where the reply does not match the batch."""

from __future__ import annotations

from solbench.evaluate.trusted import subjects


def test_checked_calls_of_one_size_share_an_arena_until_a_ring_or_the_workloads_end(tmp_path):
    """A checked call reuses the arena of the call before where it is of the same size (the candidate keeps its
    mapping: on the GPU no new IPC handle on either side); a timing's ring, another size or the workload's end
    lends a fresh one, under a new id the candidate attaches anew."""
    import types

    import torch

    sub = subjects.RemoteSubject.__new__(subjects.RemoteSubject)  # the arenas alone: no process
    sub.ctx = types.SimpleNamespace(dev=torch.device("cpu"), torch=torch, job={"sandbox": {"private": str(tmp_path)}})
    sub.arena, sub.arena_id, sub._calls_arena, sub.budget_s = None, 0, None, None
    first = sub._lend_for_calls(1024)
    first.reserve((64,), torch.float32)
    again = sub._lend_for_calls(1024)
    assert again is first and again.used == 0 and sub.arena_id == 1
    assert sub._lend_for_calls(2048) is not first and sub.arena_id == 2
    ring = sub._lend(4096)  # a timing's ring, lent by ``cross_check``
    assert sub._lend_for_calls(2048) is not ring and sub.arena_id == 4
    sub.end()
    assert sub.arena is None and sub._lend_for_calls(2048) is not None and sub.arena_id == 5


def _batching(tmp_path, answer):
    """A subject with an arena and no process: ``answer(msg, arena)`` stands in for the candidate's reply to a
    ``calls`` command (a dict, checked as the protocol checks it), or for a process gone (a verdict update)."""
    import contextlib
    import types

    import torch

    from solbench.evaluate.boundary import protocol

    sub = subjects.RemoteSubject.__new__(subjects.RemoteSubject)
    sub.ctx = types.SimpleNamespace(dev=torch.device("cpu"), torch=torch, job={"sandbox": {"private": str(tmp_path)}},
                                    out_shapes=lambda axes: [((4,), torch.float32)], input_names=["x"], inplace=[],
                                    phases=lambda name: contextlib.nullcontext())
    sub.arena, sub.arena_id, sub._calls_arena, sub.budget_s, sub.proc = None, 0, None, None, None
    sub.sent, sub.used_s = [], 0.0

    def exchange(msg, expected):
        sub.sent.append(msg)
        sub.used_s += 1.0  # each exchange's wait, charged as ``waiting`` charges it
        got = answer(msg, sub.arena)
        if "verdict" in got:
            return None, got
        return protocol.accept(dict(got, nonce="n"), expected, "n"), None

    sub._exchange = exchange
    return sub


def _tripled(msg, arena, failed_at=None, results=None, lost=False):
    """An honest candidate's answer: each call's output is three times its input, written into its own room
    (``failed_at``: that call fails, ``lost``: losing its CUDA context)."""
    items = []
    for k, call in enumerate(msg["calls"]):
        if k == failed_at:
            items.append({"failed": {"verdict": "runtime_error", "reasons": ["exception", "cuda_fault"][:1 + lost],
                                     "message": "boom"}, "lost": lost})
            break
        arena.view(call["outputs"][0]).copy_(arena.view(call["inputs"][0]) * 3)
        items.append({"outputs": [{"shape": [4], "dtype": "float32", "delivered": True}], "count": 1})
    return {"type": "called_batch", "results": items[:results], "codes": ["thread_injection"] if failed_at == -1
            else [], "harness": None, "lost": lost}


def test_a_batch_of_calls_is_read_call_by_call_from_rooms_of_their_own(tmp_path):
    import torch

    sub = _batching(tmp_path, _tripled)
    sets = [[torch.full((4,), float(k))] for k in range(3)]
    got = sub.calls(sets, {})
    assert len(sub.sent) == 1 and sub.sent[0]["op"] == "calls" and len(sub.sent[0]["calls"]) == 3
    assert [float(c.outputs[0][0]) for c in got] == [0.0, 3.0, 6.0]
    assert all(torch.equal(c.inputs_after[0], s[0]) for c, s in zip(got, sets))
    flagged = _batching(tmp_path, lambda msg, arena: _tripled(msg, arena, failed_at=-1)).calls(sets, {})
    assert all(c.codes == ["thread_injection"] for c in flagged)  # the process's own checks hold for every call


def test_a_batch_ends_at_its_first_failed_call(tmp_path):
    import torch

    sub = _batching(tmp_path, lambda msg, arena: _tripled(msg, arena, failed_at=1))
    got = sub.calls([[torch.ones(4)] for _ in range(3)], {})
    assert len(got) == 2 and got[0].failed is None and got[1].failed["verdict"] == "runtime_error"


def test_a_batch_ends_at_a_call_with_codes_of_its_own(tmp_path):
    """A call whose result was not read (``tensor_subclass``) is a verdict: the candidate stops there, and a batch
    cut short at it is no forgery."""
    import torch

    def subclass_at_1(msg, arena):
        answer = _tripled(msg, arena)
        answer["results"] = answer["results"][:1] + [{"codes": ["tensor_subclass"], "outputs": [], "count": 0}]
        return answer

    got = _batching(tmp_path, subclass_at_1).calls([[torch.ones(4)] for _ in range(3)], {})
    assert len(got) == 2 and got[0].codes == [] and got[1].codes == ["tensor_subclass"]


def test_a_batch_answered_short_or_long_is_forged(tmp_path):
    import torch

    sets = [[torch.ones(4)] for _ in range(3)]
    short = _batching(tmp_path, lambda msg, arena: _tripled(msg, arena, results=2)).calls(sets, {})
    assert len(short) == 1 and short[0].failed["reasons"] == ["result_forgery"]

    def longer(msg, arena):
        answer = _tripled(msg, arena)
        answer["results"].append(answer["results"][0])
        return answer

    long = _batching(tmp_path, longer).calls(sets, {})
    assert len(long) == 1 and long[0].failed["reasons"] == ["result_forgery"]


def test_a_batch_whose_process_ended_is_made_again_one_call_at_a_time_but_a_time_out_is_a_verdict(tmp_path):
    import torch

    sets = [[torch.ones(4)]]
    crash = {"verdict": "runtime_error", "reasons": ["crash"], "message": "the process ended"}
    crashed = _batching(tmp_path, lambda msg, arena: crash)
    assert crashed.calls(sets, {}) is None and crashed.used_s == 0.0  # its calls are made and charged again
    timeout = {"verdict": "timeout", "reasons": ["timeout"], "message": "no answer (the workload's time limit)"}
    got = _batching(tmp_path, lambda msg, arena: timeout).calls(sets, {})
    assert len(got) == 1 and got[0].failed == timeout and got[0].lost


def test_a_cuda_context_lost_after_the_first_call_has_the_batch_made_again_one_call_at_a_time(tmp_path):
    """The process ends unchecked where a call lost its CUDA context, so the calls before it would go unchecked
    with it: after the first call the batch is made again call by call in a fresh process, its wait not charged;
    the first call's own loss is its verdict. A lost context that is not the last call's is a forged reply."""
    import torch

    sets = [[torch.ones(4)] for _ in range(3)]
    sub = _batching(tmp_path, lambda msg, arena: _tripled(msg, arena, failed_at=2, lost=True))
    assert sub.calls(sets, {}) is None and sub.used_s == 0.0 and sub.arena is None
    first = _batching(tmp_path, lambda msg, arena: _tripled(msg, arena, failed_at=0, lost=True)).calls(sets, {})
    assert len(first) == 1 and first[0].lost and "cuda_fault" in first[0].failed["reasons"]

    def claims_lost(msg, arena):
        return dict(_tripled(msg, arena), lost=True)

    forged = _batching(tmp_path, claims_lost).calls(sets, {})
    assert len(forged) == 1 and forged[0].failed["reasons"] == ["result_forgery"]
