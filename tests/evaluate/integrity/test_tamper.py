"""The in-process layer (evaluate/integrity/tamper.py, ghost.py, calls.not_plain): what a snapshot sees change,
what the ghost replay counts, which results are never touched."""

import sys
import threading

import pytest
import torch

import solbench.evaluate.candidate.process  # noqa: F401  (the harness modules a candidate's process loads)
from solbench.evaluate.boundary import calls
from solbench.evaluate.integrity import ghost, tamper
from solbench.evaluate.timing import rounds


@pytest.fixture
def before():
    return tamper.snapshot()


def test_a_snapshot_does_not_change_by_itself(before):
    assert tamper.tampered(before) == []
    now = tamper.snapshot()
    assert tamper.digest(tamper.comparable(before, now)) == tamper.digest(before)


def test_rebinding_an_imported_name_in_a_harness_module_is_seen(before, monkeypatch):
    monkeypatch.setattr(rounds, "time", type("FakeTime", (), {"perf_counter": staticmethod(lambda: 0.0)}))
    assert "solbench.evaluate.timing.rounds.time" in tamper.tampered(before)


def test_a_name_added_to_a_harness_module_is_seen(before, monkeypatch):
    monkeypatch.setattr(calls, "len", lambda x: 0, raising=False)  # would shadow the builtin inside calls
    assert "solbench.evaluate.boundary.calls.len" in tamper.tampered(before)


def test_the_checker_itself_is_covered(before, monkeypatch):
    original = tamper.snapshot
    monkeypatch.setattr(tamper, "tampered", lambda *a, **k: [])
    now = original()
    assert now["solbench.evaluate.integrity.tamper.tampered"] != before["solbench.evaluate.integrity.tamper.tampered"]
    # the digest the trusted side compares changes with it
    assert tamper.digest(tamper.comparable(before, now)) != tamper.digest(before)


def test_swapping_a_functions_code_in_place_is_seen(before):
    f = calls.as_list
    code = f.__code__
    f.__code__ = (lambda result: [result]).__code__
    try:
        assert "solbench.evaluate.boundary.calls.as_list" in tamper.tampered(before)
    finally:
        f.__code__ = code


@pytest.mark.parametrize("hook", ["settrace", "setprofile"])
def test_trace_and_profile_hooks_are_seen(before, hook):
    getattr(sys, hook)(lambda *a: None)
    try:
        assert f"hook.sys.get{hook[3:]}" in tamper.tampered(before)
    finally:
        getattr(sys, hook)(None)


def test_thread_hooks_and_torch_modes_are_seen(before):
    threading.settrace(lambda *a: None)
    try:
        assert "hook.threading.trace" in tamper.tampered(before)
    finally:
        threading.settrace(None)
    from torch.overrides import TorchFunctionMode

    with TorchFunctionMode():
        assert "hook.torch._len_torch_function_stack" in tamper.tampered(before)


def test_an_eval_frame_callback_left_set_is_seen_and_a_compiled_call_leaves_none():
    """A callback on torch's eval-frame hook is handed every Python frame, the harness's too: left set after a
    call, it is tampering; torch.compile sets it only while its compiled call runs."""
    from torch._C._dynamo import eval_frame

    compiled = torch.compile(lambda x: x * 2 + 1, backend="eager")
    compiled(torch.ones(4))  # dynamo's import wraps torch.manual_seed: before the snapshot, as in a candidate
    base = tamper.snapshot()
    assert compiled(torch.ones(4)).tolist() == [3.0] * 4
    assert tamper.tampered(base) == []
    from torch._dynamo.types import ConvertFrameReturn

    handed = []

    def callback(frame, cache_entry, frame_state):  # runs every frame as it is, having seen it
        handed.append(frame.f_code.co_name)
        return ConvertFrameReturn()

    prior = eval_frame.set_eval_frame(callback)
    try:
        changed = tamper.tampered(base)
    finally:
        eval_frame.set_eval_frame(prior)
    assert "hook.torch.get_eval_frame_callback" in changed and "tampered" in handed  # the checker's own frame
    assert tamper.tampered(base) == []


def test_watched_state_is_seen(before):
    class State:
        def __init__(self):
            self.fn = print
            self.counter = 0

    s = State()
    tamper.watch("probe", s, mutable={"counter"})
    base = tamper.snapshot()
    s.counter += 1
    assert tamper.tampered(base) == []
    s.fn = repr
    assert "watched.probe.fn" in tamper.tampered(base)
    tamper._watched.pop("probe")


