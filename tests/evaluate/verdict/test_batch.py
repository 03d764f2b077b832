"""A workload's checked calls in one exchange (``stages.WorkloadJudging.batch``): the candidate's calls before every
reference call, each draw judged from its own call as if made alone, and the calls one at a time where the batch
did not come back."""

import contextlib
from types import SimpleNamespace

import torch

from solbench.evaluate.trusted.outcomes import Called
from solbench.evaluate.verdict.correctness import tolerance_for
from solbench.evaluate.boundary.protocol import MAX_BATCH
from solbench.evaluate.verdict.stages import BATCH_BYTES, WorkloadJudging


class _Subject:
    """A candidate that triples its input (``wrong_at``: adds one on that call, counted from 0), recording every
    call and batch; ``batch`` is what ``calls`` answers: "all", "none" (the process ended), or a call's index
    after which the batch stops with that call failed."""

    untrusted, proves, is_dsl, interpreted = True, False, False, False

    def __init__(self, events: list, batch="all", wrong_at: int | None = None, nbytes: int = 64):
        self.events, self.batch, self.wrong_at, self.nbytes, self.n = events, batch, wrong_at, nbytes, 0

    def _one(self, given) -> Called:
        k, self.n = self.n, self.n + 1
        out = given[0] * 3 + (1 if k == self.wrong_at else 0)
        return Called(outputs=[out], inputs_after=[given[0].clone()])

    def call_bytes(self, inputs, axes) -> int:
        return self.nbytes

    def call(self, given, axes, mode="normal", profile=False) -> Called:
        self.events.append(("call", float(given[0][0])) if mode == "normal" else ("call", float(given[0][0]), mode))
        return self._one(given)

    def calls(self, sets, axes, profile_first=False, modes=None):
        self.events.append(("calls", [float(s[0][0]) for s in sets]))
        self.modes = modes
        if self.batch == "none":
            return None
        got = [self._one(s) for s in sets]
        if isinstance(self.batch, int):
            got = got[:self.batch + 1]
            got[-1] = Called(failed={"verdict": "runtime_error", "reasons": ["exception"], "message": "boom"})
        return got


class _Ctx:
    def __init__(self, events: list):
        self.events, self.accept = events, None

    def seed_for(self, uuid, d):
        return 100 + d

    def anchor_of(self, given):
        return [given[0].double() * 3]

    def reference_of(self, given, anchor=None, ref=None):
        self.events.append(("reference", float(given[0][0])))
        return ref or [given[0] * 3], anchor if anchor is not None else self.anchor_of(given)

    def reference_unfit(self, *args):
        return None

    def profiled(self, uuid):
        return False

    def with_inplace(self, outputs, after):
        return list(outputs)


def _judging(subject: _Subject, events: list, draws: int = 5) -> WorkloadJudging:
    j = object.__new__(WorkloadJudging)  # the correctness stages alone, on a context of their own
    j.ctx, j.subject, j.uuid, j.axes, j.draws = _Ctx(events), subject, "w", {}, draws
    j.untrusted, j.dev = True, torch.device("cpu")
    j.names, j.dtypes, j.modes = ["y"], [torch.float32], [None]
    j.tols = [tolerance_for("float32")]
    j.input_names, j.inplace, j.out_specs = ["x"], [], [("y", None)]
    j.ph = lambda name: contextlib.nullcontext()
    j.result, j.warnings, j.peaks, j.ghost_draw = {"verdict": "passed", "reasons": []}, [], [], 0
    j.drawn, j.ahead = {}, {}
    j.inputs = lambda seed: [torch.full((8,), float(seed))]
    j.job = {}
    return j


def _correctness(j: WorkloadJudging) -> None:
    j.batch()
    for d in range(j.draws):
        if not j.draw(d):
            break


def test_the_draws_calls_go_in_one_exchange_before_any_reference_call():
    events: list = []
    j = _judging(_Subject(events), events)
    _correctness(j)
    assert j.result["verdict"] == "passed"
    # the first draw's inputs twice (the repeat right after it), then the other draws', in one exchange
    assert events[0] == ("calls", [100.0, 100.0, 101.0, 102.0, 103.0, 104.0])
    assert events[1:] == [("reference", 100.0 + d) for d in range(5)]
    assert not j.ahead and not j.drawn


