"""The import allowlist: a solution imports, reaches and ships only what its language allows.

Every import (``import a.b``, ``from a import b``, ``__import__("a")``, ``importlib.import_module("a")``, in any
scope), every attribute chain that lands on a module (``torch.sys``, ``numpy.random.mtrand``) and every dotted
name spelled in a string (what resolvers such as ``pydoc.locate`` or ``mock.patch`` take) is checked against the
allowlist (allowlist.py); the solution's own modules are followed through what they bind (modules.py). A module
handed around as a value (returned, stored, passed) is indirection the chains cannot follow. A solution's own call
of a compiler is a finding too: only the trusted side builds native code.
"""

from __future__ import annotations

import ast
import re

from .allowlist import PYTHON_SUFFIXES, allowlist, suffixes
from .modules import STDLIB, installed
from .rules import REJECT, Finding, names, on_call, on_name, on_string, rule, src, visits

rule("import_not_allowed", REJECT,
     "A solution imports only the modules on its language's allowlist (docs/STATIC_RULES.md); any other module, "
     "reached by an import, an attribute chain or a dotted name in a string, can reach the harness.")
rule("unexpected_source", REJECT,
     "A solution ships only the source suffixes its language builds or reads; any other file is never scanned "
     "and can be built or loaded at run time.")
rule("compiler_call", REJECT,
     "Only the trusted side builds native code: a solution that calls a compiler builds and loads code the scan "
     "never saw.")

names(
    "compiler_call",
    "torch.compile torch.utils.cpp_extension torch.cuda.jiterator torch.jit torch._dynamo torch._inductor "
    "torch.compiler triton.compile triton.compiler triton.runtime.build triton.tools.compile setuptools distutils "
    "numpy.f2py numpy.distutils cffi.FFI.compile cffi.FFI.verify cupy.RawKernel cupy.RawModule "
    "cupy.ElementwiseKernel cupy.ReductionKernel numba pycuda.compiler tvm.contrib cuda.bindings.nvrtc cuda.nvrtc "
    "nvrtc",
)

#: descriptive dunders of a module; any other (``__getattr__``, ``__init__``, ``__class__``) is indirection
MODULE_DUNDERS = frozenset({"__name__", "__doc__", "__version__", "__file__", "__all__", "__path__", "__package__"})
_IMPORTERS = ("__import__", "importlib.import_module", "importlib.__import__")
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_][\w.]*)?|[A-Za-z_]\w*:[A-Za-z_][\w.]*")
_FILE_SUFFIXES = frozenset(s.lstrip(".") for s in PYTHON_SUFFIXES + (".cu", ".cpp", ".h", ".hpp", ".cuh", ".c",
                                                                    ".so", ".yaml", ".yml", ".toml", ".csv", ".pt"))


def source_findings(path: str, language: str) -> list[Finding]:
    """A source whose suffix the language does not accept (the entry point reports it for every file)."""
    allowed = suffixes(language)
    name = path.rsplit("/", 1)[-1]
    dot = name.rfind(".")
    suffix = name[dot:].lower() if dot > 0 else ""
    if suffix in allowed:
        return []
    return [Finding("unexpected_source", REJECT, path, 1,
                    f"{path}: a {language} solution ships only {', '.join(allowed)} sources")]


def _allowed(module: str) -> bool:
    return allowlist().allows(module)


def _refuse(s, node: ast.AST, what: str, module: str) -> None:
    s.add("import_not_allowed", node, f"{what}: {module} is not on the allowlist of solution modules")


# ---- imports


@visits(("import_not_allowed", "module_indirection"), ast.Import)
def import_statement(s, node: ast.Import) -> None:
    """``import a.b.c`` imports the module ``a.b.c``."""
    _in_class_body(s, node)
    for a in node.names:
        if not s.own.owns(a.name) and not _allowed(a.name):
            _refuse(s, node, f"imports {a.name}", a.name)


@visits(("import_not_allowed", "module_indirection"), ast.ImportFrom)
def import_from(s, node: ast.ImportFrom) -> None:
    """``from a import b`` imports ``a.b`` when it is a module, else ``a``; a relative import names the solution's
    own modules."""
    _in_class_body(s, node)
    if any(a.name == "*" for a in node.names):
        s.add("module_indirection", node, "a star import hides which names it binds")
    module = s.absolute(node)
    if not module or module.startswith("<") or s.own.owns(module):
        return
    for a in node.names:
        if a.name == "*":
            if not _allowed(module):
                _refuse(s, node, f"imports * from {module}", module)
            continue
        r = s.reach(f"{module}.{a.name}")
        if r.own:
            continue
        if not _allowed(r.module):
            _refuse(s, node, f"imports {a.name} from {module}", r.module)
        elif r.rest:
            _private(s, node, r.module, r.rest)


