"""Judge a candidate's outputs against the reference and its float64 anchor.

An element matches when

    |out - anchor| <= atol + rtol * |anchor| + 2 * |ref - anchor|                       (the plain test)

that is, the candidate may be as far from exact as twice the reference's own rounding, plus the dtype's
tolerance. Integers and bools must be exact. NaN/Inf where the anchor is finite never match. An all-zero output
fails when the anchor is not.

The reference's own rounding at one element is luck: where the fp32 reference lands on the anchor, the plain
test allows only ``atol + rtol * |anchor|``, although summing in another order moves such an element by more.
What an honest fp32 computation may err by follows the computation's conditioning: for a sum, the sum of the
terms' magnitudes, not the magnitude of the sum. So when the plain test fails elements (and only then: the
common case costs nothing), each element also gets

    SLACK * u * S,   S = sum_i |d out / d x_i * x_i|                                   (the conditioning slack)

where ``x_i`` runs over every element of every floating input and ``u`` is the unit roundoff of the arithmetic
(2^-24 for outputs of 32 bits or fewer, whose computations accumulate in fp32; 2^-53 for fp64; TF32's 2^-11
with ``allow_tf32``). To first order, that is every value the exact function takes on inputs each moved by up to
``SLACK`` units of roundoff of their own magnitude: a componentwise backward error of ``SLACK * u``. A sum of n
terms in any order can err by up to (n - 1) * u * S, but rounding errors are random in sign, and measured on
the wide, heavy-tailed draws of the fixtures tests/exploits/problem_i21_* (100 to 300 seeds each), honest orders
needed at most 1.1 * u * S beyond the plain test (blocked, split-K, strided, sequential, reversed, Kahan and
3xTF32 products, K <= 1000; a 3xTF32 split by truncation instead of rounding 5.8 * u * S once in 300 seeds) and
3 * u * S (sequential and reversed row sums of 41,000 terms), and on the H200 a split-K product of
2048 x 2048 x 2048 in cuBLAS 0.72 * u * S (6 seeds), while rounding the inputs or
products to bf16, fp16 or TF32 needed at least 1,000 * u * S on the products and 30 * u * S on those row sums.
Where a downgrade's error falls under the slack, it is as accurate as fp32 summation itself on that element
(3xBF16 products, about 16 bits per operand, passed at K = 1000 about half the time with the sketch's draws
clipped at 10^3; fp16 inputs to row sums of some 10^5 terms and more), and the plain test still governs every
element without cancellation.

S is the sum of magnitudes for a sum, twice |a| @ |b| for a product, |x * exp(x)| for exp, and follows any
reference without knowing its formula: it is estimated on the trusted side from the reference itself, in
float64, with a 1-stable (Cauchy) sketch. Perturbing every input as x_i * (1 + EPS * c_i), c_i standard Cauchy,
moves each output by EPS * sum_i g_i c_i (g_i = d out / d x_i * x_i), which is Cauchy with scale EPS * S
(each c_i clipped at ``CLIP``, which keeps the response linear and the estimate a little low for sums of
thousands of terms); the geometric mean of ``SAMPLES`` such draws estimates S
(log |Cauchy| is symmetric about the log of its scale), drawn from a fixed seed so that a verdict repeats. An
output that this estimate does not excuse is judged once more on ``MORE_SAMPLES`` draws: over millions of
elements the estimate's low tail is the sketch's luck, not the computation's. On a 1024 x 1024 product of
K = 2048 (the fixture's draws), 8 draws put the median estimate at 0.85 S, one element in 10^4 under 0.099 S, the
lowest at 0.034 S and the highest at 7.6 S; 32 draws put one in 10^4 under 0.31 S, the lowest at 0.23 S and the
highest at 2.4 S. Inputs that hold only integers (positions, counts) are exact data and stay
unperturbed, as do integer tensors and Python scalars. A perturbation that crosses a discontinuity of the
reference (a comparison, a rounding) gives that element the jump's size: an fp32 computation could land on
either side. A non-finite response gives no slack. The estimate costs ``SAMPLES`` float64 reference calls,
made once per comparison and only when the plain test fails, and ``MORE_SAMPLES - SAMPLES`` more where those do
not excuse every element.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from solbench.evaluate.verdict.elementwise import elementwise, errors_within
from solbench.problems.definition import Tolerance

DEFAULT_TOLERANCE: dict[str, Tolerance] = {
    "float64": Tolerance(atol=1e-8, rtol=1e-7, matched_ratio=1.0),
    "float32": Tolerance(atol=1e-5, rtol=1e-4, matched_ratio=1.0),
    "float16": Tolerance(atol=1e-3, rtol=1e-3, matched_ratio=0.999),
    "bfloat16": Tolerance(atol=1e-2, rtol=1.6e-2, matched_ratio=0.99),
    "float8_e4m3fn": Tolerance(atol=5e-3, rtol=2e-2, matched_ratio=0.95, max_abs_error=1.0),
    "float8_e5m2": Tolerance(atol=5e-3, rtol=2e-2, matched_ratio=0.95, max_abs_error=1.0),
}
TF32_TOLERANCE = Tolerance(atol=1e-4, rtol=2e-3, matched_ratio=1.0, unit_roundoff=2.0 ** -11)
#: the conditioning slack in units of roundoff: the componentwise backward error an honest computation may have
SLACK = 8.0
#: Cauchy draws behind each element's conditioning estimate (one float64 reference call each), and behind the
#: second estimate an output gets where the first does not excuse every element
SAMPLES = 8
MORE_SAMPLES = 32
#: the perturbation's scale, relative to each input element, and the bound on a Cauchy draw (|c| <= CLIP keeps
#: every perturbation under 6e-4 of the input: the reference's response stays linear)
EPS = 2.0 ** -24
CLIP = 1e4
#: a fixed seed: the same outputs on the same inputs always get the same verdict
SKETCH_SEED = 21


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
    #: failed only by elements outside the tolerance (not NaN/Inf, shape, dtype, all zeros or the cap): the
    #: computation's conditioning may excuse them
    out_of_tolerance: bool = field(default=False, repr=False)

    @property
    def ok(self) -> bool:
        return self.verdict == "passed"


def _fail(verdict: str, reason: str, **kw) -> Check:
    return Check(verdict=verdict, reason=reason, **kw)


def unit_roundoff(dtype: torch.dtype, tol: Tolerance) -> float:
    """The unit roundoff of the arithmetic an output's computation is expected in: the tolerance's own
    ``unit_roundoff`` (TF32's with ``allow_tf32``), else fp64's for fp64 outputs and fp32's for the rest."""
    own = getattr(tol, "unit_roundoff", None)
    if own is not None:
        return float(own)
    return 2.0 ** -53 if dtype in (torch.float64, torch.complex128) else 2.0 ** -24


def compare_output(name: str, got: Any, ref: Any, anchor: Any, dtype: torch.dtype, tol: Tolerance,
                   spread: Any = None) -> Check:
    """One output against the reference and its anchor; ``spread`` (the conditioning estimate S, per element,
    from ``conditioning``) adds the conditioning slack to the plain test. A floating output within the tolerance
    of the anchor alone at every element (``elementwise.errors_within``: the plain test less its reference term,
    so stricter) passes on that test's few operations, with the same largest errors the full statistics give."""
    slack = 0.0 if spread is None else SLACK * unit_roundoff(dtype, tol)
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
        bound += slack * float(spread) if spread is not None else 0.0
        if not err <= bound:
            return _fail("incorrect_numerical", f"{name}: {got} vs {anchor}", max_abs_err=err,
                         out_of_tolerance=math.isfinite(err))
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
    if spread is None and got.is_floating_point():  # the common case: within the tolerance of the anchor alone
        quick = errors_within(got, anchor, dtype, tol.atol or 0.0, tol.rtol or 0.0, tol.max_abs_error)
        if quick is not None:
            return Check(max_abs_err=quick[0], max_rel_err=quick[1])
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
    st = elementwise(got, ref, anchor, tol.atol or 0.0, tol.rtol or 0.0, spread, slack)
    n_ok, n_all, max_abs, max_rel = st.n_ok, st.n, st.max_abs, st.max_rel
    ratio = n_ok / n_all  # counted exactly: a float mean of 16M ones can round below 1.0
    worst = {"output": name, "index": _unravel(st.worst_i, got.shape), "got": st.worst[0], "expected": st.worst[1],
             "allowed": st.worst[2]}
    kw = dict(max_abs_err=max_abs, max_rel_err=max_rel, worst=worst)
    if st.bad_special:
        return _fail("incorrect_numerical", f"{name}: {st.bad_special} NaN/Inf values where the reference is finite",
                     **kw)
    if st.anchor_nonzero and not st.got_nonzero:
        return _fail("incorrect_numerical", f"{name}: all zeros while the reference is not", **kw)
    need = tol.matched_ratio if tol.matched_ratio is not None else 1.0
    if n_ok < math.ceil(need * n_all - 1e-9):
        within = "within tolerance" + (" (with the computation's conditioning)" if spread is not None else "")
        return _fail("incorrect_numerical", f"{name}: {ratio:.4%} of elements {within}, {need:.2%} required",
                     out_of_tolerance=True, **kw)
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


def _perturbed(x: Any, gen: dict) -> Any:
    """A copy of ``x``, in float64 with each element moved by EPS * c * |x| (c a clipped standard Cauchy draw)
    for a floating tensor; integer tensors, integral-valued floats and non-tensors keep their values."""
    if type(x) is not torch.Tensor:
        return x
    if not x.is_floating_point() or x.numel() == 0:
        return x.clone()
    x64 = x.to(torch.float64, copy=True)
    if bool(torch.equal(x64, x64.round())):  # integer data (positions, counts) stored as floats: exact
        return x64
    if x.device not in gen:
        gen[x.device] = torch.Generator(device=x.device).manual_seed(SKETCH_SEED)
    c = torch.empty_like(x64).cauchy_(generator=gen[x.device]).clamp_(-CLIP, CLIP)
    return c.mul_(EPS).add_(1.0).mul_(x64)


def _arranged(x: Any, mode: dict | None) -> Any:
    """An output as its comparison sees it: sorted along the mode's dim for ``set``."""
    if (mode or {}).get("mode") == "set" and isinstance(x, torch.Tensor):
        return torch.sort(x, dim=int(mode.get("dim", -1))).values
    return x


def conditioning(anchor_of: Callable[[list[Any]], list[Any]], given: list[Any], anchors: list[Any],
                 modes: list[dict | None], samples: int = SAMPLES) -> list[Any] | None:
    """Per output, the estimate of S = sum_i |d out / d x_i * x_i| (module docstring) from ``samples`` draws: a
    float64 tensor of the output's shape, a float for a scalar output, or None; None for all when the reference
    cannot be sketched. ``anchor_of`` runs the reference in float64 on a list of inputs, in-place inputs appended
    to its outputs."""
    sketch = Sketch(anchor_of, given, anchors, modes)
    return sketch.spreads(samples)


class Sketch:
    """The conditioning estimate of every output, its draws kept so that more can be added (from the same fixed
    seed): ``spreads(n)`` is the estimate from the first ``n`` draws, or from all drawn where more were."""

    def __init__(self, anchor_of: Callable[[list[Any]], list[Any]], given: list[Any], anchors: list[Any],
                 modes: list[dict | None]):
        self.anchor_of, self.given, self.anchors, self.modes = anchor_of, given, anchors, modes
        self.gen: dict = {}
        self.logs: list[Any] = [None] * len(anchors)
        self.drawn, self.failed = 0, False

    def spreads(self, samples: int) -> list[Any] | None:
        if not self._draw_to(samples):
            return None
        n = self.drawn
        return [None if t is None else (t / n).exp_().div_(EPS) if isinstance(t, torch.Tensor)
                else math.exp(t / n) / EPS for t in self.logs]

    def _draw_to(self, samples: int) -> bool:
        try:
            while not self.failed and self.drawn < samples:
                moved = [_arranged(o, m) for o, m in
                         zip(self.anchor_of([_perturbed(x, self.gen) for x in self.given]), self.modes)]
                if len(moved) != len(self.anchors):
                    self.failed = True
                    break
                for i, (out, base) in enumerate(zip(moved, self.anchors)):
                    self.logs[i] = _add_log(self.logs[i], out, _arranged(base, self.modes[i]))
                self.drawn += 1
        except Exception:  # a reference that cannot run on perturbed inputs gives no slack
            self.failed = True
        return not self.failed


def _add_log(total: Any, out: Any, base: Any) -> Any:
    """``total`` + log |out - base| (a non-finite difference counts as 0: no slack), or None where the output
    is not floating."""
    if isinstance(base, torch.Tensor) and base.is_floating_point() and isinstance(out, torch.Tensor) \
            and out.shape == base.shape:
        d = (out.to(torch.float64) - base.to(torch.float64)).abs_().nan_to_num_(0.0, 0.0, 0.0).log_()
        return d if total is None else total.add_(d)
    if isinstance(base, float) and isinstance(out, (int, float)) and not isinstance(out, bool):
        d = abs(float(out) - base)
        d = math.log(d) if math.isfinite(d) and d > 0 else -math.inf
        return d if total is None else total + d
    return None


def compare(outputs: list[Any], refs: list[Any], anchors: list[Any], names: list[str],
            dtypes: list[torch.dtype], tols: list[Tolerance], modes: list[dict | None] | None = None,
            inputs: dict[str, Any] | None = None,
            anchor_of: Callable[[list[Any]], list[Any]] | None = None) -> Check:
    """Judge every output; ``modes`` (per output, from the definition's ``compare``) replace elementwise
    closeness where it is the wrong test, and may need the call's pristine ``inputs`` (in the definition's
    order). With ``anchor_of`` (the reference in float64 on a list of inputs, in-place inputs appended to its
    outputs) and ``inputs``, an output that fails the plain test is judged again with the conditioning slack."""
    if len(outputs) != len(refs):
        return _fail("incorrect_shape", f"expected {len(refs)} outputs, got {len(outputs)}")
    modes = modes or [None] * len(outputs)
    total = Check()
    sketch: Sketch | None = None
    for i, (got, ref, anchor, name, dt, tol, mode) in enumerate(zip(outputs, refs, anchors, names, dtypes, tols,
                                                                     modes)):
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
        if c.out_of_tolerance and anchor_of is not None and inputs is not None:
            if sketch is None:  # once per comparison, for every output
                sketch = Sketch(anchor_of, list(inputs.values()), anchors, modes)
            for samples in (SAMPLES, MORE_SAMPLES):  # more draws only where the first estimate does not excuse
                spreads = sketch.spreads(samples) or [None] * len(anchors)
                if spreads[i] is None:
                    break
                c = compare_output(name, got, ref, anchor, dt, tol, spread=spreads[i])
                if c.ok:
                    break
        if not c.ok:
            return c
        if c.max_abs_err >= total.max_abs_err:
            total.worst = c.worst
        total.max_abs_err = max(total.max_abs_err, c.max_abs_err)
        total.max_rel_err = max(total.max_rel_err, c.max_rel_err)
    return total
