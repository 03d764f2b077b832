"""Whether the solution's own kernel does the work: PyTorch fallbacks, PyTorch compute inside a DSL solution, and
library calls the problem forbids."""

from __future__ import annotations

import ast
import re

from .rules import REJECT, WARN, on_call, on_ident, on_name, rule, setup, visits

rule("reference_fallback", REJECT, "An exception handler that computes with PyTorch hides a kernel that does not work.")
rule("forbidden_call", REJECT, "The problem forbids this library call; using it means the kernel was not written.")
rule("torch_compute_in_dsl", WARN,
     "Heavy PyTorch compute inside a DSL or CUDA solution may mean the custom kernel does not do the work.")

#: heavy PyTorch compute (exact names, or prefixes ending with ".")
TORCH_HEAVY = frozenset(
    "torch.matmul torch.mm torch.bmm torch.einsum torch.addmm torch.addbmm torch.baddbmm torch.addmv torch.mv "
    "torch.chain_matmul torch.tensordot torch.conv1d torch.conv2d torch.conv3d torch.conv_transpose1d "
    "torch.conv_transpose2d torch.conv_transpose3d torch.convolution torch.softmax torch.log_softmax "
    "torch.layer_norm torch.group_norm torch.batch_norm torch.instance_norm torch.rms_norm torch.cdist "
    "torch._scaled_mm torch.compile torch.Tensor.matmul torch.Tensor.mm torch.Tensor.bmm torch.Tensor.softmax".split()
)
TORCH_HEAVY_PREFIXES = ("torch.nn.functional.", "torch.ops.aten.", "torch._C._nn.", "torch.linalg.", "torch.fft.",
                        "torch._C._VariableFunctions.")
HEAVY_METHODS = frozenset({"matmul", "mm", "bmm", "softmax", "log_softmax", "einsum", "addmm", "baddbmm"})
_NN_NOT_COMPUTE = frozenset({"Module", "Parameter", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
                             "Buffer", "Identity"})
#: where the same ATen operator is reachable from Python: forbidding ``torch.X`` forbids all of these
TORCH_OP_NAMESPACES = ("torch", "torch.ops.aten", "torch._C._nn", "torch._C._VariableFunctions", "torch.Tensor",
                       "torch.nn.functional", "torch.special", "torch.linalg")
_REF_NAME = re.compile(r"reference|(?:^|_)ref(?:_|$)", re.IGNORECASE)


def is_heavy(name: str) -> bool:
    if name in TORCH_HEAVY or name.startswith(TORCH_HEAVY_PREFIXES):
        return True
    if name.startswith("torch.nn.") and name.count(".") == 2:
        leaf = name.rsplit(".", 1)[1]
        return leaf[:1].isupper() and leaf not in _NN_NOT_COMPUTE
    return False


def _decorator_name(s, d: ast.AST) -> str | None:
    return s.resolve(d.func if isinstance(d, ast.Call) else d)


# ---- forbidden calls (the problem's policy)


@setup
def _forbidden(s) -> None:
    forbid = {f for f in s.policy.forbid_calls if "::" not in f}
    s.forbid_plain = {f for f in forbid if "." not in f and not f.endswith("*")}
    exact = {f for f in forbid if not f.endswith("*") and "." in f}
    for f in list(exact):
        if f.startswith("torch."):
            leaf = f.rsplit(".", 1)[1]
            exact.update(f"{ns}.{leaf}" for ns in TORCH_OP_NAMESPACES)
    s.forbid_exact = exact
    s.forbid_prefix = tuple(f.rstrip("*") for f in forbid if f.endswith("*"))
    s.forbid_methods = {f[len("torch."):] for f in exact if f.startswith("torch.") and f.count(".") == 1}
    s.forbid_matmul = bool(exact & {"torch.matmul", "torch.mm", "torch.bmm"})


@on_name("forbidden_call", when=lambda s: bool(s.forbid_exact or s.forbid_prefix))
def forbidden_name(s, name: str, node: ast.AST, what: str) -> None:
    hit = name in s.forbid_exact or (s.forbid_prefix and name.startswith(s.forbid_prefix))
    if not hit and "." in name:
        parts = name.split(".")
        hit = any(".".join(parts[:i]) in s.forbid_exact for i in range(2, len(parts)))
    if hit:
        s.add("forbidden_call", node, f"uses {name}, which this problem forbids")


