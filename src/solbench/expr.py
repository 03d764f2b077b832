"""Safe arithmetic over named integers.

Axis expressions (``"hidden_size // num_heads"``), constraints
(``"H_qo == H_kv * H_r"``) and SOL overrides (``"2 * M * N * K"``) are strings
in problem files; they are evaluated here with a small AST walker, never with
``eval``.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Mapping

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg, ast.Not: operator.not_}
_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_FUNCS = {
    "min": min,
    "max": max,
    "ceil": math.ceil,
    "floor": math.floor,
    "log2": math.log2,
    "sqrt": math.sqrt,
    "cdiv": lambda a, b: -(-a // b),
    "abs": abs,
}


class ExprError(ValueError):
    """An expression that cannot be parsed or evaluated."""


def evaluate(expression: str | int | float, names: Mapping[str, int | float]) -> int | float | bool:
    """Evaluate ``expression`` with ``names`` bound; numbers pass through."""
    if isinstance(expression, (int, float)):
        return expression
    try:
        tree = ast.parse(str(expression), mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"cannot parse expression {expression!r}") from exc
    return _eval(tree.body, names, str(expression))


def names_in(expression: str) -> set[str]:
    """Names an expression refers to (function names excluded)."""
    try:
        tree = ast.parse(str(expression), mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"cannot parse expression {expression!r}") from exc
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - called


def _eval(node: ast.AST, names: Mapping[str, int | float], src: str):
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise ExprError(f"unknown name {node.id!r} in expression {src!r}")
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](_eval(node.left, names, src), _eval(node.right, names, src))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand, names, src))
    if isinstance(node, ast.BoolOp):
        values = [_eval(v, names, src) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, names, src)
        for op, comp in zip(node.ops, node.comparators):
            if type(op) not in _COMPARE:
                raise ExprError(f"unsupported comparison in {src!r}")
            right = _eval(comp, names, src)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return _eval(node.body if _eval(node.test, names, src) else node.orelse, names, src)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS and not node.keywords:
        return _FUNCS[node.func.id](*[_eval(a, names, src) for a in node.args])
    raise ExprError(f"unsupported syntax in expression {src!r}")
