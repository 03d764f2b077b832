"""The KernelBench importer: problem files (``class Model(nn.Module)``, ``get_inputs()``, ``get_init_inputs()``)
become solbench problem directories (docs/PROBLEM_FORMAT.md, "KernelBench problems").

- The inputs are the forward's arguments (``input_0``, ...) and then the model's state (``param_<dotted name>``):
  its parameters in ``named_parameters()`` order, then the running statistics of its norms (the buffers eval
  mode reads) in ``named_buffers()`` order. Every other buffer and every plain tensor attribute (a causal mask,
  a table, an initial hidden state) is a constant of the reference: it comes from building the model, never
  from a random draw.
- The reference builds ``Model(*get_init_inputs())`` once per device, in eval mode (no dropout, running
  statistics read rather than written), with a fixed seed, and calls it with ``torch.func.functional_call``.
- Roles come from the values the file produces (kernelbench_roles); input sizes that the model accepts at other
  values become var axes, with a small CPU workload beside the file's sizes (kernelbench_probe).
- Before a problem is written its reference runs twice on the CPU workload: one that is random or gives NaN is
  refused.

Every file is tried; each failure is one line of the report, and a problem directory that exists is replaced
only with ``force``.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from solbench.errors import UserError
from solbench.problems.directory import slug, write_problem
from solbench.problems.kernelbench_probe import (
    ImportFailure,
    build,
    describe,
    init_inputs,
    load_module,
    plan_axes,
    probe,
    size_for_cpu,
)
from solbench.problems.kernelbench_reference import RUNNER, check_reference
from solbench.problems.kernelbench_roles import (
    buffer_spec,
    input_spec,
    input_values,
    param_spec,
)

DTYPE_NAMES = {
    torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float64: "float64",
    torch.int64: "int64", torch.int32: "int32", torch.int16: "int16", torch.int8: "int8", torch.uint8: "uint8",
    torch.bool: "bool", torch.float8_e4m3fn: "float8_e4m3fn", torch.float8_e5m2: "float8_e5m2",
}
#: the most parameter elements built twice on the CPU to read their initial values
VALUE_BUILD_LIMIT = 1 << 27



@dataclass
class ImportReport:
    written: list[Path] = field(default_factory=list)
    failed: list[tuple[Path, str]] = field(default_factory=list)
    notes: dict[Path, list[str]] = field(default_factory=dict)
    files: int = 0


def _dtype(t: torch.dtype) -> str:
    try:
        return DTYPE_NAMES[t]
    except KeyError:
        raise ImportFailure(f"dtype {t} is not supported") from None


def _owner(model: torch.nn.Module, dotted: str) -> torch.nn.Module:
    prefix = dotted.rpartition(".")[0]
    return model.get_submodule(prefix) if prefix else model


def _state(model: torch.nn.Module) -> tuple[list[tuple[str, torch.Tensor, bool]], list[str]]:
    """(dotted name, tensor, is a parameter) of what the inputs feed, and the names of the constants."""
    fed = [(n, t, True) for n, t in model.named_parameters()]
    constants = []
    for n, b in model.named_buffers():
        if isinstance(_owner(model, n), torch.nn.modules.batchnorm._NormBase) and b.is_floating_point():
            fed.append((n, b, False))
        else:
            constants.append(n)
    for prefix, mod in model.named_modules():
        constants += [f"{prefix}.{k}" if prefix else k for k, v in vars(mod).items() if isinstance(v, torch.Tensor)]
    return fed, constants


def _init_values(p, fed) -> tuple[list[list[torch.Tensor]], str | None]:
    """Initial values of the fed tensors in two CPU builds with different seeds (empty lists when too large)."""
    numel = sum(t.numel() for _, t, _ in fed)
    if numel > VALUE_BUILD_LIMIT:
        return [[] for _ in fed], f"{numel} parameter elements: roles by shape, not by initial values"
    try:
        builds = [p.model if p.device == "cpu" else build(p.module, p.init, "cpu", 0),
                  build(p.module, p.init, "cpu", 1)]
    except Exception as exc:
        return [[] for _ in fed], f"no CPU build for initial values ({describe(exc)})"
    tables = [dict(m.named_parameters(remove_duplicate=False)) | dict(m.named_buffers()) for m in builds]
    return [[t[n] for t in tables if n in t] for n, _, _ in fed], None


def _unique(name: str, taken: set[str]) -> str:
    out, k = name, 2
    while out in taken:
        out, k = f"{name}_{k}", k + 1
    taken.add(out)
    return out


def convert(f: Path, out_root: Path, name: str, force: bool) -> tuple[Path, list[str]]:
    """One file -> one problem directory (``out_root / name``), checked before it replaces anything."""
    target = out_root / name
    if target.exists() and not force:
        raise ImportFailure(f"{target} exists (--force replaces it)")
    module_name = f"solbench_kernelbench_{name}"
    try:
        module = load_module(f, module_name)
        return _convert(f, module, out_root, name, target)
    finally:
        sys.modules.pop(module_name, None)


def _convert(f: Path, module, out_root: Path, name: str, target: Path) -> tuple[Path, list[str]]:
    init = init_inputs(module)
    p = probe(module, init)
    notes = list(p.notes)
    plan = plan_axes(p)
    cpu_values = size_for_cpu(p, plan)
    numel = sum(x.numel() for x in p.inputs if isinstance(x, torch.Tensor))
    values, ranges, why = (p.inputs, {}, None) if p.device == "cpu" else input_values(module, len(p.inputs), numel)
    if why:
        notes.append(f"input roles by default: {why}")
    axes: dict[str, Any] = {g.name: {"type": "var", "min": g.floor, "description": f"the file's size {g.value}"}
                            for g in plan.groups}
    for g in plan.groups:
        if g.ceiling is not None:
            axes[g.name]["max"] = g.ceiling
    inputs, scalars, consts = _forward_inputs(p, plan, values, ranges)
    axes.update(consts)
    fed, constants = _state(p.model)
    init_vals, why = _init_values(p, fed)
    if why:
        notes.append(why)
    state, consts, state_names = _state_inputs(p, fed, init_vals, set(inputs))
    inputs.update(state)
    axes.update(consts)
    outputs, consts = _outputs(p, plan)
    axes.update(consts)
    level = next((q.name.lower() for q in f.parents if q.name.lower().startswith("level")), None)
    literal = repr(init)
    try:
        import ast

        ast.literal_eval(literal)
    except (ValueError, SyntaxError):
        literal = None
        notes.append("get_init_inputs() is not a literal: a ModelNew solution must define get_init_inputs itself")
    definition = {
        "name": name, "op_type": "kernelbench",
        "description": f"Imported from the KernelBench problem file {f.name}; the model runs in eval mode.",
        "tags": ["imported:kernelbench"] + ([f"kernelbench:{level}"] if level else []),
        "axes": axes, "inputs": inputs, "outputs": outputs,
        "kernelbench": {"file": f.name, "mode": "eval", "init_inputs": literal, "forward_inputs": len(p.inputs),
                        "state": state_names, "constants": constants},
    }
    workloads = _workloads(name, plan, cpu_values, scalars, notes)
    reference = module_source(f) + RUNNER.format(n_inputs=len(p.inputs), state=state_names)
    _replace(out_root, name, target, definition, reference, workloads, notes)
    return target, notes


def _forward_inputs(p, plan, values, ranges) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The forward's arguments as inputs (``input_<i>``), the numbers among them as the workloads' scalars, and the
    const axes of the tensors' sizes that no var axis covers."""
    position = {pos: g.name for g in plan.groups for pos in g.positions}
    axes: dict[str, Any] = {}
    inputs: dict[str, Any] = {}
    scalars: dict[str, Any] = {}
    for i, x in enumerate(p.inputs):
        iname = f"input_{i}"
        if isinstance(x, torch.Tensor):
            dims = []
            for j, v in enumerate(x.shape):
                if (i, j) in position:
                    dims.append(position[(i, j)])
                else:
                    dims.append(f"{iname}_d{j}")
                    axes[dims[-1]] = {"type": "const", "value": int(v)}
            spec: dict[str, Any] = {"shape": dims, "dtype": _dtype(x.dtype)}
            got = values[i] if values is not None else None
            if isinstance(got, torch.Tensor) and got.dtype == x.dtype and got.dim() == x.dim():
                spec.update(input_spec(got, ranges.get(id(got))))
            bound = (spec.get("range") or [None, None])[1] if spec.get("role") == "index" else None
            tied = [g.name for g in plan.groups if g.value == bound]
            if tied:  # class ids below a size that varies (cross-entropy's targets): the bound is that axis
                spec["range"] = [spec["range"][0], tied[0]]
            inputs[iname] = spec
        elif isinstance(x, (bool, int, float)):
            dtype = "bool" if isinstance(x, bool) else "int64" if isinstance(x, int) else "float32"
            inputs[iname] = {"shape": None, "dtype": dtype}
            scalars[iname] = {"type": "scalar", "value": x}
        else:
            raise ImportFailure(f"get_inputs() item {i} is a {type(x).__name__}: only tensors and numbers are supported")
    return inputs, scalars, axes