def _in_class_body(s, node: ast.AST) -> None:
    if type(node._sb_parent) is ast.ClassDef:
        s.add("module_indirection", node, "imports a module as a class attribute")


@on_call("import_not_allowed", *_IMPORTERS)
def import_by_name(s, node: ast.Call, r: str) -> None:
    """``__import__("a")`` and ``importlib.import_module("a")`` with a constant name are imports of ``a``."""
    module = s.fold(node.args[0]) if node.args else None
    if module and not s.own.owns(module) and not _allowed(module):
        _refuse(s, node, f"{r}({module!r})", module)


# ---- attribute chains and modules as values


@on_name(("import_not_allowed", "module_indirection"))
def reached_module(s, name: str, node: ast.AST, what: str) -> None:
    """A chain that lands on a module not on the allowlist imports it; a module used as a value hides where it
    goes."""
    if what != "uses":
        return
    r = s.reach(name)
    if r.module is None:
        return
    if not r.own:
        if not _allowed(r.module):
            direct = name == r.module or name.startswith(r.module + ".")
            _refuse(s, node, f"uses {name}" if direct else f"{name} reaches {r.module}", r.module)
        elif r.rest:
            _private(s, node, r.module, r.rest)
    if r.rest:
        if r.rest[0] not in MODULE_DUNDERS and r.rest[0].startswith("__") and r.rest[0].endswith("__"):
            s.add("module_indirection", node, f"reaches {r.rest[0]} of the module {r.module}")
    elif _as_value(s, node, name):
        s.add("module_indirection", node, f"uses the module {r.module} as a value: {src(node)}")


def _private(s, node: ast.AST, module: str, rest: tuple[str, ...]) -> None:
    """A private name of a standard-library module is its implementation (``dataclasses._create_fn`` runs text)."""
    first = rest[0]
    if module.split(".")[0] in STDLIB and first.startswith("_") and not first.startswith("__"):
        s.add("import_not_allowed", node, f"reaches {module}.{first}, a private name of {module}")


def _as_value(s, node: ast.AST, name: str) -> bool:
    """Whether a module is used other than by its attributes: stored, passed, returned or bound anew."""
    p = node._sb_parent
    t = type(p)
    if t in (ast.Attribute, ast.Subscript) and p.value is node:
        return False
    if t is ast.Call:
        if p.func is node:
            return False
        return not (p.args and p.args[0] is node and s.resolve(p.func) in ("getattr", "hasattr"))
    if t in (ast.Expr, ast.Delete, ast.arg) or (t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
                                                 and any(d is node for d in p.decorator_list)):
        return False
    if t is ast.AnnAssign and p.annotation is node:
        return False
    if t in (ast.Assign, ast.AnnAssign) and p.value is node and type(p._sb_parent) is not ast.ClassDef:
        targets = p.targets if t is ast.Assign else [p.target]
        return not all(type(g) is ast.Name and s.reach(s.aliases.get(g.id, "")).name == s.reach(name).name
                       for g in targets)
    return True


# ---- dotted names in strings


@on_string("import_not_allowed")
def dotted_string(s, node: ast.Constant, v: str) -> None:
    """``"solbench.evaluate.trusted.worker"``, ``"sys.modules"``, ``"os:system"``: the names resolvers take
    (``pydoc.locate``, ``mock.patch``, ``logging.config``'s ``resolve``, a storage's ``type()``)."""
    if len(v) > 200 or ("." not in v and ":" not in v) or not _DOTTED.fullmatch(v):
        return
    dotted = v.replace(":", ".")
    root, _, last = dotted.partition(".")
    if dotted.rsplit(".", 1)[-1].lower() in _FILE_SUFFIXES or s.own.owns(root) or not installed(root):
        return
    r = s.reach(dotted)
    if r.module is not None and not r.own and not _allowed(r.module):
        _refuse(s, node, f"names {v!r} in a string, which a resolver imports", r.module)