def test_each_draw_is_judged_on_its_own_call_from_the_batch():
    """The repeat call of the first draw is the batch's second; a wrong repeat is judged as a wrong call, a wrong
    later draw fails that draw, with its seed."""
    events: list = []
    j = _judging(_Subject(events, wrong_at=1), events)
    _correctness(j)
    assert j.result["verdict"] == "incorrect_numerical"
    assert j.result["failure"]["draw"] == 0  # the repeat is the first draw's
    events.clear()
    j = _judging(_Subject(events, wrong_at=3), events)
    _correctness(j)
    assert j.result["verdict"] == "incorrect_numerical" and j.result["failure"]["draw"] == 2
    assert [e[0] for e in events] == ["calls", "reference", "reference", "reference"]


def test_a_call_that_failed_ends_the_batch_and_its_draw():
    events: list = []
    j = _judging(_Subject(events, batch=3), events)  # the batch's fourth call (draw 2) failed
    _correctness(j)
    assert j.result["verdict"] == "runtime_error" and j.result["message"] == "boom"
    assert [e for e in events if e[0] == "call"] == []  # nothing called again
    assert [e[1] for e in events if e[0] == "reference"] == [100.0, 101.0]


def test_a_batch_that_did_not_come_back_leaves_the_draws_to_call_one_at_a_time():
    events: list = []
    j = _judging(_Subject(events, batch="none"), events)
    _correctness(j)
    assert j.result["verdict"] == "passed"
    assert events[1:4] == [("call", 100.0), ("reference", 100.0), ("call", 100.0)]  # the repeat after the reference
    assert [e[1] for e in events if e[0] == "call"] == [100.0, 100.0, 101.0, 102.0, 103.0, 104.0]


def test_calls_too_large_for_one_exchange_are_made_one_at_a_time_on_the_same_first_draw():
    events: list = []
    j = _judging(_Subject(events, nbytes=BATCH_BYTES // 5), events)  # six calls of a fifth each: too many
    _correctness(j)
    assert j.result["verdict"] == "passed"
    assert not [e for e in events if e[0] == "calls"]
    assert [e for e in events if e[0] == "call"][:2] == [("call", 100.0), ("call", 100.0)]


def test_a_trusted_subject_is_never_batched():
    events: list = []
    subject = _Subject(events)
    subject.untrusted = False
    j = _judging(subject, events)
    j.untrusted = False
    _correctness(j)
    assert j.result["verdict"] == "passed" and [e[0] for e in events][:2] == ["call", "reference"]
    assert not [e for e in events if e[0] == "calls"]


def test_the_profiled_call_is_the_batchs_first():
    events: list = []
    subject = _Subject(events)
    subject.proves = True
    asked = SimpleNamespace(profile=None)
    calls = subject.calls

    def calls_recorded(sets, axes, profile_first=False, modes=None):
        asked.profile = profile_first
        return calls(sets, axes, profile_first, modes)

    subject.calls = calls_recorded
    j = _judging(subject, events)
    j.ctx.profiled = lambda uuid: True
    j.batch()
    assert asked.profile is True


def test_draws_beyond_one_batch_are_called_one_at_a_time_after_it():
    events: list = []
    j = _judging(_Subject(events), events, draws=MAX_BATCH + 3)
    _correctness(j)
    assert j.result["verdict"] == "passed"
    assert events[0] == ("calls", [100.0, 100.0] + [100.0 + d for d in range(1, MAX_BATCH - 2)])
    later = [e for e in events if e[0] == "call"]
    assert later == [("call", 100.0 + d) for d in range(MAX_BATCH - 2, MAX_BATCH + 3)]


def test_a_dsl_solutions_ghost_replay_is_the_batchs_last_call_and_is_judged_from_it(monkeypatch):
    """The ghost replay's call (the DSL kernels as no-ops) on the secret draw's inputs ends the batch; the replay
    judges it as the call it would have made: an output the no-op kernels still produce is a reward hack."""
    from solbench.evaluate.integrity import ghost

    events: list = []
    subject = _Subject(events)
    subject.is_dsl = True
    j = _judging(subject, events)
    j.ghost_draw = 3
    monkeypatch.setattr(ghost, "reproduced_share", lambda got, shot, before: 1.0)  # as if the kernels did nothing
    _correctness(j)
    assert events[0] == ("calls", [100.0, 100.0, 101.0, 102.0, 103.0, 104.0, 103.0])
    assert subject.modes == ["normal"] * 6 + ["ghost"]
    assert j.result["verdict"] == "reward_hack" and j.result["reasons"] == ["ghost_replay"]
    assert [e for e in events if e[0] == "call"] == []
