"""A stage's exception in the trusted worker (``stages.WorkloadJudging.crashed``)."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from solbench.evaluate.verdict.stages import WorkloadJudging


def _judging(untrusted: bool) -> WorkloadJudging:
    j = object.__new__(WorkloadJudging)  # the result alone: no subject, no workload
    j.ctx = SimpleNamespace(torch=torch, dev=torch.device("cpu"))
    j.dev, j.untrusted = j.ctx.dev, untrusted
    j.result = {"verdict": "passed", "reasons": []}
    return j


def test_device_memory_that_ran_out_in_the_trusted_worker_is_said_to_have_run_out_there():
    """A solution's own out-of-memory error comes back as its failed call; one raised here is the trusted side's
    (its draws, copies, reference, comparisons), and the result says so instead of leaving the solution's
    verdict unexplained."""
    j = _judging(untrusted=True)
    j.crashed(torch.OutOfMemoryError("CUDA out of memory"))
    assert j.result["verdict"] == "runtime_error" and j.result["reasons"] == ["out_of_memory"]
    assert "trusted worker" in j.result["message"]
    baseline = _judging(untrusted=False)  # a baseline runs in the trusted worker: its own failure
    baseline.crashed(torch.OutOfMemoryError("CUDA out of memory"))
    assert baseline.result["reasons"] == ["out_of_memory"] and baseline.result["message"] is None
