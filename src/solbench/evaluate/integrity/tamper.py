"""Harness snapshots in the candidate's process: has anything the harness relies on been replaced or hooked?

This is the second layer of the defence against in-process tampering (the first is the static scan, and the
decisions themselves are the trusted side's: docs/SECURITY.md). A snapshot fingerprints, by identity:

- every module-level binding of every harness module loaded in this process (functions and their code,
  defaults, keyword defaults and globals, classes and every entry of their dictionaries, imported modules and
  objects such as ``rounds.time``, each with its type, and the values of immutable constants), this module
  included;
- the builtins, and the functions of the standard-library and torch modules the harness calls (``time``,
  ``os``, ``json``, ``math``, ``statistics``, ``threading``, ``numpy``, ``torch``, ``torch.Tensor``,
  ``torch.return_types``, ``torch.cuda`` and its events, streams and graphs), and Triton's launch and
  interpreter classes;
- the hooks through which code can run inside the harness's own frames: trace and profile functions
  (``sys`` and ``threading``), ``sys.monitoring`` tools, torch function and dispatch modes, torch's eval-frame
  and bytecode-debugger callbacks, import hooks, ``gc`` callbacks, signal handlers, the exception and
  audit-adjacent hooks of ``sys`` and ``threading``;
- objects registered with ``watch`` (the candidate's own state).

The snapshot's digest is taken before the solution is imported and sent to the trusted side, which compares
it with the digest each later reply carries (``harness_tamper``): a solution that edits the recorded
snapshot gains nothing, since the baseline is held outside its process.
"""

from __future__ import annotations

import sys
from itertools import chain
from operator import attrgetter, is_
from types import MappingProxyType
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
    """Identity of an object and of its type (a module's or an instance's class can be reassigned), of the code it
    runs (a function's __code__ can be swapped in place) and of the defaults, keyword defaults and globals it runs
    with; immutable constants by value. A value is classified by its type alone, never by attributes it answers."""
    kind = type(value)
    if kind in _OPAQUE_TYPES:
        return (id(value),)
    if issubclass(kind, _IMMUTABLE):
        return ("=", kind.__name__, repr(value)[:200])
    return (id(value), id(kind)) + (_deep(value) or ())


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
        # the eval-frame hook (PEP 523, torch.compile's entry) is handed every Python frame the process runs, the
        # harness's own; torch.compile sets it only for a compiled call's length, so between calls it is as before
        frames = getattr(getattr(c, "_dynamo", None), "eval_frame", None)
        for fn in ("get_eval_frame_callback", "get_bytecode_debugger_callback"):
            if hasattr(frames, fn):
                out[f"hook.torch.{fn}"] = _fingerprint(getattr(frames, fn)())


def _sources():
    """Every namespace a snapshot fingerprints, in order: (prefix, namespace, names skipped, what it keeps:
    "all", "callables" or "methods" (callables, static and class methods, properties), whether the classes
    defined in it are fingerprinted too)."""
    for name, mod in sorted(harness_modules().items()):
        yield name, vars(mod), MUTABLE_GLOBALS, "all", True
    for name in _STDLIB:
        mod = sys.modules.get(name)
        if mod is not None:
            yield f"std.{name}", vars(mod), frozenset(), "callables", False
    numpy = sys.modules.get("numpy")
    if numpy is not None:  # the interpreter's kernels and the harness's store count run on numpy
        yield "std.numpy", vars(numpy), frozenset(), "callables", False
    for name, cls in (("triton.runtime.interpreter", "InterpreterBuilder"), ("triton.runtime.interpreter",
                      "InterpretedFunction"), ("triton.runtime.jit", "JITFunction")):
        mod = sys.modules.get(name)
        obj = getattr(mod, cls, None) if mod is not None else None
        if isinstance(obj, type):  # methods only: Triton keeps hooks and caches in class attributes
            yield f"{name}.{cls}", vars(obj), frozenset(), "methods", False
    torch = sys.modules.get("torch")
    if torch is not None:
        yield "torch", vars(torch), frozenset(), "callables", False
        rt = sys.modules.get("torch.return_types")
        if rt is not None:
            yield "torch.return_types", vars(rt), frozenset(), "all", False
        yield "torch.Tensor", vars(torch.Tensor), frozenset(), "all", False
        yield "torch._C.TensorBase", vars(torch._C.TensorBase), frozenset(), "all", False
        cuda = getattr(torch, "cuda", None)
        if cuda is not None:
            yield "torch.cuda", vars(cuda), frozenset(), "callables", False
            for cls in ("Event", "Stream", "CUDAGraph", "graph"):
                obj = getattr(cuda, cls, None)
                if isinstance(obj, type):  # their methods: torch keeps state of its own in class attributes
                    # (torch.cuda.graph.default_capture_stream is set at the first capture)
                    yield f"torch.cuda.{cls}", vars(obj), frozenset(), "methods", False
    for name, (obj, mutable) in list(_watched.items()):
        yield f"watched.{name}", vars(obj), mutable, "all", False


