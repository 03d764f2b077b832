"""Harness snapshots in the candidate's process: has anything the harness relies on been replaced or hooked?

This is the second layer of the defence against in-process tampering (the first is the static scan, and the
decisions themselves are the trusted side's: docs/SECURITY.md). A snapshot fingerprints, by identity:

- every module-level binding of every harness module loaded in this process (functions and their code,
  defaults and globals, classes and every entry of their dictionaries, imported modules and objects such as
  ``rounds.time``, and the values of immutable constants), this module included;
- the builtins, and the functions of the standard-library and torch modules the harness calls (``time``,
  ``os``, ``json``, ``math``, ``statistics``, ``threading``, ``numpy``, ``torch``, ``torch.Tensor``,
  ``torch.return_types``, ``torch.cuda`` and its events, streams and graphs), and Triton's launch and
  interpreter classes;
- the hooks through which code can run inside the harness's own frames: trace and profile functions
  (``sys`` and ``threading``), ``sys.monitoring`` tools, torch function and dispatch modes, import hooks,
  ``gc`` callbacks, signal handlers, the exception and audit-adjacent hooks of ``sys`` and ``threading``;
- objects registered with ``watch`` (the candidate's own state).

The snapshot's digest is taken before the solution is imported and sent to the trusted side, which compares
it with the digest each later reply carries (``harness_tamper``): a solution that edits the recorded
snapshot gains nothing, since the baseline is held outside its process.
"""

from __future__ import annotations

import sys
from typing import Any

HARNESS_PREFIXES = ("solbench.evaluate.", "solbench.problems.", "solbench.hardware.telemetry")
#: module-level names that change by design after the first snapshot (caches filled on first use)
MUTABLE_GLOBALS = frozenset({"_pool", "_isolation_ok", "_extra"})
_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), frozenset, range)
_STDLIB = ("builtins", "time", "os", "json", "math", "statistics", "threading", "traceback", "select", "signal",
           "ctypes", "contextlib", "dataclasses", "pathlib", "hashlib")

_watched: dict[str, tuple[Any, frozenset[str]]] = {}


def watch(name: str, obj: Any, mutable: frozenset[str] | set[str] = frozenset()) -> None:
    """Fingerprint ``obj``'s attributes in every later snapshot, except those named in ``mutable``."""
    _watched[name] = (obj, frozenset(mutable))


def _code_of(value: Any) -> Any:
    return getattr(value, "__code__", None) or getattr(getattr(value, "__func__", None), "__code__", None)


_FUNCTION = type(_code_of)
#: exact types whose objects hold no Python code that could be swapped in place: their identity is their
#: fingerprint (builtin functions, classes, modules, slot wrappers and method descriptors). Checked first, as
#: most of a snapshot's entries are of these types.
_OPAQUE_TYPES = frozenset({type(len), type, type(sys), type(str.join), type(object.__init__),
                           type(object().__str__)})


def _fingerprint(value: Any) -> tuple:
    """Identity of an object, of the code it runs (a function's __code__ can be swapped in place) and of the
    defaults and globals it runs with; immutable constants by value."""
    kind = type(value)
    if kind is _FUNCTION:
        fn, code = value, value.__code__
    elif kind in _OPAQUE_TYPES:
        return (id(value),)
    elif isinstance(value, _IMMUTABLE):
        return ("=", kind.__name__, repr(value)[:200])
    else:
        code = _code_of(value)
        if code is None:
            return (id(value),)
        fn = getattr(value, "__func__", value)
    return (id(value), id(code), id(getattr(fn, "__defaults__", None)), id(getattr(fn, "__kwdefaults__", None)),
            id(getattr(fn, "__globals__", None)), id(getattr(fn, "__closure__", None)))


def _namespace(prefix: str, ns: dict[str, Any], out: dict[str, tuple], skip: frozenset[str] = frozenset(),
               classes: bool = True) -> None:
    for name, value in list(ns.items()):
        if name in skip or name in ("__builtins__", "__cached__", "__loader__", "__spec__", "__file__", "__doc__"):
            continue
        out[f"{prefix}.{name}"] = _fingerprint(value)
        if classes and isinstance(value, type) and getattr(value, "__module__", "") == ns.get("__name__"):
            _namespace(f"{prefix}.{name}", dict(vars(value)), out, classes=False)


def harness_modules() -> dict[str, Any]:
    """The harness modules loaded in this process (by name; the candidate's modules are never among them)."""
    mods = {}
    for name, mod in list(sys.modules.items()):
        if mod is not None and (name.startswith(HARNESS_PREFIXES) or name == "solbench"):
            mods[name] = mod
    main = sys.modules.get("__main__")
    spec_name = getattr(getattr(main, "__spec__", None), "name", None) or ""
    if spec_name.startswith(HARNESS_PREFIXES):
        mods["__main__"] = main
    return mods


