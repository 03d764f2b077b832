"""Replacing or intercepting what the harness calls: monkeypatching, tensor subclasses, and torch function or
dispatch modes that intercept every torch call in the process."""

from __future__ import annotations

import ast

from .modules import namespace
from .names import PROTECTED_ROOTS, literal
from .rules import (
    REJECT,
    WARN,
    cpp_pattern,
    names,
    on_attr,
    on_call,
    on_target,
    rule,
    src,
    visits,
)
from .timing_hardware import sets_reduced_precision

rule("monkeypatching", REJECT,
     "Replacing attributes of any module (torch, triton, numpy, the standard library, the harness) or writing into "
     "its global tables can fake timings or results.")
rule("tensor_subclass", WARN, "Tensor subclasses and __class__ swaps can defer work into the untimed correctness check.")
rule("torch_interception", REJECT,
     "A torch function or dispatch mode, a __torch_function__/__torch_dispatch__ override or a kernel registered "
     "for a core ATen operator intercepts torch calls of the whole process, the harness's copies included.")

names(
    "torch_interception",
    "torch.overrides.TorchFunctionMode torch.overrides.BaseTorchFunctionMode torch.overrides._push_mode "
    "torch.overrides._pop_mode torch.overrides._pop_mode_temporarily torch.overrides._push_on_torch_function_stack "
    "torch.overrides.enable_reentrant_dispatch torch.utils._python_dispatch torch._C._push_on_torch_function_stack "
    "torch._C._push_on_torch_dispatch_stack torch._C._pop_torch_function_stack torch._C._pop_torch_dispatch_stack "
    "torch._C._set_torch_function_mode torch._C._set_dispatch_mode torch._C._unset_dispatch_mode "
    "torch._C._EnablePythonDispatcher torch._C._enable_python_dispatcher torch._dispatch torch._subclasses "
    "torch._python_dispatcher torch.set_default_device",
)

# process-wide state that a context manager swaps: the working directory (the CPU arena's file lives there) and
# sys.stdout/sys.stderr
names("monkeypatching", "contextlib.chdir contextlib.redirect_stdout contextlib.redirect_stderr")

cpp_pattern("monkeypatching", r"\bPyObject_(?:Set|Del)Attr\w*", "sets attributes of Python objects",
            subs="PyObject_SetAttr PyObject_DelAttr")

SETTERS = frozenset({"setattr", "delattr", "object.__setattr__", "object.__delattr__", "type.__setattr__"})
_SYS_MODULES_WRITES = frozenset({"sys.modules.update", "sys.modules.setdefault", "sys.modules.pop",
                                 "sys.modules.__setitem__", "sys.modules.clear", "sys.modules.popitem",
                                 "sys.modules.__delitem__"})
_DICT_WRITES = (".__dict__.update", ".__dict__.__setitem__", ".__dict__.setdefault", ".__dict__.pop")
#: methods that change a list, dict or set in place
MUTATORS = frozenset({"update", "setdefault", "pop", "popitem", "clear", "append", "extend", "insert", "remove",
                      "add", "discard", "__setitem__", "__delitem__"})


def module_attribute(s, name: str | None) -> tuple[str, tuple[str, ...]] | None:
    """``(module, attributes)`` for a name that is an attribute of a module other than the solution's own (a
    protected root counts whatever the chain: ``sys.modules``), or None."""
    if not name:
        return None
    r = s.reach(name)
    if r.module is None or r.own:
        return (name.split(".")[0], tuple(name.split(".")[1:])) if name.split(".")[0] in PROTECTED_ROOTS else None
    return r.module, r.rest
TENSOR_BASES = frozenset({"torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase", "torch.nn.Parameter"})


# ---- monkeypatching


