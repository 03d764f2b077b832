"""Reaching objects the code does not name: frame and garbage-collector walks, and indirection into modules
(``sys.modules``, importlib, ``__import__``, module namespaces, ``getattr`` with a computed or sensitive name)."""

from __future__ import annotations

import ast
import re

from .rules import REJECT, cpp_pattern, names, on_attr, on_call, on_name, on_string, rule, src, visits

rule("frame_or_gc_walk", REJECT,
     "Walking frames or the garbage collector reaches the harness's expected outputs and timers.")
rule("module_indirection", REJECT,
     "Reaching modules through sys.modules, importlib, __import__, module namespaces or getattr with a computed "
     "or sensitive name hides what the code touches (gc walkers, exec, sys.argv, tracers) from every other rule.")

names(
    "frame_or_gc_walk",
    "sys._getframe sys._current_frames sys._current_exceptions inspect.currentframe inspect.stack "
    "inspect.getouterframes inspect.getinnerframes inspect.trace gc.get_objects gc.get_referrers gc.get_referents "
    "traceback.walk_stack traceback.walk_tb traceback.extract_stack traceback.format_stack traceback.print_stack "
    "traceback.StackSummary",
)
cpp_pattern("frame_or_gc_walk", r"\bPyEval_GetFrame\b|\bPyThreadState_GetFrame\b|\bPyFrame_\w+|"
                                r"\bPyEval_GetGlobals\b|\bPyEval_GetLocals\b|\bPyEval_GetBuiltins\b",
            "walks Python frames",
            words="PyEval_GetFrame PyThreadState_GetFrame PyEval_GetGlobals PyEval_GetLocals PyEval_GetBuiltins",
            subs="PyFrame_")

FRAME_ATTRS = frozenset({"f_back", "f_globals", "f_locals", "f_builtins", "f_trace", "tb_frame", "gi_frame",
                         "cr_frame", "ag_frame", "__globals__", "__subclasses__"})


@on_attr("frame_or_gc_walk", *sorted(FRAME_ATTRS))
def frame_attribute(s, node: ast.Attribute) -> None:
    s.add("frame_or_gc_walk", node, f"reaches {node.attr}")


# --------------------------------------------------------------------------------------------
# module indirection

# ``importlib.import_module("const")`` is an ordinary import (the name table applies to the module it names);
# everything else of importlib that hands out modules or loaders is indirection
names(
    "module_indirection",
    "sys.modules builtins __import__ __loader__ __spec__ importlib.__import__ importlib.reload importlib.util "
    "importlib.machinery "
    "importlib._bootstrap importlib._bootstrap_external importlib.abc imp pkgutil inspect.getmodule "
    "inspect.getmembers inspect.getmembers_static pydoc help unittest.mock logging.config torch.ops.import_module "
    "torch.set_default_tensor_type torch._utils._import_dotted_name tvm.get_global_func tvm.register_func "
    "tvm.ffi tvm_ffi.get_global_func tvm_ffi.register_global_func tvm_ffi.get_global_func_metadata",
)

#: calls that fetch an attribute by name: (callee, index of the name argument; the base is argument 0 when 1)
GETTERS = {"getattr": 1, "inspect.getattr_static": 1, "object.__getattribute__": 1, "type.__getattribute__": 1,
           "operator.attrgetter": 0, "operator.methodcaller": 0}
#: dunder names that only describe an object; every other dunder is sensitive on an unknown object
BENIGN_DUNDERS = frozenset({"__name__", "__qualname__", "__doc__", "__module__", "__version__", "__len__",
                            "__iter__", "__next__", "__contains__", "__getitem__", "__setitem__", "__call__",
                            "__enter__", "__exit__", "__cuda_array_interface__", "__array_interface__",
                            "__array__", "__dlpack__", "__dlpack_device__", "__annotations__", "__file__",
                            "__dataclass_fields__", "__slots__", "__init__", "__repr__", "__str__", "__hash__",
                            "__eq__", "__bool__", "__float__", "__int__", "__index__"})
