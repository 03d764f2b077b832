"""Caches that replay results instead of computing: keyed on tensor addresses or identity, on tensor values, or
on shapes (which only warns)."""

from __future__ import annotations

import ast

from .rules import REJECT, WARN, on_call, rule, setup, src, visits

rule("output_cache_by_pointer", REJECT,
     "Caching results by tensor address or identity replays old outputs instead of computing them.")
rule("value_cache", REJECT,
     "Caching results by tensor values or comparing inputs to stored tensors skips the computation on repeated "
     "inputs.")
rule("shape_cache", WARN,
     "Caches keyed on shapes are normal for autotuning and CUDA graphs but can also replay outputs; the dynamic "
     "checks decide.")

PTR_METHODS = frozenset({"data_ptr", "untyped_storage", "storage", "_cdata"})
PTR_ATTRS = frozenset({"__cuda_array_interface__", "__array_interface__", "_cdata"})
VALUE_METHODS = frozenset({"item", "tolist", "numpy", "tobytes", "sum", "mean", "max", "min", "norm", "std",
                           "var", "prod", "amax", "amin", "any", "all", "nansum", "abs"})
VALUE_FUNCS = frozenset({"hash", "torch.sum", "torch.mean", "torch.max", "torch.min", "torch.norm",
                         "torch.std", "torch.prod", "torch.amax", "torch.amin", "torch.any", "torch.all",
                         "bytes", "numpy.asarray", "numpy.array"})
SHAPE_METHODS = frozenset({"size", "stride", "numel", "dim"})
TENSOR_ATTRS = frozenset({"shape", "dtype", "device", "data_ptr", "numel", "stride", "contiguous",
                          "is_contiguous", "element_size", "is_cuda", "untyped_storage", "storage_offset",
                          "ndim", "new_empty", "new_zeros", "copy_", "zero_", "fill_", "view", "reshape",
                          "transpose", "permute", "float", "half", "bfloat16", "clone", "detach"})
CACHE_DECORATORS = frozenset({"functools.lru_cache", "functools.cache", "functools.cached_property"})
DICT_FACTORIES = frozenset({"dict", "set", "collections.defaultdict", "collections.OrderedDict",
                            "collections.Counter", "weakref.WeakKeyDictionary", "weakref.WeakValueDictionary",
                            "weakref.WeakSet", "frozenset"})
_KEY_METHODS = frozenset({"get", "setdefault", "pop", "__getitem__", "__setitem__", "__contains__"})


# ---- per-file state: containers, memoized functions, stored pointers


@setup
def _containers(s) -> None:
    s.dict_names = set()
    s.dict_attrs = set()
    s.stored_ptr = set()
    s.cached_funcs = set()
    s.tensor_maps = {}
    for tgt, ann in s.annotated:
        a = src(ann).lower()
        if "dict" in a or "mapping" in a or "set[" in a:
            _note_container(s, tgt)
    for tgt, val in s.assigns:
        if isinstance(val, (ast.Dict, ast.DictComp, ast.Set, ast.SetComp)):
            _note_container(s, tgt)
        elif isinstance(val, ast.Call):
            r = s.resolve(val.func)
            if r in DICT_FACTORIES:
                _note_container(s, tgt)
            elif r in CACHE_DECORATORS or (
                isinstance(val.func, ast.Call) and s.resolve(val.func.func) in CACHE_DECORATORS
            ):
                if isinstance(tgt, ast.Name):
                    s.cached_funcs.add(tgt.id)
        if isinstance(tgt, ast.Attribute) or (isinstance(tgt, ast.Name) and tgt.id in s.global_names):
            if "pointer" in _shallow_kinds(val):
                s.stored_ptr.add(tgt.attr if isinstance(tgt, ast.Attribute) else tgt.id)
    for node in s.decorated:
        for d in node.decorator_list:
            f = d.func if isinstance(d, ast.Call) else d
            if s.resolve(f) in CACHE_DECORATORS:
                s.cached_funcs.add(node.name)


def _note_container(s, tgt: ast.AST) -> None:
    if isinstance(tgt, ast.Name):
        s.dict_names.add(tgt.id)
    elif isinstance(tgt, ast.Attribute):
        s.dict_attrs.add(tgt.attr)


def _shallow_kinds(node: ast.AST) -> set[str]:
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            if isinstance(n.func, ast.Attribute) and n.func.attr in PTR_METHODS:
                out.add("pointer")
            elif isinstance(n.func, ast.Name) and n.func.id == "id":
                out.add("pointer")
    return out


