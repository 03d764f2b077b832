"""The candidate's process (evaluate/candidate/process.py): what its profiled call reports when the profiler
itself fails."""

from __future__ import annotations

import pytest
import torch

from solbench.evaluate.boundary import calls
from solbench.evaluate.candidate import process
from solbench.evaluate.integrity import language


def _candidate() -> process.Candidate:
    cand = process.Candidate.__new__(process.Candidate)  # the profiled call alone: no channel, no solution loaded
    cand.torch, cand.cuda, cand.dps, cand.streams, cand.calls = torch, False, False, None, 0
    cand.fn = lambda x: x * 2
    return cand


def _profiler_fails(thunk):
    thunk()
    raise RuntimeError("the profiler's own synchronisation failed")


@pytest.mark.parametrize("healthy", [True, False])
def test_a_profiler_failure_is_no_verdict_unless_the_cuda_context_is_lost(monkeypatch, healthy):
    """A profiler that cannot run leaves the language proof without evidence (no verdict); where the context is
    lost, the failure surfaced there is the solution's fault and this call's failure, not the next call's."""
    monkeypatch.setattr(language, "profile_kernels", _profiler_fails)
    monkeypatch.setattr(calls, "cuda_healthy", lambda torch: healthy)
    got = _candidate().profile([torch.ones(4)], [])
    if healthy:
        assert got == {}
    else:
        assert isinstance(got["failed"], RuntimeError)
