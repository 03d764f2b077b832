"""Input roles for an imported KernelBench problem, read from the values its file produces.

The forward's inputs get the role of what ``get_inputs()`` returns (run on the CPU at shrunk sizes): a
probability distribution along the last dim (``softmax``), integers in a range, +-1, a constant, a uniform draw
in a range, or the default activation; square inputs that are symmetric or triangular say so in ``structure``.
Parameters get the role of their initial values over two builds with different seeds: a constant init (the same
all-equal values whatever the seed: a hyperparameter stored as a parameter) keeps its value; a random init is
drawn uniformly over a range of the same spread. Learnable affine parameters of torch.nn's own modules (a
norm's ones and zeros) are drawn like norm weights and biases instead, so that a solution cannot skip them.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from solbench.problems.definition import ROLES
from solbench.problems.kernelbench_probe import describe, get_inputs

_NORMS = (torch.nn.modules.batchnorm._NormBase, torch.nn.LayerNorm, torch.nn.GroupNorm)


def _nice(lo: float, hi: float) -> list[float]:
    """[lo, hi] widened to two significant digits of the span (torch.rand's [0.00002, 0.99997] -> [0.0, 1.0])."""
    span = hi - lo
    if span <= 0:
        return [lo, hi]
    q = 10.0 ** (math.floor(math.log10(span)) - 1)
    return [round(math.floor(lo / q) * q, 12), round(math.ceil(hi / q) * q, 12)]


def constant_spec(value: float) -> dict[str, Any]:
    if value == 0.0:
        return {"role": "zeros"}
    if value == 1.0:
        return {"role": "ones"}
    return {"role": "uniform", "range": [value, value]}


def _sign_spec() -> dict[str, Any]:
    if "sign" in ROLES:
        return {"role": "sign"}
    # until the input generator has a +-1 role: the nearest it has, and what is wanted beside it
    return {"role": "uniform", "range": [-1.0, 1.0], "wanted_role": "sign"}


def _excess_kurtosis(x: torch.Tensor) -> float:
    x = x - x.mean()
    var = float((x * x).mean())
    return float((x ** 4).mean()) / (var * var) - 3.0 if var > 0 else 0.0


def _structure(x: torch.Tensor) -> tuple[str | None, torch.Tensor]:
    """symmetric / lower_triangular / upper_triangular over the last two dims, and the values that are drawn."""
    if x.dim() < 2 or x.shape[-1] != x.shape[-2] or x.shape[-1] < 2:
        return None, x.flatten()
    n = x.shape[-1]
    lower = torch.ones(n, n, dtype=torch.bool).tril()
    strict_upper = ~lower
    if bool(x[..., strict_upper].eq(0).all()) and bool(x[..., ~torch.ones(n, n, dtype=torch.bool).triu()].ne(0).any()):
        return "lower_triangular", x[..., lower].flatten()
    upper = lower.T
    if bool(x[..., ~upper].eq(0).all()) and bool(x[..., strict_upper].ne(0).any()):
        return "upper_triangular", x[..., upper].flatten()
    if torch.equal(x, x.transpose(-1, -2)) and bool(x[..., strict_upper].ne(0).any()):
        return "symmetric", x[..., lower].flatten()
    return None, x.flatten()


def input_spec(t: torch.Tensor, bounds: tuple[int, int] | None = None) -> dict[str, Any]:
    """Role fields for one forward input, from the tensor ``get_inputs()`` returned ({} for the default)."""
    if t.dtype == torch.bool:
        if t.dim() >= 2:
            rows, cols = t.shape[-2], t.shape[-1]
            causal = torch.ones(rows, cols, dtype=torch.bool).tril(diagonal=cols - rows)
            if bool((t == causal).all()):
                return {"role": "causal_mask"}
        return {}
    if not t.is_floating_point():
        if t.numel() == 0:
            return {"role": "index"}
        lo, hi = bounds or (int(t.min()), int(t.max()) + 1)
        return {"role": "index", "range": [lo, hi]}
    x = t.detach().to(torch.float64)
    if x.numel() == 0 or not bool(torch.isfinite(x).all()):
        return {}
    structure, body = _structure(x)
    spec: dict[str, Any] = {"structure": structure} if structure else {}
    lo, hi = float(body.min()), float(body.max())
    uniq = torch.unique(body)
    if len(uniq) == 1:
        return {**spec, **constant_spec(lo)}
    if len(uniq) == 2 and set(uniq.tolist()) == {-1.0, 1.0}:
        return {**spec, **_sign_spec()}
    if len(uniq) <= 64 and torch.equal(body, body.round()):  # integers as floats: randint(...).float()
        return {**spec, "role": "index", "range": [int(lo), int(hi) + 1]}
    if lo >= 0 and x.dim() >= 1 and x.shape[-1] > 1 and structure is None:
        if bool(torch.allclose(x.sum(-1), torch.ones((), dtype=x.dtype), atol=1e-3)):
            return {**spec, "role": "probability"}
    if lo >= 0 or (body.numel() >= 64 and _excess_kurtosis(body) < -0.8):
        return {**spec, "role": "uniform", "range": _nice(lo, hi)}  # torch.rand and friends: a bounded draw
    return spec  # a normal draw: the activation role


def _like(values: list[torch.Tensor]) -> dict[str, Any]:
    """A uniform draw with the spread of a random init."""
    v = values[0].detach().to(torch.float64).flatten()
    lo, hi = float(v.min()), float(v.max())
    if lo >= 0:
        return {"role": "uniform", "range": _nice(lo, hi)}
    if v.numel() >= 16 and _excess_kurtosis(v) < -0.8:  # a uniform init (nn's default): its own bounds
        b = max(abs(lo), abs(hi))
        return {"role": "uniform", "range": _nice(-b, b)}
    pooled = torch.cat([x.detach().to(torch.float64).flatten() for x in values])
    sigma = float(pooled.std()) if pooled.numel() > 1 else 1.0
    mu = float(pooled.mean()) if pooled.numel() > 1 else 0.0
    half = math.sqrt(3.0) * (sigma or 1.0)  # a normal init: a uniform draw of the same variance
    return {"role": "uniform", "range": _nice(mu - half, mu + half)}


def _default_param(leaf: str, owner: torch.nn.Module, shape: tuple[int, ...]) -> dict[str, Any]:
    if isinstance(owner, _NORMS):
        return {"role": "norm_weight"} if leaf == "weight" else {"role": "bias"}
    if len(shape) >= 2:
        fan_in = max(1, math.prod(shape[1:]))
    else:
        fan_in = max(1, shape[0]) if shape else 1
    b = round(fan_in ** -0.5, 8)
    return {"role": "uniform", "range": [-b, b]}  # nn's default init: uniform within 1/sqrt(fan_in)


def param_spec(dotted: str, owner: torch.nn.Module, shape: tuple[int, ...], dtype: torch.dtype,
               values: list[torch.Tensor]) -> dict[str, Any]:
    """Role fields for a parameter, from its initial values in builds with different seeds (none: by its shape)."""
    leaf = dotted.rsplit(".", 1)[-1]
    if not dtype.is_floating_point:
        return {"role": "index"}
    if not values or values[0].numel() == 0:
        return _default_param(leaf, owner, shape)
    v0 = values[0].detach()
    first = float(v0.flatten()[0])
    all_equal = bool((v0 == first).all())
    if len(values) > 1:
        constant = all_equal and all(torch.equal(v0, v.detach()) for v in values[1:])
    else:  # one build: a single value is constant only when it is 0 or 1
        constant = all_equal and (v0.numel() > 1 or first in (0.0, 1.0))
    if constant:
        if type(owner).__module__.startswith("torch.nn"):  # a norm's affine ones and zeros: learnable
            return _default_param(leaf, owner, shape) if isinstance(owner, _NORMS) or leaf in ("weight", "bias") \
                else constant_spec(first)
        return constant_spec(first)
    return _like(values)


def buffer_spec(leaf: str) -> dict[str, Any]:
    """Running statistics of a norm, which eval mode reads: inputs like any parameter."""
    if leaf == "running_var":
        return {"role": "positive", "range": [0.5, 1.5]}
    return {"role": "bias"}


# ---- what get_inputs() draws -------------------------------------------------------------------------------------
_SIZED = {torch.randn, torch.rand, torch.ones, torch.zeros, torch.empty}


def _cap(size) -> tuple[int, ...]:
    dims = [int(d) for d in size]
    while math.prod(dims) > 1 << 16:
        k = max(range(len(dims)), key=lambda i: dims[i])
        dims[k] = (dims[k] + 1) // 2
    return tuple(dims)


def _size_arg(args) -> Any:
    return args[0] if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)) else args


