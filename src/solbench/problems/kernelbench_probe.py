"""Probing a KernelBench problem file: its module, its model, its inputs' values and which sizes may vary.

Everything here runs the user's own file: on meta tensors where it can (no memory), else on the CPU, where
``__init__`` or ``forward`` needs values (``.item()``). Every failure becomes an ``ImportFailure`` whose message
is the one line the importer reports for the file.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode


class ImportFailure(Exception):
    """A file that cannot become a problem; the message is one line saying why."""


def describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


def failure(what: str, exc: BaseException) -> ImportFailure:
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return ImportFailure(f"missing module {exc.name!r} (install it, then import again)")
    if isinstance(exc, ImportFailure):
        return exc
    return ImportFailure(f"{what}: {describe(exc)}")


@contextmanager
def seeded(seed: int):
    """A fixed CPU seed inside, the caller's RNG state untouched outside."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


class _HostOnly(TorchFunctionMode):
    """``.cuda()`` and ``.to("cuda")`` in get_inputs() keep the tensor where it is (meta or the CPU)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func is torch.Tensor.cuda:
            return args[0]
        if func is torch.Tensor.to:
            def gpu(d) -> bool:
                return isinstance(d, (str, torch.device)) and str(d).startswith("cuda")
            args = tuple(a for a in args if not gpu(a))
            if gpu(kwargs.get("device")):
                kwargs.pop("device")
            if len(args) == 1 and not kwargs:
                return args[0]
        return func(*args, **kwargs)


def get_inputs(module) -> list[Any]:
    """The file's get_inputs(), with a fixed seed, on the current default device (meta or the CPU)."""
    with seeded(0), _HostOnly():
        return list(module.get_inputs())


def load_module(path: Path, name: str):
    from solbench.problems.modules import import_file

    try:
        module = import_file(path, name)
    except SystemExit as exc:
        raise ImportFailure(f"the file exits when imported (SystemExit {exc.code})") from None
    except Exception as exc:
        raise failure("the file does not import", exc) from None
    if not isinstance(getattr(module, "Model", None), type) or not callable(getattr(module, "get_inputs", None)):
        raise ImportFailure("no class Model and get_inputs()")
    return module


def init_inputs(module) -> list[Any]:
    fn = getattr(module, "get_init_inputs", None)
    if fn is None:
        return []
    try:
        with seeded(0):
            return list(fn())
    except Exception as exc:
        raise failure("get_init_inputs() fails", exc) from None


def outputs_of(result) -> list[torch.Tensor]:
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    for o in outs:
        if not isinstance(o, torch.Tensor):
            raise ImportFailure(f"forward returns a {type(o).__name__}, not tensors")
    return outs


# ---- the model, on meta tensors or on the CPU ----------------------------------------------------------------------
#: seconds the search for var axes may spend running the model at other sizes
PROBE_BUDGET = 60.0
#: a meta forward slower than this (a recurrent net decomposed step by step) probes on the CPU instead
SLOW_META = 1.0


@dataclass
class Probe:
    module: Any
    init: list[Any]
    device: str  # "meta" or "cpu": where the model was built and run at the file's sizes
    model: torch.nn.Module
    inputs: list[Any]  # the forward's arguments at the file's sizes (on ``device``; scalars as they are)
    outputs: list[torch.Tensor]
    notes: list[str] = field(default_factory=list)
    shape_model: torch.nn.Module | None = None  # what the shape probes run (default: ``model``)
    shape_device: str = ""
    deadline: float = 0.0

    def forward_shapes(self, shapes: list[tuple[int, ...] | None]) -> list[tuple[int, ...]] | None:
        """Output shapes for inputs of these shapes (None for a scalar input), or None where the model fails (or the
        search's time is up)."""
        if not self.deadline:
            self.deadline = time.monotonic() + PROBE_BUDGET
        if time.monotonic() > self.deadline:
            if not any(n.startswith("the search for var axes") for n in self.notes):
                self.notes.append(f"the search for var axes stopped after {PROBE_BUDGET:.0f} s")
            return None
        device = self.shape_device or self.device
        model = self.shape_model or self.model
        args = []
        for x, shape in zip(self.inputs, shapes):
            if not isinstance(x, torch.Tensor):
                args.append(x)
            elif device == "meta":
                args.append(torch.empty(shape, dtype=x.dtype, device="meta"))
            elif x.is_floating_point():
                args.append(torch.rand(shape, dtype=x.dtype))
            elif x.dtype == torch.bool:
                args.append(torch.ones(shape, dtype=torch.bool))
            else:
                args.append(torch.zeros(shape, dtype=x.dtype))
        try:
            with torch.no_grad(), seeded(0):
                return [tuple(o.shape) for o in outputs_of(model(*args))]
        except Exception:
            return None