@on_target("monkeypatching", ast.Attribute)
def patched_attribute(s, tgt: ast.Attribute, value: ast.AST | None, anchor: ast.AST) -> None:
    """``torch.cuda.Event.elapsed_time = f``; ``type(obj).x = f``; ``obj.__class__.x = f``."""
    if sets_reduced_precision(s, tgt, value):
        return  # a precision flag, reported as such
    base = s.resolve(tgt.value)
    if module_attribute(s, base) is not None:
        parts = set(base.split("."))
        if (parts & {"config", "backends", "_config"}) and literal(value):
            return  # setting a library's configuration value, not replacing code
        if base.startswith("os.environ"):
            return
        s.add("monkeypatching", anchor, f"assigns to {base}.{tgt.attr}")
    elif isinstance(tgt.value, ast.Call) and s.resolve(tgt.value.func) == "type":
        s.add("monkeypatching", anchor, f"assigns to a class attribute through type(): {src(tgt)}")
    elif isinstance(tgt.value, ast.Attribute) and tgt.value.attr == "__class__":
        s.add("monkeypatching", anchor, f"assigns to a class attribute through __class__: {src(tgt)}")


@on_target("monkeypatching", ast.Subscript)
def patched_namespace(s, tgt: ast.Subscript, value: ast.AST | None, anchor: ast.AST) -> None:
    """``sys.modules["torch"] = fake``; ``vars(time)["perf_counter"] = f``."""
    base = s.resolve(tgt.value)
    if base == "sys.modules":
        s.add("monkeypatching", anchor, f"writes into sys.modules: {src(tgt)}")
    elif base and (base == "builtins" or base.endswith(".__dict__")) and base.split(".")[0] in PROTECTED_ROOTS:
        s.add("monkeypatching", anchor, f"writes into {base}: {src(tgt)}")
    elif base and not base.startswith("os.environ"):
        where = module_attribute(s, base)
        if where is not None and where[1]:  # ``copy.dispatch_table[T] = f``: a module's global table
            s.add("monkeypatching", anchor, f"writes into {base}, a table of the module {where[0]}: {src(tgt)}")


@on_call("monkeypatching", *sorted(SETTERS))
def setattr_on_protected(s, node: ast.Call, r: str) -> None:
    args = node.args
    if not args:
        return
    base = s.resolve(args[0])
    if module_attribute(s, base) is not None:
        s.add("monkeypatching", node, f"{r}() on {base}")
    elif isinstance(args[0], ast.Call) and s.resolve(args[0].func) == "type":
        s.add("monkeypatching", node, f"{r}() on a class through type()")


@on_call("monkeypatching")
def namespace_write_call(s, node: ast.Call, r: str | None) -> None:
    """``sys.modules.update(...)``, ``torch.__dict__.setdefault(...)``."""
    if not r:
        return
    if r in _SYS_MODULES_WRITES:
        s.add("monkeypatching", node, f"{r}()")
    elif r.endswith(_DICT_WRITES) and r.split(".")[0] in PROTECTED_ROOTS:
        s.add("monkeypatching", node, f"{r}()")
    elif r.rsplit(".", 1)[-1] in MUTATORS and "." in r:
        where = module_attribute(s, r.rsplit(".", 1)[0])
        if where is not None and len(where[1]) == 1:
            ns = namespace(where[0])
            if ns is not None and isinstance(ns.get(where[1][0]), (dict, list, set)):
                s.add("monkeypatching", node, f"{r}() changes a table of the module {where[0]}")


# ---- tensor subclasses


@on_attr("tensor_subclass", "_make_subclass", "_make_wrapper_subclass", "as_subclass")
def subclass_constructor(s, node: ast.Attribute) -> None:
    s.add("tensor_subclass", node, f"makes a tensor subclass ({node.attr})")


@on_target("tensor_subclass", ast.Attribute)
def class_swap(s, tgt: ast.Attribute, value, anchor: ast.AST) -> None:
    if tgt.attr == "__class__":
        s.add("tensor_subclass", anchor, f"swaps an object's class: {src(tgt)}")


@visits("tensor_subclass", ast.FunctionDef, ast.AsyncFunctionDef)
def torch_function_override(s, node: ast.FunctionDef) -> None:
    if node.name in ("__torch_function__", "__torch_dispatch__"):
        s.add("tensor_subclass", node, f"defines {node.name}")