@on_ident("forbidden_call", when=lambda s: bool(s.forbid_plain))
def forbidden_identifier(s, ident: str, node: ast.AST) -> None:
    if ident in s.forbid_plain:
        s.add("forbidden_call", node, f"uses {ident}, which this problem forbids")


@on_call("forbidden_call", "getattr", "ctypes.CDLL", when=lambda s: bool(s.forbid_plain))
def forbidden_by_string(s, node: ast.Call, r: str) -> None:
    """``getattr(lib, "cublasGemmEx")``."""
    if len(node.args) >= 2:
        n = s.fold(node.args[1])
        if n in s.forbid_plain:
            s.add("forbidden_call", node, f"uses {n}, which this problem forbids")


@on_call("forbidden_call", when=lambda s: bool(s.forbid_methods))
def forbidden_method(s, node: ast.Call, r: str | None) -> None:
    f = node.func
    if r is None and isinstance(f, ast.Attribute) and f.attr in s.forbid_methods:
        s.add("forbidden_call", node,
              f"calls .{f.attr}(), the method form of torch.{f.attr}, which this problem forbids")


# ---- PyTorch compute in a DSL solution


@visits("torch_compute_in_dsl", ast.FunctionDef, ast.AsyncFunctionDef, when=lambda s: s.dsl)
def heavy_decorator(s, node: ast.FunctionDef) -> None:
    for d in node.decorator_list:
        r = _decorator_name(s, d)
        if r and is_heavy(r):
            s.add("torch_compute_in_dsl", d, f"decorates {node.name} with {r} in a non-PyTorch solution")


@on_call("torch_compute_in_dsl", when=lambda s: s.dsl)
def heavy_call(s, node: ast.Call, r: str | None) -> None:
    if r is None:
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in HEAVY_METHODS:
            s.add("torch_compute_in_dsl", node, f"calls .{f.attr}() in a non-PyTorch solution")
    elif is_heavy(r):
        s.add("torch_compute_in_dsl", node, f"calls {r} in a non-PyTorch solution")


@visits(("torch_compute_in_dsl", "forbidden_call"), ast.BinOp)
def matmul_operator(s, node: ast.BinOp) -> None:
    if isinstance(node.op, ast.MatMult):
        if s.dsl:
            s.add("torch_compute_in_dsl", node, "uses the @ operator in a non-PyTorch solution")
        if s.forbid_matmul:
            s.add("forbidden_call", node, "uses the @ operator, i.e. torch.matmul, which this problem forbids")


# ---- fallbacks to PyTorch


@visits("reference_fallback", ast.Try, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))
def exception_fallback(s, node: ast.Try) -> None:
    for body in [h.body for h in node.handlers] + [node.orelse]:
        for stmt in body:
            hit = _fallback_in(s, stmt)
            if hit:
                s.add("reference_fallback", hit[0], f"exception path computes with {hit[1]}")
                break


def _fallback_in(s, stmt: ast.AST) -> tuple[ast.AST, str] | None:
    helpers = _helpers(s)
    for n in ast.walk(stmt):
        if isinstance(n, ast.Call):
            r = s.resolve(n.func)
            if r and is_heavy(r) and r != "torch.compile":
                return n, r
            f = n.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name:
                if r is None and isinstance(f, ast.Attribute) and name in HEAVY_METHODS:
                    return n, f".{name}()"
                if _REF_NAME.search(name):
                    return n, f"{name}()"
                if isinstance(f, ast.Name) and name in helpers:
                    return n, f"{name}() (which calls PyTorch compute)"
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult):
            return n, "the @ operator"
    return None


def _helpers(s) -> set[str]:
    """Module-level functions whose bodies call heavy PyTorch compute directly."""
    if s.heavy_helpers is None:
        s.heavy_helpers = set()
        for name, d in s.module_defs.items():
            if isinstance(d, ast.ClassDef) or any(
                isinstance(dec, (ast.Attribute, ast.Name)) and (s.resolve(dec) or "").startswith("triton.")
                for dec in d.decorator_list
            ):
                continue
            for n in ast.walk(d):
                if isinstance(n, ast.Call):
                    r = s.resolve(n.func)
                    if r and is_heavy(r) and r != "torch.compile":
                        s.heavy_helpers.add(name)
                        break
                elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult):
                    s.heavy_helpers.add(name)
                    break
    return s.heavy_helpers


@setup
def _no_helpers_yet(s) -> None:
    s.heavy_helpers = None
