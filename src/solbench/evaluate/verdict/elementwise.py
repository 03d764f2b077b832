"""One floating output's elementwise statistics against its anchor (``correctness.compare_output``): how many
elements pass the test, NaN/Inf where the anchor is finite, the largest absolute and relative errors and the worst
element.

On the CPU the output is read in chunks of ``CPU_CHUNK`` elements: each chunk's temporaries (a dozen of them, in
float64 for 32-bit outputs) stay in the processor's caches instead of streaming through memory once per operation,
and the comparison's memory stays a few megabytes over outputs of hundreds of millions of elements. On the GPU a
chunk is ``GPU_CHUNK`` elements (each operation one kernel over it): most outputs are one chunk, and the
temporaries of the largest stay a few gigabytes, where one chunk of a billion-element fp32 output (an embedding's
gradient table) held a dozen fp64 temporaries of 8.4 GB each, more than an 80 GB device has. The statistics are
the same either way: counts add up, maxima take the larger, and the worst element is the first of the largest
excess over its allowance, as ``argmax`` over the whole output would pick it (a NaN excess first, then an infinite
one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

CPU_CHUNK = 1 << 18
GPU_CHUNK = 1 << 26  # 64 Mi elements: a float64 temporary of a chunk is 512 MiB


def chunk_for(t: torch.Tensor) -> int:
    """Elements per chunk of a comparison over ``t``: ``CPU_CHUNK`` on the CPU, ``GPU_CHUNK`` on a device."""
    return CPU_CHUNK if t.device.type == "cpu" else GPU_CHUNK


@dataclass
class Stats:
    n: int = 0
    n_ok: int = 0
    bad_special: int = 0  # NaN/Inf in the output where the anchor is finite
    max_abs: float = 0.0
    max_rel: float = 0.0
    worst_i: int = 0  # flat index of the worst element
    worst: tuple[float, float, float] | None = None  # its value, the anchor's, what it was allowed
    anchor_nonzero: bool = False
    got_nonzero: bool = False
    _rank: tuple[int, float] = (-1, 0.0)


def elementwise(got: torch.Tensor, ref: torch.Tensor, anchor: Any, atol: float, rtol: float,
                spread: torch.Tensor | None, slack: float) -> Stats:
    """``|got - anchor| <= atol + rtol * |anchor| + 2 * |ref - anchor| (+ slack * spread)`` per element (a NaN
    where the anchor is finite is an infinite error; where the anchor is not finite the output must equal it)."""
    # the errors of a 16- or 8-bit output are exact enough in fp32 (24 mantissa bits against at most 11), at half
    # the memory traffic of fp64; wider outputs use fp64
    wide = torch.float64 if got.dtype.itemsize >= 4 else torch.float32
    flat = [got.reshape(-1), ref.reshape(-1), (anchor if isinstance(anchor, torch.Tensor) else ref).reshape(-1),
            spread.reshape(-1) if spread is not None else None]
    st = Stats(n=flat[0].numel())
    step = chunk_for(got)
    for lo in range(0, st.n, step):
        g, r, a, s = (None if x is None else x[lo:lo + step] for x in flat)
        _chunk(st, g.to(wide), r.to(wide), a.to(device=g.device, dtype=wide),
               None if s is None else s.to(device=g.device, dtype=wide), atol, rtol, slack, lo)
    return st


def _chunk(st: Stats, g: torch.Tensor, r: torch.Tensor, a: torch.Tensor, s: torch.Tensor | None, atol: float,
           rtol: float, slack: float, offset: int) -> None:
    finite_anchor = torch.isfinite(a)
    err = torch.where(finite_anchor, (g - a).abs_().nan_to_num_(nan=float("inf")),
                      torch.where(g.eq(a) | (g.isnan() & a.isnan()), 0.0, float("inf")))
    # in the order of atol + rtol * |a| + 2 * |r - a| + slack * s, so that every sum rounds as it always has
    allowed = a.abs().mul_(rtol).add_(atol).add_((r - a).abs_().nan_to_num_(0.0, 0.0, 0.0).mul_(2.0))
    if s is not None:
        allowed.add_(s.mul(slack))
    excess = torch.where(torch.isfinite(err), err - allowed, float("inf"))
    i = torch.argmax(excess).view(1)

    def at(x: torch.Tensor) -> torch.Tensor:
        return x.index_select(0, i)

    # every statistic in one tensor, read back at once: one wait for the device, not a dozen
    f64 = torch.float64
    (bad, n_ok, worst_i, k, g_i, a_i, allowed_i, max_abs, rel, a_nz, g_nz) = torch.cat([
        ((~torch.isfinite(g)) & finite_anchor).sum().view(1).to(f64), (err <= allowed).sum().view(1).to(f64),
        i.to(f64), at(excess).to(f64), at(g).to(f64), at(a).to(f64), at(allowed).to(f64), err.max().view(1).to(f64),
        (err / a.abs().clamp_min(1e-12)).max().view(1).to(f64), a.ne(0).any().view(1).to(f64),
        g.ne(0).any().view(1).to(f64)]).tolist()
    st.bad_special += int(bad)
    st.n_ok += int(n_ok)
    rank = (2, 0.0) if math.isnan(k) else (1, 0.0) if k == math.inf else (0, k)
    if st.worst is None or rank > st._rank:  # the first of the largest, as argmax over the whole output
        st._rank, st.worst_i = rank, offset + int(worst_i)
        st.worst = (g_i, a_i, allowed_i)
    st.max_abs = max(st.max_abs, max_abs)
    st.max_rel = math.nan if math.isnan(rel) or math.isnan(st.max_rel) else max(st.max_rel, rel)
    st.anchor_nonzero = st.anchor_nonzero or bool(a_nz)
    st.got_nonzero = st.got_nonzero or bool(g_nz)


def within(got: Any, anchor: Any, dtype: torch.dtype, atol: float, rtol: float, cap: float | None,
           nonzero: bool = False) -> bool:
    """A quick test that ``got`` passes ``elementwise``'s statistics against ``anchor`` as its own reference
    (``|got - anchor| <= atol + rtol * |anchor|`` at every element, in ``elementwise``'s arithmetic), with
    nothing for ``correctness.compare_output`` to fail it on: the exact type, shape, dtype and device, a finite
    anchor, not all zeros where the anchor is not (``nonzero``: not all zeros at all), no error above ``cap``.
    False says only that the full comparison must decide (``errors_within``)."""
    return errors_within(got, anchor, dtype, atol, rtol, cap, relative=False, nonzero=nonzero) is not None


def errors_within(got: Any, anchor: Any, dtype: torch.dtype, atol: float, rtol: float, cap: float | None,
                  relative: bool = True, nonzero: bool = False) -> tuple[float, float] | None:
    """``within``'s test, and where it passes the largest absolute and relative errors, as ``elementwise`` counts
    them (against the anchor, in its arithmetic; the relative one 0.0 unless ``relative``); None where the full
    comparison must decide. A handful of operations and one read-back per chunk (as ``elementwise`` reads them),
    against ``elementwise``'s three dozen; it stops at the first chunk that fails."""
    if type(got) is not torch.Tensor or not isinstance(anchor, torch.Tensor) or got.dtype != dtype \
            or tuple(got.shape) != tuple(anchor.shape) or got.device != anchor.device or got.numel() == 0 \
            or not got.is_floating_point():
        return None
    wide = torch.float64 if got.dtype.itemsize >= 4 else torch.float32
    flat_g, flat_a = got.reshape(-1), anchor.reshape(-1)
    n = flat_g.numel()
    step = chunk_for(got)
    some_a = some_g = False
    max_abs = max_rel = 0.0
    for lo in range(0, n, step):
        g, a = flat_g[lo:lo + step].to(wide), flat_a[lo:lo + step].to(wide)
        err, size = (g - a).abs_(), a.abs()
        zero = torch.zeros((), dtype=wide, device=g.device)
        top = err.max() if relative or cap is not None else zero
        ok = (err <= (size.mul(rtol) if relative else size.mul_(rtol)).add_(atol)).all()  # ``size`` kept for ``rel``
        # then, in stream order, the relative errors in place: every statistic comes back in one read
        rel = err.div_(size.clamp_min_(1e-12)).max() if relative else zero
        finite, ok, a_nz, g_nz, top, rel = torch.stack([
            torch.isfinite(a).all().to(wide), ok.to(wide), a.ne(0).any().to(wide), g.ne(0).any().to(wide),
            top.to(wide), rel.to(wide)]).tolist()
        if not (finite and ok and (cap is None or top <= cap)):
            return None
        some_a, some_g = some_a or bool(a_nz), some_g or bool(g_nz)
        max_abs, max_rel = max(max_abs, top), max(max_rel, rel)
    return (max_abs, max_rel) if some_g or not (some_a or nonzero) else None
