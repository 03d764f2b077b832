"""The candidate's stream fence, against a stand-in for torch.cuda (the real one needs a GPU; the GPU test set
runs the exploit `01_side_stream_in_hold` against the real one)."""

import contextlib
import itertools
from types import SimpleNamespace

from solbench.evaluate.integrity import streams as streams_module


def fake_torch():
    state = SimpleNamespace(current=0, capturing=set(), handles=itertools.count(1))

    class Stream:
        def __new__(cls, handle=None):
            s = object.__new__(cls)
            s.cuda_stream = next(state.handles) if handle is None else handle
            s.waits = []
            return s

        def wait_event(self, event):
            self.waits.append(event)

        def __eq__(self, other):
            return isinstance(other, Stream) and other.cuda_stream == self.cuda_stream

        __hash__ = object.__hash__

    class Event:
        def record(self, stream):
            self.on = stream.cuda_stream

    def current_stream(device=None):
        return Stream(state.current)  # like torch: a new object for the current stream, through __new__

    @contextlib.contextmanager
    def stream(s):
        previous = current_stream().cuda_stream  # torch's StreamContext reads the current stream on entry
        state.current = s.cuda_stream
        try:
            yield
        finally:
            state.current = previous

    cuda = SimpleNamespace(Stream=Stream, Event=Event, current_stream=current_stream, stream=stream,
                           is_current_stream_capturing=lambda: state.current in state.capturing)
    return SimpleNamespace(cuda=cuda), state


class _Candidate:
    """The candidate's stream records (integrity/streams.py) over the stand-in, with the old test's names."""

    def __init__(self, streams):
        self._s = streams

    def __getattr__(self, name):
        return getattr(self._s, {"timed_stream": "timed"}.get(name, name))

    def __setattr__(self, name, value):
        if name == "_s":
            object.__setattr__(self, name, value)
        else:
            setattr(self._s, {"timed_stream": "timed"}.get(name, name), value)


def candidate(monkeypatch):
    torch, state = fake_torch()
    monkeypatch.setattr(streams_module, "torch", torch)
    s = streams_module.Streams()
    s.in_candidate = True
    return _Candidate(s), torch, state


def test_streams_made_at_import_are_fenced_behind_the_start_of_each_timed_call(monkeypatch):
    c, torch, state = candidate(monkeypatch)
    side = torch.cuda.Stream()  # the solution's import
    c.in_candidate = False
    assert [s.cuda_stream for s in c.streams] == [side.cuda_stream] and not side.waits  # no call yet, no fence
    c.timed_stream = torch.cuda.current_stream()  # the timed call starts on stream 0
    c.fence(c.streams)
    assert len(side.waits) == 1 and side.waits[0].on == 0
    assert not c.in_candidate  # the flag is left as it was


def test_a_stream_made_during_a_timed_call_waits_for_the_timed_stream_without_recursing(monkeypatch):
    c, torch, state = candidate(monkeypatch)
    c.in_candidate = False
    c.timed_stream = torch.cuda.current_stream()
    c.in_candidate = True  # inside the solution's call
    first = torch.cuda.Stream()
    with torch.cuda.stream(first):  # entering reads current_stream() through the patched constructor
        second = torch.cuda.Stream()
    assert [w.on for w in first.waits] == [0] and [w.on for w in second.waits] == [0]
    # neither the stream objects the fence itself made nor the lookup of the current stream on entering were
    # counted as the solution's
    assert {s.cuda_stream for s in c.streams} == {first.cuda_stream, second.cuda_stream}


def test_a_lookup_of_the_current_stream_is_not_the_solutions_stream_in_a_later_call(monkeypatch):
    """Autotuning records timing events (``Event.record()`` looks up the current stream): the stream of the call
    it ran in is the harness's, and a later call on another stream must not fence or join it."""
    c, torch, state = candidate(monkeypatch)
    state.current = 7  # the correctness check's stream
    c.in_candidate = True
    torch.cuda.current_stream()  # inside the solution's first call
    c.in_candidate = False
    assert c.streams == []
    state.current = 9  # a later phase's stream
    c.timed_stream = torch.cuda.current_stream()
    c.fence(c.streams)
    assert c.tails() == []


def test_no_fence_outside_timed_calls_or_into_a_capture(monkeypatch):
    c, torch, state = candidate(monkeypatch)
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    c.in_candidate = False
    c.fence(c.streams)  # not in a timed call
    assert not a.waits and not b.waits
    c.timed_stream = torch.cuda.current_stream()
    state.capturing = {0}  # the harness captures the call into a graph: the solution's own joins are what count
    c.fence(c.streams)
    assert not a.waits and not b.waits
    state.capturing = {a.cuda_stream}  # the solution's own capture cannot wait on an event from outside it
    c.fence(c.streams)
    assert not a.waits and [w.on for w in b.waits] == [0]
