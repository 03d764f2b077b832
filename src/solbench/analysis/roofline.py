"""The roofline: work counts and ceilings -> T_SOL and the bound that binds.

T_SOL = max(sum over tensor units of flops/rate, vector flops/rate, sfu ops/rate,
bytes/DRAM bandwidth, launch floor). Tensor units share the tensor cores, so
their times add; the vector pipes, the special-function units, memory and the
tensor cores can overlap, so the largest of those is the bound.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from solbench import expr
from solbench.analysis.counting import WorkCount, trace_counts
from solbench.hardware.spec import Ceilings
from solbench.problems.definition import Definition
from solbench.problems.inputs import torch_dtype
from solbench.problems.modules import entry, module_from_source
from solbench.problems.problem import Problem
from solbench.problems.workload import CustomInput, ScalarInput, Workload

BOUNDS = ("memory", "tensor", "vector", "sfu", "latency")


@dataclass
class Work:
    """What one workload must do at least: FLOPs by unit (incl. "sfu"), bytes, and where they came from."""

    flops: dict[str, float]
    bytes: float
    overridden: list[str] = field(default_factory=list)
    traced: bool = True
    note: str | None = None


@dataclass
class Sol:
    sol_s: float
    bound: str
    times_s: dict[str, float]
    ceilings: str  # "datasheet" or "calibrated"

    @property
    def sol_ms(self) -> float:
        return self.sol_s * 1e3


def _fake_inputs(definition: Definition, workload: Workload, axes: dict[str, int], module) -> list[Any]:
    sources = workload.inputs
    if sources and all(isinstance(s, CustomInput) for s in sources.values()):
        fn = entry(module, definition.custom_inputs_entrypoint or "")
        produced = fn(dict(axes), torch.device("cpu"))
        return [produced[n] for n in definition.inputs]
    out: list[Any] = []
    for name, spec in definition.inputs.items():
        src = sources.get(name)
        if spec.shape is None:
            if isinstance(src, ScalarInput):
                out.append(src.value)
            else:
                out.append(1 if spec.dtype.startswith(("int", "uint")) else 1.0)
            continue
        out.append(torch.empty(definition.shape_of(spec, axes), dtype=torch_dtype(spec.dtype)))
    return out


def count_work(problem: Problem, workload: Workload, module=None) -> Work:
    """Trace the reference on fake tensors for this workload's shapes, then apply the definition's overrides."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    definition = problem.definition
    axes = definition.resolve_axes(workload.axes)
    override = definition.sol
    need_trace = override is None or override.bytes is None or override.flops is None
    counted = WorkCount()
    traced = False
    error = None
    if need_trace:
        module = module or module_from_source(problem.reference_source, f"solbench_ref_{abs(hash(problem.name))}")
        run = entry(module, "run")
        out_dtypes = [torch_dtype(s.dtype) for s in definition.outputs.values()]
        try:
            with FakeTensorMode(allow_non_fake_inputs=True):
                inputs = _fake_inputs(definition, workload, axes, module)
                counted = trace_counts(run, inputs, list(definition.inputs), definition.allow_tf32, out_dtypes)
            traced = True
        except Exception as exc:  # data-dependent references need an override
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    flops = dict(counted.flops)
    nbytes = counted.bytes
    overridden: list[str] = []
    if override is not None:
        if override.flops is not None:
            # an override of flops states the complete tensor/vector picture for the units it names
            for unit, value in override.flops.items():
                flops[unit] = float(expr.evaluate(value, axes))
                overridden.append(f"flops.{unit}")
        if override.sfu is not None:
            flops["sfu"] = float(expr.evaluate(override.sfu, axes))
            overridden.append("sfu")
        if override.bytes is not None:
            nbytes = float(expr.evaluate(override.bytes, axes))
            overridden.append("bytes")
    if not traced and (override is None or override.bytes is None):
        raise ValueError(f"{problem.name}: the reference cannot be traced on fake tensors ({error}); "
                         "state its counts in the definition's `sol` override")
    return Work(flops=flops, bytes=nbytes, overridden=overridden, traced=traced,
                note=override.note if override else None)


def sol_time(work: Work, ceilings: Ceilings) -> Sol:
    tensor_s = sum(v / ceilings.rates[u] for u, v in work.flops.items() if u.startswith("tensor_") and ceilings.rates.get(u))
    times = {
        "memory": work.bytes / ceilings.dram_bytes_per_s,
        "tensor": tensor_s,
        "vector": work.flops.get("vector_fp32", 0.0) / ceilings.rates["vector_fp32"],
        "sfu": work.flops.get("sfu", 0.0) / ceilings.rates["sfu"],
        "latency": ceilings.launch_floor_s,
    }
    bound = max(BOUNDS, key=lambda b: times[b])
    return Sol(sol_s=times[bound], bound=bound, times_s=times, ceilings=ceilings.kind)


def workload_report(problem: Problem, workload: Workload, ceilings: Ceilings, work: Work | None = None,
                    calibrated: Ceilings | None = None) -> dict[str, Any]:
    work = work or count_work(problem, workload)
    sol = sol_time(work, ceilings)
    row: dict[str, Any] = {
        "uuid": workload.uuid,
        "label": workload.label,
        "axes": problem.definition.resolve_axes(workload.axes),
        "flops": {k: v for k, v in sorted(work.flops.items())},
        "bytes": work.bytes,
        "sol_ms": sol.sol_ms,
        "bound": sol.bound,
        "times_ms": {k: v * 1e3 for k, v in sol.times_s.items()},
        "overridden": work.overridden,
    }
    if calibrated is not None:
        cal = sol_time(work, calibrated)
        row["calibrated_sol_ms"] = cal.sol_ms
        row["calibrated_bound"] = cal.bound
    return row


def as_dict(obj) -> dict[str, Any]:
    return asdict(obj)