def _state_inputs(p, fed, init_vals, taken: set[str]) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """The model's state as inputs (``param_<dotted name>``, unique among ``taken``), their const axes, and the
    dotted names in order."""
    axes: dict[str, Any] = {}
    inputs: dict[str, Any] = {}
    state_names = []
    for (dotted, t, is_param), vals in zip(fed, init_vals):
        pname = _unique("param_" + slug(dotted), taken)
        dims = [f"{pname}_d{j}" for j in range(t.dim())]
        axes.update({d: {"type": "const", "value": int(v)} for d, v in zip(dims, t.shape)})
        owner = _owner(p.model, dotted)
        role = param_spec(dotted, owner, tuple(t.shape), t.dtype, vals) if is_param \
            else buffer_spec(dotted.rsplit(".", 1)[-1])
        inputs[pname] = {"shape": dims, "dtype": _dtype(t.dtype), **role}
        state_names.append(dotted)
    return inputs, axes, state_names


def _outputs(p, plan) -> tuple[dict[str, Any], dict[str, Any]]:
    """The forward's outputs (``output_<k>``) and the const and expression axes of their sizes."""
    axes: dict[str, Any] = {}
    outputs: dict[str, Any] = {}
    for k, (o, dims_k) in enumerate(zip(p.outputs, plan.dims)):
        dims = []
        for m, d in enumerate(dims_k):
            axis = f"output_{k}_d{m}"
            if d[0] == "const":
                axes[axis] = {"type": "const", "value": d[1]}
            elif d[2:] == (1, 0, 1):
                axis = d[1]
            else:
                _, g, a, c, s = d
                term = f"{a} * {g}" if a != 1 else g
                term = f"{term} + {c}" if c > 0 else f"{term} - {-c}" if c < 0 else term
                axes[axis] = {"type": "expr", "expression": f"({term}) // {s}" if s != 1 else term}
            dims.append(axis)
        outputs[f"output_{k}"] = {"shape": dims, "dtype": _dtype(o.dtype)}
    return outputs, axes


