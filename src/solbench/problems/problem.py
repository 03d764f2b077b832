"""A problem on disk: ``definition.json``, ``reference.py``, ``workload.jsonl`` (+ optional ``baseline.py``).

``load_problem`` accepts a bundled name or a path to any problem directory and
turns every user-caused fault into one ``UserError`` line.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from solbench.errors import UserError
from solbench.problems.definition import Definition
from solbench.problems.modules import remember_source
from solbench.problems.solution import _first_error
from solbench.problems.workload import Workload, parse_workload_line

SUITE_ROOT = Path(__file__).resolve().parent.parent / "suite"


@dataclass
class Problem:
    directory: Path
    definition: Definition
    workloads: list[Workload]
    reference_source: str
    baseline_source: str | None = None
    example_solutions: list[Path] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def family(self) -> str:
        tagged = self.definition.tag_value("family")
        if tagged:
            return tagged[0]
        if self.directory.parent.parent == SUITE_ROOT:
            return self.directory.parent.name
        return self.definition.op_type or "other"

    def workloads_for(self, device: str) -> list[Workload]:
        return [w for w in self.workloads if w.runs_on(device)]

    def workload(self, uuid: str) -> Workload:
        for w in self.workloads:
            if w.uuid == uuid:
                return w
        raise UserError(f"problem {self.name} has no workload {uuid!r}")

    def digest(self) -> str:
        """Identifies the definition + reference + baseline; keys the baseline cache."""
        h = hashlib.sha256()
        h.update(self.definition.model_dump_json().encode())
        h.update(self.reference_source.encode())
        h.update((self.baseline_source or "").encode())
        return h.hexdigest()[:16]


def _read_text(path: Path) -> str:
    try:
        return path.read_text()
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a UTF-8 text file") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read it ({exc.strerror})") from None


def _read_json(path: Path) -> object:
    try:
        return json.loads(_read_text(path))
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None


def load_definition(path: Path) -> Definition:
    obj = _read_json(path)
    try:
        return Definition.model_validate(obj)
    except ValidationError as exc:
        raise UserError(f"{path}: not a valid definition: {_first_error(exc)}") from None


def load_workloads(path: Path, definition: Definition) -> list[Workload]:
    workloads: list[Workload] = []
    for lineno, line in enumerate(_read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{lineno}: malformed JSON: {exc.msg}") from None
        try:
            w = parse_workload_line(obj)
        except ValidationError as exc:
            raise UserError(f"{path}:{lineno}: not a valid workload: {_first_error(exc)}") from None
        try:
            definition.resolve_axes(w.axes)
        except ValueError as exc:
            raise UserError(f"{path}:{lineno}: {exc}") from None
        unknown = set(w.inputs) - set(definition.inputs)
        if unknown:
            raise UserError(f"{path}:{lineno}: inputs {sorted(unknown)} are not in the definition")
        workloads.append(w)
    seen: set[str] = set()
    for w in workloads:
        if w.uuid in seen:
            raise UserError(f"{path}: workload uuid {w.uuid} appears twice")
        seen.add(w.uuid)
    return workloads


def resolve_problem_dir(name_or_dir: str | Path) -> Path:
    p = Path(name_or_dir)
    if (p / "definition.json").is_file():
        return p.resolve()
    if p.exists():
        raise UserError(f"{p} is not a problem directory (no definition.json)")
    for d in SUITE_ROOT.glob("*/*/definition.json"):
        if d.parent.name == str(name_or_dir):
            return d.parent
    # bundled problems may also be named by their definition name
    for d in SUITE_ROOT.glob("*/*/definition.json"):
        try:
            if json.loads(d.read_text()).get("name") == str(name_or_dir):
                return d.parent
        except json.JSONDecodeError:
            continue
    raise UserError(f"unknown problem {name_or_dir!r} (not a bundled name nor a directory); try `solbench list`")


def load_problem(name_or_dir: str | Path) -> Problem:
    directory = resolve_problem_dir(name_or_dir)
    definition = load_definition(directory / "definition.json")
    ref_path = directory / "reference.py"
    if ref_path.is_file():
        reference = _read_text(ref_path)
        remember_source(reference, ref_path)
    elif definition.reference:
        reference = definition.reference
        remember_source(reference, None)  # imported from a copy in the source cache (modules.py)
    else:
        raise UserError(f"{directory}: no reference.py and no 'reference' in definition.json")
    if "def run" not in reference:
        raise UserError(f"{directory}: the reference defines no global `run`")
    wl_path = directory / "workload.jsonl"
    if not wl_path.is_file():
        raise UserError(f"{directory}: no workload.jsonl")
    workloads = load_workloads(wl_path, definition)
    if not workloads:
        raise UserError(f"{wl_path}: no workloads")
    baseline_path = directory / "baseline.py"
    baseline = _read_text(baseline_path) if baseline_path.is_file() else None
    if baseline is not None:
        remember_source(baseline, baseline_path, "baseline")
    solutions_dir = directory / "solutions"
    examples = sorted(solutions_dir.glob("*.py")) + sorted(solutions_dir.glob("*.json")) if solutions_dir.is_dir() else []
    return Problem(directory, definition, workloads, reference, baseline, examples)


def bundled_problem_dirs() -> list[Path]:
    return sorted(d.parent for d in SUITE_ROOT.glob("*/*/definition.json"))
