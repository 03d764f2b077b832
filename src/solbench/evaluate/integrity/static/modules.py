"""What a dotted name reaches: the last module along it and the attributes after that.

A link of a chain is a module when the module before it holds one under that name. The scanner reads that from
the module itself where it may import it (the standard library's allowed share, torch and numpy: trusted
dependencies of the harness; ``vars()`` only, so no module ``__getattr__`` runs), from the alias table of the
kernel packages (``allowlist.ALIASES``; the trusted side never imports a kernel language), from the installed
packages' files (``torch/utils/cpp_extension.py`` makes ``torch.utils.cpp_extension`` a module, imported or not),
and from the allowlist's own entries. ``torch.sys`` is therefore ``sys``, ``enum.bltns`` is ``builtins`` and
``torch.nn.functional.importlib`` is ``importlib``, however the chain is spelled.

A solution's own modules (its other Python files, by path) are followed through what they bind, so a helper file
that imports torch does not hide ``helper.torch.sys``. A file named like a module that the environment already
has (``pydoc.py``, ``triton.py``) is not the solution's own: the environment's module is imported first.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
import types
from functools import lru_cache
from pathlib import Path

from .allowlist import ALIASES, INTROSPECTED_ROOTS, allowlist
from .names import BUILTIN_NAMES, norm

STDLIB = frozenset(sys.stdlib_module_names)
#: the roots of the packages the harness and the kernel languages bring: never a solution's own module
KNOWN_ROOTS = frozenset({"torch", "numpy", "triton", "cutlass", "tilelang", "tvm", "tvm_ffi", "cuda", "cudnn",
                         "solbench"})
#: modules that packages re-export under their own name (``torch.sys``): a link of this name that the scanner
#: cannot place (a package it cannot read, an attribute of an object) is taken for the module
REEXPORTED = frozenset({"sys", "os", "gc", "builtins", "importlib", "inspect", "threading", "_thread", "subprocess",
                        "signal", "ctypes", "socket", "multiprocessing", "traceback", "marshal", "pickle", "atexit",
                        "faulthandler", "resource", "runpy", "pty", "cProfile", "pkgutil", "pydoc", "types"})
_SO = (".so", ".pyd")


# --------------------------------------------------------------------------------------------
# one link: is ``module.attr`` a module, and which?


@lru_cache(maxsize=None)
def child(module: str, attr: str) -> str | None:
    """The real name of the module that ``module.attr`` is, or None where it is another attribute."""
    if attr.startswith("__") and attr.endswith("__"):
        return None
    full = f"{module}.{attr}"
    alias = ALIASES.get((module, attr))
    if alias:
        return alias
    ns = namespace(module)
    if ns is not None:
        value = ns.get(attr)
        if isinstance(value, types.ModuleType):
            name = value.__dict__.get("__name__")
            return name if isinstance(name, str) else full
        if value is not None:
            return None
    if allowlist().names_module(full) or on_disk(module, attr):
        return full
    return None


def namespace(module: str) -> dict | None:
    """A module's namespace, where the scanner may read it: already imported, or an allowed module of a trusted
    root that is a file of its package (imported here; nothing of the solution's runs, and no package's
    ``__getattr__`` is asked for a submodule it does not have)."""
    root = module.split(".")[0]
    if root not in INTROSPECTED_ROOTS and root not in STDLIB:
        return None
    mod = sys.modules.get(module)
    parent, _, last = module.rpartition(".")
    if mod is None and allowlist().allows(module) and (not parent or on_disk(parent, last)):
        try:
            mod = importlib.import_module(module)
        except Exception:  # a broken optional dependency: read nothing
            return None
    return mod.__dict__ if isinstance(mod, types.ModuleType) else None


def on_disk(module: str, attr: str) -> bool:
    """Whether a package directory of ``module`` holds ``attr`` as a module or package."""
    for d in package_dirs(module):
        names = _listing(d)
        if attr + ".py" in names or attr in names or any(
                n.startswith(attr + ".") and n.endswith(_SO) for n in names):
            return True
    return False


@lru_cache(maxsize=None)
def _listing(d: str) -> frozenset[str]:
    try:
        return frozenset(os.listdir(d))
    except OSError:
        return frozenset()


@lru_cache(maxsize=None)
def package_dirs(module: str) -> tuple[str, ...]:
    """The directories of a package (none for a plain module or one not installed), found without importing."""
    parts = module.split(".")
    roots = list(_root_dirs(parts[0]))
    out = []
    for r in roots:
        d = Path(r).joinpath(*parts[1:])
        if d.is_dir():
            out.append(str(d))
    return tuple(out)


@lru_cache(maxsize=None)
def _root_dirs(root: str) -> tuple[str, ...]:
    dirs: list[str] = []
    try:
        spec = importlib.util.find_spec(root)
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        dirs.extend(spec.submodule_search_locations)
    lang_root = os.environ.get("SOLBENCH_LANG_ROOT")  # the kernel languages' own folders (languages/packages.py)
    if lang_root and Path(lang_root).is_dir():
        for folder in sorted(Path(lang_root).iterdir()):
            if (folder / root).is_dir():
                dirs.append(str(folder / root))
    return tuple(dirs)


@lru_cache(maxsize=None)
def installed(root: str) -> bool:
    """Whether the environment has a top-level module of this name (found on the path, not imported; the working
    directory of the process that scans is no part of a candidate's path)."""
    if root in STDLIB or root in KNOWN_ROOTS or root in sys.builtin_module_names:
        return True
    cwd = os.getcwd()
    path = [p for p in sys.path if p and os.path.abspath(p) != cwd]
    try:
        return importlib.machinery.PathFinder.find_spec(root, path) is not None or bool(_root_dirs(root))
    except (ImportError, ValueError):
        return False


# --------------------------------------------------------------------------------------------
# the solution's own modules


def module_name(path: str) -> str | None:
    """The module a Python source path is imported as (``pkg/helper.py`` -> ``pkg.helper``)."""
    if not path.endswith(".py"):
        return None
    parts = path[:-3].replace("\\", "/").strip("/").split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    if not parts or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts)


