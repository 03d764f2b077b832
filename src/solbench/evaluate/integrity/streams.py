"""The solution's own CUDA streams, in the candidate's process: recorded, fenced behind each timed call's start,
and marked before its end.

Every stream the solution creates (``torch.cuda.Stream``, ``torch.cuda.ExternalStream``, at import or in a
call) is recorded. During a timed call each of them is made to wait for an event recorded on the timed stream
(a stream created during the call, at its creation), so its work starts inside the sample; after the call, one
event on each (``tails``) lets the sample run to whichever stream finished last (docs/SECURITY.md, layer 5).
"""

from __future__ import annotations

from typing import Any

import torch


def _capturing(stream: Any) -> bool:
    """Whether ``stream`` is being captured into a CUDA graph."""
    with torch.cuda.stream(stream):
        return torch.cuda.is_current_stream_capturing()


class Streams:
    def __init__(self) -> None:
        self.streams: list[Any] = []
        self.in_candidate = False  # streams created while this is true are the solution's
        self.timed: Any = None  # during a timed call: the stream its start event is on
        self._track()

    def _track(self) -> None:
        owner = self
        for cls in (torch.cuda.Stream, getattr(torch.cuda, "ExternalStream", None)):
            if cls is None or "__new__" not in vars(cls):
                continue
            original = vars(cls)["__new__"]
            original = getattr(original, "__func__", original)

            def tracked(kind, *args, _original=original, **kwargs):
                stream = _original(kind, *args, **kwargs)
                if owner.in_candidate and not owner._current(stream):
                    # one entry per distinct stream: torch hands out streams from a pool of a few per priority,
                    # and current_stream() builds a new object for the same stream at every call
                    if all(s.cuda_stream != stream.cuda_stream for s in owner.streams):
                        owner.streams.append(stream)
                    owner.fence([stream])
                return stream

            cls.__new__ = staticmethod(tracked)

    def _current(self, stream: Any) -> bool:
        """Whether ``stream`` is the stream the call runs on: an object torch made for a lookup
        (``current_stream()``, also inside ``Event.record()`` and ``torch.cuda.stream(...)``), not a stream of the
        solution's. Counted as the solution's, the harness's stream of one phase (the correctness check's, a
        round's) was fenced and joined as another stream in every later call; the audit's clock, which times all
        between its stamps, then read an autotuned Triton kernel (its tuning records events) at 2 to 3.3 times
        the kernel's time on the H200, and it agreed once such lookups were left out."""
        was, self.in_candidate = self.in_candidate, False
        try:
            return stream == torch.cuda.current_stream(getattr(stream, "device", None))
        finally:
            self.in_candidate = was

    def fence(self, streams: list[Any]) -> None:
        """During a timed call, make ``streams`` wait for the timed stream's work so far (its start event
        included). Without this, work launched on a stream that never waits for the timed one could run while
        the stream is held or flushed, before the start event, and so outside every sample."""
        main = self.timed
        if main is None:
            return
        others = [s for s in streams if s.cuda_stream != main.cuda_stream]
        if not others:
            return
        # the stream objects made here are the harness's, and must not fence again
        was, self.in_candidate = self.in_candidate, False
        try:
            if _capturing(main):  # the harness's graph capture: the solution must join its streams anyway
                return
            mark = torch.cuda.Event()
            mark.record(main)
            for s in others:
                if not _capturing(s):  # a capture of the solution's own cannot wait on an outside event
                    s.wait_event(mark)
        finally:
            self.in_candidate = was

    def begin_timed_call(self) -> None:
        self.timed = torch.cuda.current_stream()
        self.fence(self.streams)

    def end_timed_call(self) -> None:
        self.timed = None

    def tails(self) -> list[Any]:
        """One timing event on each stream the solution created (see timing.round_cuda)."""
        if not self.streams:
            return []
        was, self.in_candidate = self.in_candidate, False
        try:
            current = torch.cuda.current_stream()
            marks = []
            for s in self.streams:
                if s != current:
                    e = torch.cuda.Event(enable_timing=True)
                    e.record(s)
                    marks.append(e)
            return marks
        finally:
            self.in_candidate = was