class _Shrunk(TorchFunctionMode):
    """Factory calls at most 65536 elements each (the values keep their distribution); randint's bounds recorded."""

    def __init__(self):
        super().__init__()
        self.ranges: dict[int, tuple[int, int]] = {}
        self.keep: list[torch.Tensor] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in _SIZED:
            if "size" in kwargs:
                kwargs["size"] = _cap(kwargs["size"])
            else:
                args = (_cap(_size_arg(args)),)
        elif func is torch.randint:
            if "size" in kwargs:
                kwargs["size"] = _cap(kwargs["size"])
                bounds = args
            else:
                bounds, size = args[:-1], args[-1]
                args = (*bounds, _cap(size))
            low, high = (0, bounds[0]) if len(bounds) == 1 else (bounds[0], bounds[1])
            if "high" in kwargs:
                low, high = kwargs.get("low", 0), kwargs["high"]
            out = func(*args, **kwargs)
            self.ranges[id(out)] = (int(low), int(high))
            self.keep.append(out)
            return out
        elif func is torch.full:
            if "size" in kwargs:
                kwargs["size"] = _cap(kwargs["size"])
            elif args:
                args = (_cap(args[0]), *args[1:])
        elif func is torch.eye:
            args = tuple(min(int(a), 256) if isinstance(a, int) else a for a in args)
        return func(*args, **kwargs)


def input_values(module, n: int, numel: int) -> tuple[list[Any] | None, dict[int, tuple[int, int]], str | None]:
    """get_inputs() on the CPU with every factory call shrunk, else at its own sizes when they hold at most 2**24
    elements: (values or None, randint bounds by id of the tensor, why there are no values)."""
    mode = _Shrunk()
    try:
        with mode:
            values = get_inputs(module)
        if len(values) == n:
            return values, mode.ranges, None
        why = "get_inputs() returned another count when shrunk"
    except Exception as exc:
        why = f"shrunk get_inputs() failed ({describe(exc)})"
    if numel <= 1 << 24:
        try:
            values = get_inputs(module)
            if len(values) == n:
                return values, {}, None
        except Exception as exc:
            why = f"get_inputs() failed on the CPU ({describe(exc)})"
    return None, {}, why