def build(module, init: list[Any], device: str, seed: int = 0) -> torch.nn.Module:
    with seeded(seed), torch.device(device):
        model = module.Model(*init)
    if not isinstance(model, torch.nn.Module):
        raise ImportFailure(f"Model(...) is a {type(model).__name__}, not an nn.Module")
    return model.eval()


def probe(module, init: list[Any]) -> Probe:
    """The model and its outputs at the file's sizes: on meta tensors, else (values needed) on the CPU."""
    try:
        with torch.device("meta"):
            inputs = get_inputs(module)
        model = build(module, init, "meta")
        started = time.monotonic()
        with torch.no_grad():
            outputs = outputs_of(model(*inputs))
        p = Probe(module, init, "meta", model, inputs, outputs)
        if time.monotonic() - started > SLOW_META:  # a first call may warm up: time another
            started = time.monotonic()
            with torch.no_grad():
                model(*inputs)
        if time.monotonic() - started > SLOW_META:  # meta tensors decompose the op step by step: real ones are faster
            try:
                p.shape_model, p.shape_device = build(module, init, "cpu"), "cpu"
            except Exception:
                pass
        return p
    except ModuleNotFoundError as exc:
        raise failure("", exc) from None
    except Exception as meta_exc:
        reason = describe(meta_exc)
    try:
        model = build(module, init, "cpu")
    except Exception as exc:
        raise failure("Model(*get_init_inputs()) fails on the CPU", exc) from None
    try:
        inputs = get_inputs(module)
    except Exception as exc:
        raise failure("get_inputs() fails", exc) from None
    try:
        with torch.no_grad(), seeded(0):
            outputs = outputs_of(model(*inputs))
    except Exception as exc:
        raise failure("the model's forward fails on get_inputs()", exc) from None
    return Probe(module, init, "cpu", model, inputs, outputs, [f"built on the CPU (meta tensors: {reason})"])


# ---- which input sizes may vary --------------------------------------------------------------------------------
@dataclass
class Group:
    """Input dims that share one size and vary together: one var axis."""

    name: str
    value: int  # the file's size
    positions: list[tuple[int, int]]  # (input index, dim)
    floor: int  # the smallest size the model was seen to accept
    ceiling: int | None = None  # the largest, where twice the file's size fails (None: not known to fail)
    cpu_value: int = 0


@dataclass
class AxisPlan:
    groups: list[Group]
    #: per output, per dim: ("const", value) or ("dep", group name, a, c, s): size = (a * group + c) // s
    dims: list[list[tuple]]

    def size(self, dim: tuple, values: dict[str, int]) -> int:
        if dim[0] == "const":
            return dim[1]
        _, g, a, c, s = dim
        return (a * values[g] + c) // s

    def input_shapes(self, probe: Probe, values: dict[str, int]) -> list[tuple[int, ...] | None]:
        shapes = [list(x.shape) if isinstance(x, torch.Tensor) else None for x in probe.inputs]
        for g in self.groups:
            for i, j in g.positions:
                shapes[i][j] = values[g.name]
        return [tuple(s) if s is not None else None for s in shapes]

    def output_shapes(self, values: dict[str, int]) -> list[tuple[int, ...]]:
        return [tuple(self.size(d, values) for d in dims) for dims in self.dims]


