"""Judge a candidate's outputs against the reference and its float64 anchor.

An element matches when |out - anchor| <= atol + rtol * |anchor| + 2 * |ref - anchor|:
the candidate may be as far from exact as twice the reference's own rounding,
plus the dtype's tolerance. Integers and bools must be exact. NaN/Inf where the
anchor is finite never match. An all-zero output fails when the anchor is not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from solbench.problems.definition import Tolerance

DEFAULT_TOLERANCE: dict[str, Tolerance] = {
    "float64": Tolerance(atol=1e-8, rtol=1e-7, matched_ratio=1.0),
    "float32": Tolerance(atol=1e-5, rtol=1e-4, matched_ratio=1.0),
    "float16": Tolerance(atol=1e-3, rtol=1e-3, matched_ratio=0.999),
    "bfloat16": Tolerance(atol=1e-2, rtol=1.6e-2, matched_ratio=0.99),
    "float8_e4m3fn": Tolerance(atol=5e-3, rtol=2e-2, matched_ratio=0.95, max_abs_error=1.0),
    "float8_e5m2": Tolerance(atol=5e-3, rtol=2e-2, matched_ratio=0.95, max_abs_error=1.0),
}
TF32_TOLERANCE = Tolerance(atol=1e-4, rtol=2e-3, matched_ratio=1.0)


def tolerance_for(dtype: str, *layers: Tolerance | None, tf32: bool = False) -> Tolerance:
    """Defaults for the dtype, then each non-null field of each layer (definition, then workload) wins."""
    base = TF32_TOLERANCE if (tf32 and dtype == "float32") else DEFAULT_TOLERANCE.get(dtype, Tolerance(atol=0, rtol=0, matched_ratio=1.0))
    merged = base.model_dump()
    for layer in layers:
        if layer is None:
            continue
        for k, v in layer.model_dump().items():
            if v is not None:
                merged[k] = v
    return Tolerance(**merged)


@dataclass
class Check:
    verdict: str = "passed"  # passed | incorrect_shape | incorrect_dtype | incorrect_numerical
    reason: str | None = None
    code: str | None = None  # a finer reason code where one applies
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    worst: dict[str, Any] = field(default_factory=dict)  # output, index, got, expected

    @property
    def ok(self) -> bool:
        return self.verdict == "passed"


def _fail(verdict: str, reason: str, **kw) -> Check:
    return Check(verdict=verdict, reason=reason, **kw)


def compare_output(name: str, got: Any, ref: Any, anchor: Any, dtype: torch.dtype, tol: Tolerance) -> Check:
    if not isinstance(ref, torch.Tensor):  # a Python scalar output
        if isinstance(got, torch.Tensor):
            if got.numel() != 1:
                return _fail("incorrect_shape", f"{name}: expected a scalar, got shape {tuple(got.shape)}")
            got = got.item()
        try:
            err = abs(float(got) - float(anchor))
        except (TypeError, ValueError):
            return _fail("incorrect_dtype", f"{name}: expected a number, got {type(got).__name__}")
        bound = (tol.atol or 0) + (tol.rtol or 0) * abs(float(anchor)) + 2 * abs(float(ref) - float(anchor))
        if not err <= bound:
            return _fail("incorrect_numerical", f"{name}: {got} vs {anchor}", max_abs_err=err)
        return Check(max_abs_err=err)
    if type(got) is not torch.Tensor:  # exact type: no subclasses, no lazy wrappers
        return _fail("incorrect_dtype", f"{name}: expected a torch.Tensor, got {type(got).__name__}")
    if tuple(got.shape) != tuple(ref.shape):
        return _fail("incorrect_shape", f"{name}: expected shape {tuple(ref.shape)}, got {tuple(got.shape)}")
    if got.dtype != dtype:
        return _fail("incorrect_dtype", f"{name}: expected dtype {dtype}, got {got.dtype}")
    if got.device.type != ref.device.type:
        return _fail("incorrect_dtype", f"{name}: expected a tensor on {ref.device.type}, got {got.device.type}")
    if got.numel() == 0:
        return Check()
    if not (got.is_floating_point() or got.is_complex()):
        diff = got.ne(ref)
        n_bad = int(diff.sum())
        if n_bad:
            idx = int(diff.flatten().nonzero()[0])
            return _fail("incorrect_numerical", f"{name}: {n_bad} of {got.numel()} values differ",
                         max_abs_err=float("inf"),
                         worst={"output": name, "index": _unravel(idx, got.shape),
                                "got": got.flatten()[idx].item(), "expected": ref.flatten()[idx].item()})
        return Check()
    # the errors of a 16- or 8-bit output are exact enough in fp32 (24 mantissa bits against at most 11), at half
    # the memory traffic of fp64 over outputs of hundreds of millions of elements; wider outputs use fp64
    wide = torch.float64 if got.dtype.itemsize >= 4 else torch.float32
    g = got.to(wide)
    a = anchor.to(wide) if isinstance(anchor, torch.Tensor) else ref.to(wide)
    r = ref.to(wide)
    finite_anchor = torch.isfinite(a)
    bad_special = (~torch.isfinite(g)) & finite_anchor
    err = (g - a).abs()
    # a NaN where the anchor is finite is an infinite error (a NaN error would vanish from every max() below)
    err = torch.where(finite_anchor, err.nan_to_num(nan=float("inf")),
                      torch.where(g.eq(a) | (g.isnan() & a.isnan()), 0.0, float("inf")))
    allowed = (tol.atol or 0.0) + (tol.rtol or 0.0) * a.abs() + 2.0 * (r - a).abs().nan_to_num(0.0, 0.0, 0.0)
    ok = err <= allowed
    n_ok, n_all = int(ok.sum()), ok.numel()  # counted exactly: a float mean of 16M ones can round below 1.0
    ratio = n_ok / n_all
    flat_err = err.flatten()
    worst_i = int(torch.argmax(torch.where(torch.isfinite(flat_err), flat_err - allowed.flatten(), torch.full_like(flat_err, float("inf")))))
    max_abs = float(flat_err.max())
    rel = (err / a.abs().clamp_min(1e-12))
    max_rel = float(rel.max())
    worst = {"output": name, "index": _unravel(worst_i, got.shape),
             "got": float(g.flatten()[worst_i]), "expected": float(a.flatten()[worst_i]),
             "allowed": float(allowed.flatten()[worst_i])}
    kw = dict(max_abs_err=max_abs, max_rel_err=max_rel, worst=worst)
    if bool(bad_special.any()):
        n = int(bad_special.sum())
        return _fail("incorrect_numerical", f"{name}: {n} NaN/Inf values where the reference is finite", **kw)
    if bool(a.ne(0).any()) and not bool(g.ne(0).any()):
        return _fail("incorrect_numerical", f"{name}: all zeros while the reference is not", **kw)
    need = tol.matched_ratio if tol.matched_ratio is not None else 1.0
    if n_ok < math.ceil(need * n_all - 1e-9):
        return _fail("incorrect_numerical",
                     f"{name}: {ratio:.4%} of elements within tolerance, {need:.2%} required", **kw)
    if tol.max_abs_error is not None and max_abs > tol.max_abs_error:
        return _fail("incorrect_numerical", f"{name}: max error {max_abs:.3g} above the cap {tol.max_abs_error}", **kw)
    return Check(**kw)


def _unravel(flat: int, shape) -> list[int]:
    idx = []
    for dim in reversed(tuple(shape)):
        idx.append(flat % dim if dim else 0)
        flat //= dim if dim else 1
    return list(reversed(idx))


_FP8_MANTISSA = {torch.float8_e4m3fn: (3, -6), torch.float8_e5m2: (2, -14)}


def _fp8_within_ulps(name: str, got: torch.Tensor, ref: torch.Tensor, ulps: float) -> Check:
    """fp8 outputs: each element within ``ulps`` steps of the reference's value (rounding ties may differ)."""
    mant, min_exp = _FP8_MANTISSA[ref.dtype]
    g, r = got.to(torch.float64), ref.to(torch.float64)
    exp = torch.floor(torch.log2(r.abs().clamp_min(2.0 ** min_exp))).clamp_min(min_exp)
    step = torch.pow(2.0, exp - mant)
    err = (g - r).abs()
    bad = ~(err <= ulps * step) & ~(g.isnan() & r.isnan())
    if bool(bad.any()):
        i = int(bad.flatten().nonzero()[0])
        return _fail("incorrect_numerical", f"{name}: {int(bad.sum())} fp8 values more than {ulps:g} step(s) off",
                     max_abs_err=float(err.max()), worst={"output": name, "index": _unravel(i, got.shape),
                                                          "got": float(g.flatten()[i]), "expected": float(r.flatten()[i])})
    return Check(max_abs_err=float(err.max()) if err.numel() else 0.0)


