"""The degenerate-task filter: a problem must not be passable without computing it.

For a workload, the reference runs on inputs from several seeds (trusted code,
in-process). A problem is flagged when, under its own tolerances:

- ``constant_output``: all zeros, the output's mean, or the output of another
  seed passes the correctness check (softmax over a 128k vocabulary gives about
  1e-5 per element: zeros would pass an atol of 1e-2);
- ``input_passthrough``: returning an input of the output's shape and dtype passes;
- ``insensitive_input``: redrawing one input (the others fixed) leaves the output
  within tolerance, so that input could be ignored (deterministic roles such as
  causal masks and constants are skipped; scalars are not redrawn).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from solbench.evaluate.verdict.correctness import accept_alternative, compare_output, tolerance_for
from solbench.problems.inputs import make_inputs
from solbench.problems.roles import infer_role, torch_dtype
from solbench.problems.modules import entry, module_from_source
from solbench.problems.problem import Problem
from solbench.problems.workload import Workload

_FIXED_ROLES = {"causal_mask", "zeros", "ones"}


@dataclass
class Finding:
    problem: str
    workload: str
    code: str
    detail: str


def _outputs(run, inputs: list[Any], inplace: tuple[int, ...] = ()) -> list[Any]:
    """The outputs of one call, then the in-place inputs as the call left them."""
    args = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    out = run(*args)
    outs = list(out) if isinstance(out, (tuple, list)) else ([] if out is None else [out])
    return outs + [args[i] for i in inplace]


def _upcast(inputs: list[Any]) -> list[Any]:
    return [x.to(torch.float64) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]


def check_workload(problem: Problem, workload: Workload, device: str = "cpu", seed: int = 1234) -> list[Finding]:
    d = problem.definition
    module = module_from_source(problem.reference_source, f"solbench_degenerate_{problem.name}")
    run = entry(module, "run")
    custom = getattr(module, d.custom_inputs_entrypoint) if d.custom_inputs_entrypoint else None
    accept = getattr(module, d.custom_check_entrypoint) if d.custom_check_entrypoint else None
    # in-place inputs are outputs too (a KV-cache write has no other)
    inplace = tuple(list(d.inputs).index(n) for n in d.inplace_inputs)
    out_specs = list(d.outputs.items()) + [(n, d.inputs[n]) for n in d.inplace_inputs]
    found: list[Finding] = []

    def inputs_for(s: int) -> list[Any]:
        return make_inputs(d, workload, s, device, problem.directory, custom)

    dtypes = [torch_dtype(s.dtype) for _, s in out_specs]

    def passes(candidate: torch.Tensor, idx: int) -> bool:
        """Whether ``candidate`` in place of output ``idx`` passes the check of this draw (``ref``, ``anchor``)."""
        name, spec = out_specs[idx]
        tol = tolerance_for(spec.dtype, d.tolerance, workload.tolerance, tf32=d.allow_tf32)
        c = compare_output(name, candidate, ref[idx], anchor[idx], dtypes[idx], tol)
        if accept is None or c.ok:
            return c.ok
        # the problem's own acceptor judges the shortcut beside the reference's other outputs, as in evaluation
        outs = list(ref)
        outs[idx] = candidate
        return accept_alternative(c, accept, named, outs, ref, dtypes).ok

    base = inputs_for(seed)
    named = dict(zip(d.inputs, base))
    with torch.no_grad():
        # the outputs, then the in-place inputs as the call left them, as evaluation passes them
        ref = _outputs(run, base, inplace)
        anchor = _outputs(run, _upcast(base), inplace)
        other = _outputs(run, inputs_for(seed + 1), inplace)
    for i, (name, _spec) in enumerate(out_specs[: len(ref)]):
        r = ref[i]
        if not isinstance(r, torch.Tensor) or r.numel() == 0:
            continue
        shortcuts: dict[str, torch.Tensor] = {"zeros": torch.zeros_like(r), "another seed's output": other[i]}
        if r.is_floating_point() and isinstance(other[i], torch.Tensor) and other[i].numel():
            # a constant fixed before seeing this draw's inputs: another draw's mean (this draw's own mean of a
            # one-element output would be the answer itself)
            shortcuts["a constant (another draw's mean)"] = torch.full_like(r, float(other[i].double().mean()))
        for label, fake in shortcuts.items():
            if isinstance(fake, torch.Tensor) and fake.shape == r.shape and fake.dtype == r.dtype \
                    and passes(fake, i):
                found.append(Finding(problem.name, workload.uuid, "constant_output",
                                     f"output {name}: returning {label} passes the check"))
                break
        for in_name, x in zip(d.inputs, base):
            if isinstance(x, torch.Tensor) and x.shape == r.shape and x.dtype == r.dtype and passes(x.clone(), i):
                found.append(Finding(problem.name, workload.uuid, "input_passthrough",
                                     f"output {name}: returning input {in_name} passes the check"))
    # sensitivity: redraw one input at a time
    with torch.no_grad():
        for k, (in_name, spec) in enumerate(d.inputs.items()):
            if spec.shape is None or infer_role(in_name, spec) in _FIXED_ROLES or d.custom_inputs_entrypoint:
                continue
            redrawn = inputs_for(seed + 100 + k)
            mixed = list(base)
            mixed[k] = redrawn[k]
            if isinstance(base[k], torch.Tensor) and torch.equal(base[k], mixed[k]):
                continue  # this input does not vary with the seed (a deterministic role)
            try:
                changed = _outputs(run, mixed, inplace)
            except Exception:
                continue  # some inputs are only valid together (lengths and tables); not a degenerate sign
            if all(isinstance(c, torch.Tensor) and passes(c, i)
                   for i, c in enumerate(changed[: len(ref)]) if isinstance(ref[i], torch.Tensor)):
                found.append(Finding(problem.name, workload.uuid, "insensitive_input",
                                     f"redrawing input {in_name} leaves every output within tolerance"))
    return found


def check_problem(problem: Problem, device: str = "cpu", workloads: list[Workload] | None = None) -> list[Finding]:
    """The filter over a problem's workloads for ``device`` (or the ones given).

    An input counts as insensitive, and an output as constant, only when it is so on every workload checked:
    on a batch-1 decode shape, redrawing top_p may well leave the one sampled token unchanged, and
    moe_align_block_size's padded token count is fixed by the shape when one token is routed; yet no solution
    can ignore top_p or return a fixed count on every shape.
    """
    found: list[Finding] = []
    workloads = workloads if workloads is not None else problem.workloads_for(device)
    per_shape: dict[tuple[str, str], list[Finding]] = {}
    for w in workloads:
        for f in check_workload(problem, w, device):
            if f.code in ("insensitive_input", "constant_output"):
                per_shape.setdefault((f.code, f.detail.split(":")[0]), []).append(f)
            else:
                found.append(f)
    found.extend(fs[0] for fs in per_shape.values() if len({f.workload for f in fs}) == len(workloads))
    return found


def reference_self_check(problem: Problem, workload: Workload, device: str = "cpu", seed: int = 99) -> str | None:
    """None when the reference produces what the definition declares, else what is wrong.

    The native run must return the declared outputs (count, shapes, dtypes), free of NaN; the
    float64-anchor run (every floating input upcast) must stay float64, so the anchor is a real reference.
    """
    d = problem.definition
    module = module_from_source(problem.reference_source, f"solbench_selfcheck_{problem.name}")
    run = entry(module, "run")
    custom = getattr(module, d.custom_inputs_entrypoint) if d.custom_inputs_entrypoint else None
    base = make_inputs(d, workload, seed, device, problem.directory, custom)
    axes = d.resolve_axes(workload.axes)
    with torch.no_grad():
        ref = _outputs(run, base)
        anchor = _outputs(run, _upcast(base))
    if len(ref) != len(d.outputs):
        return f"returns {len(ref)} outputs, the definition declares {len(d.outputs)}"
    for (name, spec), r, a in zip(d.outputs.items(), ref, anchor):
        if spec.shape is None:
            continue
        if not isinstance(r, torch.Tensor):
            return f"output {name} is a {type(r).__name__}, not a tensor"
        if tuple(r.shape) != d.shape_of(spec, axes):
            return f"output {name} has shape {tuple(r.shape)}, declared {d.shape_of(spec, axes)}"
        if r.dtype != torch_dtype(spec.dtype):
            return f"output {name} has dtype {r.dtype}, declared {spec.dtype}"
        if r.is_floating_point():
            if bool(torch.isnan(r.to(torch.float64)).any()):  # +-inf can be legitimate (masked scores)
                return f"output {name} has NaN"
            if not isinstance(a, torch.Tensor) or a.dtype != torch.float64:
                return f"the float64 anchor of {name} is {getattr(a, 'dtype', type(a))}: the reference downcasts"
    return None