class Own:
    """A solution's own Python modules: their names and what each binds (filled in by the scan's pre-pass)."""

    def __init__(self, paths: list[str]):
        names = {m for m in map(module_name, paths) if m}
        self.modules = {".".join(m.split(".")[:i]) for m in names for i in range(1, m.count(".") + 2)}
        self.roots = frozenset(m for m in self.modules if "." not in m and not installed(m))
        self.binds: dict[str, dict[str, str]] = {}

    def owns(self, name: str) -> bool:
        return name.split(".", 1)[0] in self.roots


NO_OWN = Own([])


class Reach:
    """Where a dotted name leads: ``module`` (its real name; None for a builtin) and the attributes after it."""

    __slots__ = ("module", "rest", "own", "name")

    def __init__(self, module: str | None, rest: tuple[str, ...], own: bool = False):
        self.module, self.rest, self.own = module, rest, own
        #: the name by its real modules (``torch.sys.settrace`` -> ``sys.settrace``)
        self.name = norm(".".join((module,) + rest)) if module else ".".join(rest)


def reach(name: str, own: Own = NO_OWN, known: frozenset[str] | set[str] = frozenset(), depth: int = 0) -> Reach:
    """The last module along ``name`` and what follows it; ``known`` holds names the file imports as modules."""
    parts = name.split(".")
    root = parts[0]
    if root in BUILTIN_NAMES or root.startswith("<") or depth > 8:
        return Reach(None, tuple(parts))
    if own.owns(root):
        cur, i = root, 1
        while i < len(parts):
            nxt = f"{cur}.{parts[i]}"
            if nxt in own.modules:
                cur, i = nxt, i + 1
                continue
            target = own.binds.get(cur, {}).get(parts[i])
            if target and target != nxt:  # what the own module bound: follow it (``helper.torch`` is torch)
                return reach(".".join([target] + parts[i + 1:]), own, known, depth + 1)
            break
        return Reach(cur, tuple(parts[i:]), own=True)
    cur, i = root, 1
    while i < len(parts):
        full = f"{cur}.{parts[i]}"
        nxt = full if full in known else child(cur, parts[i])
        if nxt is None:
            break
        cur, i = nxt, i + 1
    for j in range(i, len(parts)):  # ``cute.arch.sys``, ``torch.Tensor.os``: a module the walk could not place
        if parts[j] in REEXPORTED:
            return reach(".".join(parts[j:]), own, known, depth + 1)
    return Reach(cur, tuple(parts[i:]))
