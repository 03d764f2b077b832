"""The tree index of the Python scan: every node in source order, tagged with its parent and its scope."""

from __future__ import annotations

import ast

_FIELDS: dict[type, tuple[str, ...]] = {}
#: fields that never hold a node worth visiting (names, operators, contexts)
_SCALAR_FIELDS = frozenset({"ctx", "type_comment", "op", "ops", "id", "attr", "arg", "name", "names", "module",
                            "level", "kind", "conversion", "is_async", "simple"})


def index(tree: ast.Module) -> tuple[list[ast.AST], dict[int, list[ast.AST]]]:
    """Every node in source pre-order, each tagged with its parent and its scope (module or function).

    Returns the order and, per scope, the nodes that belong to it directly (a nested function's
    body belongs to that function; its decorators and defaults to the enclosing scope).
    """
    order: list[ast.AST] = []
    members: dict[int, list[ast.AST]] = {id(tree): []}
    tree._sb_parent = None
    tree._sb_scope = tree
    stack: list[ast.AST] = [tree]
    AST = ast.AST
    fields_cache = _FIELDS
    func_types = (ast.FunctionDef, ast.AsyncFunctionDef)
    while stack:
        node = stack.pop()
        order.append(node)
        scope = node._sb_scope
        members[id(scope)].append(node)
        t = node.__class__
        fields = fields_cache.get(t)
        if fields is None:
            fields = fields_cache[t] = () if t is ast.Constant else tuple(f for f in t._fields if f not in _SCALAR_FIELDS)
        is_func = t in func_types
        if is_func:
            members[id(node)] = []
        kids: list[ast.AST] = []
        for f in fields:
            v = getattr(node, f, None)
            if v is None:
                continue
            child_scope = node if (is_func and f == "body") else scope
            if v.__class__ is list:
                for x in v:
                    if isinstance(x, AST):
                        x._sb_parent = node
                        x._sb_scope = child_scope
                        kids.append(x)
            elif isinstance(v, AST):
                v._sb_parent = node
                v._sb_scope = child_scope
                kids.append(v)
        kids.reverse()
        stack.extend(kids)
    return order, members


def chain_inner(node: ast.AST) -> bool:
    """Whether ``node`` is the base of an enclosing attribute access (``a`` in ``a.b``)."""
    p = node._sb_parent
    return p.__class__ is ast.Attribute and p.value is node
