"""The Solution: an implementation of a definition (flashinfer-trace / SOL-ExecBench schema).

A solution is either a Solution JSON (sources inline, ``entry_point`` as
``file::function``, destination-passing style by default) or a bare ``.py``
file whose ``run(*inputs)`` returns the outputs (or, where it takes the outputs after the inputs as the starters
print it, writes them). For a problem imported from
KernelBench, a file that defines KernelBench's ``class ModelNew`` (and no
``run``) is a solution too: ``with_kernelbench`` adds what its adapter needs
(evaluate/languages/base.py builds ``ModelNew(*get_init_inputs())`` and feeds
it the problem's parameter inputs by name).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from solbench.errors import UserError

#: the file a KernelBench ``ModelNew`` solution carries for its adapter (``languages.base``)
KERNELBENCH_SIDECAR = "solbench_kernelbench.json"


class SourceFile(BaseModel):
    model_config = ConfigDict(extra="allow")
    path: str
    content: str


class BuildSpec(BaseModel):
    model_config = ConfigDict(extra="allow")
    language: str | None = None
    #: SOL-ExecBench's newer form: a list of languages
    languages: list[str] | None = None
    target_hardware: list[str] = Field(default_factory=list)
    entry_point: str
    destination_passing_style: bool = True
    binding: str | None = None
    dependencies: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _language(self) -> "BuildSpec":
        if self.language is None:
            if not self.languages:
                raise ValueError("spec needs 'language' (or 'languages')")
            self.language = self.languages[0]
        if "::" not in self.entry_point:
            raise ValueError(f"entry_point {self.entry_point!r} must be 'file::function'")
        return self

    @property
    def entry_file(self) -> str:
        return self.entry_point.split("::", 1)[0]

    @property
    def entry_function(self) -> str:
        return self.entry_point.split("::", 1)[1]


class Solution(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    definition: str | None = None
    author: str = "unknown"
    description: str | None = None
    spec: BuildSpec
    sources: list[SourceFile]

    @model_validator(mode="after")
    def _entry_exists(self) -> "Solution":
        paths = {s.path for s in self.sources}
        if self.spec.entry_file not in paths:
            raise ValueError(f"entry point file {self.spec.entry_file!r} is not among the sources")
        for s in self.sources:
            p = Path(s.path)
            if p.is_absolute() or ".." in p.parts:
                raise ValueError(f"source path {s.path!r} must be relative and stay inside the solution")
        return self

    @property
    def language(self) -> str:
        return self.spec.language or "pytorch"

    def digest(self) -> str:
        import hashlib

        h = hashlib.sha256()
        for s in sorted(self.sources, key=lambda s: s.path):
            h.update(s.path.encode())
            h.update(b"\0")
            h.update(s.content.encode())
            h.update(b"\0")
        h.update(self.spec.entry_point.encode())
        h.update(str(self.spec.destination_passing_style).encode())
        return h.hexdigest()[:16]


def _guess_language(source: str) -> str:
    return "triton" if ("import triton" in source or "from triton" in source) else "pytorch"


def solution_from_python(path: Path, definition: str | None = None, language: str | None = None) -> Solution:
    """A bare .py file: ``run(*inputs)`` returns the outputs (not destination-passing; ``load_solution`` makes
    it destination-passing where the function takes the outputs too, ``_takes_outputs``)."""
    text = path.read_text()
    return Solution(
        name=path.stem,
        definition=definition,
        author="local",
        spec=BuildSpec(
            language=language or _guess_language(text),
            entry_point=f"{path.name}::run",
            destination_passing_style=False,
        ),
        sources=[SourceFile(path=path.name, content=text)],
    )



def _defines(source: str, what: str) -> bool:
    return bool(re.search(rf"^(class|def)\s+{what}\b", source, re.MULTILINE))


def with_kernelbench(solution: Solution, definition: Any) -> Solution:
    """``solution`` plus the adapter's facts when the problem was imported from KernelBench and the entry file
    defines ``ModelNew`` instead of the entry function: the forward's input count, the dotted names of the
    param_* inputs, ``get_init_inputs()``. Anything else is returned as it is."""
    facts = (getattr(definition, "model_extra", None) or {}).get("kernelbench")
    if not isinstance(facts, dict) or any(s.path == KERNELBENCH_SIDECAR for s in solution.sources):
        return solution
    entry = next((s for s in solution.sources if s.path == solution.spec.entry_file), None)
    function = solution.spec.entry_function
    if entry is None or not _defines(entry.content, "ModelNew") or (
            function != "ModelNew" and _defines(entry.content, function)):
        return solution
    sidecar = {"forward_inputs": facts.get("forward_inputs"), "state": facts.get("state", []),
               "init_inputs": facts.get("init_inputs")}
    return solution.model_copy(update={"sources": [*solution.sources, SourceFile(
        path=KERNELBENCH_SIDECAR, content=json.dumps(sidecar, indent=1) + "\n")]})


def load_solution(path: str | Path, definition: Any = None) -> Solution:
    """A Solution JSON or a bare .py; ``definition`` is the problem's name or its Definition (which also lets a
    KernelBench ``ModelNew`` file be the solution of an imported KernelBench problem)."""
    solution = _load_solution(path, definition.name if hasattr(definition, "name") else definition)
    if not hasattr(definition, "name"):
        return solution
    if Path(path).suffix == ".py" and _takes_outputs(solution, definition):
        solution = solution.model_copy(update={"spec": solution.spec.model_copy(
            update={"destination_passing_style": True})})
    return with_kernelbench(solution, definition)


def _takes_outputs(solution: Solution, definition: Any) -> bool:
    """Whether a bare .py's entry function is written destination-passing, as the starters of ``solbench show``
    print it: its required parameters are the definition's inputs and then its outputs, by name. (A function
    whose output parameters have defaults, ``out=None``, is called with the inputs alone and returns.)"""
    import ast

    outputs = list(getattr(definition, "outputs", None) or {})
    entry = next((s for s in solution.sources if s.path == solution.spec.entry_file), None)
    if not outputs or entry is None:
        return False
    try:
        tree = ast.parse(entry.content)
    except SyntaxError:
        return False  # the build says so
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == solution.spec.entry_function),
              None)
    if fn is None or fn.args.vararg or fn.args.posonlyargs:
        return False
    params = [a.arg for a in fn.args.args]
    required = params[:len(params) - len(fn.args.defaults)]
    return required == [*definition.inputs, *outputs]


def _load_solution(path: str | Path, definition: str | None = None) -> Solution:
    p = Path(path)
    if not p.exists():
        raise UserError(f"solution file not found: {p}")
    if p.is_dir():
        raise UserError(f"solution must be a .py or .json file, not a directory: {p}")
    try:
        if p.suffix == ".py":
            return solution_from_python(p, definition)
        text = p.read_text()
    except UnicodeDecodeError:
        raise UserError(f"{p}: not a text file") from None
    except OSError as exc:
        raise UserError(f"{p}: cannot read it ({exc.strerror})") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{p}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    try:
        return Solution.model_validate(obj)
    except ValidationError as exc:
        raise UserError(f"{p}: not a valid solution: {_first_error(exc)}") from None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(x) for x in err.get("loc", ()))
    msg = err.get("msg", "invalid")
    return f"{loc}: {msg}" if loc else msg