def _workloads(name: str, plan, cpu_values: dict[str, int], scalars: dict[str, Any],
               notes: list[str]) -> list[dict[str, Any]]:
    """The file's sizes as a workload, and a small one for the CPU when they differ."""
    var = {g.name: g for g in plan.groups}
    file_sizes = {g: v.value for g, v in var.items()}
    workloads = [{"uuid": f"{name}-kernelbench", "axes": file_sizes, "inputs": scalars,
                  "label": "the file's get_inputs() sizes"}]
    if cpu_values != file_sizes:
        workloads[0]["device"] = "gpu"
        workloads.append({"uuid": f"{name}-cpu", "axes": cpu_values, "inputs": scalars, "device": "cpu",
                          "label": "small sizes for the CPU: " + " ".join(f"{k}={v}" for k, v in cpu_values.items())})
    elif not plan.groups:
        notes.append("no size varies: the CPU runs the file's sizes")
    return workloads


def _replace(out_root: Path, name: str, target: Path, definition: dict[str, Any], reference: str,
             workloads: list[dict[str, Any]], notes: list[str]) -> None:
    """Writes the problem beside ``target``, checks its reference, and only then replaces ``target`` with it."""
    staging = out_root / f".{name}.importing-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        try:
            write_problem(staging, definition, reference, workloads)
        except UserError as exc:
            raise ImportFailure(str(exc)) from None
        note = check_reference(staging, name)
        if note:
            notes.append(note)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def module_source(f: Path) -> str:
    text = f.read_text()
    return text if text.endswith("\n") else text + "\n"


def _files(path: Path) -> list[Path]:
    files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
    out = []
    for f in files:
        try:
            text = f.read_text()
        except (OSError, UnicodeDecodeError):
            continue
        if re.search(r"^class Model\b", text, re.MULTILINE) and "def get_inputs" in text and not f.name.startswith("."):
            out.append(f)
    return out


def import_kernelbench_report(path: Path, out_root: Path, force: bool = False, progress=None) -> ImportReport:
    """Import every problem file under ``path``; a failure is one line in the report, never the end of the run."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"not found: {path}")
    files = _files(path)
    if not files:
        raise UserError(f"no KernelBench problem files (class Model + get_inputs) under {path}")
    out_root = Path(out_root)
    try:
        out_root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot write to {out_root}: {exc.strerror}") from None
    report = ImportReport(files=len(files))
    used: set[str] = set()
    for f in files:
        name = slug(f.stem)
        if name in used:  # the same file name in two levels
            level = next((q.name for q in f.parents if q.name.lower().startswith("level")), f.parent.name)
            name = slug(f"{level}_{f.stem}")
        used.add(name)
        try:
            target, notes = convert(f, out_root, name, force)
        except ImportFailure as exc:
            report.failed.append((f, str(exc)))
        except Exception as exc:  # the user's file did something unforeseen: still one line
            report.failed.append((f, f"import failed: {describe(exc)}"))
        else:
            report.written.append(target)
            report.notes[target] = notes
        if progress is not None:
            progress(f, report)
    return report


def import_kernelbench(path: Path, out_root: Path, force: bool = False) -> list[Path]:
    """The problem directories written; a UserError naming the first failure when none was."""
    report = import_kernelbench_report(path, out_root, force)
    if not report.written:
        f, reason = report.failed[0]
        raise UserError(f"{f}: {reason}")
    return report.written
