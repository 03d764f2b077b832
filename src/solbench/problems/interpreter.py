"""Triton's interpreter made faithful on the CPU, for ``tl.dot`` and the float casts around it.

Wherever a Triton source runs on the CPU (a candidate's process, a reference or baseline loaded by
``problems.modules``), solbench makes Triton's interpreter faithful where Triton 3.x
(``triton/runtime/interpreter.py``) is not, for ``tl.dot`` and for the float casts that
feed and drain it. The interpreter keeps a bf16 block as its raw uint16 bit patterns
and an fp8 block as uint8 bit patterns (numpy has neither type), and then:

- ``create_dot`` hands the bf16 bit patterns straight to ``np.matmul``, which multiplies
  them as integers (1.0 is 0x3F80 = 16256): a bf16 dot is garbage. fp8 operands go
  through a conversion that turns e5m2 subnormals into 0, e5m2 Inf into 65536, e4m3's
  NaN into 480 and the fnuz NaN into -0, and a default (tf32) fp32 dot is computed in
  full fp32, more exactly than a GPU does.
- a downcast to bf16 (``x.to(tl.bfloat16)``, fp32 -> bf16) truncates instead of
  rounding to nearest even; fp64 -> bf16 and int -> bf16 convert the value into the
  uint16 bit pattern (garbage); a downcast to fp8 rounds half-up, loses the carry into
  the exponent (1.98 -> 1.0 instead of 2.0) and does not saturate.

The replacements decode every operand exactly (bf16 by a 16-bit shift, fp8 through a
256-entry table per format, NaN and Inf included). The dot rounds fp32 operands to
tf32 when ``input_precision`` is tf32 (the tensor cores read only the top 19 bits),
multiplies and accumulates in float32 (float64 for fp64, exactly in int32 arithmetic
for int8), adds the accumulator and rounds once to its dtype (fp16 for
``out_dtype=tl.float16``). ``max_num_imprecise_acc`` is not modelled: fp8 products are
summed in full fp32, a little more exactly than Hopper's fp8 tensor cores do. Casts to
bf16, fp16 and fp8 round the exact value once, to nearest even (or toward zero for
``fp_downcast_rounding="rtz"``), as the GPU's ``cvt.rn`` does; fp8 saturates to its
largest finite value (``cvt.rn.satfinite``), bf16 and fp16 overflow to Inf.

A type the replacements do not know goes to Triton's own method; if the interpreter's
internals are not the ones expected, nothing is patched. bf16 elementwise arithmetic,
math and reductions on bf16 blocks (as opposed to casts and dots) are left as Triton
computes them.
"""

from __future__ import annotations

#: the attribute that marks a builder method as already replaced
_MARK = "_solbench_faithful"

#: per format (Triton's dtype name): float32 value of each code, and the tables for rounding to it
_DECODE: dict = {}
_ENCODE: dict = {}

#: the fp8 formats decoded and encoded here (fp8e4b15 is left to Triton: no MLIR type, its own conversions)
_FP8 = ("fp8e5", "fp8e4nv", "fp8e4b8", "fp8e5b16")


class _Fallback(Exception):
    """Operands of a kind the faithful versions do not handle: use Triton's."""


def _scalar(dtype):
    """The element type of a block type; a scalar or pointer type as it is."""
    return getattr(dtype, "scalar", dtype)


def _fp8_table(dtype):
    """The float32 values of an fp8 format's 256 codes, from its sign, exponent and mantissa bits."""
    import numpy as np

    name = getattr(dtype, "name", None)
    if name in _DECODE:
        return _DECODE[name]
    if name not in _FP8:
        raise _Fallback(name)
    mant_bits = int(dtype.fp_mantissa_width)
    exp_bits = 7 - mant_bits
    bias = int(dtype.exponent_bias)
    codes = np.arange(256, dtype=np.int64)
    sign = np.where(codes >> 7, -1.0, 1.0)
    exp = (codes >> mant_bits) & ((1 << exp_bits) - 1)
    mant = codes & ((1 << mant_bits) - 1)
    subnormal = mant * 2.0 ** (1 - bias - mant_bits)
    normal = (1.0 + mant / float(1 << mant_bits)) * np.exp2((exp - bias).astype(np.float64))
    values = sign * np.where(exp == 0, subnormal, normal)
    top = (1 << exp_bits) - 1
    if name == "fp8e5":  # IEEE-like e5m2: the top exponent is Inf (mantissa 0) or NaN
        values = np.where((exp == top) & (mant == 0), sign * np.inf, values)
        values = np.where((exp == top) & (mant != 0), np.copysign(np.nan, sign), values)
    elif name == "fp8e4nv":  # e4m3fn: no Inf, S.1111.111 is NaN
        values = np.where((exp == top) & (mant == (1 << mant_bits) - 1), np.copysign(np.nan, sign), values)
    else:  # fnuz (fp8e4b8, fp8e5b16): no Inf, no -0, 0x80 is the only NaN
        values = np.where(codes == 0x80, np.nan, values)
    table = values.astype(np.float32)  # every fp8 value is exact in float32
    _DECODE[name] = table
    return table


