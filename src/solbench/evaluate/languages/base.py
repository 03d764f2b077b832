"""The language plug-in point: how a solution's sources become a callable.

A plug-in says which environment variables must be set before the candidate's
process imports anything, builds the callable from staged sources (a failure
there is a compile_error verdict), and may declare a device unsupported.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any, Callable

from solbench.problems.solution import KERNELBENCH_SIDECAR  # what a KernelBench ``ModelNew`` solution carries


class CompileError(Exception):
    """The solution could not be built or imported."""


class Unsupported(Exception):
    """The solution cannot be judged on this device (e.g. an unfaithful interpreter)."""


class Language:
    name = "base"
    #: does the CPU run this language's kernels (possibly interpreted)?
    interpreted_on_cpu = False
    #: does the language proof check, from the profiler's kernel names, that this language's own kernels did
    #: the work? Without it a solution's claim to the language is reported as unproven (``language_unproven``)
    proof = False
    #: origins of vendor-library kernels (``integrity.kernel_origin``) that are this language's own work: a
    #: cuBLAS solution's cuBLAS kernels
    own_origins: frozenset[str] = frozenset()
    #: native code loaded into the candidate's process (a built library): its process is sealed on every device
    #: (``seccomp``)
    compiled = False

    def proven_on(self, device: str) -> bool:
        """Whether the language proof checks a solution on ``device``: the profiler on a GPU, the interpreter's
        store count on the CPU (Triton); a compiled language's kernels on the CPU give no evidence."""
        return self.proof and (device != "cpu" or self.interpreted_on_cpu)

    def kernel_names(self, sources: dict[str, str]) -> set[str]:
        """The names of the kernels the solution's sources define, read on the trusted side from the solution as
        submitted (never from what its process reports or leaves in its directory)."""
        return set()

    def owns(self, kernel: str, names: set[str]) -> bool:
        """Whether a profiled kernel's (demangled) name is one of the solution's own kernels ``names``."""
        return False

    def unavailable(self, device: str) -> str | None:
        """Why this language cannot run on ``device`` here (a missing package or toolchain, with the install
        command), or None. Asked on the trusted side before any candidate starts: an ``unsupported`` verdict."""
        return None

    def environment(self, device: str) -> dict[str, str]:
        return {}

    def install_hooks(self, device: str) -> None:
        """Called in the candidate's process before the solution is imported."""

    def load(self, staged: Path, entry_file: str, function: str) -> Callable:
        path = staged / entry_file
        if not path.is_file():
            raise CompileError(f"entry file {entry_file} not found")
        module_name = "solbench_candidate_" + Path(entry_file).stem.replace("-", "_").replace(".", "_")
        # appended, not prepended: a solution file named like a package it imports (triton.py) must not shadow it
        sys.path.append(str(staged))
        try:
            spec = importlib.util.spec_from_file_location(module_name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
        except Exception as exc:  # any import-time failure is the solution's fault
            raise CompileError(f"{type(exc).__name__}: {exc}") from exc
        fn = getattr(module, function, None)
        if _module_class(fn) or (fn is None and _module_class(getattr(module, "ModelNew", None))):
            return kernelbench_adapter(module, fn if fn is not None else module.ModelNew, staged)
        if not callable(fn):
            raise CompileError(f"{entry_file} defines no callable {function!r}")
        return fn


def _module_class(obj: Any) -> bool:
    """A subclass of torch.nn.Module (told by its bases' names: nothing is imported to tell)."""
    return isinstance(obj, type) and any(c.__name__ == "Module" and c.__module__.startswith("torch.nn")
                                         for c in obj.__mro__)


def kernelbench_adapter(module: Any, cls: type, staged: Path) -> Callable:
    """KernelBench's way of writing a solution, ``class ModelNew(nn.Module)``, as a ``run(*inputs)``.

    ``ModelNew(*get_init_inputs())`` is built at the first call on the inputs' device (in eval mode, from a fixed
    seed), and every call feeds it the problem's param_* inputs by dotted name through
    ``torch.func.functional_call``: the forward's inputs come first, then the state in the order the sidecar names
    (the problem's ``kernelbench.state``), then, in destination-passing style, the outputs to write. A parameter
    ModelNew does not have is not fed; one it has and the problem does not keeps ModelNew's own init.
    """
    import ast
    import json

    sidecar = staged / KERNELBENCH_SIDECAR
    if not sidecar.is_file():
        raise CompileError("a ModelNew solution needs a problem imported from KernelBench "
                           "(`solbench import kernelbench`): which inputs are the forward's and which its parameters")
    try:
        facts = json.loads(sidecar.read_text())
        n_inputs = int(facts["forward_inputs"])
        state = [str(n) for n in facts.get("state") or []]
        literal = facts.get("init_inputs")
        init = list(ast.literal_eval(literal)) if literal is not None else None
    except (ValueError, KeyError, TypeError, SyntaxError) as exc:
        raise CompileError(f"{KERNELBENCH_SIDECAR} is not valid: {exc}") from None
    if init is None:
        get_init = getattr(module, "get_init_inputs", None)
        if not callable(get_init):
            raise CompileError("ModelNew needs get_init_inputs(): the problem's is not a literal, so the solution "
                               "must define it")
        init = list(get_init())
    models: dict[str, Any] = {}

    def run(*args):
        import torch

        device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
        entry = models.get(str(device))
        if entry is None:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(0)
                model = cls(*init)
            model = model.to(device).eval()
            names = set(dict(model.named_parameters(remove_duplicate=False))) | set(dict(model.named_buffers()))
            entry = models[str(device)] = (model, [n if n in names else None for n in state])
        model, fed = entry
        inputs, params, outs = args[:n_inputs], args[n_inputs:n_inputs + len(state)], args[n_inputs + len(state):]
        result = torch.func.functional_call(model, {n: t for n, t in zip(fed, params) if n is not None},
                                            tuple(inputs))
        if not outs:
            return result
        for o, r in zip(outs, result if isinstance(result, (tuple, list)) else [result]):
            o.copy_(r)
        return None

    return run


def decorated_functions(sources: dict[str, str], leaves: tuple[str, ...]) -> set[str]:
    """Names of the functions in the Python ``sources`` that a decorator ending in one of ``leaves`` wraps
    (``@triton.jit``, ``@triton.autotune(...)``, ``@cute.kernel``), or that are passed to one (``k = jit(f)``)."""
    import ast

    def leaf(node: ast.AST) -> str | None:
        node = node.func if isinstance(node, ast.Call) else node
        return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None

    names: set[str] = set()
    for path, text in sources.items():
        if not path.endswith(".py"):
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if any(leaf(d) in leaves for d in node.decorator_list):
                    names.add(node.name)
            elif isinstance(node, ast.Call) and leaf(node) in leaves:
                names.update(a.id for a in node.args[:1] if isinstance(a, ast.Name))
    return names
