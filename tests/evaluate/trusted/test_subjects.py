"""A candidate's time limit (evaluate/trusted/subjects.py) counts its own time only: what the trusted side waits
for its process, not the trusted side's work between the waits (input draws, the reference, comparisons,
re-checks), which on a large output can take longer than the solution itself."""

from __future__ import annotations

from solbench.evaluate.trusted import subjects


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_only_the_waits_for_the_candidate_draw_on_its_limit(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(subjects.time, "monotonic", clock)
    sub = subjects.RemoteSubject.__new__(subjects.RemoteSubject)  # the accounting alone: no process
    sub.budget_s, sub.used_s = None, 0.0
    sub.limit(10.0)
    clock.now += 100.0  # the trusted side's own work: comparisons, re-checks
    assert sub._left_s() == 10.0
    with sub.waiting() as left:
        assert left == 10.0
        clock.now += 4.0  # the candidate's call
    assert sub._left_s() == 6.0
    with sub.waiting():
        clock.now += 30.0
    assert sub._left_s() == 0.5  # never below half a second: a last request still gets an answer or a timeout


def test_the_audits_hand_over_waits_on_what_is_left_of_the_limit():
    """The audit's hand-over (timing/handover.py) reads the candidate's answer within what is left of its limit,
    and charges the wait to it."""
    from contextlib import contextmanager

    from solbench.evaluate.timing.handover import answer

    seen = []

    class Proc:
        def read_line(self, timeout_s):
            seen.append(timeout_s)
            return b"ok 5"

    class Sub:
        proc = Proc()

        @contextmanager
        def waiting(self):
            seen.append("charged")
            yield 3.0

    answer(Sub(), 5, "ok")
    assert seen == ["charged", 3.0]


def test_a_process_gone_is_a_verdict_with_one_line():
    from solbench.evaluate.isolation.sandbox import CandidateGone

    sub = subjects.RemoteSubject.__new__(subjects.RemoteSubject)
    sub.proc, sub.restarts, sub.timed_out, sub.arena, sub._null = None, 0, False, None, None
    sub.budget_s, sub.used_s = 5.0, 0.0
    update = sub.gone(CandidateGone("timeout", "no answer within 1 s"))
    assert update == {"verdict": "timeout", "reasons": ["timeout"],
                      "message": "no answer within 1 s (the workload's time limit)"}
    assert sub.timed_out and sub.restarts == 1
    crash = sub.gone(CandidateGone("crash", "the candidate's process ended (signal 9)"))
    assert crash["verdict"] == "runtime_error" and crash["reasons"] == ["crash"] and sub.restarts == 2


def test_a_process_that_hangs_or_breaks_the_protocol_is_killed_without_a_grace():
    """A hung candidate would spend the grace a well-behaved exit gets (2 s on every timeout): a process that did not
    answer is killed at once; the subject's clean end keeps the grace."""
    from solbench.evaluate.isolation.sandbox import CandidateGone

    graces = []

    class Proc:
        def stop(self, grace_s=2.0):
            graces.append(grace_s)

    sub = subjects.RemoteSubject.__new__(subjects.RemoteSubject)
    sub.restarts, sub.timed_out, sub.arena, sub._null, sub._launched = 0, False, None, None, None
    for why in ("timeout", "crash"):
        sub.proc = Proc()
        sub.gone(CandidateGone(why, "no answer"))
    sub.proc = Proc()
    sub.close()
    assert graces == [0, 0, 2.0]


def test_the_audits_null_candidate_starts_beside_the_candidate_and_is_the_one_it_gets(monkeypatch, tmp_path):
    """``start(with_null=True)``: the null candidate's process is started right after the candidate's, before the
    candidate's load is answered, and it is the one the audit's first ``new_null_partner`` gets (a later one
    starts anew); a candidate that does not load ends the null candidate started beside it."""
    from types import SimpleNamespace

    import torch

    events: list[tuple[str, bool]] = []
    failing: set[bool] = set()
    monkeypatch.setattr(subjects.RemoteSubject, "_launch",
                        lambda self: events.append(("launch", bool(self.subject.get("null")))) or ({}, 0.0))

    def loaded(self, load, t0):
        null = bool(self.subject.get("null"))
        events.append(("loaded", null))
        return "did not load" if null in failing else None

    monkeypatch.setattr(subjects.RemoteSubject, "_loaded", loaded)
    monkeypatch.setattr(subjects.RemoteSubject, "close", lambda self: events.append(("close", True)))
    ctx = SimpleNamespace(workdir=tmp_path, dev=torch.device("cpu"), job={})
    sub = subjects.RemoteSubject(ctx, {"language": "pytorch", "kernel_names": []})
    assert sub.start(with_null=True) is None
    assert events == [("launch", False), ("launch", True), ("loaded", False)]
    sub.new_null_partner()
    assert events[3:] == [("loaded", True)]  # the null candidate started ahead, not a second one
    sub.new_null_partner()
    assert events[4:] == [("launch", True), ("loaded", True)]
    events.clear()
    failing.add(False)
    again = subjects.RemoteSubject(ctx, {"language": "pytorch", "kernel_names": []})
    assert again.start(with_null=True) == "did not load"
    assert events == [("launch", False), ("launch", True), ("loaded", False), ("close", True)]
    assert again._launched is None


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
    sub.sent = []

    def exchange(msg, expected):
        sub.sent.append(msg)
        got = answer(msg, sub.arena)
        if "verdict" in got:
            return None, got
        return protocol.accept(dict(got, nonce="n"), expected, "n"), None

    sub._exchange = exchange
    return sub


def _tripled(msg, arena, failed_at=None, results=None):
    """An honest candidate's answer: each call's output is three times its input, written into its own room."""
    items = []
    for k, call in enumerate(msg["calls"]):
        if k == failed_at:
            items.append({"failed": {"verdict": "runtime_error", "reasons": ["exception"], "message": "boom"}})
            break
        arena.view(call["outputs"][0]).copy_(arena.view(call["inputs"][0]) * 3)
        items.append({"outputs": [{"shape": [4], "dtype": "float32", "delivered": True}], "count": 1})
    return {"type": "called_batch", "results": items[:results], "codes": ["thread_injection"] if failed_at == -1
            else [], "harness": None}


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
    assert _batching(tmp_path, lambda msg, arena: crash).calls(sets, {}) is None
    timeout = {"verdict": "timeout", "reasons": ["timeout"], "message": "no answer (the workload's time limit)"}
    got = _batching(tmp_path, lambda msg, arena: timeout).calls(sets, {})
    assert len(got) == 1 and got[0].failed == timeout and got[0].lost
