"""Count the work a reference does, by tracing it on fake tensors (no memory is allocated).

A ``TorchDispatchMode`` sees every aten op the reference runs on FakeTensors and
accumulates:

- matrix FLOPs (2 x MACs of matmuls, convolutions, attention and recurrent
  layers; the rules are in ``rules.py``), keyed by the precision the operands
  *arrived in*: a bf16 input upcast to fp32 before a matmul still counts as a
  bf16 matmul, because a kernel can feed the bf16 data to the tensor cores with
  fp32 accumulation. fp32 products count as ``matmul_fp32`` (``tensor_tf32``
  where the problem allows TF32), which the roofline may place on the FMA units
  or on tensor cores through an fp32-accurate emulation;
- vector FLOPs (one per output element of elementwise ops, one per input
  element of reductions);
- special-function ops (exp, log, tanh, erf, rsqrt, ...), one per element;
- minimum DRAM bytes: each input element the computation uses, once (a view
  counts only the elements it covers; a gather only the rows it touches), and
  each output element once. In-place inputs count what is written to them.

These are lower bounds of what any correct kernel must do, given the
reference's algorithm; a definition's ``sol`` override replaces any of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from solbench.analysis.rules import _NARROW, RULES, bind, matmul_unit, narrowest

aten = torch.ops.aten

_SFU = {
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "tanh", "sigmoid", "erf", "erfc", "erfinv",
    "sin", "cos", "tan", "rsqrt", "sqrt", "pow", "reciprocal", "atan", "atan2", "sinh", "cosh", "asin",
    "acos", "softplus", "silu", "gelu", "mish", "logit", "lgamma", "digamma",
}
# ops with one transcendental per element *plus* vector work
_SOFTMAX = {"_softmax", "_log_softmax", "softmax", "log_softmax", "_safe_softmax"}
_MOVEMENT = {
    "view", "_unsafe_view", "reshape", "permute", "transpose", "t", "expand", "slice", "select", "unsqueeze",
    "squeeze", "as_strided", "alias", "detach", "lift_fresh", "clone", "contiguous", "_to_copy", "to", "copy",
    "copy_", "cat", "stack", "split", "split_with_sizes", "chunk", "unbind", "narrow", "flip", "roll", "repeat",
    "index", "index_select", "gather", "embedding", "empty", "empty_like", "empty_strided", "zeros", "zeros_like",
    "ones", "ones_like", "full", "full_like", "fill", "fill_", "zero_", "new_empty", "new_zeros", "new_ones",
    "new_full", "arange", "scalar_tensor", "index_put", "index_put_", "index_copy", "index_copy_", "scatter",
    "scatter_", "_reshape_alias", "view_as_real", "view_as_complex", "diagonal", "tril", "triu", "pad",
    "constant_pad_nd", "masked_fill", "masked_fill_", "where", "resize_", "set_", "_local_scalar_dense",
    "lift_fresh_copy", "unfold", "movedim", "broadcast_to", "_unsafe_index", "split_with_sizes_copy",
    "slice_scatter", "select_scatter", "topk", "sort", "argsort", "argmax", "argmin", "one_hot",
    "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "dim", "is_same_size", "item",
}
_REDUCTION = {"sum", "mean", "amax", "amin", "max", "min", "prod", "var", "std", "var_mean", "norm",
              "linalg_vector_norm", "logsumexp", "cumsum", "cumprod", "nansum", "all", "any"}
# ops that look at a tensor's metadata (or only its shape) and read none of its data
_NO_READ = {"device", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "dim", "is_same_size", "layout",
            "empty_like", "zeros_like", "ones_like", "full_like", "new_empty", "new_zeros", "new_ones", "new_full",
            "empty_strided", "size", "stride", "numel", "is_contiguous", "storage_offset"}
_GATHER = {"index", "index_select", "gather", "embedding", "_unsafe_index"}
_SCATTER_WRITE = {"index_put_", "index_put", "index_copy_", "index_copy", "scatter_", "scatter", "slice_scatter",
                  "select_scatter"}

@dataclass
class WorkCount:
    flops: dict[str, float] = field(default_factory=dict)  # unit -> count (includes "sfu")
    bytes_read: float = 0.0
    bytes_written: float = 0.0
    ops: dict[str, int] = field(default_factory=dict)  # aten op name -> calls, for inspection
    failed: dict[str, int] = field(default_factory=dict)  # op name -> calls its rule could not count

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written

    def add(self, unit: str, n: float) -> None:
        if n:
            self.flops[unit] = self.flops.get(unit, 0.0) + float(n)


def _op_name(func) -> str:
    name = func.__name__ if hasattr(func, "__name__") else str(func)
    return name.split(".")[0]


class _Tracer(TorchDispatchMode):
    def __init__(self, roots: dict[int, tuple[str, torch.Tensor]], allow_tf32: bool):
        super().__init__()
        self.roots = roots  # id(tensor) -> (input name, root tensor)
        self.origin: dict[int, int] = {}  # id(view/derived tensor) -> id(root) (views only)
        self.precision: dict[int, torch.dtype] = {}  # id(tensor) -> narrowest dtype its values came in
        self.keep: list[Any] = []  # hold references so ids stay unique
        self.read_elems: dict[int, float] = {}  # root id -> elements read
        self.write_elems: dict[int, float] = {}  # root id -> elements written in place
        self.count = WorkCount()
        self.allow_tf32 = allow_tf32

    # -- identity helpers --------------------------------------------------
    def _root(self, t: Any) -> int | None:
        if not isinstance(t, torch.Tensor):
            return None
        tid = id(t)
        if tid in self.roots:
            return tid
        return self.origin.get(tid)

    def _prec(self, t: torch.Tensor) -> torch.dtype:
        return self.precision.get(id(t), t.dtype)

    def _read(self, root: int, elems: float) -> None:
        self.read_elems[root] = self.read_elems.get(root, 0.0) + elems

    # -- the hook ------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        try:
            self._account(func, args, kwargs, out)
        except Exception:  # accounting must never break the trace
            pass
        return out

    def _account(self, func, args, kwargs, out) -> None:
        name = _op_name(func)
        self.count.ops[name] = self.count.ops.get(name, 0) + 1
        if name in _NO_READ:
            return
        flat_args, _ = tree_flatten((args, kwargs))
        flat_out, _ = tree_flatten(out)
        out_tensors = [o for o in flat_out if isinstance(o, torch.Tensor)]
        self.keep.extend(out_tensors)
        schema = getattr(func, "_schema", None)

        # 1. aliasing: outputs that are views of an argument inherit its root
        is_view = schema is not None and any(r.alias_info is not None for r in schema.returns)
        first = args[0] if args else None
        if is_view and isinstance(first, torch.Tensor) and not name.endswith("_"):
            r = self._root(first)
            for o in out_tensors:
                if r is not None:
                    self.origin[id(o)] = r
                self.precision[id(o)] = self._prec(first)
            return

        # 2. precision provenance through conversions
        if name in ("_to_copy", "to", "clone", "contiguous", "copy", "_unsafe_view", "lift_fresh_copy") and isinstance(first, torch.Tensor):
            src = self._prec(first)
            for o in out_tensors:
                if _NARROW.get(src, 9) < _NARROW.get(o.dtype, 9):
                    self.precision[id(o)] = src

        # 3. matrix work by rule (rules.py); a rule may say which input elements the op reads
        rule = RULES.get(name)
        reads = None
        if rule is not None and out_tensors:
            try:
                reads = rule(self, name, bind(func, args, kwargs), args, out_tensors)
            except Exception:  # a rule that cannot read this call counts nothing for it (a lower bound still)
                self.count.failed[name] = self.count.failed.get(name, 0) + 1
        if reads is not None:
            for t, n in reads:
                r = self._root(t)
                if r is not None:
                    self._read(r, n)
            return

        # 4. bytes: reads of input-derived tensors
        gather_src = None
        if name in _GATHER and args:
            gather_src = args[0]
        mutated = args[0] if (name.endswith("_") and args and isinstance(args[0], torch.Tensor)) else None
        for a in flat_args:
            if not isinstance(a, torch.Tensor):
                continue
            r = self._root(a)
            if r is None:
                continue
            if a is mutated:
                # in-place write into an input
                if name in _SCATTER_WRITE:
                    vals = args[-1] if isinstance(args[-1], torch.Tensor) else None
                    n = vals.numel() if vals is not None else a.numel()
                else:
                    n = a.numel()
                self.write_elems[r] = self.write_elems.get(r, 0.0) + n
                if name not in _SCATTER_WRITE and name not in ("copy_", "fill_", "zero_"):
                    self._read(r, a.numel())  # read-modify-write
                continue
            if a is gather_src and out_tensors:
                self._read(r, out_tensors[0].numel())
            else:
                self._read(r, a.numel())

        # 5. vector and special-function work
        if rule is None:
            self._flops(name, args, kwargs, out_tensors)

    # -- what rules see ------------------------------------------------------
    def add(self, unit: str, n: float) -> None:
        self.count.add(unit, n)

    def unit(self, *tensors) -> str:
        """The matrix unit of a product of these operands: the narrowest precision they arrived in."""
        return matmul_unit(narrowest([self._prec(t) for t in tensors if isinstance(t, torch.Tensor)]), self.allow_tf32)

    def _flops(self, name: str, args, kwargs, outs: list[torch.Tensor]) -> None:
        c = self.count
        if not outs:
            return
        n_out = sum(o.numel() for o in outs if o.is_floating_point())
        if name in _MOVEMENT:
            return
        if name in _SOFTMAX:
            c.add("sfu", n_out)
            c.add("vector_fp32", 4 * n_out)
            return
        if name in ("native_layer_norm", "native_group_norm", "native_batch_norm", "_native_batch_norm_legit",
                    "rms_norm", "_fused_rms_norm"):
            c.add("vector_fp32", 5 * outs[0].numel())
            c.add("sfu", outs[-1].numel() if len(outs) > 1 else 0)
            return
        if name in _REDUCTION:
            inp = args[0] if args and isinstance(args[0], torch.Tensor) else None
            c.add("vector_fp32", inp.numel() if inp is not None else n_out)
            if name == "logsumexp" and inp is not None:
                c.add("sfu", inp.numel())
            return
        base = name.rstrip("_")
        if base == "pow" and len(args) > 1 and isinstance(args[1], (int, float)) and float(args[1]).is_integer() \
                and abs(args[1]) <= 4:
            c.add("vector_fp32", n_out * max(1, abs(int(args[1])) - 1))  # x**2 is a multiply
            return
        if base in _SFU:
            c.add("sfu", n_out)
            if base in ("silu", "gelu", "softplus", "mish"):
                c.add("vector_fp32", 2 * n_out)
            return
        c.add("vector_fp32", n_out)


def trace_counts(run, fake_inputs: list[Any], input_names: list[str], allow_tf32: bool = False,
                 output_dtypes: list[torch.dtype] | None = None) -> WorkCount:
    """Run ``run(*fake_inputs)`` under the tracer (caller enters the FakeTensorMode)."""
    roots = {id(t): (n, t) for n, t in zip(input_names, fake_inputs) if isinstance(t, torch.Tensor)}
    tracer = _Tracer(roots, allow_tf32)
    with tracer:
        result = run(*fake_inputs)
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    count = tracer.count
    for rid, elems in tracer.read_elems.items():
        root = tracer.roots[rid][1]
        count.bytes_read += min(elems, root.numel()) * root.element_size()
    for rid, elems in tracer.write_elems.items():
        root = tracer.roots[rid][1]
        count.bytes_written += min(elems, root.numel()) * root.element_size()
    for i, o in enumerate(outs):
        if isinstance(o, torch.Tensor):
            size = torch.empty((), dtype=output_dtypes[i]).element_size() if output_dtypes and i < len(output_dtypes) else o.element_size()
            count.bytes_written += o.numel() * size
    return count
