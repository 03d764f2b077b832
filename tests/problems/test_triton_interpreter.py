"""The faithful tl.dot that the Triton plug-in installs in Triton's interpreter on the CPU.

Triton reads TRITON_INTERPRET when it is first imported, so the kernels run in a
child process (as the candidate's process does, with Triton.environment("cpu")),
which prints one JSON line of results; this process never imports Triton.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests import paths

SRC = str(paths.SRC)

_PROLOGUE = """
import json, math, sys, zlib
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter
from solbench.evaluate.languages.triton import Triton
from solbench.problems.interpreter import _MARK, patch_interpreter_dot

unpatched = interpreter.InterpreterBuilder.create_dot
"""

_KERNELS = """
@triton.jit
def _dot(a_ptr, b_ptr, acc_ptr, c_ptr, M, N, K,
         BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, HAS_ACC: tl.constexpr,
         PREC: tl.constexpr, OUT16: tl.constexpr, TRANS_B: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    # masked lanes: no `other` (0 cannot be cast to fp8); the interpreter fills them with zero bits
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K))
    if TRANS_B:  # b is stored [N, K], as in a weight matrix: dot(a, trans(b))
        bt = tl.load(b_ptr + rn[:, None] * K + rk[None, :], mask=(rn[:, None] < N) & (rk[None, :] < K))
        b = tl.trans(bt)
    else:
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N))
    cmask = (rm[:, None] < M) & (rn[None, :] < N)
    if HAS_ACC:
        acc = tl.load(acc_ptr + rm[:, None] * N + rn[None, :], mask=cmask)
        c = tl.dot(a, b, acc, input_precision=PREC, out_dtype=acc.dtype)
    elif OUT16:
        c = tl.dot(a, b, input_precision=PREC, out_dtype=tl.float16)
    else:
        c = tl.dot(a, b, input_precision=PREC)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c, mask=cmask)


@triton.jit
def _bdot(a_ptr, b_ptr, c_ptr, BB: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rb = tl.arange(0, BB)[:, None, None]
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rb * (BM * BK) + rm[None, :, None] * BK + rk[None, None, :])
    b = tl.load(b_ptr + rb * (BK * BN) + rk[None, :, None] * BN + rn[None, None, :])
    c = tl.dot(a, b)
    tl.store(c_ptr + rb * (BM * BN) + rm[None, :, None] * BN + rn[None, None, :], c)


