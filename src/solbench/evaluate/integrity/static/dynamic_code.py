"""Code that exists only at run time: exec and friends, decoded payloads, and names assembled at run time."""

from __future__ import annotations

import ast

from .folding import DECODERS
from .names import BUILTIN_NAMES
from .rules import (
    REJECT,
    cpp_pattern,
    names,
    on_attr,
    on_call,
    on_string,
    on_target,
    rule,
    src,
    visits,
)

rule("dynamic_code", REJECT,
     "Code built or loaded at run time (exec, eval, compile, unpickling, dlopen) cannot be reviewed statically.")
rule("obfuscated_payload", REJECT,
     "Decoding a blob and executing it is how scanners are evaded; honest kernels never need it.")
rule("name_obfuscation", REJECT,
     "Attribute and module names assembled at run time hide what the code really touches.")

names(
    "dynamic_code",
    "exec eval compile __import__ importlib.__import__ types.FunctionType types.CodeType types.LambdaType marshal "
    "pickle.loads pickle.load pickle.Unpickler _pickle dill cloudpickle runpy code.interact code.InteractiveConsole "
    "code.InteractiveInterpreter codeop torch.load torch.serialization torch.jit.load torch.import_ir_module "
    "torch.import_ir_module_from_buffer torch.ops.load_library torch.classes.load_library numpy.load "
    "torch.cuda.CUDAPluggableAllocator torch.cuda.change_current_allocator torch.cuda.memory.CUDAPluggableAllocator "
    "torch.cuda.memory.change_current_allocator typing.get_type_hints typing.ForwardRef typing.evaluate_forward_ref "
    "typing_extensions.get_type_hints typing_extensions.get_annotations typing_extensions.ForwardRef "
    "typing_extensions.evaluate_forward_ref tvm.runtime.load_module tvm_ffi.load_module "
    "functools.singledispatch functools.singledispatchmethod inspect.get_annotations annotationlib",
)
cpp_pattern("dynamic_code", r"\b(?:dlopen|dlsym|dlmopen|dlvsym|LoadLibrary\w*|GetProcAddress|PyRun_\w+|"
                            r"Py_CompileString\w*|PyEval_EvalCode\w*|PyImport_ExecCode\w*)\b",
            "loads or runs code at run time", words="dlopen dlsym dlmopen dlvsym GetProcAddress",
            subs="LoadLibrary PyRun_ Py_CompileString PyEval_EvalCode PyImport_ExecCode")

PAYLOAD_SINKS = frozenset({"exec", "eval", "compile", "__import__", "importlib.import_module",
                           "types.FunctionType", "types.CodeType", "pickle.loads", "marshal.loads"})
IMPORTERS = ("importlib.import_module", "__import__", "importlib.__import__")
#: calls that take an attribute name (the first argument for operator.*, else the second)
ATTR_BY_NAME = frozenset({"getattr", "setattr", "hasattr", "delattr", "operator.attrgetter",
                          "operator.methodcaller", "object.__getattribute__", "object.__setattr__",
                          "object.__delattr__", "type.__getattribute__", "type.__setattr__",
                          "inspect.getattr_static"})


@on_call("dynamic_code", "exec", "eval", "compile")
def constant_source(s, node: ast.Call, r: str) -> None:
    """A constant string run by exec/eval/compile (directly, or through a name bound only to it) is parsed and
    scanned as part of the file."""
    args = node.args
    if not args:
        return
    code = args[0]
    if type(code) is ast.Name:
        vals = s.assigned(code.id)
        code = vals[0] if len(vals) == 1 else code
    if isinstance(code, ast.Constant) and isinstance(code.value, str):
        s.scan_embedded(code)


@on_call("obfuscated_payload", *sorted(PAYLOAD_SINKS))
def decoded_payload(s, node: ast.Call, r: str) -> None:
    for a in list(node.args) + [k.value for k in node.keywords]:
        dec = decoder_in(s, a, 0)
        if dec:
            s.add("obfuscated_payload", node, f"{r}() of data decoded by {dec}")
            break


def decoder_in(s, node: ast.AST, depth: int) -> str | None:
    """The decoder a value comes from, directly or through variables of the scope."""
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            r = s.resolve(n.func)
            if r in DECODERS:
                return r
            if isinstance(n.func, ast.Attribute) and n.func.attr in ("fromhex", "decompress", "b64decode"):
                return n.func.attr
        elif isinstance(n, ast.Name) and depth < 3:
            for v in s.assigned(n.id):
                d = decoder_in(s, v, depth + 1)
                if d:
                    return d
    return None


@on_call(("dynamic_code", "name_obfuscation", "*"), *IMPORTERS)
def computed_import(s, node: ast.Call, r: str) -> None:
    """``import_module(name)``: a computed name is dynamic code; a folded one is checked as an import."""
    args = node.args
    if args and not isinstance(args[0], ast.Constant):
        s.add("dynamic_code", node, f"{r}() with a computed module name: {src(args[0])}")
        if s.built(args[0]):
            s.add("name_obfuscation", node, f"module name assembled at run time: {src(args[0])}")
    mod = s.fold(args[0]) if args else None
    if mod:
        s.check_name(mod, node, "imports")