def test_results_that_would_run_the_solutions_code_are_refused():
    class LazyTuple(tuple):
        def __iter__(self):
            raise AssertionError("iterated")

    class Sub(torch.Tensor):
        pass

    class Number:
        def __float__(self):
            raise AssertionError("converted")

    assert calls.not_plain(LazyTuple([torch.ones(2)])) and "tuple subclass" in calls.not_plain(LazyTuple())
    assert calls.not_plain(torch.ones(2).as_subclass(Sub))
    assert calls.not_plain([torch.ones(2), Number()])
    assert calls.not_plain((torch.ones(2), 1.5, None)) is None and calls.not_plain(torch.ones(1)) is None
    assert calls.as_list(LazyTuple([1])) == [LazyTuple([1])]  # not unpacked: that would iterate it


def test_the_ghost_must_not_reproduce_most_of_the_output():
    real = [torch.arange(100.0)]
    nothing_done = [torch.full((100,), float("nan"))]
    assert ghost.reproduced_share(real, nothing_done, [None]) == 0.0
    token = real[0].clone()
    token[:2] = float("nan")  # the DSL kernels wrote 2 of 100 elements
    assert ghost.reproduced_share(real, [token], [None]) == 0.98
    # an in-place output: only the elements the real call changed count
    before = torch.zeros(100)
    after = before.clone()
    after[10:20] = 1.0
    assert ghost.reproduced_share([after], [before.clone()], [before]) == 0.0
    assert ghost.reproduced_share([after], [after.clone()], [before]) == 1.0
    # a ghost that returns something else gives no evidence
    assert ghost.reproduced_share(real, [torch.zeros(3)], [None]) is None
    assert ghost.reproduced_share(real, [], [None]) is None


def test_torchs_own_result_tuples_are_plain():
    r = torch.max(torch.ones(2, 3), dim=1)
    assert calls.not_plain(r) is None and len(calls.as_list(r)) == 2

    class Fake(tuple):
        pass

    Fake.__module__ = "torch.return_types"  # a look-alike is not torch's own class
    assert calls.not_plain(Fake([torch.ones(1)]))


def test_state_torch_keeps_in_its_classes_is_not_tamper(before):
    """torch.cuda.graph caches its capture stream in a class attribute at the first capture (seen on the H200):
    the methods of torch's CUDA classes are fingerprinted, not their data."""
    cls = torch.cuda.graph
    saved = vars(cls).get("default_capture_stream", None)
    try:
        cls.default_capture_stream = object()
        assert tamper.tampered(before) == []
    finally:
        cls.default_capture_stream = saved
    original = cls.__enter__
    try:
        cls.__enter__ = lambda self: None
        assert "torch.cuda.graph.__enter__" in tamper.tampered(before)
    finally:
        cls.__enter__ = original


def test_the_quick_check_sees_what_a_snapshot_sees_and_takes_one_only_where_something_moved(monkeypatch):
    """``Harness.changed``: no snapshot where the marks stand still; a change a snapshot sees is reported through
    the marks (a function's code, a rebound name, a hook); a move a snapshot does not count re-marks."""
    harness = tamper.Harness()
    assert harness.changed() == ([], None)  # None: no snapshot was taken
    cls = torch.cuda.graph
    saved = vars(cls).get("default_capture_stream", None)
    try:
        cls.default_capture_stream = object()  # data torch keeps in its class: moves the marks, not a snapshot
        found, now = harness.changed()
        assert found == [] and now is not None
        assert harness.changed() == ([], None)  # re-marked: no snapshot on the next check
    finally:
        cls.default_capture_stream = saved
    f = calls.as_list
    code = f.__code__
    f.__code__ = (lambda result: [result]).__code__
    try:
        assert "solbench.evaluate.boundary.calls.as_list" in harness.changed()[0]  # and where it is imported
    finally:
        f.__code__ = code
    monkeypatch.setattr(rounds, "time", type("FakeTime", (), {}))
    assert "solbench.evaluate.timing.rounds.time" in harness.changed()[0]
    monkeypatch.undo()
    sys.setprofile(lambda *a: None)
    try:
        assert "hook.sys.getprofile" in harness.changed()[0]
    finally:
        sys.setprofile(None)
    assert harness.changed()[0] == []


