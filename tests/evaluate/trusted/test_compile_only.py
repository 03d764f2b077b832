"""A compile baseline compiled and never run (evaluate/trusted/compile_only.py), in-process on the CPU: the graph
goes to torch.compile's default Inductor backend, whole, and never runs (a side effect of the reference, which
Dynamo replays only after its graph has run, never happens); a reference that breaks its graph fails instead of
running its eager parts on the shells; custom inputs are left to the run. That the real compile fills the cache
the run's own compile then hits is tests/evaluate/test_compile_ahead.py's crux test; on the GPU, what Inductor
itself runs on the device while it compiles is measured here."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from solbench.evaluate.phases import Phases
from solbench.evaluate.trusted import compile_only
from solbench.problems.problem import load_problem
from tests.paths import AXPY

SEEN: list[int] = []


def _ctx(reference):
    axpy = load_problem(AXPY)
    return SimpleNamespace(definition=axpy.definition, problem=axpy, dev=torch.device("cpu"), reference=reference,
                           phases=Phases()), axpy.workloads_for("cpu")[0].uuid


def _noted(x, y, alpha):
    SEEN.append(1)  # a side effect: applied by Dynamo only once the compiled graph has run
    return alpha * x + y


def _broken(x, y, alpha):
    if float(x.sum()) > 0:  # data-dependent: a graph break
        return x
    return alpha * x + y


def test_the_graph_is_compiled_by_inductor_as_torch_compile_makes_it_and_never_run(monkeypatch):
    """Inductor stands in here by a recorder (the real compile, and its cache key, are the crux test's in
    tests/evaluate/test_compile_ahead.py): the backend is torch.compile's default Inductor (mode and options unset,
    static shapes), called once with the reference's whole graph, and nothing runs."""
    made, compiled = [], []

    class Inductor:
        def __init__(self, mode, options, dynamic):
            made.append((mode, options, dynamic))

        def __call__(self, gm, example_inputs):
            compiled.append([tuple(x.shape) for x in example_inputs if isinstance(x, torch.Tensor)])
            return gm

    monkeypatch.setattr(torch, "_TorchCompileInductorWrapper", Inductor)
    SEEN.clear()
    ctx, uuid = _ctx(_noted)
    out = compile_only.compile_workload(ctx, uuid)
    assert out["verdict"] == "passed", out
    n = ctx.problem.workload(uuid).axes["N"]
    assert made == [(None, None, False)] and compiled == [[(n,), (n,)]]
    assert SEEN == []  # the side effect never happened: nothing ran
    torch._dynamo.reset()
    assert torch.compile(_noted, backend="eager")(torch.ones(3), torch.ones(3), 2.0).tolist() == [3.0] * 3
    assert SEEN == [1]  # where the graph runs, it does


def test_a_reference_that_breaks_its_graph_is_left_to_the_run():
    ctx, uuid = _ctx(_broken)
    out = compile_only.compile_workload(ctx, uuid)
    assert out["verdict"] == "runtime_error" and out["reasons"] == ["exception"]


def test_custom_inputs_are_left_to_the_run(monkeypatch):
    ctx, uuid = _ctx(_noted)

    def refuse(*args, **kwargs):
        raise ValueError("custom inputs are known only by drawing them")

    monkeypatch.setattr("solbench.problems.inputs.input_shells", refuse)
    assert compile_only.compile_workload(ctx, uuid)["verdict"] == "unsupported"


@pytest.mark.gpu
def test_a_compile_on_the_gpu_runs_none_of_its_graph_on_the_device():
    """On the GPU, under CUPTI (torch's profiler): the compile of six starter references (a norm, a softmax, a
    matmul, a sort, and two whose references make constants with ``torch.zeros``) on their shells. A run of the
    graph would put the reference's own kernels there (``rms``, ``softmax``, ``gemm``, ``sort``: at least one
    kernel touching every element); what may remain is Inductor's own work while it compiles (one-element
    constants), bounded here at 20 device operations and 1 ms of device time per compile, and printed."""
    from torch.profiler import ProfilerActivity, profile

    from solbench.problems.modules import entry, module_from_source
    from solbench.problems.suite import select_problems

    wanted = ("rmsnorm", "softmax_vocab", "gemm_bf16", "moe_topk_softmax", "attention_prefill_gqa",
              "mamba2_chunk_scan")
    problems = [p for p in select_problems("starter") if p.name in wanted]
    assert len(problems) == len(wanted)
    torch.cuda.init()
    for problem in problems:
        module = module_from_source(problem.reference_source, "solbench_reference", problem.directory / "reference.py")
        ctx = SimpleNamespace(definition=problem.definition, problem=problem, dev=torch.device("cuda"),
                              reference=entry(module, "run"), phases=Phases())
        uuid = problem.workloads_for("cuda")[0].uuid
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            out = compile_only.compile_workload(ctx, uuid)
        assert out["verdict"] == "passed", (problem.name, out)
        on_device = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        device_us = sum(e.device_time_total for e in on_device)
        print(f"{problem.name}: {len(on_device)} device operations, {device_us:.1f} us: "
              f"{sorted({e.name for e in on_device})[:6]}")
        assert len(on_device) <= 20 and device_us <= 1000.0, (problem.name, [e.name for e in on_device][:10])