@triton.jit
def _cast(x_ptr, y_ptr, n, DST: tl.constexpr, RTZ: tl.constexpr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    m = o < n
    x = tl.load(x_ptr + o, mask=m)
    if RTZ:
        y = x.to(DST, fp_downcast_rounding="rtz")
    else:
        y = x.to(DST)
    tl.store(y_ptr + o, y, mask=m)


def tf32(x):
    # what the tensor cores read of an fp32 operand: the low 13 mantissa bits dropped
    bits = x.float().contiguous().view(torch.int32)
    return (bits & -8192).view(torch.float32)


def rand(shape, dtype, gen):
    if dtype == torch.int8:
        return torch.randint(-128, 128, shape, generator=gen, dtype=torch.int8)
    return (torch.randn(shape, generator=gen) * 2).to(dtype)


def case(name, dt, M, N, K, BM, BN, BK, acc=None, prec="ieee", out16=False, dt_b=None, trans_b=False):
    gen = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    a = rand((M, K), dt, gen)
    b = rand((N, K) if trans_b else (K, N), dt_b or dt, gen)
    bk = b.t() if trans_b else b  # [K, N]
    if acc is not None:
        accv = rand((M, N), acc, gen) if acc != torch.int32 else torch.randint(-2**20, 2**20, (M, N), generator=gen, dtype=torch.int32)
        out_dt = acc
    else:
        accv = torch.zeros(1)
        out_dt = torch.int32 if dt == torch.int8 else (torch.float16 if out16 else (torch.float64 if dt == torch.float64 else torch.float32))
    c = torch.full((M, N), 7, dtype=out_dt)
    _dot[(1,)](a, b, accv, c, M, N, K, BM, BN, BK, acc is not None, prec, out16, trans_b)
    A, B = a.double(), bk.double()
    if prec == "tf32" and dt == torch.float32:
        A, B = tf32(a).double(), tf32(bk).double()
    ref = A @ B + (accv.double() if acc is not None else 0)
    bound = A.abs() @ B.abs() + (accv.double().abs() if acc is not None else 0)
    exact = a.double() @ bk.double() + (accv.double() if acc is not None else 0)
    if dt == torch.int8:
        ref = (a.long() @ bk.long() + (accv.long() if acc is not None else 0))
        return {"name": name, "int_equal": bool(torch.equal(c.long(), ref)), "dtype": str(c.dtype)}
    err = (c.double() - ref).abs()
    return {"name": name, "dtype": str(c.dtype),
            "rel_err": float((err / (bound + 1e-30)).max()),
            "rel_err_vs_exact": float(((c.double() - exact).abs() / (bound + 1e-30)).max()),
            "finite": bool(torch.isfinite(c).all())}
"""

_CASES = """
results = []
F8 = [torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz]
specs = [
    ("fp32_ieee", torch.float32, 16, 16, 32, 16, 16, 32, {}),
    ("fp32_tf32", torch.float32, 16, 16, 32, 16, 16, 32, {"prec": "tf32"}),
    ("fp32_tf32x3", torch.float32, 16, 16, 32, 16, 16, 32, {"prec": "tf32x3"}),
    ("fp32_ieee_acc_odd", torch.float32, 13, 7, 21, 16, 8, 32, {"acc": torch.float32}),
    ("fp64", torch.float64, 9, 16, 16, 16, 16, 16, {"acc": torch.float64}),
    ("fp16", torch.float16, 16, 32, 64, 16, 32, 64, {}),
    ("fp16_acc_odd", torch.float16, 5, 3, 17, 8, 4, 32, {"acc": torch.float32}),
    ("fp16_out16", torch.float16, 16, 16, 32, 16, 16, 32, {"out16": True}),
    ("fp16_acc16", torch.float16, 16, 16, 32, 16, 16, 32, {"acc": torch.float16}),
    ("bf16", torch.bfloat16, 16, 16, 32, 16, 16, 32, {}),
    ("bf16_tf32_default", torch.bfloat16, 16, 16, 32, 16, 16, 32, {"prec": "tf32"}),
    ("bf16_acc_odd", torch.bfloat16, 11, 19, 37, 16, 32, 64, {"acc": torch.float32}),
    ("bf16_trans_acc", torch.bfloat16, 32, 16, 64, 32, 16, 64, {"acc": torch.float32, "trans_b": True}),
    ("bf16_skinny", torch.bfloat16, 1, 64, 128, 1, 64, 128, {}),
    ("int8", torch.int8, 16, 16, 64, 16, 16, 64, {}),
    ("int8_acc_odd", torch.int8, 7, 9, 33, 8, 16, 64, {"acc": torch.int32}),
]
for f in F8:
    tag = str(f).split("_", 1)[1]
    specs.append((f"fp8_{tag}", f, 16, 16, 64, 16, 16, 64, {}))
    specs.append((f"fp8_{tag}_acc_odd_trans", f, 13, 9, 40, 16, 16, 64, {"acc": torch.float32, "trans_b": True}))
specs.append(("fp8_mixed_e4m3_e5m2", torch.float8_e4m3fn, 16, 16, 32, 16, 16, 32, {"dt_b": torch.float8_e5m2}))
specs.append(("fp8_out16", torch.float8_e4m3fn, 16, 16, 32, 16, 16, 32, {"out16": True}))
for name, dt, M, N, K, BM, BN, BK, kw in specs:
    try:
        results.append(case(name, dt, M, N, K, BM, BN, BK, **kw))
    except Exception as exc:
        results.append({"name": name, "error": f"{type(exc).__name__}: {exc}"[:300]})

# every finite fp8 code through a dot with the identity gives back its value (subnormals and extremes too;
# a NaN or Inf code would spread over its row through 0 * Inf, so those become zeros here)
for f in F8:
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    codes[~codes.view(f).float().isfinite()] = 0
    a = codes.view(f).reshape(16, 16)
    eye = torch.eye(16).to(f)
    c = torch.empty(16, 16)
    _dot[(1,)](a, eye, torch.zeros(1), c, 16, 16, 16, 16, 16, 16, False, "ieee", False, False)
    same = c == a.float()
    results.append({"name": "fp8_codes_" + str(f).split("_", 1)[1], "code_mismatches": int((~same).sum())})

# a batched (3-D) bf16 dot
gen = torch.Generator().manual_seed(5)
a = torch.randn(2, 16, 32, generator=gen).bfloat16()
b = torch.randn(2, 32, 8, generator=gen).bfloat16()
c = torch.empty(2, 16, 8)
_bdot[(1,)](a, b, c, 2, 16, 8, 32)
ref = a.double() @ b.double()
bound = a.double().abs() @ b.double().abs()
results.append({"name": "bf16_batched", "dtype": str(c.dtype), "finite": True,
                "rel_err": float(((c.double() - ref).abs() / bound).max())})

# the fp8 decoding tables against torch's, all 256 codes, NaN and Inf included
from solbench.problems.interpreter import _fp8_table
codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
for f, t in zip(F8, [tl.float8e4nv, tl.float8e5, tl.float8e4b8, tl.float8e5b16]):
    want = codes.view(f).float().numpy()
    got = _fp8_table(t)
    import numpy as np
    same = bool(np.array_equal(want, got, equal_nan=True) and np.array_equal(np.signbit(want), np.signbit(got)))
    results.append({"name": "table_" + str(f).split("_", 1)[1], "table_equal": same})

# casts: every source against torch's round-to-nearest-even (fp8: saturated, as cvt.rn.satfinite)
TL = {torch.bfloat16: tl.bfloat16, torch.float16: tl.float16, torch.float32: tl.float32, torch.float64: tl.float64,
      torch.int32: tl.int32, torch.float8_e4m3fn: tl.float8e4nv, torch.float8_e5m2: tl.float8e5,
      torch.float8_e4m3fnuz: tl.float8e4b8, torch.float8_e5m2fnuz: tl.float8e5b16}
gen = torch.Generator().manual_seed(11)
special = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e30, -1e30, 1e-30, -1e-42, 65504.0,
                        65520.0, 448.0, 464.0, 57344.0, 61440.0, 1.9793, -1.9086, 168.0, 4.5, 125.25, 3.0e38])