#: attribute names that reach frames, code, module namespaces, hooks or the result channel
SENSITIVE_NAMES = FRAME_ATTRS | frozenset({
    "f_code", "f_lineno", "tb_next", "gi_code", "cr_code", "ag_code", "modules", "get_objects", "get_referrers",
    "get_referents", "_getframe", "_current_frames", "settrace", "setprofile", "addaudithook", "monitoring",
    "call_tracing", "settrace_all_threads", "setprofile_all_threads", "argv", "orig_argv", "import_module",
    "reload", "exec", "eval", "compile", "system", "popen", "_exit", "fork", "kill", "pythonapi",
    "_push_on_torch_function_stack", "_push_on_torch_dispatch_stack", "_set_torch_function_mode",
    "_set_dispatch_mode",
})
#: modules on which a computed name is allowed (``getattr(math, fn_name)``): namespaces that hold no module and
#: nothing that runs code. Any other module holds modules (``torch.sys``, ``tl.core``), so a name computed at run
#: time on it is an import the allowlist cannot see
SAFE_ROOTS = frozenset({"math", "cmath"})
#: listings of a namespace: a name drawn from one is not a parameter, even on a safe base
_LISTINGS = frozenset({"dir", "vars", "globals", "locals", "inspect.getmembers", "inspect.getmembers_static"})
#: functions whose use as a value (not a call) hides the lookup they make
_INDIRECT_FUNCS = frozenset({"getattr", "vars", "globals", "importlib.import_module", "operator.attrgetter",
                             "operator.methodcaller", "inspect.getattr_static"})


def sensitive(name: str) -> bool:
    """Whether an attribute name (or any link of a dotted one, as attrgetter takes) reaches something sensitive."""
    for part in name.split("."):
        if part.startswith("__") and part.endswith("__"):
            if part not in BENIGN_DUNDERS:
                return True
        elif part in SENSITIVE_NAMES:
            return True
    return False


def safe_base(name: str | None) -> bool:
    return name in SAFE_ROOTS


def _drawn_from_listing(s, node: ast.AST) -> bool:
    """Whether a name comes from ``dir(m)``, ``vars(m)``, ``m.__dict__``, ``globals()``... (directly or through a
    variable or loop of the scope)."""
    values = s.assigned(node.id) if type(node) is ast.Name else [node]
    for v in values:
        for n in ast.walk(v):
            if type(n) is ast.Call and s.resolve(n.func) in _LISTINGS:
                return True
            if type(n) is ast.Attribute and n.attr == "__dict__":
                return True
    return False


@on_call(("module_indirection", "frame_or_gc_walk"), *sorted(GETTERS))
def attribute_by_name(s, node: ast.Call, r: str) -> None:
    """``getattr(obj, name)`` with a computed name on an object that is not a known safe one, or with a sensitive
    constant name (``"__globals__"``, ``"f_back"``, ``"modules"``...) on an object that does not resolve."""
    idx = GETTERS[r]
    args = node.args
    if len(args) <= idx:
        return
    name_arg = args[idx]
    base_node = args[0] if idx == 1 else None
    consts = s.constants(name_arg)
    if consts is None:
        if _drawn_from_listing(s, name_arg):
            s.add("module_indirection", node, f"{r}() with a name drawn from a namespace listing: {src(name_arg)}")
            return
        if base_node is not None and safe_base(s.resolve(base_node)):
            return
        on = f" on {src(base_node)}" if base_node is not None else ""
        s.add("module_indirection", node, f"{r}() with a computed name{on}: {src(name_arg)}")
        return
    for name in sorted(consts):
        if name in FRAME_ATTRS:
            s.add("frame_or_gc_walk", node, f"{r}() reaches {name}")
    if base_node is not None and s.resolve(base_node):
        return  # the name resolves; the name table judges it
    hits = sorted(n for n in consts if sensitive(n) or not UNRESOLVED_SENSITIVE.isdisjoint(n.split(".")))
    if hits:
        s.add("module_indirection", node, f"{r}() fetches {hits[0]!r} from an object that does not resolve")


@on_call("module_indirection", "vars")
def module_vars(s, node: ast.Call, r: str) -> None:
    """``vars(sys)`` (a module's namespace as a dict), ``vars()`` (this module's, with its __builtins__), and
    ``vars`` of anything else: a class's or a type's namespace holds ``__annotations__``, ``__subclasses__`` and
    the rest of what the attribute allowlist keeps out, and ``self`` is only a parameter (``K.ns(type)``)."""
    if not node.args:
        s.add("module_indirection", node, "vars() hands out the module namespace")
    elif s.resolve(node.args[0]):
        s.add("module_indirection", node, f"vars({src(node.args[0])}) reads a module's namespace")
    else:
        s.add("module_indirection", node, f"vars({src(node.args[0])}) reads a namespace by name")


@on_call("module_indirection", "globals")
def module_globals(s, node: ast.Call, r: str) -> None:
    s.add("module_indirection", node, "globals() hands out the module namespace (and its __builtins__)")


@on_call("module_indirection", "importlib.import_module")
def computed_module_name(s, node: ast.Call, r: str) -> None:
    if node.args and s.fold(node.args[0]) is None:
        s.add("module_indirection", node, f"{r}() of a computed name: {src(node.args[0])}")