@on_call("name_obfuscation", *sorted(ATTR_BY_NAME))
def assembled_attribute_name(s, node: ast.Call, r: str) -> None:
    idx = 0 if r.startswith("operator.") else 1
    name_arg = node.args[idx] if len(node.args) > idx else None
    if name_arg is not None and s.built(name_arg):
        s.add("name_obfuscation", node, f"{r}() with a name assembled at run time: {src(name_arg)}")


@on_attr("name_obfuscation", "__getattribute__")
def getattribute(s, node: ast.Attribute) -> None:
    s.add("name_obfuscation", node, "uses __getattribute__")


@visits("name_obfuscation", ast.Subscript)
def namespace_lookup(s, node: ast.Subscript) -> None:
    """``globals()[...]``, ``vars(m)[...]``, ``m.__dict__[...]``, ``__builtins__[...]``, ``sys.modules[<built>]``."""
    v = node.value
    if isinstance(v, ast.Call):
        fr = s.resolve(v.func)
        if fr in ("globals", "locals", "vars"):
            s.add("name_obfuscation", node, f"looks names up through {fr}()[...]: {src(node)}")
    elif isinstance(v, ast.Attribute) and v.attr == "__dict__":
        if s.resolve(v.value) or (isinstance(v.value, ast.Call) and s.resolve(v.value.func) == "type"):
            s.add("name_obfuscation", node, f"looks names up through __dict__[...]: {src(node)}")
    base = s.resolve(v)
    if base == "builtins":
        s.add("name_obfuscation", node, f"looks names up through __builtins__[...]: {src(node)}")
    elif base == "sys.modules" and not isinstance(node.slice, ast.Constant) and s.built(node.slice):
        s.add("name_obfuscation", node, f"sys.modules lookup with an assembled name: {src(node)}")


@on_target("dynamic_code", ast.Attribute)
def code_replacement(s, tgt: ast.Attribute, value, anchor: ast.AST) -> None:
    if tgt.attr == "__code__":
        s.add("dynamic_code", anchor, f"replaces a function's code: {src(tgt)}")


#: namespaces whose names library code pastes into source it runs (dataclasses builds ``__init__`` and ``__eq__``
#: from them), or whose string values it evaluates (``typing.get_type_hints``, reached from inside
#: ``functools.singledispatch``'s ``register``)
CODE_NAMESPACES = frozenset({"__annotations__", "__dataclass_fields__"})


@visits("dynamic_code", ast.Name)
def annotation_names(s, node: ast.Name) -> None:
    """``__annotations__`` named in the solution (a class body's own, assigned or changed by hand): its names
    become source that ``dataclasses`` runs."""
    if node.id in CODE_NAMESPACES:
        s.add("dynamic_code", node, f"names {node.id}, whose entries library code turns into source it runs")


@on_string("dynamic_code")
def annotation_namespace_by_name(s, node: ast.AST, text: str) -> None:
    """``setattr(C, "__annotations__", ...)``, ``type("C", (), {"__annotations__": ...})``."""
    if text in CODE_NAMESPACES:
        s.add("dynamic_code", node, f"names {text}, whose entries library code turns into source it runs")


#: what a type written as text may hold: names, dotted names, subscripts, tuples and lists of them, ``X | Y``
_TYPE_NODES = (ast.Expression, ast.Name, ast.Attribute, ast.Subscript, ast.Tuple, ast.List, ast.Constant,
               ast.BinOp, ast.BitOr, ast.Load)
#: the builtins a type written as text may name (the others are functions: ``"exec"`` would hand one out)
_BUILTIN_TYPES = frozenset({"int", "float", "complex", "bool", "str", "bytes", "list", "dict", "tuple", "set",
                            "frozenset", "type", "object", "slice", "range"})


def _type_text(text: str) -> bool:
    """Whether ``text`` only names a type: parsed, it holds nothing but ``_TYPE_NODES``, no private or dunder
    name, no builtin but a type, and its nested strings are types too."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return False
    for n in ast.walk(tree):
        if not isinstance(n, _TYPE_NODES):
            return False
        name = n.id if type(n) is ast.Name else n.attr if type(n) is ast.Attribute else None
        if name is not None and (name.startswith("_") or (name in BUILTIN_NAMES and name not in _BUILTIN_TYPES)):
            return False
        if type(n) is ast.Constant and n.value is not None and n.value is not Ellipsis and not (
                isinstance(n.value, str) and _type_text(n.value)):
            return False
    return True


@visits("dynamic_code", ast.arg, ast.AnnAssign, ast.FunctionDef, ast.AsyncFunctionDef)
def string_annotation(s, node: ast.AST) -> None:
    """An annotation written as a string is code that ``typing.get_type_hints`` evaluates, out of the scan's sight
    (``functools.singledispatch``'s ``register`` calls it): a string annotation may only name a type
    (``_type_text``: a forward reference such as ``"OrderedDict[Mode, Callable]"``)."""
    ann = node.returns if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else node.annotation
    for sub in ast.walk(ann) if ann is not None else ():
        if type(sub) is ast.Constant and isinstance(sub.value, str) and not _type_text(sub.value):
            s.add("dynamic_code", sub, f"an annotation holds code as text: {sub.value[:60]!r}")


@visits("dynamic_code", ast.keyword)
def eval_str(s, node: ast.keyword) -> None:
    """``inspect.signature(f, eval_str=True)`` and the like evaluate a function's annotations as code."""
    if node.arg == "eval_str":
        s.add("dynamic_code", node, "eval_str= evaluates annotations as code")