def _keeps(keep: str, v: Any) -> bool:
    """Whether a namespace that keeps ``keep`` fingerprints ``v`` (``_sources``)."""
    if keep == "all":
        return True
    return callable(v) or (keep == "methods" and isinstance(v, (staticmethod, classmethod, property)))


def _kept(ns, keep: str) -> dict[str, Any]:
    return dict(ns) if keep == "all" else {k: v for k, v in ns.items() if _keeps(keep, v)}


def _stored(ns):
    """A namespace as its storage holds it: a plain dict or a class's proxy as they are, a dict subclass (a
    watched object's ``__dict__`` can be replaced by one, whose own methods may answer otherwise) read through
    ``dict``'s methods into a plain dict."""
    return ns if type(ns) in (dict, MappingProxyType) else dict(dict.items(ns))


def _spaces():
    """``_sources``, each harness module's own classes after it as namespaces of their own: (prefix, namespace
    as stored, names skipped, what it keeps)."""
    for prefix, ns, skip, keep, classes in _sources():
        ns = _stored(ns)
        yield prefix, ns, skip, keep
        if classes:
            module = ns.get("__name__")
            for name, value in list(ns.items()):
                if name not in skip and isinstance(value, type) and getattr(value, "__module__", "") == module:
                    yield f"{prefix}.{name}", vars(value), frozenset(), "all"


def snapshot() -> dict[str, tuple]:
    out: dict[str, tuple] = {}
    for prefix, ns, skip, keep in _spaces():
        _namespace(prefix, _kept(ns, keep), out, skip=skip, classes=False)
    _hooks(out)
    return out


_FN_PARTS = attrgetter("__code__", "__defaults__", "__kwdefaults__", "__globals__", "__closure__")


def _kw_entries(fns) -> tuple:
    """The keyword defaults' names and values of ``fns``, in order, read through ``dict``'s own method (a
    function's ``__kwdefaults__`` is a dict that can be changed in place, its identity kept)."""
    return tuple(chain.from_iterable(chain.from_iterable(dict.items(f.__kwdefaults__)) for f in fns
                                     if f.__kwdefaults__ is not None))


def _parts(v: Any) -> tuple | None:
    """The objects behind ``v``'s code: a function's (a static, class or bound method's function's) code,
    defaults, keyword defaults, globals, closure and keyword defaults' entries; None where it has no code."""
    kind = type(v)
    if kind is _FUNCTION:
        return _FN_PARTS(v) + _kw_entries((v,))
    if kind in _OPAQUE_TYPES or issubclass(kind, _IMMUTABLE):
        return None
    code = _code_of(v)
    if code is None:
        return None
    fn = getattr(v, "__func__", v)
    return ((code, getattr(fn, "__defaults__", None), getattr(fn, "__kwdefaults__", None),
             getattr(fn, "__globals__", None), getattr(fn, "__closure__", None))
            + (_kw_entries((fn,)) if type(fn) is _FUNCTION else ()))


def _deep(v: Any) -> tuple | None:
    """What of ``v`` besides its identity a snapshot fingerprints (``_parts``, as ids), or None where that is
    nothing."""
    parts = _parts(v)
    return None if parts is None else tuple(map(id, parts))


