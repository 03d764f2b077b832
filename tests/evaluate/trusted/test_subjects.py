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
