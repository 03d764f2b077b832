"""Importers: turn other benchmarks' problems, which the user points at, into solbench problem directories.

- ``import_kernelbench``: KernelBench problem files (``class Model(nn.Module)``, ``get_inputs()``,
  ``get_init_inputs()``) become definitions whose inputs are the forward's inputs followed by the model's
  parameters and running statistics, with a reference that runs the model in eval mode on them
  (problems/kernelbench.py).
- ``import_flashinfer_trace``: a FlashInfer-Trace dataset (``definitions/**.json`` with workloads in
  ``workloads/**.jsonl`` as Trace lines) or SOL-ExecBench problem directories (``definition.json`` +
  ``workload.jsonl``) become one directory per definition; safetensors paths are made absolute so the inputs
  load from where they are.

The user's files are read, never copied into this repository: the output goes where the user says.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from solbench.errors import UserError
from solbench.problems.directory import slug, write_problem
from solbench.problems.workload import parse_workload_line


# ---- KernelBench (problems/kernelbench.py) -------------------------------------------------------------
def import_kernelbench(path: Path, out_root: Path, force: bool = False) -> list[Path]:
    """KernelBench problem files -> problem directories (problems/kernelbench.py)."""
    from solbench.problems.kernelbench import import_kernelbench as _import

    return _import(path, out_root, force)


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


def import_flashinfer_trace(path: Path, out_root: Path, force: bool = False) -> list[Path]:
    path, out_root = Path(path), Path(out_root)
    if not path.exists():
        raise UserError(f"not found: {path}")
    definitions: dict[str, tuple[dict[str, Any], Path]] = {}
    for f in sorted(path.rglob("*.json")):
        try:
            obj = json.loads(f.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError, OSError):
            continue
        if isinstance(obj, dict) and {"name", "axes", "inputs", "outputs"} <= obj.keys() and isinstance(obj["name"], str):
            definitions[obj["name"]] = (obj, f)
    if not definitions:
        raise UserError(f"no definitions (JSON with name, axes, inputs, outputs) under {path}")
    workloads: dict[str, list[dict[str, Any]]] = {n: [] for n in definitions}
    for f in sorted(path.rglob("*.jsonl")):
        try:
            lines = f.read_text().splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        sibling_name = None
        if f.name == "workload.jsonl" and (f.parent / "definition.json").is_file():
            try:
                sibling_name = json.loads((f.parent / "definition.json").read_text()).get("name")
            except (json.JSONDecodeError, UnicodeDecodeError, OSError, AttributeError):
                sibling_name = None
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(obj, dict):
                continue
            owner = obj.get("definition") if isinstance(obj.get("definition"), str) else sibling_name
            if owner not in workloads:
                continue
            w = obj["workload"] if "workload" in obj and "uuid" not in obj else obj
            if not isinstance(w, dict):
                continue
            try:
                parse_workload_line(w)  # validate before writing
            except ValidationError as exc:
                raise UserError(f"{f}:{lineno}: not a valid workload: {exc.errors()[0]['msg']}") from None
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
        target = out_root / slug(name)
        if target.exists() and not force:
            raise UserError(f"{target} exists (--force replaces it)")
        written.append(write_problem(target, definition, reference, workloads[name]))
    return written