@on_attr("module_indirection", "__dict__")
def module_dict(s, node: ast.Attribute) -> None:
    base = s.resolve(node.value)
    if base:
        s.add("module_indirection", node, f"{base}.__dict__ reads a module's namespace")


@on_attr("module_indirection", "__loader__", "__spec__")
def module_loader(s, node: ast.Attribute) -> None:
    s.add("module_indirection", node, f"reaches a module's {node.attr}")


@on_name("module_indirection")
def lookup_function_as_value(s, name: str, node: ast.AST, what: str) -> None:
    """``functools.reduce(getattr, ["modules"], sys)``: a lookup function passed around instead of called."""
    if name in _INDIRECT_FUNCS and what == "uses":
        p = node._sb_parent
        if not (type(p) is ast.Call and p.func is node):
            s.add("module_indirection", node, f"uses {name} as a value, not a call")


#: dunders a solution may read on any object: those that only describe it or are everyday protocol;
#: ``__annotations__`` and ``__dataclass_fields__`` are out (library code pastes the names they hold into source it
#: runs: ``dynamic_code.annotation_names``)
READABLE_DUNDERS = BENIGN_DUNDERS - {"__annotations__", "__dataclass_fields__"}
#: modules that hand out capabilities, by the names other modules keep them under (``warnings.sys``,
#: ``enum.bltns``): a module reached as a value the scan cannot follow (``catch_warnings()._module``, an
#: ``AttributeError``'s ``obj``) leads no further through them
CAPABILITY_MODULES = frozenset({
    "sys", "os", "posix", "gc", "builtins", "bltns", "inspect", "importlib", "subprocess", "threading", "_thread",
    "socket", "ctypes", "_ctypes", "signal", "pickle", "marshal", "traceback", "weakref", "shutil", "tempfile",
    "multiprocessing", "runpy", "code", "codeop", "pydoc", "site", "linecache", "io", "_io", "types"})
#: builtins that look names up, run text or open files, and inspect's frame functions, under the name a module
#: or a namespace keeps them (``builtins_module.getattr``, ``inspect_module.getouterframes``)
CAPABILITY_FUNCTIONS = frozenset({
    "getattr", "setattr", "delattr", "vars", "globals", "locals", "open", "breakpoint", "currentframe", "stack",
    "trace", "getouterframes", "getinnerframes", "getargvalues", "getframeinfo", "getmembers", "getattr_static"})
#: attribute names that reach a capability whatever object holds them (``numpy_array.ctypes`` is the door to the
#: ctypes module); ``modules``, ``compile`` and ``eval`` are everyday method names of models and patterns
UNRESOLVED_SENSITIVE = ((SENSITIVE_NAMES - {"modules", "compile", "eval"}) | CAPABILITY_MODULES
                        | CAPABILITY_FUNCTIONS)


@visits("module_indirection", ast.Attribute)
def attribute_allowlist(s, node: ast.Attribute) -> None:
    """An allowlist for attributes: a dunder outside ``READABLE_DUNDERS`` on any object (``[len][0].__self__`` is
    the builtins module, ``torch.save.__defaults__`` holds the pickle module, a builtin's ``__self__`` is the C
    module it came from, not the one it is found in), and on a value the scan cannot follow (an element of a list,
    a parameter, a call's result, an attribute of the solution's own objects) a name of ``UNRESOLVED_SENSITIVE``,
    are indirections the name table cannot see. A name on a base that resolves is the name table's to judge."""
    attr = node.attr
    if attr.startswith("__") and attr.endswith("__"):
        if attr not in READABLE_DUNDERS:
            s.add("module_indirection", node, f"reaches {attr} of {src(node.value)}")
        return
    if attr in UNRESOLVED_SENSITIVE and not s.resolve(node.value):
        s.add("module_indirection", node, f"reaches {attr} on a value the scan cannot follow: {src(node.value)}")


_FIELD = re.compile(r"\{([^{}!:]*)")


@on_string("module_indirection")
def format_fields(s, node: ast.AST, text: str) -> None:
    """A format string's fields read attributes and items by name (``"{0.f_globals}".format(frame)``): a field
    that reaches a dunder outside ``READABLE_DUNDERS`` or a sensitive name is an attribute read out of the scan's
    sight."""
    if "{" not in text:
        return
    for field in _FIELD.findall(text):
        for part in re.split(r"[.\[\]]", field)[1:]:
            if (part.startswith("__") and part not in READABLE_DUNDERS) or part in UNRESOLVED_SENSITIVE:
                s.add("module_indirection", node, f"a format field reads {part}: {text[:60]!r}")
                return