def accept_alternative(check: Check, accept: Any, inputs: dict[str, Any], outputs: list[Any],
                       refs: list[Any], dtypes: list[torch.dtype] | None = None) -> Check:
    """A failed elementwise ``check`` reconsidered by the problem's ``accept`` (its custom_check_entrypoint), which
    may recognise another valid answer. Only wrong values are reconsidered: every output must first have the
    exact type, shape, dtype and device the reference's has (``check`` stops at the first output it fails)."""
    if check.ok or accept is None or check.verdict != "incorrect_numerical" or len(outputs) != len(refs):
        return check
    for i, (got, ref) in enumerate(zip(outputs, refs)):
        if isinstance(ref, torch.Tensor):
            want = dtypes[i] if dtypes is not None and i < len(dtypes) else ref.dtype
            if type(got) is not torch.Tensor or tuple(got.shape) != tuple(ref.shape) or got.dtype != want \
                    or got.device.type != ref.device.type:
                return check
    try:
        why = accept(inputs, list(outputs), list(refs))
    except Exception as exc:  # the outputs were so far off that the problem's own check could not read them
        why = f"{type(exc).__name__}: {exc}"
    if why is None:  # another valid answer: the elementwise errors against the reference's answer mean nothing
        return Check(code="accepted_alternative")
    check.reason = f"{check.reason}; not another valid answer either: {str(why)[:200]}"
    return check


