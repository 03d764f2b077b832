"""A workload's torch.compile baseline compiled and never run: what a compile ahead (``evaluate.compile_ahead``)
asks of a trusted worker.

A compile ahead exists to fill Inductor's and Triton's caches on disk before the run's own trusted worker compiles
the same graph. Running the compiled graph adds nothing to them that the run needs (its launch tuning is done again
in the run, alone on the device), but it is device work, and device work beside another evaluation's timing
would disturb its samples. So here the reference is traced on input shells (``inputs.input_shells``: fake
tensors, no memory and no kernel), compiled by Inductor exactly as ``torch.compile(dynamic=False)`` would, and the
compiled graph, in place of running, raises ``Compiled``. The trace is whole (``fullgraph``): a reference that
breaks its graph would run its eager parts on the shells, so it fails here and compiles in the run, as before.

What Inductor itself runs while it compiles remains: its folding of constants of one value (a ``torch.zeros``
or ``full`` in the reference) computes on one-element tensors on the device, and its padding of a matrix product
whose sizes are not aligned benchmarks both layouts there. A GPU test (``tests/evaluate/trusted/
test_compile_only.py``) bounds and prints what six starter references leave on the device under CUPTI.
"""

from __future__ import annotations

from typing import Any


class Compiled(Exception):
    """The graph is compiled (the compiled callable raises this where it would run)."""


def backend(gm, example_inputs):
    """A torch.compile backend: Inductor's own, as ``torch.compile``'s default makes it (mode and options
    unset), whose result raises ``Compiled`` instead of running."""
    import torch

    wrapper = getattr(torch, "_TorchCompileInductorWrapper", None)
    if wrapper is not None:
        wrapper(None, None, False)(gm, example_inputs)
    else:  # pragma: no cover - torch without the wrapper: its default backend is compile_fx itself
        from torch._inductor.compile_fx import compile_fx

        compile_fx(gm, example_inputs)

    def not_run(*args: Any, **kwargs: Any):
        raise Compiled()

    return not_run


def compile_workload(ctx, uuid: str) -> dict[str, Any]:
    """Compile ``ctx``'s reference for workload ``uuid`` on input shells, running nothing on the device: the
    result message's verdict ("passed": compiled; "unsupported": custom inputs, known only by drawing them;
    "runtime_error": the compile failed, left for the run)."""
    import torch
    import torch._dynamo
    from torch._subclasses.fake_tensor import FakeTensorMode

    from solbench.evaluate.boundary.calls import short_traceback
    from solbench.problems.inputs import input_shells

    try:  # fake tensors: not even the shells' memory is taken on the device, where evaluations run beside
        shells = input_shells(ctx.definition, ctx.problem.workload(uuid), ctx.dev, ctx.problem.directory,
                              fake=FakeTensorMode())
    except ValueError as why:
        return {"verdict": "unsupported", "reasons": [], "message": str(why)}
    torch._dynamo.reset()  # as the run's compile baseline: a fresh static compile per workload
    compiled = torch.compile(ctx.reference, dynamic=False, fullgraph=True, backend=backend)
    try:
        with ctx.phases("compile_only"):
            compiled(*shells)
    except Compiled:
        return {"verdict": "passed", "reasons": [], "phases": ctx.phases.take()}
    except Exception as exc:  # noqa: BLE001 - the run compiles it where it always did
        return {"verdict": "runtime_error", "reasons": ["exception"], "message": short_traceback(exc)}
    return {"verdict": "runtime_error", "reasons": ["exception"], "message": "the compiled graph was not called"}