def tensor_names(s, scope: ast.AST | None = None) -> set[str]:
    """Names of a scope used as tensors: annotated ``Tensor`` or used with a tensor attribute."""
    scope = scope or s.cur
    key = id(scope)
    t = s.tensor_maps.get(key)
    if t is not None:
        return t
    t = set()
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        for a in scope.args.args + scope.args.kwonlyargs + scope.args.posonlyargs:
            if a.annotation is not None and src(a.annotation).endswith("Tensor"):
                t.add(a.arg)
    for n in s.members.get(key, ()):
        if type(n) is ast.Attribute and n.attr in TENSOR_ATTRS and type(n.value) is ast.Name:
            t.add(n.value.id)
    s.tensor_maps[key] = t
    return t


# ---- key analysis


def kinds(s, node: ast.AST, depth: int = 0) -> set[str]:
    """What a key expression is built from: 'pointer', 'tensor', 'value', 'shape'."""
    out: set[str] = set()
    _kinds(s, node, depth, out, tensor_names(s))
    return out


def _kinds(s, node: ast.AST, depth: int, out: set[str], tensors: set[str]) -> None:
    t = type(node)
    if t is ast.Call:
        f = node.func
        if isinstance(f, ast.Attribute):
            a = f.attr
            if a in PTR_METHODS:
                out.add("pointer")
            elif a in VALUE_METHODS:
                out.add("value")
            elif a in SHAPE_METHODS:
                out.add("shape")
            if not isinstance(f.value, ast.Name):
                _kinds(s, f.value, depth, out, tensors)
        else:
            if (type(f) is ast.Name and depth < 3 and f.id in s.module_defs
                    and not isinstance(s.module_defs[f.id], ast.ClassDef)):
                _helper_kinds(s, s.module_defs[f.id], depth, out)
            r = s.resolve(f)
            if r == "id" or r == "ctypes.addressof":
                out.add("pointer")
                return
            if r in VALUE_FUNCS or (r and r.startswith("hashlib.")):
                out.add("value")
                return
        for a in node.args:
            _kinds(s, a, depth, out, tensors)
        for k in node.keywords:
            _kinds(s, k.value, depth, out, tensors)
        return
    if t is ast.Attribute:
        if node.attr == "shape":
            out.add("shape")
        elif node.attr in PTR_ATTRS:
            out.add("pointer")
        if not isinstance(node.value, ast.Name):
            _kinds(s, node.value, depth, out, tensors)
        return
    if t is ast.Name:
        if node.id in tensors:
            out.add("tensor")
        if depth < 3:
            for v in s.assigned(node.id):
                if v is not node:
                    _kinds(s, v, depth + 1, out, tensors)
        return
    if t in (ast.Lambda, ast.FunctionDef):
        return
    for child in ast.iter_child_nodes(node):
        _kinds(s, child, depth, out, tensors)


def _helper_kinds(s, fn: ast.AST, depth: int, out: set[str]) -> None:
    """What a module-level helper's return values are built from (``key = _fingerprint(x)``)."""
    saved = s.cur
    s.cur = fn
    try:
        tensors = tensor_names(s, fn)
        for n in s.members.get(id(fn), ()):
            if type(n) is ast.Return and n.value is not None:
                _kinds(s, n.value, depth + 1, out, tensors)
    finally:
        s.cur = saved