def test_a_function_replaced_by_a_builtin_is_reported_not_raised(monkeypatch):
    harness = tamper.Harness()
    monkeypatch.setattr(calls, "as_list", len)
    assert "solbench.evaluate.boundary.calls.as_list" in harness.changed()[0]


def test_an_object_freed_under_the_marks_cannot_lend_its_identity_to_a_replacement():
    """The quick check holds the objects it marked: a look-alike allocated where a marked one lay (the same id and
    type: CPython's allocator hands a freed block out again) cannot pass for it."""

    class Box:
        pass

    state = type("State", (), {})()
    state.box = Box()
    tamper.watch("box", state)
    try:
        harness = tamper.Harness()
        marked = id(state.box)
        state.box = None  # the marked Box is freed here unless something else holds it
        made = []  # look-alikes, kept so that each takes the next free block: one lands where the first lay
        while len(made) < 10_000 and (not made or id(made[-1]) != marked):
            made.append(Box())
        state.box = made[-1]
        assert "watched.box.box" in harness.changed()[0]
    finally:
        tamper._watched.pop("box")


def test_a_modules_class_reassigned_is_seen():
    """A module's ``__class__`` set to a subclass that answers attributes of its own (``time.perf_counter`` then
    returns what the solution wants) changes no name a harness module binds: the type is in the fingerprint."""
    import time
    import types

    class Answering(types.ModuleType):
        def __getattribute__(self, name):
            return (lambda: 0.0) if name == "perf_counter" else types.ModuleType.__getattribute__(self, name)

    harness = tamper.Harness()
    time.__class__ = Answering
    try:
        assert rounds.time.perf_counter() == 0.0
        assert "solbench.evaluate.timing.rounds.time" in harness.changed()[0]
    finally:
        time.__class__ = types.ModuleType
    assert harness.changed()[0] == []


def test_keyword_defaults_changed_in_place_are_seen():
    def run(*, hold=True):
        return hold

    state = type("State", (), {})()
    state.run = run
    tamper.watch("kw", state)
    try:
        harness = tamper.Harness()
        run.__kwdefaults__["hold"] = False  # the same dict, one entry changed
        assert "watched.kw.run" in harness.changed()[0]
    finally:
        tamper._watched.pop("kw")


def test_a_namespace_replaced_by_a_dict_that_answers_otherwise_is_read_as_stored():
    """A watched object's ``__dict__`` replaced by a dict subclass whose methods answer from a frozen copy: the
    check reads the storage (what attribute lookups read), where a watched attribute was replaced."""

    class Frozen(dict):
        def __init__(self, shown):
            super().__init__(shown)
            self.shown = dict(shown)

        def keys(self):
            return self.shown.keys()

        def values(self):
            return self.shown.values()

        def __getitem__(self, key):
            return self.shown[key]

    state = type("State", (), {})()
    state.fn, state.counter = print, 0
    tamper.watch("frozen", state, mutable={"counter"})
    try:
        harness = tamper.Harness()
        state.__dict__ = Frozen(vars(state))
        dict.__setitem__(state.__dict__, "fn", repr)
        assert state.fn is repr
        assert "watched.frozen.fn" in harness.changed()[0]
    finally:
        tamper._watched.pop("frozen")


def test_a_name_that_changes_by_design_moves_the_marks_but_is_never_tamper(monkeypatch):
    """Names in ``MUTABLE_GLOBALS`` (caches a harness module fills on first use) are left out of the check, whether
    the module holds one when marked (``arena._pool``: its value may change) or gains one later (the count of
    names moves the marks; the snapshot finds nothing and the marks are taken again). Any other name added beside
    it is still seen."""
    from solbench.evaluate.boundary import arena

    harness = tamper.Harness()
    monkeypatch.setattr(arena, "_pool", object())
    assert harness.changed()[0] == []
    monkeypatch.setattr(calls, "_extra", object(), raising=False)  # a module that held none of them
    found, now = harness.changed()
    assert found == [] and now is not None
    assert harness.changed() == ([], None)  # marked again with it: no snapshot on the next check
    monkeypatch.setattr(calls, "_extra", object())
    assert harness.changed()[0] == []
    monkeypatch.setattr(calls, "_planted", object(), raising=False)
    assert "solbench.evaluate.boundary.calls._planted" in harness.changed()[0]
