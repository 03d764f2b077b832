"""The reference an imported KernelBench problem gets, and its check before the problem is written."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import torch

from solbench.errors import UserError
from solbench.problems.kernelbench_probe import ImportFailure, failure

#: the most elements (inputs and outputs of the CPU workload) for the reference check at import
CHECK_LIMIT = 1 << 26

RUNNER = '''

# ---- added by `solbench import kernelbench` (docs/PROBLEM_FORMAT.md, "KernelBench problems") ----
# Model(*get_init_inputs()) is built once per device, in eval mode, with a fixed seed. Its parameters and its
# norms' running statistics are the param_* inputs, fed on every call by torch.func.functional_call; its other
# buffers and plain tensor attributes (masks, tables, initial states) are the file's own, restored before
# every call.
import torch as _sb_torch
from torch.utils._python_dispatch import _disable_current_modes as _sb_no_modes

_SB_N_INPUTS = {n_inputs}
_SB_STATE = {state!r}
_sb_models = {{}}


def _sb_build(device):
    with _sb_no_modes(), _sb_torch.no_grad(), _sb_torch.random.fork_rng(devices=[]):
        _sb_torch.manual_seed(0)
        with _sb_torch.device("cpu"):
            model = Model(*get_init_inputs())
        model.eval()
        fed, stand_in, attrs = set(_SB_STATE), {{}}, []
        for prefix, mod in model.named_modules():
            prefix = prefix + "." if prefix else ""
            for key, t in list(mod._parameters.items()):
                if t is not None:  # fed on every call: a meta stand-in (shared where weights are tied)
                    stand_in.setdefault(id(t), _sb_torch.nn.Parameter(t.detach().to("meta"), requires_grad=False))
                    mod._parameters[key] = stand_in[id(t)]
            for key, t in list(mod._buffers.items()):
                if t is None:
                    continue
                if prefix + key in fed:
                    mod._buffers[key] = stand_in.setdefault(id(t), t.to("meta"))
                else:
                    mod._buffers[key] = t.to(device)
            for key, value in list(vars(mod).items()):
                if isinstance(value, _sb_torch.Tensor):
                    attrs.append((mod, key, value.to(device)))
    return model, attrs


def run(*args):
    device = next((a.device for a in args if isinstance(a, _sb_torch.Tensor)), _sb_torch.device("cpu"))
    if str(device) not in _sb_models:
        _sb_models[str(device)] = _sb_build(device)
    model, attrs = _sb_models[str(device)]
    with _sb_no_modes():
        for mod, key, value in attrs:
            mod.__dict__[key] = value.clone()
    state = dict(zip(_SB_STATE, args[_SB_N_INPUTS:]))
    return _sb_torch.func.functional_call(model, state, tuple(args[:_SB_N_INPUTS]))
'''


def _outputs(result) -> list[Any]:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def check_reference(directory: Path, name: str) -> str | None:
    """Refuse a reference that is random, gives NaN or writes into its inputs on the CPU workload; a note when
    the workload is too large to check here."""
    from solbench.problems.inputs import make_inputs
    from solbench.problems.modules import entry, module_from_source
    from solbench.problems.problem import load_problem

    try:
        problem = load_problem(directory)
    except UserError as exc:
        raise ImportFailure(f"the converted problem does not load: {exc}") from None
    d = problem.definition
    w = problem.workloads_for("cpu")[0]
    axes = d.resolve_axes(w.axes)
    numel = sum(math.prod(d.shape_of(s, axes)) for s in list(d.inputs.values()) + list(d.outputs.values())
                if s.shape is not None)
    if numel > CHECK_LIMIT:
        return f"reference not checked at import: {numel} elements is too much for the CPU"
    module_name = f"solbench_kbcheck_{name}"
    try:
        module = module_from_source(problem.reference_source, module_name, directory / "reference.py")
        run = entry(module, "run")
        pristine = make_inputs(d, w, 20240601, "cpu", directory)
        results = []
        for _ in range(2):
            args = [x.clone() if isinstance(x, torch.Tensor) else x for x in pristine]
            with torch.no_grad():
                results.append(_outputs(run(*args)))
            for (iname, _), a, b in zip(d.inputs.items(), args, pristine):
                if isinstance(a, torch.Tensor) and not torch.equal(a, b):
                    raise ImportFailure(f"the reference writes into its input {iname}")
    except ImportFailure:
        raise
    except Exception as exc:
        raise failure("the converted reference fails on the CPU workload", exc) from None
    finally:
        sys.modules.pop(module_name, None)
    first, second = results
    for k, (a, b) in enumerate(zip(first, second)):
        if isinstance(a, torch.Tensor) and a.is_floating_point() and bool(torch.isnan(a).any()):
            roles = ", ".join(f"{n}: {s.role or 'activation'}" for n, s in d.inputs.items() if n.startswith("input_"))
            raise ImportFailure(f"the reference gives NaN in output_{k} on inputs drawn by role ({roles})")
        if isinstance(a, torch.Tensor) and not torch.equal(a, b):
            raise ImportFailure(f"the reference is random: two calls on the same inputs differ in output_{k} "
                                "(a random op in forward: F.dropout(training=True), torch.rand, ...)")
    return None