def compare(outputs: list[Any], refs: list[Any], anchors: list[Any], names: list[str],
            dtypes: list[torch.dtype], tols: list[Tolerance], modes: list[dict | None] | None = None,
            inputs: dict[str, Any] | None = None) -> Check:
    """Judge every output; ``modes`` (per output, from the definition's ``compare``) replace elementwise
    closeness where it is the wrong test, and may need the call's pristine ``inputs``."""
    if len(outputs) != len(refs):
        return _fail("incorrect_shape", f"expected {len(refs)} outputs, got {len(outputs)}")
    modes = modes or [None] * len(outputs)
    total = Check()
    for got, ref, anchor, name, dt, tol, mode in zip(outputs, refs, anchors, names, dtypes, tols, modes):
        kind = (mode or {}).get("mode")
        if kind and isinstance(got, torch.Tensor) and isinstance(ref, torch.Tensor) and \
                tuple(got.shape) == tuple(ref.shape) and got.dtype == dt:
            dim = int(mode.get("dim", -1))
            if kind == "set":
                got, ref = torch.sort(got, dim=dim).values, torch.sort(ref, dim=dim).values
                anchor = torch.sort(anchor, dim=dim).values if isinstance(anchor, torch.Tensor) else anchor
            elif kind == "fp8_ulp":
                c = _fp8_within_ulps(name, got, ref, float(mode.get("ulps", 1)))
                if not c.ok:
                    return c
                continue
            elif kind == "indices_of" and inputs is not None:
                src = inputs[mode["input"]]
                n = src.shape[dim]
                if bool(((got < 0) | (got >= n)).any()):
                    return _fail("incorrect_numerical", f"{name}: indices outside [0, {n})")
                if got.shape[dim] > 1:
                    ordered = torch.sort(got, dim=dim).values
                    if bool((ordered.narrow(dim, 1, got.shape[dim] - 1)
                             == ordered.narrow(dim, 0, got.shape[dim] - 1)).any()):
                        # top-k and sort pick each position once: a repeated index would let one tied value
                        # stand in for another
                        return _fail("incorrect_numerical", f"{name}: the same index picked twice along dim {dim}")
                src64 = src.to(torch.float64)
                picked = torch.gather(src64, dim, got.to(torch.int64))
                # the input at the candidate's indices must equal the input at the reference's: exactly unless the
                # mode gives a tolerance (ties between equal values pass; an approximate sort does not)
                expected = torch.gather(src64, dim, ref.to(torch.int64))
                c = compare_output(f"{name} (inputs at these indices)", picked, expected, expected, torch.float64,
                                   Tolerance(atol=float(mode.get("atol", 0.0)), rtol=float(mode.get("rtol", 0.0)),
                                             matched_ratio=1.0))
                if not c.ok:
                    return c
                continue
        c = compare_output(name, got, ref, anchor, dt, tol)
        if not c.ok:
            return c
        if c.max_abs_err >= total.max_abs_err:
            total.worst = c.worst
        total.max_abs_err = max(total.max_abs_err, c.max_abs_err)
        total.max_rel_err = max(total.max_rel_err, c.max_rel_err)
    return total
