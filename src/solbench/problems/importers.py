"""Importers: turn other benchmarks' problems, which the user points at, into solbench problem directories.

- ``import_kernelbench``: a KernelBench problem file (``class Model(nn.Module)``, ``get_inputs()``,
  ``get_init_inputs()``) becomes a definition whose inputs are the forward's inputs followed by the model's
  parameters (so a solution receives the weights like any other input), a reference that runs the model
  functionally on them, and one workload with the file's sizes. Shapes are found on meta tensors: no memory.
- ``import_flashinfer_trace``: a FlashInfer-Trace dataset (``definitions/**.json`` with workloads in
  ``workloads/**.jsonl`` as Trace lines) or SOL-ExecBench problem directories (``definition.json`` +
  ``workload.jsonl``) become one directory per definition; safetensors paths are made absolute so the inputs
  load from where they are.

The user's files are read, never copied into this repository: the output goes where the user says.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from solbench.errors import UserError
from solbench.problems.definition import Definition
from solbench.problems.workload import parse_workload_line

_DTYPE_NAMES = {
    "torch.float32": "float32", "torch.float16": "float16", "torch.bfloat16": "bfloat16", "torch.float64": "float64",
    "torch.int64": "int64", "torch.int32": "int32", "torch.int8": "int8", "torch.uint8": "uint8", "torch.bool": "bool",
    "torch.float8_e4m3fn": "float8_e4m3fn", "torch.float8_e5m2": "float8_e5m2", "torch.int16": "int16",
}


def _slug(text: str) -> str:
    return re.sub(r"[^0-9a-zA-Z_]+", "_", text).strip("_").lower() or "problem"


def _write(out_dir: Path, definition: dict[str, Any], reference: str, workloads: list[dict[str, Any]]) -> Path:
    try:
        Definition.model_validate(definition)
    except ValidationError as exc:
        raise UserError(f"{definition.get('name')}: the converted definition is not valid: {exc.errors()[0]['msg']}") from None
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "definition.json").write_text(json.dumps(definition, indent=2) + "\n")
    (out_dir / "reference.py").write_text(reference)
    (out_dir / "workload.jsonl").write_text("".join(json.dumps(w) + "\n" for w in workloads))
    return out_dir


# ---- KernelBench ---------------------------------------------------------------------------
_KB_RUNNER = '''

# ---- added by `solbench import kernelbench`: the model as a function of its inputs and parameters ----
import torch as _sb_torch

_SB_INIT = {init!r}
_SB_N_INPUTS = {n_inputs}
_SB_PARAMS = {params!r}
_sb_model = None


def run(*args):
    global _sb_model
    if _sb_model is None:
        with _sb_torch.device("meta"):
            _sb_model = Model(*_SB_INIT)
    inputs, params = args[:_SB_N_INPUTS], args[_SB_N_INPUTS:]
    state = dict(zip(_SB_PARAMS, params))
    return _sb_torch.func.functional_call(_sb_model, state, tuple(inputs))
'''


def import_kernelbench(path: Path, out_root: Path) -> list[Path]:
    import torch

    files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
    if not files:
        raise UserError(f"no KernelBench problem files under {path}")
    written = []
    for f in files:
        source = f.read_text()
        if "class Model" not in source or "def get_inputs" not in source:
            continue
        namespace: dict[str, Any] = {"__name__": f"kernelbench_{_slug(f.stem)}"}
        try:
            exec(compile(source, str(f), "exec"), namespace)  # noqa: S102 - the user's own problem file
            init = list(namespace["get_init_inputs"]()) if "get_init_inputs" in namespace else []
            with torch.device("meta"):
                inputs = list(namespace["get_inputs"]())
                model = namespace["Model"](*init)
                out = model(*inputs)
        except Exception as exc:
            raise UserError(f"{f}: cannot run its Model on meta tensors: {type(exc).__name__}: {exc}") from None
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        axes: dict[str, Any] = {}
        spec_inputs: dict[str, Any] = {}
        for i, x in enumerate(inputs):
            name = f"input_{i}"
            if isinstance(x, torch.Tensor):
                dims = [f"{name}_d{j}" for j in range(x.dim())]
                axes.update({d: {"type": "const", "value": int(v)} for d, v in zip(dims, x.shape)})
                spec_inputs[name] = {"shape": dims, "dtype": _DTYPE_NAMES.get(str(x.dtype), "float32")}
            else:
                spec_inputs[name] = {"shape": None, "dtype": "float32" if isinstance(x, float) else "int64"}
        # parameters and buffers become inputs, so a solution receives the weights like any other input
        params = list(model.named_parameters()) + list(model.named_buffers())
        for n, p in params:
            name = "param_" + _slug(n)
            dims = [f"{name}_d{j}" for j in range(p.dim())]
            axes.update({d: {"type": "const", "value": int(v)} for d, v in zip(dims, p.shape)})
            spec: dict[str, Any] = {"shape": dims, "dtype": _DTYPE_NAMES.get(str(p.dtype), "float32")}
            if not p.is_floating_point():
                spec["role"] = "index"
            elif "var" in n:
                spec["role"] = "positive"
            else:  # the default nn init: uniform within 1/sqrt(fan_in)
                fan_in = max(1, int(torch.Size(p.shape[1:]).numel())) if p.dim() > 1 else max(1, int(p.shape[0]))
                spec.update(role="uniform", range=[-fan_in ** -0.5, fan_in ** -0.5])
            spec_inputs[name] = spec
        spec_outputs = {}
        for i, o in enumerate(outs):
            dims = [f"output_{i}_d{j}" for j in range(o.dim())]
            axes.update({d: {"type": "const", "value": int(v)} for d, v in zip(dims, o.shape)})
            spec_outputs[f"output_{i}"] = {"shape": dims, "dtype": _DTYPE_NAMES.get(str(o.dtype), "float32")}
        level = next((p.name for p in f.parents if p.name.lower().startswith("level")), None)
        name = _slug(f.stem)
        definition = {
            "name": name, "op_type": "kernelbench",
            "description": f"Imported from the KernelBench problem file {f.name}.",
            "tags": ["imported:kernelbench"] + ([f"kernelbench:{level.lower()}"] if level else []),
            "axes": axes, "inputs": spec_inputs, "outputs": spec_outputs,
        }
        scalars = {f"input_{i}": {"type": "scalar", "value": x} for i, x in enumerate(inputs)
                   if not isinstance(x, torch.Tensor)}
        workload = {"uuid": f"{name}-kernelbench", "axes": {}, "inputs": scalars,
                    "label": "the file's get_inputs() sizes"}
        reference = source + _KB_RUNNER.format(init=init, n_inputs=len(inputs), params=[n for n, _ in params])
        written.append(_write(out_root / name, definition, reference, [workload]))
    if not written:
        raise UserError(f"no KernelBench problem (class Model + get_inputs) found in {path}")
    return written


# ---- FlashInfer-Trace / SOL-ExecBench --------------------------------------------------------------
def _absolute_paths(workload: dict[str, Any], bases: list[Path]) -> dict[str, Any]:
    for src in (workload.get("inputs") or {}).values():
        if isinstance(src, dict) and src.get("type") == "safetensors" and not Path(src["path"]).is_absolute():
            for base in bases:
                candidate = (base / src["path"]).resolve()
                if candidate.exists():
                    src["path"] = str(candidate)
                    break
            else:
                src["path"] = str((bases[0] / src["path"]).resolve())
    return workload


def import_flashinfer_trace(path: Path, out_root: Path) -> list[Path]:
    if not path.exists():
        raise UserError(f"not found: {path}")
    definitions: dict[str, tuple[dict[str, Any], Path]] = {}
    for f in sorted(path.rglob("*.json")):
        try:
            obj = json.loads(f.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(obj, dict) and {"name", "axes", "inputs", "outputs"} <= obj.keys():
            definitions[obj["name"]] = (obj, f)
    if not definitions:
        raise UserError(f"no definitions (JSON with name, axes, inputs, outputs) under {path}")
    workloads: dict[str, list[dict[str, Any]]] = {n: [] for n in definitions}
    for f in sorted(path.rglob("*.jsonl")):
        for line in f.read_text().splitlines():
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            owner = obj.get("definition") if isinstance(obj, dict) else None
            if owner is None and f.name == "workload.jsonl":
                sibling = f.parent / "definition.json"
                owner = json.loads(sibling.read_text()).get("name") if sibling.exists() else None
            if owner not in workloads:
                continue
            w = obj["workload"] if "workload" in obj and "uuid" not in obj else obj
            if w is None:
                continue
            parse_workload_line(w)  # validate before writing
            workloads[owner].append(_absolute_paths(dict(w), [f.parent, path]))
    written = []
    for name, (definition, def_file) in definitions.items():
        reference = definition.get("reference")
        ref_file = def_file.parent / "reference.py"
        if ref_file.exists():
            reference = ref_file.read_text()
        if not reference:
            raise UserError(f"{def_file}: no reference (neither a 'reference' field nor a reference.py)")
        if not workloads[name]:
            raise UserError(f"{def_file}: no workloads found for definition {name!r}")
        definition = dict(definition)
        definition["tags"] = list(definition.get("tags") or []) + ["imported:flashinfer-trace"]
        written.append(_write(out_root / _slug(name), definition, reference, workloads[name]))
    return written