def _fit(points: dict[int, int]) -> tuple[int, int, int] | None:
    """(a, c, s) with o == (a * g + c) // s at every point (g, o): the simplest, or None."""
    g0, o0 = min(points.items())
    best = None
    for s in (1, 2, 3, 4):
        for a in (1, 2, 3, 4):
            for r in range(s):
                c = s * o0 + r - a * g0
                if all((a * g + c) // s == o for g, o in points.items()):
                    key = (s, a, abs(c), c)
                    best = key if best is None or key < best else best
    return (best[1], best[3], best[0]) if best else None


def fit_size(fit: tuple[int, int, int] | None, g: int, const: int) -> int:
    if fit is None:
        return int(const)
    a, c, s = fit
    return (a * g + c) // s


def _trial_values(v: int, device: str) -> list[int]:
    smaller = [v // 2 + 1, v // 2, v // 4 + 1, max(2, v // 8)]
    trials = ([v - 1] if device == "meta" else []) + smaller
    return sorted({t for t in trials if 2 <= t < v}, reverse=True)


def plan_axes(p: Probe) -> AxisPlan:
    """Var axes for input sizes that the model accepts at other values, with every output dim a simple function of
    one of them (``(a * g + c) // s``: the size itself, a convolution's or a pooling's output, a concatenation)."""
    const_dims = [[("const", int(v)) for v in o.shape] for o in p.outputs]
    by_value: dict[int, list[tuple[int, int]]] = {}
    for i, x in enumerate(p.inputs):
        if isinstance(x, torch.Tensor):
            for j, v in enumerate(x.shape):
                if v >= 4:
                    by_value.setdefault(int(v), []).append((i, j))
    groups: list[Group] = []
    dims = [list(d) for d in const_dims]
    claimed: set[tuple[int, int]] = set()
    base_shapes = [tuple(x.shape) if isinstance(x, torch.Tensor) else None for x in p.inputs]
    for value, positions in sorted(by_value.items(), key=lambda kv: (min(kv[1]), kv[0])):
        points: dict[int, list[tuple[int, ...]]] = {value: [tuple(o.shape) for o in p.outputs]}
        for t in _trial_values(value, p.shape_device or p.device):
            shapes = [list(s) if s is not None else None for s in base_shapes]
            for i, j in positions:
                shapes[i][j] = t
            got = p.forward_shapes([tuple(s) if s is not None else None for s in shapes])
            if got is not None and len(got) == len(p.outputs) and all(
                    len(a) == len(b.shape) for a, b in zip(got, p.outputs)):
                points[t] = got
        if len(points) < 3:
            continue
        fits: dict[tuple[int, int], tuple[int, int, int]] = {}
        ok = True
        for k, o in enumerate(p.outputs):
            for m in range(o.dim()):
                seen = {g: shapes[k][m] for g, shapes in points.items()}
                if len(set(seen.values())) == 1:
                    continue
                fit = _fit(seen)
                if fit is None or (k, m) in claimed:
                    ok = False
                    break
                fits[(k, m)] = fit
            if not ok:
                break
        if not ok:
            continue
        ceiling = value
        if (p.shape_device or p.device) == "meta":  # twice the file's size: fine, or the sizes stop at the file's (a mask's length)
            shapes = [list(s) if s is not None else None for s in base_shapes]
            for i, j in positions:
                shapes[i][j] = 2 * value
            got = p.forward_shapes([tuple(s) if s is not None else None for s in shapes])
            if got is not None and all(
                    tuple(fit_size(fits.get((k, m)), 2 * value, o.shape[m]) for m in range(o.dim())) == tuple(g)
                    for k, (o, g) in enumerate(zip(p.outputs, got))):
                ceiling = None
        all_dim0 = all(j == 0 for _, j in positions)
        name = "batch" if all_dim0 and (0, 0) in positions and not any(g.name == "batch" for g in groups) \
            else f"input_{positions[0][0]}_d{positions[0][1]}"
        groups.append(Group(name, value, positions, floor=min(points), ceiling=ceiling))
        for (k, m), (a, c, s) in fits.items():
            dims[k][m] = ("dep", name, a, c, s)
            claimed.add((k, m))
    plan = AxisPlan(groups, dims)
    # together, not only one at a time: drop the last groups until a joint change of every size is predicted
    while plan.groups:
        values = {g.name: max(g.floor, g.value // 2) for g in plan.groups}
        got = p.forward_shapes(plan.input_shapes(p, values))
        if got is not None and got == plan.output_shapes(values):
            break
        dropped = plan.groups.pop()
        plan.dims = [[("const", int(o.shape[m])) if d[0] == "dep" and d[1] == dropped.name else d
                      for m, d in enumerate(dims_k)] for o, dims_k in zip(p.outputs, plan.dims)]
    return plan


def size_for_cpu(p: Probe, plan: AxisPlan, budget: int = 1 << 18) -> dict[str, int]:
    """Halve the var axes (largest first) until the inputs and outputs hold at most ``budget`` elements."""
    values = {g.name: g.value for g in plan.groups}
    floors = {g.name: max(2, g.floor) for g in plan.groups}

    def elements(vals):
        shapes = [s for s in plan.input_shapes(p, vals) if s is not None] + plan.output_shapes(vals)
        return sum(math.prod(s) for s in shapes)

    while elements(values) > budget:
        shrinkable = [n for n in values if values[n] // 2 >= floors[n]]
        if not shrinkable:
            break
        name = max(shrinkable, key=lambda n: values[n] / floors[n])
        trial = dict(values, **{name: values[name] // 2})
        got = p.forward_shapes(plan.input_shapes(p, trial))
        if got is not None and got == plan.output_shapes(trial):
            values = trial
        else:
            floors[name] = values[name]
    for g in plan.groups:
        g.cpu_value = values[g.name]
    return values