class _Space:
    """One namespace's marks: its names and values (the objects themselves, held here so that no identity can be
    reused while the marks stand) and their types, and for the values with code (functions; static, class and
    bound methods) the objects behind it (``_parts``), held too. All are compared by identity."""

    def __init__(self, prefix: str, ns, skip: frozenset[str], keep: str):
        self.prefix = prefix
        # whether any name to skip is here now: where none is (most harness modules), the namespace's own keys and
        # values are compared as they are stored, no filtered copy made; one that appears later changes the count
        self.filtered = not skip.isdisjoint(ns.keys())
        self.names, self.values = _names_values(ns, skip if self.filtered else frozenset())
        self.types = tuple(map(type, self.values))
        at = [i for i, v in enumerate(self.values) if _keeps(keep, v) and _parts(v) is not None]
        self.fns = tuple(self.values[i] for i in at if type(self.values[i]) is _FUNCTION)
        # a function's keyword defaults set or cleared change its parts; only those it has are read again
        self.kw_fns = tuple(f for f in self.fns if f.__kwdefaults__ is not None)
        self.others = tuple(self.values[i] for i in at if type(self.values[i]) is not _FUNCTION)
        self.parts = self._parts_now()

    def _parts_now(self) -> tuple:
        """The marked values' parts as they are now, in one tuple: plain functions' (read at C speed), their
        keyword defaults' entries, the other values'."""
        now = chain.from_iterable(map(_FN_PARTS, self.fns))
        if self.kw_fns:
            now = chain(now, _kw_entries(self.kw_fns))
        if self.others:
            now = chain(now, chain.from_iterable(_parts(v) or () for v in self.others))
        return tuple(now)

    def still(self, prefix: str, ns, skip: frozenset[str]) -> bool:
        """Whether ``ns`` holds the very objects it held, of the same types, in the same order, under the same
        names, and its values with code run the same code with the same defaults, globals and closures. Names,
        values and types are compared over the namespace's storage (``_spaces`` gives plain dicts and class
        proxies), so none of their own code runs there; the few values with code other than plain functions
        are read through their attributes, after their types were found unchanged."""
        names, values = _names_values(ns, skip) if self.filtered else (ns.keys(), ns.values())
        if prefix != self.prefix or not (_same(names, self.names) and _same(values, self.values)):
            return False
        return all(map(is_, map(type, self.values), self.types)) and _same(self._parts_now(), self.parts)


def _same(now, marked: tuple) -> bool:
    """Whether ``now`` (a sized iterable) holds the objects of ``marked``, position by position."""
    return len(now) == len(marked) and all(map(is_, now, marked))


def _names_values(ns, skip: frozenset[str]) -> tuple[tuple, tuple]:
    if skip:
        names = tuple(k for k in ns if k not in skip)
        return names, tuple(ns[k] for k in names)
    return tuple(ns), tuple(ns.values())


class Harness:
    """The harness as it was when made (before the solution's code was imported): its snapshot and that
    snapshot's digest, and whether anything changed since (``changed``).

    A snapshot costs milliseconds, and the candidate's process answers every command with a check. So the
    check first compares marks (``_Space``): per namespace its names, its values (held by the marks, so that no
    identity is reused while they stand) and their types, and the functions' code, defaults, globals and
    closure, all by identity, and the hooks. Where they are unchanged, a snapshot would be too (it is made of
    nothing else but an object's gaining code it did not have, which changes no call); where they moved, a
    snapshot decides."""

    def __init__(self):
        self.snapshot = snapshot()
        self.digest = digest(self.snapshot)
        self._marks()

    def _marks(self) -> None:
        self.spaces = [_Space(*space) for space in _spaces()]
        self.hooks: dict[str, tuple] = {}
        _hooks(self.hooks)

    def _still(self) -> bool:
        spaces = iter(self.spaces)
        for prefix, ns, skip, _ in _spaces():
            space = next(spaces, None)
            if space is None or not space.still(prefix, ns, skip):
                return False
        hooks: dict[str, tuple] = {}
        _hooks(hooks)
        return next(spaces, None) is None and hooks == self.hooks

    def changed(self) -> tuple[list[str], dict[str, tuple] | None]:
        """The names changed since (``tampered``), and the snapshot taken now, or None where the marks show
        nothing moved."""
        if self._still():
            return [], None
        now = snapshot()
        found = tampered(self.snapshot, now)
        if not found:  # moved, but nothing a snapshot sees: the next check compares with new marks
            self._marks()
        return found, now


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