def _decode(handle):
    """A block's values, exactly: (array, kind); float32 for 8/16/32-bit floats, float64, int64 for integers."""
    import numpy as np

    dtype = _scalar(handle.dtype)
    data = np.asarray(handle.data)
    if dtype.is_bf16():  # stored as the uint16 bit pattern
        return (data.view(np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32), "float"
    if dtype.is_fp8():  # stored as the uint8 bit pattern
        return _fp8_table(dtype)[data.view(np.uint8)], "float"
    if dtype.is_fp16() or dtype.is_fp32():
        return data.astype(np.float32, copy=False), "fp32" if dtype.is_fp32() else "float"
    if dtype.is_fp64():
        return data.astype(np.float64, copy=False), "fp64"
    if dtype.is_int() and not dtype.is_bool():
        return data.astype(np.int64), "int"
    raise _Fallback(str(dtype))


def _encode_table(dtype):
    """For rounding to a 16- or 8-bit float format: its finite non-negative values (code = index), and specials."""
    import numpy as np

    name = getattr(dtype, "name", None)
    if name in _ENCODE:
        return _ENCODE[name]
    if dtype.is_bf16():
        codes = np.arange(0x8000, dtype=np.uint32)
        with np.errstate(invalid="ignore"):  # the NaN codes
            values = (codes << np.uint32(16)).view(np.float32).astype(np.float64)
        spec = {"bits": 16, "inf": 0x7F80, "nan": 0x7FC0, "saturate": False, "fnuz": False}
    elif dtype.is_fp16():
        values = np.arange(0x8000, dtype=np.uint16).view(np.float16).astype(np.float64)
        spec = {"bits": 16, "inf": 0x7C00, "nan": 0x7E00, "saturate": False, "fnuz": False}
    elif dtype.is_fp8() and name in _FP8:
        values = _fp8_table(dtype)[:128].astype(np.float64)
        fnuz = name in ("fp8e4b8", "fp8e5b16")
        spec = {"bits": 8, "inf": None, "nan": 0x80 if fnuz else 0x7F, "saturate": True, "fnuz": fnuz}
    else:
        raise _Fallback(name)
    finite = values[np.isfinite(values)]  # the finite codes come first, in increasing order of value
    if not (np.all(np.diff(finite) > 0) and np.array_equal(finite, values[: len(finite)])):
        raise _Fallback(name)
    table = dict(spec, values=finite, dtype=np.uint16 if spec["bits"] == 16 else np.uint8)
    _ENCODE[name] = table
    return table


def _encode(x, dtype, toward_zero: bool = False):
    """Bit patterns of ``x`` (any real numpy array) rounded once to ``dtype``: to nearest, ties to even, or toward zero."""
    import numpy as np

    t = _encode_table(dtype)
    vals = t["values"]
    n = len(vals)
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x)
    idx = np.searchsorted(vals, a, side="left")  # vals[idx - 1] < a <= vals[idx]
    hi = np.minimum(idx, n - 1)
    lo = np.maximum(idx - 1, 0)
    exact = vals[hi] == a
    if toward_zero:
        code = np.where(exact, hi, lo)
    else:
        mid = (vals[lo] + vals[hi]) / 2  # exact: two neighbouring low-precision values
        code = np.where(a < mid, lo, np.where(a > mid, hi, np.where(lo % 2 == 0, lo, hi)))
        code = np.where(exact, hi, code)
    over = a > vals[-1]  # beyond the largest finite value (Inf included)
    if t["saturate"]:
        code = np.where(over, n - 1, code)
    elif toward_zero:
        code = np.where(over, np.where(np.isinf(a), t["inf"], n - 1), code)
    else:  # IEEE: from half an ulp above the largest finite value on, the result is Inf
        code = np.where(over, np.where(a >= vals[-1] + (vals[-1] - vals[-2]) / 2, t["inf"], n - 1), code)
    sign_bit = 1 << (t["bits"] - 1)
    negative = np.signbit(x)
    if t["fnuz"]:
        negative &= code != 0  # no negative zero
    code = np.where(negative, code | sign_bit, code)
    nan_code = t["nan"]
    code = np.where(np.isnan(x), np.where(negative & (not t["fnuz"]), nan_code | sign_bit, nan_code), code)
    return code.astype(t["dtype"]).reshape(x.shape)


def _convert(handle, dst, rounding, rtz_mode, original_data):
    """numpy data of ``handle`` converted to the scalar type ``dst``; ``original_data`` for what is left to Triton."""
    import numpy as np

    values, kind = _decode(handle)
    if dst.is_bf16() or dst.is_fp16() or (dst.is_fp8() and getattr(dst, "name", None) in _FP8):
        return _encode(values, dst, toward_zero=rtz_mode is not None and rounding == rtz_mode)
    if kind == "int":
        raise _Fallback("integer source")
    if dst.is_fp32():
        if values.dtype == np.float64 and rtz_mode is not None and rounding == rtz_mode:
            raise _Fallback("fp64 -> fp32 toward zero")
        return values.astype(np.float32)
    if dst.is_fp64():
        return values.astype(np.float64)
    if original_data is None:
        raise _Fallback(str(dst))
    return original_data(values.astype(np.float32))  # to an integer: Triton's own semantics, from exact values


