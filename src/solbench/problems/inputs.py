"""Input generation: realistic random tensors by role, scalars, safetensors files, custom entry points.

Every draw is a pure function of (definition, workload, seed, device): the same
seed reproduces the same inputs, which is what ``eval --replay`` relies on.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

import torch

from solbench import expr
from solbench.problems.definition import Definition, TensorSpec
from solbench.problems.workload import CustomInput, SafetensorsInput, ScalarInput, Workload

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
if hasattr(torch, "float4_e2m1fn_x2"):
    TORCH_DTYPES["float4_e2m1fn_x2"] = torch.float4_e2m1fn_x2

FLOAT8 = {"float8_e4m3fn", "float8_e5m2"}
INTEGER = {"int64", "int32", "int16", "int8", "uint8"}


def torch_dtype(name: str) -> torch.dtype:
    try:
        return TORCH_DTYPES[name]
    except KeyError:
        raise ValueError(f"dtype {name} is not supported by this torch build") from None


def infer_role(name: str, spec: TensorSpec) -> str:
    """Name-based defaults, so definitions written without roles still get sensible data."""
    if spec.role:
        return spec.role
    n = name.lower()
    if spec.dtype == "bool":
        return "causal_mask" if "mask" in n else "uniform"
    if spec.dtype in INTEGER:
        if any(k in n for k in ("len", "lens", "length")):
            return "length"
        return "index"
    if "cos" == n or n.endswith("_cos") or n.startswith("cos"):
        return "rope_cos"
    if "sin" == n or n.endswith("_sin") or n.startswith("sin"):
        return "rope_sin"
    if ("norm" in n or "ln" in n.split("_") or n in ("gamma",)) and ("weight" in n or n == "gamma"):
        return "norm_weight"
    if n in ("bias", "beta") or n.endswith("_bias") or n.endswith("bias"):
        return "bias"
    if "scale" in n and spec.dtype == "float32":
        return "scale"
    if "var" in n.split("_") or n.endswith("variance"):
        return "positive"
    if (n == "weight" or n.endswith("_weight") or n.startswith("w_") or n in ("w", "w1", "w2", "w3")) and spec.shape and len(spec.shape) >= 2:
        return "weight"
    return "activation"


def _range(spec: TensorSpec, axes: dict[str, int], default: tuple[float, float]) -> tuple[float, float]:
    if not spec.range:
        return default
    lo, hi = (expr.evaluate(v, axes) for v in spec.range[:2])
    return float(lo), float(hi)


def _normal(shape, gen, device) -> torch.Tensor:
    return torch.randn(shape, generator=gen, device=device, dtype=torch.float32)


def _uniform(shape, lo, hi, gen, device) -> torch.Tensor:
    return torch.rand(shape, generator=gen, device=device, dtype=torch.float32) * (hi - lo) + lo


def random_tensor(name: str, spec: TensorSpec, shape: tuple[int, ...], axes: dict[str, int],
                  gen: torch.Generator, device: torch.device, angle_seed: int) -> torch.Tensor:
    role = infer_role(name, spec)
    dtype = torch_dtype(spec.dtype)
    if spec.dtype in INTEGER or role in ("index", "length", "page_table"):
        if role == "page_table":
            lo, hi = _range(spec, axes, (0, max(shape[-1], 1)))
            rows = math.prod(shape[:-1]) if len(shape) > 1 else 1
            pages = [torch.randperm(int(hi - lo), generator=gen, device=gen.device).cpu()[: shape[-1]] + int(lo)
                     for _ in range(rows)]
            return torch.stack(pages).reshape(shape).to(device=device, dtype=dtype)
        if role == "length":
            lo, hi = _range(spec, axes, (1, 16))
            return torch.randint(int(lo), int(hi) + 1, shape, generator=gen, device=device).to(dtype)
        lo, hi = _range(spec, axes, (0, 16))
        return torch.randint(int(lo), int(hi), shape, generator=gen, device=device).to(dtype)
    if spec.dtype == "bool" or role == "causal_mask":
        if role == "causal_mask":
            rows, cols = shape[-2], shape[-1]
            mask = torch.ones(rows, cols, dtype=torch.bool, device=device).tril(diagonal=cols - rows)
            return mask.expand(shape).contiguous().to(dtype)
        return (torch.rand(shape, generator=gen, device=device) < 0.5).to(dtype)
    if role in ("rope_cos", "rope_sin"):
        # angles depend only on angle_seed so cos and sin of one draw agree
        g = torch.Generator(device="cpu").manual_seed(angle_seed)
        rows = shape[0] if len(shape) > 1 else 1
        dim = shape[-1]
        pos = torch.randint(0, 8192, (rows, 1), generator=g).to(torch.float64)
        half = (dim + 1) // 2
        inv = 10000.0 ** (-torch.arange(half, dtype=torch.float64) * 2 / max(dim, 2))
        ang = pos * inv
        if dim != half:
            ang = torch.cat([ang, ang], dim=-1)[:, :dim]
        val = torch.cos(ang) if role == "rope_cos" else torch.sin(ang)
        val = val.reshape((rows,) + (1,) * (len(shape) - 2) + (dim,)).expand(shape)
        return val.to(device=device, dtype=dtype).contiguous()
    if role == "weight":
        fan_axis = spec.fan_in or (spec.shape[-1] if spec.shape else None)
        fan_in = axes.get(fan_axis, shape[-1]) if fan_axis else 1
        x = _normal(shape, gen, device) / math.sqrt(max(fan_in, 1))
    elif role == "norm_weight":
        x = 1.0 + 0.1 * _normal(shape, gen, device)
    elif role == "bias":
        x = 0.1 * _normal(shape, gen, device)
    elif role == "positive":
        x = _uniform(shape, *_range(spec, axes, (0.5, 1.5)), gen, device)
    elif role == "negative":
        x = -_uniform(shape, *_range(spec, axes, (0.5, 1.5)), gen, device)
    elif role == "uniform":
        x = _uniform(shape, *_range(spec, axes, (-1.0, 1.0)), gen, device)
    elif role == "scale":
        x = _uniform(shape, *_range(spec, axes, (0.005, 0.02)), gen, device)
    elif role == "probability":
        x = torch.softmax(_normal(shape, gen, device), dim=-1)
    elif role == "zeros":
        x = torch.zeros(shape, device=device)
    elif role == "ones":
        x = torch.ones(shape, device=device)
    else:  # activation
        x = _normal(shape, gen, device)
        if spec.range:
            x = x.clamp(*_range(spec, axes, (-2.0, 2.0)))
    if spec.dtype in FLOAT8 and role not in ("scale",):
        lo, hi = _range(spec, axes, (-2.0, 2.0)) if role == "activation" else (-448.0, 448.0)
        x = x.clamp(lo, hi)
    return x.to(dtype)


def _load_safetensors(src: SafetensorsInput, problem_dir: Path | None, device) -> torch.Tensor:
    from safetensors.torch import load_file

    path = Path(src.path)
    if not path.is_absolute() and problem_dir is not None:
        path = problem_dir / path
    if not path.is_file():
        raise FileNotFoundError(f"safetensors file not found: {path}")
    tensors = load_file(str(path))
    if src.tensor_key not in tensors:
        raise KeyError(f"{path} holds no tensor {src.tensor_key!r}")
    return tensors[src.tensor_key].to(device)


def make_inputs(definition: Definition, workload: Workload, seed: int, device: str | torch.device,
                problem_dir: Path | None = None,
                custom_entry: Callable[..., dict[str, Any]] | None = None) -> list[Any]:
    """Inputs in the definition's order for one draw."""
    device = torch.device(device)
    axes = definition.resolve_axes(workload.axes)
    sources = workload.inputs
    if sources and all(isinstance(s, CustomInput) for s in sources.values()):
        if custom_entry is None:
            raise ValueError("workload uses custom inputs but the definition names no custom_inputs_entrypoint")
        torch.manual_seed(seed)
        scalars = {n: s.value for n, s in sources.items() if isinstance(s, ScalarInput)}
        produced = custom_entry({**axes, **scalars}, device)
        return [produced[name] for name in definition.inputs]
    gen = torch.Generator(device=device).manual_seed(seed)
    out: list[Any] = []
    for name, spec in definition.inputs.items():
        src = sources.get(name)
        if isinstance(src, ScalarInput):
            out.append(src.value if spec.shape is None else torch.full(definition.shape_of(spec, axes), src.value, dtype=torch_dtype(spec.dtype), device=device))
            continue
        if isinstance(src, SafetensorsInput):
            out.append(_load_safetensors(src, problem_dir, device))
            continue
        if spec.shape is None:
            lo, hi = _range(spec, axes, (0.5, 1.5))
            if spec.dtype in INTEGER:
                out.append(int(torch.randint(int(lo), int(hi) + 1, (1,), generator=gen, device=device).item()))
            else:
                out.append(float(_uniform((1,), lo, hi, gen, device).item()))
            continue
        shape = definition.shape_of(spec, axes)
        out.append(random_tensor(name, spec, shape, axes, gen, device, angle_seed=seed))
    return out