bulk = torch.randn(2000, generator=gen) * torch.exp2(torch.randint(-30, 30, (2000,), generator=gen).float())
sources = {"fp32": torch.cat([special, bulk]), "fp64": torch.cat([special.double(), bulk.double() * (1 + 2 ** -30)]),
           "fp16": torch.cat([special, bulk]).half(), "bf16": torch.cat([special, bulk]).bfloat16(),
           "int32": torch.randint(-2 ** 31, 2 ** 31 - 1, (2000,), generator=gen, dtype=torch.int32)}
for f in F8:
    sources["fp8_" + str(f).split("_", 1)[1]] = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(f)
FP8_MAX = {f: torch.finfo(f).max for f in F8}
for sname, x in sources.items():
    for dst in [torch.bfloat16, torch.float16, torch.float32, torch.float64, *F8]:
        if x.dtype == dst or (x.dtype == torch.int32 and dst in F8):  # int <-> fp8: Triton refuses it everywhere
            continue
        xf = x.double() if x.dtype not in F8 else x.float().double()
        if dst in F8:
            want = xf.clamp(-FP8_MAX[dst], FP8_MAX[dst])
            want = torch.where(xf.isnan(), xf, want).float().to(dst)  # every such source is exact in float32
        elif x.dtype == torch.float64 and dst in (torch.bfloat16, torch.float16):
            want = None  # checked below against the correctly rounded value
        else:
            want = xf.float().to(dst) if dst != torch.float64 else xf
        y = torch.empty(x.shape, dtype=dst)
        n = x.numel()
        name = f"cast_{sname}_to_{str(dst).split('.')[1]}"
        try:
            _cast[(1,)](x, y, n, TL[dst], False, triton.next_power_of_2(n))
        except Exception as exc:
            results.append({"name": name, "error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        got = y.float().double() if dst in F8 else y.double()
        if want is None:  # fp64 source: the nearest representable value, ties to even, from the exact double
            lo_hi = torch.stack([torch.nextafter(got.to(dst), torch.tensor(float("-inf")).to(dst)).double(),
                                 torch.nextafter(got.to(dst), torch.tensor(float("inf")).to(dst)).double()])
            fin = xf.isfinite() & got.isfinite()
            ok = ((got - xf).abs() <= (lo_hi - xf).abs().min(0).values) | ~fin
            ok &= (got.isnan() == xf.isnan())
            results.append({"name": name, "cast_mismatches": int((~ok).sum())})
            continue
        w = want.float().double() if dst in F8 else want.double()
        same = (got == w) | (got.isnan() & w.isnan())
        same &= (torch.signbit(got) == torch.signbit(w)) | got.isnan()  # a NaN's sign is free
        results.append({"name": name, "cast_mismatches": int((~same).sum()),
                        "example": [float(v) for v in (xf[~same][:1].tolist() + got[~same][:1].tolist() + w[~same][:1].tolist())]})

# double rounding: 1 + 2**-8 + 2**-30 is just above the midpoint of 1 and 1 + 2**-7 in bf16 (in fp32 it is on it)
x = torch.tensor([1 + 2 ** -8 + 2 ** -30, -(1 + 2 ** -8 + 2 ** -30), 1 + 2 ** -8], dtype=torch.float64)
y = torch.empty(3, dtype=torch.bfloat16)
_cast[(1,)](x, y, 3, tl.bfloat16, False, 4)
results.append({"name": "cast_fp64_bf16_single_rounding", "values": y.float().tolist()})

# rounding toward zero (fp_downcast_rounding="rtz")
x = torch.cat([special, bulk])
y = torch.empty(x.shape, dtype=torch.bfloat16)
_cast[(1,)](x, y, x.numel(), tl.bfloat16, True, triton.next_power_of_2(x.numel()))
bits = x.view(torch.int32)
want = torch.where(x.isnan(), x, (bits & -65536).view(torch.float32)).bfloat16()  # truncating the bits is RTZ
ok = (y.float() == want.float()) | (y.isnan() & want.isnan())
y16 = torch.empty(x.shape, dtype=torch.float16)
_cast[(1,)](x, y16, x.numel(), tl.float16, True, triton.next_power_of_2(x.numel()))
near = x.half()
step = torch.nextafter(near, torch.zeros_like(near))
want16 = torch.where(near.double().abs() > x.double().abs(), step, near)  # one step back toward zero if rounded up
want16 = torch.where(x.isinf(), x.half(), torch.where(want16.isinf(), torch.sign(x).half() * 65504, want16))
ok16 = (y16.double() == want16.double()) | (y16.isnan() & want16.isnan())
results.append({"name": "cast_rtz", "bf16_mismatches": int((~ok).sum()), "fp16_mismatches": int((~ok16).sum())})
print("RESULTS " + json.dumps(results))
"""


def _child(body: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", body], check=False, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def results():
    proc = _child(_PROLOGUE + "Triton().install_hooks('cpu')\n" + _KERNELS + _CASES)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULTS ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return {r["name"]: r for r in json.loads(lines[-1][len("RESULTS "):])}


#: largest error, relative to sum |a||b| (+ |acc|), that each case may have: fp32 accumulation
#: of exactly decoded operands; one rounding to fp16 where the output is fp16
FP32_ACC = 1e-5
TOLERANCE = {"fp16_out16": 2e-3, "fp16_acc16": 2e-3, "fp8_out16": 2e-3, "fp64": 1e-13}

FLOAT_CASES = (["fp32_ieee", "fp32_tf32", "fp32_tf32x3", "fp32_ieee_acc_odd", "fp64", "fp16", "fp16_acc_odd",
                "fp16_out16", "fp16_acc16", "bf16", "bf16_tf32_default", "bf16_acc_odd", "bf16_trans_acc",
                "bf16_skinny", "bf16_batched", "fp8_mixed_e4m3_e5m2", "fp8_out16"]
               + [f"fp8_{t}{s}" for t in ("e4m3fn", "e5m2", "e4m3fnuz", "e5m2fnuz") for s in ("", "_acc_odd_trans")])


@pytest.mark.parametrize("name", FLOAT_CASES)
def test_float_dot_matches_float64_reference(results, name):
    r = results[name]
    assert "error" not in r, r
    assert r["finite"], r
    assert r["rel_err"] <= TOLERANCE.get(name, FP32_ACC), r


def test_output_dtypes_follow_the_accumulator(results):
    assert results["fp16_out16"]["dtype"] == results["fp16_acc16"]["dtype"] == "torch.float16"
    assert results["fp64"]["dtype"] == "torch.float64"
    assert results["bf16"]["dtype"] == results["fp8_e4m3fn"]["dtype"] == "torch.float32"


def test_tf32_dot_rounds_fp32_operands_like_the_tensor_cores(results):
    # tf32 (Triton's default): equal to the dot of the truncated operands, and visibly not the exact one
    tf = results["fp32_tf32"]
    assert tf["rel_err"] <= FP32_ACC
    assert 1e-5 < tf["rel_err_vs_exact"] <= 2 * 2 ** -10
    # ieee and tf32x3 keep full fp32 precision
    assert results["fp32_ieee"]["rel_err_vs_exact"] <= FP32_ACC
    assert results["fp32_tf32x3"]["rel_err_vs_exact"] <= FP32_ACC
    # bf16 operands are exact in tf32: the precision changes nothing
    assert results["bf16_tf32_default"]["rel_err_vs_exact"] <= FP32_ACC


@pytest.mark.parametrize("name", ["int8", "int8_acc_odd"])
def test_int8_dot_is_exact(results, name):
    assert results[name].get("int_equal") is True and results[name]["dtype"] == "torch.int32", results[name]


@pytest.mark.parametrize("fmt", ["e4m3fn", "e5m2", "e4m3fnuz", "e5m2fnuz"])
def test_fp8_decoding_matches_torch_for_every_code(results, fmt):
    assert results["table_" + fmt]["table_equal"] is True
    # and inside a dot: code @ identity gives back each code's value
    assert results["fp8_codes_" + fmt]["code_mismatches"] == 0, results["fp8_codes_" + fmt]


CAST_CASES = [f"cast_{s}_to_{d}" for s in ("fp32", "fp64", "fp16", "bf16", "int32", "fp8_e4m3fn", "fp8_e5m2",
                                            "fp8_e4m3fnuz", "fp8_e5m2fnuz")
              for d in ("bfloat16", "float16", "float32", "float64", "float8_e4m3fn", "float8_e5m2",
                        "float8_e4m3fnuz", "float8_e5m2fnuz")
              if not (s == "int32" and d.startswith("float8")) and s.replace("fp", "float") != d
              and not (s == "fp16" and d == "float16") and not (s == "bf16" and d == "bfloat16")
              and not (s.startswith("fp8_") and d == "float8_" + s[4:])]


@pytest.mark.parametrize("name", CAST_CASES)
def test_float_casts_round_to_nearest_even(results, name):
    r = results[name]
    assert "error" not in r, r
    assert r["cast_mismatches"] == 0, r


def test_cast_single_rounding_and_toward_zero(results):
    assert results["cast_fp64_bf16_single_rounding"]["values"] == [1.0078125, -1.0078125, 1.0]
    assert results["cast_rtz"]["bf16_mismatches"] == 0 and results["cast_rtz"]["fp16_mismatches"] == 0, \
        results["cast_rtz"]


def test_unpatched_interpreter_gets_bf16_wrong():
    # the reason for the patch: without it the interpreter multiplies bf16 bit patterns
    body = _PROLOGUE + _KERNELS + textwrap.dedent("""
        r = case("bf16", torch.bfloat16, 16, 16, 32, 16, 16, 32)
        assert interpreter.InterpreterBuilder.create_dot is unpatched
        print("RESULTS " + json.dumps(r))
    """)
    proc = _child(body)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.split("RESULTS ", 1)[1])
    assert r["rel_err"] > 1.0, r


def test_installing_twice_wraps_once_and_stays_exact():
    body = _PROLOGUE + _KERNELS + textwrap.dedent("""
        lang = Triton()
        lang.install_hooks("cpu")
        first = interpreter.InterpreterBuilder.create_dot
        lang.install_hooks("cpu")
        assert patch_interpreter_dot() is True
        second = interpreter.InterpreterBuilder.create_dot
        assert first is second and getattr(second, _MARK, False)
        assert second.__wrapped__ is unpatched and not getattr(unpatched, _MARK, False)
        lang.install_hooks("cuda")  # the GPU leaves the interpreter alone
        assert interpreter.InterpreterBuilder.create_dot is second
        print("RESULTS " + json.dumps(case("bf16_acc", torch.bfloat16, 16, 16, 32, 16, 16, 32, acc=torch.float32)))
    """)
    proc = _child(body)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.split("RESULTS ", 1)[1])
    assert r["rel_err"] <= FP32_ACC, r


def test_unexpected_interpreter_internals_are_left_alone():
    body = _PROLOGUE + textwrap.dedent("""
        real = interpreter.InterpreterBuilder
        class Bare:  # a builder without create_dot
            pass
        interpreter.InterpreterBuilder = Bare
        assert patch_interpreter_dot() is False and not hasattr(Bare, "create_dot")
        Triton().install_hooks("cpu")  # no error either
        interpreter.InterpreterBuilder = real
        saved = interpreter.TensorHandle
        del interpreter.TensorHandle
        assert patch_interpreter_dot() is False and real.create_dot is unpatched
        interpreter.TensorHandle = saved
        print("RESULTS ok")
    """)
    proc = _child(body)
    assert proc.returncode == 0 and "RESULTS ok" in proc.stdout, proc.stderr[-3000:]