def _hooks(out: dict[str, tuple]) -> None:
    import gc
    import signal
    import threading

    out["hook.sys.gettrace"] = _fingerprint(sys.gettrace())
    out["hook.sys.getprofile"] = _fingerprint(sys.getprofile())
    out["hook.threading.trace"] = _fingerprint(getattr(threading, "_trace_hook", None))
    out["hook.threading.profile"] = _fingerprint(getattr(threading, "_profile_hook", None))
    for name in ("excepthook", "displayhook", "breakpointhook", "unraisablehook"):
        out[f"hook.sys.{name}"] = _fingerprint(getattr(sys, name, None))
    out["hook.threading.excepthook"] = _fingerprint(getattr(threading, "excepthook", None))
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:
        for tool in range(6):
            out[f"hook.sys.monitoring.{tool}"] = ("=", str(monitoring.get_tool(tool)))
    out["hook.sys.meta_path"] = tuple(id(x) for x in sys.meta_path)
    out["hook.sys.path_hooks"] = tuple(id(x) for x in sys.path_hooks)
    out["hook.gc.callbacks"] = tuple(id(x) for x in gc.callbacks)
    for sig in sorted(signal.valid_signals()):
        try:
            out[f"hook.signal.{int(sig)}"] = _fingerprint(signal.getsignal(sig))
        except (ValueError, OSError):
            pass
    torch = sys.modules.get("torch")
    if torch is not None:
        c = torch._C
        for fn in ("_len_torch_function_stack", "_len_torch_dispatch_stack"):
            if hasattr(c, fn):
                out[f"hook.torch.{fn}"] = ("=", str(getattr(c, fn)()))
        if hasattr(c, "_is_torch_function_mode_enabled"):
            out["hook.torch.function_mode_enabled"] = ("=", str(c._is_torch_function_mode_enabled()))


def snapshot() -> dict[str, tuple]:
    out: dict[str, tuple] = {}
    for name, mod in sorted(harness_modules().items()):
        _namespace(name, dict(vars(mod)), out, skip=MUTABLE_GLOBALS)
    for name in _STDLIB:
        mod = sys.modules.get(name)
        if mod is not None:
            _namespace(f"std.{name}", {k: v for k, v in vars(mod).items() if callable(v)}, out, classes=False)
    numpy = sys.modules.get("numpy")
    if numpy is not None:  # the interpreter's kernels and the harness's store count run on numpy
        _namespace("std.numpy", {k: v for k, v in vars(numpy).items() if callable(v)}, out, classes=False)
    for name, cls in (("triton.runtime.interpreter", "InterpreterBuilder"), ("triton.runtime.interpreter",
                      "InterpretedFunction"), ("triton.runtime.jit", "JITFunction")):
        mod = sys.modules.get(name)
        obj = getattr(mod, cls, None) if mod is not None else None
        if isinstance(obj, type):  # methods only: Triton keeps hooks and caches in class attributes
            _namespace(f"{name}.{cls}", {k: v for k, v in vars(obj).items() if callable(v)
                                         or isinstance(v, (staticmethod, classmethod, property))}, out, classes=False)
    torch = sys.modules.get("torch")
    if torch is not None:
        _namespace("torch", {k: v for k, v in vars(torch).items() if callable(v)}, out, classes=False)
        rt = sys.modules.get("torch.return_types")
        if rt is not None:
            _namespace("torch.return_types", dict(vars(rt)), out, classes=False)
        _namespace("torch.Tensor", dict(vars(torch.Tensor)), out, classes=False)
        _namespace("torch._C.TensorBase", {k: v for k, v in vars(torch._C.TensorBase).items()}, out, classes=False)
        cuda = getattr(torch, "cuda", None)
        if cuda is not None:
            _namespace("torch.cuda", {k: v for k, v in vars(cuda).items() if callable(v)}, out, classes=False)
            for cls in ("Event", "Stream", "CUDAGraph", "graph"):
                obj = getattr(cuda, cls, None)
                if isinstance(obj, type):  # their methods: torch keeps state of its own in class attributes
                    # (torch.cuda.graph.default_capture_stream is set at the first capture)
                    _namespace(f"torch.cuda.{cls}", {k: v for k, v in vars(obj).items() if callable(v)
                                                     or isinstance(v, (staticmethod, classmethod, property))},
                               out, classes=False)
    _hooks(out)
    for name, (obj, mutable) in list(_watched.items()):
        _namespace(f"watched.{name}", dict(vars(obj)), out, skip=mutable, classes=False)
    return out


def digest(snap: dict[str, tuple]) -> str:
    """A digest of a snapshot, comparable with others of the same process (what the trusted side compares;
    Python's string hashing is seeded per process, so it says nothing across processes)."""
    return format(hash(tuple(sorted(snap.items()))) & ((1 << 64) - 1), "016x")


def _counted_addition(key: str) -> bool:
    # a name added to a harness module can shadow a builtin its functions use; torch, Triton and the standard
    # library gain attributes and classes as their submodules load (their replaced or removed names still count)
    return not key.startswith(("std.", "torch", "triton.", "hook.", "watched."))


def comparable(before: dict[str, tuple], now: dict[str, tuple]) -> dict[str, tuple]:
    """``now`` as it compares with ``before``: its values of ``before``'s names, and the names added where an
    addition counts. Its digest equals ``before``'s exactly when ``tampered`` finds nothing."""
    out = {k: now.get(k, ("<removed>",)) for k in before}
    out.update({k: v for k, v in now.items() if k not in before and _counted_addition(k)})
    return out


def tampered(before: dict[str, tuple], now: dict[str, tuple] | None = None) -> list[str]:
    """Names of harness objects or hooks that changed since ``before``: replaced or removed anywhere, added in a
    harness module."""
    now = snapshot() if now is None else now
    changed = [k for k in before if before[k] != now.get(k)]
    added = [k for k in now if k not in before and _counted_addition(k)]
    return sorted(changed + added)
