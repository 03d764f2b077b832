"""The roofline: work counts and ceilings -> T_SOL and the bound that binds.

T_SOL = max(tensor time, vector time, sfu ops/rate, bytes/DRAM bandwidth, launch
floor). Tensor units share the tensor cores, so their times add; the vector
pipes, the special-function units, memory and the tensor cores can overlap, so
the largest of those is the bound.

fp32 products may run where they finish first: ``matmul_fp32`` (fp32-accurate)
on the FMA units at one FLOP each, or on tensor cores through an fp32-accurate
emulation (``fp32_emulation_rate``); ``tensor_tf32`` (TF32-accurate) on the
FMA units, or on tensor cores at the faster of the TF32 and the 16-bit rate
(fp16 has TF32's 10-bit mantissa). ``share`` splits that work between the two
so that the larger of the tensor and vector times is the least it can be.
docs/BOUNDS.md gives the formulas.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from solbench import expr
from solbench.analysis import work_cache
from solbench.analysis.counting import WorkCount, trace_counts
from solbench.hardware.spec import Ceilings
from solbench.problems.definition import Definition
from solbench.problems.roles import torch_dtype
from solbench.problems.modules import entry, module_from_source
from solbench.problems.problem import Problem
from solbench.problems.workload import CustomInput, ScalarInput, Workload

BOUNDS = ("memory", "tensor", "vector", "sfu", "latency")

#: fp32-accurate emulations of one fp32 product on tensor cores: (rate unit, products of that unit). Three-term
#: splits into TF32 (tf32x3) or fp16 with a scaled low part (fp16x3) keep about 22 bits; an int8 slicing
#: (Ozaki-type) needs more slice products than 6, which is taken as its floor. bf16x3 (16 bits) and any
#: two-product split miss the fp32 tolerance, so they are not cheaper ways to the same answer (docs/BOUNDS.md).
FP32_EMULATION = (("tensor_tf32", 3), ("tensor_bf16", 3), ("tensor_int8", 6))
#: units whose work may also run on the FMA units (one vector FLOP per FLOP), and the rate on tensor cores
FLEXIBLE = ("matmul_fp32", "tensor_tf32")


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


def count_work(problem: Problem, workload: Workload, module=None, persist: bool = True) -> Work:
    """Trace the reference on fake tensors for this workload's shapes, then apply the definition's overrides; a
    count made before (this process, or ``work_cache`` on disk where ``persist``: never for a held-out shape) is
    read back instead."""
    k = work_cache.key(problem, workload)
    kept = work_cache.load(k)
    if kept is not None:
        return Work(**kept)
    work = _count(problem, workload, module)
    work_cache.keep(k, asdict(work), persist)
    return work


def _count(problem: Problem, workload: Workload, module=None) -> Work:
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
            # an override of flops states the complete tensor/vector picture for the units it names; one that
            # names vector_fp32 but not matmul_fp32 states the fp32 products too (they were vector work before
            # the unit existed, and such overrides restate the reference's fp32 matmuls in their own terms)
            if "vector_fp32" in override.flops and "matmul_fp32" not in override.flops:
                flops.pop("matmul_fp32", None)
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


def fp32_emulation_rate(ceilings: Ceilings) -> float:
    """fp32-accurate product FLOP/s on tensor cores: the fastest emulation the chip's rates allow."""
    return max((ceilings.rates[u] / n for u, n in FP32_EMULATION if ceilings.rates.get(u)), default=0.0)


def tensor_rate(unit: str, ceilings: Ceilings) -> float:
    """FLOP/s of one unit's products on the tensor cores (0 where the chip has no rate for it)."""
    if unit == "matmul_fp32":
        return fp32_emulation_rate(ceilings)
    if unit == "tensor_tf32":  # a TF32-accurate product runs as fp16 too (same mantissa), at the 16-bit rate
        return max(ceilings.rates.get("tensor_tf32", 0.0), ceilings.rates.get("tensor_bf16", 0.0))
    return ceilings.rates.get(unit, 0.0) if unit.startswith("tensor_") else 0.0


def share(tensor_s: float, vector_s: float, flexible: list[tuple[float, float]], vector_rate: float
          ) -> tuple[float, float]:
    """Place flexible work ``[(flops, tensor-core FLOP/s)]`` so that max(tensor time, vector time) is least.

    All of it starts on the FMA units; the cheapest on tensor cores moves first, until the two times meet.
    """
    q = 1.0 / vector_rate
    vector_s += q * sum(f for f, _ in flexible)
    for flops, rate in sorted(flexible, key=lambda fr: -fr[1]):
        if vector_s <= tensor_s or rate <= 0:
            break
        p = 1.0 / rate
        moved = min(flops, (vector_s - tensor_s) / (p + q))
        tensor_s += p * moved
        vector_s = tensor_s if moved < flops else vector_s - q * moved
    return tensor_s, vector_s


def sol_time(work: Work, ceilings: Ceilings) -> Sol:
    fixed = [(u, v) for u, v in work.flops.items() if u.startswith("tensor_") and u not in FLEXIBLE]
    tensor_s = sum(v / tensor_rate(u, ceilings) for u, v in fixed if tensor_rate(u, ceilings))
    flexible = [(work.flops[u], tensor_rate(u, ceilings)) for u in FLEXIBLE if work.flops.get(u)]
    vector_rate = ceilings.rates["vector_fp32"]
    tensor_s, vector_s = share(tensor_s, work.flops.get("vector_fp32", 0.0) / vector_rate, flexible, vector_rate)
    times = {
        "memory": work.bytes / ceilings.dram_bytes_per_s,
        "tensor": tensor_s,
        "vector": vector_s,
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