def _is_container(s, node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return node.id in s.dict_names
    if isinstance(node, ast.Attribute):
        return node.attr in s.dict_attrs
    return False


def check_key(s, key: ast.AST, container: ast.AST, anchor: ast.AST, how: str) -> None:
    ks = kinds(s, key)
    if not ks:
        return
    dictish = _is_container(s, container)
    if "pointer" in ks:
        s.add("output_cache_by_pointer", anchor, f"{how} keyed on a tensor address or identity: {src(key)}")
    elif "tensor" in ks and dictish:
        s.add("output_cache_by_pointer", anchor, f"{how} keyed on a tensor object (hashed by identity): {src(key)}")
    if "value" in ks and dictish:
        s.add("value_cache", anchor, f"{how} keyed on tensor values: {src(key)}")
    elif "shape" in ks and dictish:
        s.add("shape_cache", anchor, f"{how} keyed on shapes: {src(key)}")


_KEYED = ("output_cache_by_pointer", "value_cache", "shape_cache")


# ---- the checks


@visits("output_cache_by_pointer", ast.FunctionDef, ast.AsyncFunctionDef)
def memoized_on_tensors(s, node: ast.FunctionDef) -> None:
    """``@functools.lru_cache`` on a function whose parameters are used as tensors."""
    if node.name in s.cached_funcs and any(
        s.resolve(d.func if isinstance(d, ast.Call) else d) in CACHE_DECORATORS for d in node.decorator_list
    ):
        tensors = tensor_names(s, node)
        for a in node.args.args + node.args.kwonlyargs + node.args.posonlyargs:
            if a.arg in tensors and a.arg not in ("self", "cls"):
                s.add("output_cache_by_pointer", node,
                      f"{node.name} is memoized on tensor parameter {a.arg!r} (hashed by identity)")
                break


@on_call(("output_cache_by_pointer", "value_cache"))
def memoized_call(s, node: ast.Call, r: str | None) -> None:
    f = node.func
    if isinstance(f, ast.Name) and f.id in s.cached_funcs:
        for a in list(node.args) + [k.value for k in node.keywords]:
            ks = kinds(s, a)
            if "pointer" in ks or "tensor" in ks:
                s.add("output_cache_by_pointer", node, f"memoized {f.id}() called with a tensor or its address")
                break
            if "value" in ks:
                s.add("value_cache", node, f"memoized {f.id}() called with tensor values")
                break


@on_call(_KEYED)
def cache_method(s, node: ast.Call, r: str | None) -> None:
    """``cache.get(key)``, ``cache.setdefault(key, ...)``."""
    f = node.func
    if isinstance(f, ast.Attribute) and f.attr in _KEY_METHODS and node.args:
        check_key(s, node.args[0], f.value, node, f"cache .{f.attr}()")


@on_call("value_cache")
def compare_with_stored(s, node: ast.Call, r: str | None) -> None:
    """``torch.equal(x, self._last_x)``, ``x.equal(_LAST)``."""
    f = node.func
    if not isinstance(f, ast.Attribute):
        return
    if f.attr in ("equal", "allclose") or r in ("torch.equal", "torch.allclose"):
        operands = list(node.args) + ([f.value] if r is None else [])
        for o in operands:
            if isinstance(o, ast.Attribute) and s.resolve(o) is None:
                if isinstance(o.value, ast.Name) and o.value.id in ("self", "cls"):
                    s.add("value_cache", node, f"compares an input with a stored tensor {src(o)}")
                    break
            if isinstance(o, ast.Name) and o.id in s.global_names:
                s.add("value_cache", node, f"compares an input with a stored tensor {o.id}")
                break


@visits(_KEYED, ast.Subscript)
def subscript_key(s, node: ast.Subscript) -> None:
    if not isinstance(node.slice, ast.Slice):
        check_key(s, node.slice, node.value, node, "subscript")


@visits(_KEYED, ast.Compare)
def membership_or_identity(s, node: ast.Compare) -> None:
    left = node.left
    for op, right in zip(node.ops, node.comparators):
        if isinstance(op, (ast.In, ast.NotIn)):
            check_key(s, left, right, node, "membership test")
        elif isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)):
            for a, b in ((left, right), (right, left)):
                if _stored_compare(s, a, b, op, node):
                    break
        left = right


def _stored_compare(s, a: ast.AST, b: ast.AST, op: ast.cmpop, node: ast.AST) -> bool:
    """``x.data_ptr() == self._last_ptr`` or ``x is self._last_x``: a one-entry cache by identity."""
    if isinstance(b, ast.Attribute):
        if s.resolve(b) is not None:
            return False
        stored = (isinstance(b.value, ast.Name) and b.value.id in ("self", "cls")) or b.attr in s.stored_ptr
    elif isinstance(b, ast.Name):
        stored = b.id in s.global_names
    else:
        return False
    if not stored:
        return False
    if "pointer" in kinds(s, a):
        s.add("output_cache_by_pointer", node, f"compares a tensor address with a stored one: {src(node)}")
        return True
    if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(a, ast.Name) and a.id in tensor_names(s):
        s.add("output_cache_by_pointer", node, f"compares a tensor's identity with a stored one: {src(node)}")
        return True
    return False


@visits(("output_cache_by_pointer", "value_cache"), ast.Dict)
def dict_display_key(s, node: ast.Dict) -> None:
    for k in node.keys:
        if k is not None:
            ks = kinds(s, k)
            if "pointer" in ks:
                s.add("output_cache_by_pointer", node, f"dict keyed on a tensor address or identity: {src(k)}")
            elif "value" in ks:
                s.add("value_cache", node, f"dict keyed on tensor values: {src(k)}")