def _to_tf32(x):
    """fp32 values as a tensor core reads them for a tf32 MMA: the low 13 mantissa bits dropped."""
    import numpy as np

    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    special = (bits & np.uint32(0x7F800000)) == np.uint32(0x7F800000)  # Inf and NaN stay as they are
    return np.where(special, bits, bits & np.uint32(0xFFFFE000)).view(np.float32)


def faithful_dot(a, b, d, input_precision=None, tf32=None):
    """numpy result of ``d + a @ b`` for interpreter handles, in d's numpy dtype."""
    import numpy as np

    acc = np.asarray(d.data)
    if acc.dtype not in (np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.float64), np.dtype(np.int32)):
        raise _Fallback(str(acc.dtype))  # a bit-pattern accumulator (bf16) is refused by Triton itself
    x, kind_a = _decode(a)
    y, kind_b = _decode(b)
    kinds = {kind_a, kind_b}
    if "int" in kinds:
        if kinds != {"int"} or acc.dtype != np.int32:
            raise _Fallback("mixed integer dot")
        # exact: |sum| <= K * 2**14 stays far below 2**53; int32 accumulation wraps as on the GPU
        prod = np.rint(np.matmul(x.astype(np.float64), y.astype(np.float64))).astype(np.int64)
        return (prod + acc.astype(np.int64)).astype(np.int32)
    if "fp64" in kinds or acc.dtype == np.float64:
        out = np.matmul(x.astype(np.float64), y.astype(np.float64)) + acc.astype(np.float64)
        return out.astype(acc.dtype)
    if tf32 is not None and input_precision is not None and input_precision == tf32:
        # only fp32 operands are rounded; fp16/bf16/fp8 are exact in tf32 anyway
        x = _to_tf32(x) if kind_a == "fp32" else x
        y = _to_tf32(y) if kind_b == "fp32" else y
    out = np.matmul(x, y).astype(np.float32) + acc.astype(np.float32)
    return out.astype(acc.dtype)


def _replace(builder, name: str, make) -> bool:
    """Replace ``builder.name`` by ``make(original)``, once; True when it is (now or already) replaced."""
    original = getattr(builder, name, None)
    if original is None or not callable(original):
        return False
    if getattr(original, _MARK, False):
        return True
    new = make(original)
    setattr(new, _MARK, True)
    new.__wrapped__ = original
    new.__name__ = name
    setattr(builder, name, new)
    return True


def patch_interpreter_dot() -> bool:
    """Make the interpreter's dot and float casts faithful; True when its dot is (now or already) replaced."""
    try:
        from triton.runtime import interpreter
    except (ImportError, RuntimeError, OSError):  # no Triton, or one that cannot load its interpreter
        return False
    builder = getattr(interpreter, "InterpreterBuilder", None)
    handle_cls = getattr(interpreter, "TensorHandle", None)
    if builder is None or handle_cls is None:
        return False
    ir = getattr(interpreter, "_ir", None)
    tf32 = getattr(getattr(ir, "INPUT_PRECISION", None), "TF32", None)
    rtz = getattr(getattr(ir, "ROUNDING_MODE", None), "RTZ", None)
    np_dtype = getattr(interpreter, "_get_np_dtype", None)

    def dot(original):
        def create_dot(self, a, b, d, *args, **kwargs):
            precision = kwargs.get("input_precision", args[0] if args else None)
            try:
                out = faithful_dot(a, b, d, precision, tf32)
                dtype = d.dtype.scalar
            except (_Fallback, AttributeError):  # an operand kind it does not know, or other internals
                return original(self, a, b, d, *args, **kwargs)
            return handle_cls(out, dtype)
        return create_dot

    def cast(original):
        # every plain conversion (create_fp_trunc, create_fp_ext, create_si_to_fp, ...) calls self.cast_impl
        def cast_impl(self, src, dst_type):
            try:
                src_ty, dst = _scalar(src.dtype), _scalar(dst_type)
                if not (src_ty.is_bf16() or dst.is_bf16()) or np_dtype is None:
                    return original(self, src, dst_type)
                data = _convert(src, dst, None, rtz,
                                lambda v: v.astype(np_dtype(dst)))
            except (_Fallback, AttributeError):
                return original(self, src, dst_type)
            return handle_cls(data, dst_type.scalar)
        return cast_impl

    def fp_to_fp(original):
        # conversions to and from fp8, bf16 <-> fp16, and downcasts with a non-default rounding
        def create_fp_to_fp(self, src, dst_type, rounding_mode, *args, **kwargs):
            try:
                data = _convert(src, _scalar(dst_type), rounding_mode, rtz, None)
            except (_Fallback, AttributeError, TypeError):
                return original(self, src, dst_type, rounding_mode, *args, **kwargs)
            return handle_cls(data, dst_type.scalar)
        return create_fp_to_fp

    patched = _replace(builder, "create_dot", dot)
    if patched:
        _replace(builder, "cast_impl", cast)
        _replace(builder, "create_fp_to_fp", fp_to_fp)
    return patched
