"""A trusted subject the worker judges in its own process: a baseline (the eager reference, the reference under
torch.compile, baseline.py). It answers ``call`` and ``time`` as a candidate's ``subjects.RemoteSubject`` does,
without the boundary: nothing it returns needs checking."""

from __future__ import annotations

from typing import Any, Callable

from solbench.evaluate.boundary.calls import as_list, copied, cuda_healthy, short_traceback
from solbench.evaluate.trusted.outcomes import Called, Timed


class LocalSubject:
    """A trusted subject (a baseline) called in this process."""

    untrusted = False
    is_dsl = False
    proves = False
    interpreted = False

    def __init__(self, ctx, fn: Callable | None, compile_per_workload: bool = False):
        self.ctx = ctx
        self.compile_per_workload = compile_per_workload
        self.call_fn = fn

    def begin(self, uuid: str, reference: Callable) -> None:
        if self.compile_per_workload:
            import torch._dynamo

            torch._dynamo.reset()  # a fresh static compile per workload: no dependence on workload order
            self.call_fn = self.ctx.torch.compile(reference, dynamic=False)

    def end(self) -> None:
        pass

    def call(self, inputs: list[Any], axes: dict[str, int], mode: str = "normal", profile: bool = False) -> Called:
        torch = self.ctx.torch
        used = [copied(x) for x in inputs]
        cuda = self.ctx.dev.type == "cuda"
        try:
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                before = torch.cuda.memory_allocated()
            out = as_list(self.call_fn(*used))
            if cuda:
                torch.cuda.synchronize()
        except torch.OutOfMemoryError:
            return Called(failed={"verdict": "runtime_error", "reasons": ["out_of_memory"]})
        except Exception as exc:
            failed = {"verdict": "runtime_error", "reasons": ["exception"], "message": short_traceback(exc)}
            lost = cuda and not cuda_healthy(torch)
            if lost:
                failed["reasons"].append("cuda_fault")
            return Called(failed=failed, lost=lost)
        peak = int(torch.cuda.max_memory_allocated() - before) if cuda else None
        return Called(outputs=out, inputs_after=used, peak_memory_bytes=peak)

    def time(self, uuid: str, axes: dict[str, int], cfg, draw: Callable[[int], list[Any]], recheck=None) -> Timed:
        from solbench.evaluate.timing.stopping import time_cpu, time_cuda

        job = self.ctx.job
        sets = [draw(self.ctx.seed_for(uuid, 1000 + i)) for i in range(int(job.get("input_sets", 3)))]
        f = self.call_fn

        def timed_call(i: int):
            return f(*sets[i])

        if self.ctx.dev.type == "cuda":
            t = time_cuda(timed_call, len(sets), self.ctx.flusher, cfg, graph=job.get("graph"),
                          device_index=self.ctx.dev.index or 0)
        else:
            t = time_cpu(timed_call, len(sets), cfg)
        return Timed(timing=t)

    def close(self) -> None:
        pass