@visits("tensor_subclass", ast.ClassDef)
def tensor_base(s, node: ast.ClassDef) -> None:
    for b in node.bases:
        r = s.resolve(b)
        if r in TENSOR_BASES:
            s.add("tensor_subclass", node, f"class {node.name} subclasses {r}")


# ---- torch function and dispatch interception

#: attribute names that push, pop or set a torch function/dispatch mode, whatever object they are read from
INTERCEPT_ATTRS = frozenset({"_push_on_torch_function_stack", "_push_on_torch_dispatch_stack",
                             "_pop_torch_function_stack", "_pop_torch_dispatch_stack", "_set_torch_function_mode",
                             "_set_dispatch_mode", "_unset_dispatch_mode", "TorchFunctionMode",
                             "BaseTorchFunctionMode", "TorchDispatchMode", "BaseTorchDispatchMode",
                             "_python_dispatch", "py_impl"})
_OVERRIDES = ("__torch_function__", "__torch_dispatch__")
#: ``__torch_function__ = torch._C._disabled_torch_function_impl`` turns interception off
_DISABLED_IMPL = "torch._C._disabled_torch_function_impl"
#: operator namespaces of torch itself: registering a kernel there overrides the operator for everyone
CORE_NAMESPACES = frozenset({"aten", "prims", "prim", "quantized", "_quantized", "c10d", "_c10d_functional",
                             "profiler", "mkldnn", "rngprims", "debugprims"})
LIBRARY_CALLS = ("torch.library.Library", "torch.library.impl", "torch.library.register_kernel",
                 "torch.library.register_autograd", "torch.library.register_fake",
                 "torch.library.register_torch_dispatch", "torch.library.register_vmap", "torch.library.define",
                 "torch.library._impl", "torch.library.impl_abstract")


@on_attr("torch_interception", *sorted(INTERCEPT_ATTRS))
def mode_stack_attribute(s, node: ast.Attribute) -> None:
    s.add("torch_interception", node, f"reaches {node.attr}, which intercepts torch calls process-wide")


@visits("torch_interception", ast.FunctionDef, ast.AsyncFunctionDef)
def torch_override_method(s, node: ast.FunctionDef) -> None:
    if node.name in _OVERRIDES:
        s.add("torch_interception", node, f"defines {node.name}, which intercepts torch calls on its objects")


@on_target("torch_interception", ast.Name, ast.Attribute)
def torch_override_assignment(s, tgt: ast.AST, value: ast.AST | None, anchor: ast.AST) -> None:
    name = tgt.id if type(tgt) is ast.Name else tgt.attr
    if name in _OVERRIDES and not (value is not None and s.resolve(value) == _DISABLED_IMPL):
        s.add("torch_interception", anchor, f"sets {name}, which intercepts torch calls")


@on_call("torch_interception", *LIBRARY_CALLS)
def core_operator_kernel(s, node: ast.Call, r: str) -> None:
    """``torch.library.Library("aten", "IMPL")``, ``torch.library.impl("aten::clone", ...)``,
    ``register_kernel(torch.ops.aten.clone.default, ...)``: a kernel for one of torch's own operators."""
    target = node.args[0] if node.args else next(
        (k.value for k in node.keywords if k.arg in ("ns", "qualname", "op", "op_name")), None)
    if target is None:
        return
    name = s.fold(target) or s.resolve(target) or ""
    if not name:  # a namespace the scan cannot read may be torch's own: ``("aten",)[0]``
        s.add("torch_interception", node, f"{r}() registers a kernel for an operator it names out of sight: "
                                          f"{src(target)}")
        return
    if name.startswith("torch.ops."):
        ns = name.split(".")[2] if name.count(".") >= 2 else ""
    else:
        ns = name.split("::", 1)[0]
    if ns in CORE_NAMESPACES:
        s.add("torch_interception", node, f"{r}() registers a kernel for torch's own operators ({name})")
