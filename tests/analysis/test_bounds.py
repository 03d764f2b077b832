"""T_SOL is a lower bound: counted work against closed forms per op family, on random shapes (docs/BOUNDS.md).

Property tests use hypothesis where it is installed and the same draws from a seeded generator where not.
"""

import json
import math
import random
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

from solbench.analysis.counting import WorkCount, trace_counts
from solbench.analysis.roofline import Work, count_work, share, sol_time
from solbench.analysis.rules import RULES, bind, visible_pairs
from solbench.evaluate.runner import EvalOptions, evaluate
from solbench.hardware.registry import get_hardware, list_hardware
from solbench.problems.problem import load_problem
from solbench.problems.solution import load_solution
from solbench.problems.suite import all_problems
from solbench.problems.workload import Workload
from tests.paths import FIXTURES

try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from hypothesis.configuration import set_hypothesis_home_dir

    set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "solbench-hypothesis")  # not .hypothesis/ in the tree
except ImportError:  # the test extra installs pytest only
    given = None

aten = torch.ops.aten
bf16, fp32, fp8 = torch.bfloat16, torch.float32, torch.float8_e4m3fn
FIXTURE = FIXTURES / "gemm_fp32_tf32x3.py"

# the H200's datasheet figures (hardware/data/h200.json), scaled from the datasheet clock to the maximum clock
SPEC = get_hardware("h200")
CLOCK = SPEC.clock_scale()
R_VECTOR = SPEC.vector_fp32_tflops.value * 1e12 * CLOCK
R_TF32, R_BF16, R_INT8 = (SPEC.tensor_rate(t) * CLOCK for t in ("tf32", "bf16", "int8"))
R_SFU = SPEC.sfu_tops.value * 1e12 * CLOCK
R_FP32_EMULATED = max(R_TF32 / 3, R_BF16 / 3, R_INT8 / 6)  # tf32x3, fp16x3, six int8 slice products
BW, FLOOR = SPEC.dram_bandwidth_gbs.value * 1e9, SPEC.launch_floor_us.value * 1e-6
H200 = get_hardware("h200").ceilings()


class Draw:
    def __init__(self, integer, pick):
        self.int, self.pick = integer, pick

    def size(self, lo: int, hi: int) -> int:
        """Log-uniform in [lo, hi]."""
        return min(hi, max(lo, round(lo * (hi / lo) ** (self.int(0, 1000) / 1000))))


def cases(n: int = 30):
    def wrap(test):
        if given is not None:
            @settings(max_examples=n, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
                      database=None)
            @given(st.data())
            def run(data):
                test(Draw(lambda lo, hi: data.draw(st.integers(lo, hi)), lambda s: data.draw(st.sampled_from(s))))
        else:
            @pytest.mark.parametrize("seed", range(n))
            def run(seed):
                rng = random.Random(seed)
                test(Draw(rng.randint, lambda s: rng.choice(list(s))))
        run.__name__, run.__doc__ = test.__name__, test.__doc__
        return run
    return wrap


def count(fn, *specs, allow_tf32=False):
    with FakeTensorMode():
        inputs = [torch.empty(s, dtype=d) if isinstance(s, tuple) else s for s, d in specs]
        c = trace_counts(fn, inputs, [f"i{k}" for k in range(len(inputs))], allow_tf32)
    assert not c.failed, c.failed  # no rule gave up on a call
    return c


def t_sol(tensor_s=0.0, vector_s=0.0, sfu_s=0.0, nbytes=0.0):
    return max(tensor_s, vector_s, sfu_s, nbytes / BW, FLOOR)


@cases()
def test_gemm_fp32_bf16_fp8(d):
    m, n, k = d.size(1, 16384), d.size(1, 65536), d.size(1, 65536)
    c = count(lambda a, b: a @ b.T, ((m, k), fp32), ((n, k), fp32))
    nbytes = 4 * (m * k + n * k + m * n)
    assert c.flops == {"matmul_fp32": 2 * m * n * k} and c.bytes == nbytes
    # fp32-accurate: split between the FMA units and an emulation on tensor cores, whichever finishes first
    sol = sol_time(Work(flops=c.flops, bytes=c.bytes), H200)
    assert sol.sol_s == pytest.approx(t_sol(2 * m * n * k / (R_VECTOR + R_FP32_EMULATED), nbytes=nbytes), rel=1e-9)
    c = count(lambda a, b: a @ b.T, ((m, k), bf16), ((n, k), bf16))
    assert c.flops == {"tensor_bf16": 2 * m * n * k} and c.bytes == 2 * (m * k + n * k + m * n)
    assert sol_time(Work(c.flops, c.bytes), H200).sol_s == pytest.approx(t_sol(2 * m * n * k / R_BF16, nbytes=c.bytes))
    c = count(lambda a, b: (a.float() @ b.float().T).to(torch.bfloat16), ((m, k), fp8), ((n, k), fp8))
    assert c.flops == {"tensor_fp8": 2 * m * n * k} and c.bytes == m * k + n * k + 2 * m * n


@cases(20)
def test_bmm_and_tf32(d):
    b, m, n, k = d.size(1, 65536), d.size(1, 256), d.size(1, 256), d.size(1, 256)
    c = count(torch.bmm, ((b, m, k), fp32), ((b, k, n), fp32))
    assert c.flops == {"matmul_fp32": 2 * b * m * n * k} and c.bytes == 4 * b * (m * k + k * n + m * n)
    c = count(torch.bmm, ((b, m, k), fp32), ((b, k, n), fp32), allow_tf32=True)
    assert c.flops == {"tensor_tf32": 2 * b * m * n * k}
    # a TF32-accurate product runs as fp16 (the same 10-bit mantissa) at the 16-bit rate, or on the FMA units
    sol = sol_time(Work(c.flops, c.bytes), H200)
    assert sol.sol_s == pytest.approx(t_sol(2 * b * m * n * k / (R_VECTOR + R_BF16), nbytes=c.bytes), rel=1e-9)


@cases(40)
def test_share_is_the_least_max_of_tensor_and_vector_time(d):
    fixed_t, fixed_v = d.int(0, 100) * 1e-3, d.int(0, 100) * 1e-3
    flex = [(d.int(0, 100) * 1e9, d.int(1, 100) * 1e12) for _ in range(d.int(1, 2))]
    rv = d.int(1, 100) * 1e12
    t, v = share(fixed_t, fixed_v, flex, rv)
    # brute force over a grid of splits (the shares on tensor cores): nothing beats the placement share chose
    grid = [i / 40 for i in range(41)]
    best = min(max(fixed_t + sum(x * f / r for x, (f, r) in zip(xs, flex)),
                   fixed_v + sum((1 - x) * f / rv for x, (f, _) in zip(xs, flex)))
               for xs in ([(a,) for a in grid] if len(flex) == 1 else [(a, b) for a in grid for b in grid]))
    eps = 1e-12
    assert max(fixed_t, fixed_v) * (1 - eps) <= max(t, v) <= best * (1 + eps)
    assert t >= fixed_t * (1 - eps) and v >= fixed_v * (1 - eps)


def test_which_emulations_meet_the_fp32_and_tf32_tolerances():
    """Three-term splits into TF32 or fp16 (low part scaled) meet gemm_fp32_blas' tolerance; bf16x3 and a
    two-product split do not (inputs as the problem draws them; the products exact, sums in fp32)."""
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(192, 4096, generator=g), torch.randn(512, 4096, generator=g) / 64
    anchor, ref = a.double() @ b.double().T, a @ b.T
    allowed = 1e-5 + 1e-4 * anchor.abs() + 2 * (ref.double() - anchor).abs()  # evaluate/verdict/correctness.py, fp32

    def tf32(x):  # round to nearest even at 10 explicit mantissa bits
        i = x.view(torch.int32)
        return ((i + 0xFFF + ((i >> 13) & 1)) & ~0x1FFF).view(torch.float32)

    def split(x, rnd, scale):
        hi = rnd(x)
        return hi, rnd((x - hi) * scale) / scale

    def three(rnd, scale=1.0):
        (ah, al), (bh, bl) = split(a, rnd, scale), split(b, rnd, scale)
        return ah @ bh.T + (ah @ bl.T + al @ bh.T)

    fp16 = lambda x: x.half().float()
    bf = lambda x: x.bfloat16().float()
    ah, al = split(a, fp16, 2.0 ** 11)
    bad = {name: int(((c.double() - anchor).abs() > allowed).sum()) for name, c in (
        ("tf32x3", three(tf32)), ("fp16x3", three(fp16, 2.0 ** 11)), ("bf16x3", three(bf)),
        ("two products", ah @ fp16(b).T + al @ fp16(b).T))}
    assert bad["tf32x3"] == 0 and bad["fp16x3"] == 0, bad
    assert bad["bf16x3"] > 0 and bad["two products"] > 1000, bad
    # gemm_tf32_blas' tolerance (against its TF32 reference): one fp16 product (TF32's mantissa) meets it
    loose = 2e-3 + 2e-3 * anchor.abs() + 2 * ((tf32(a) @ tf32(b).T).double() - anchor).abs()
    assert int(((fp16(a) @ fp16(b).T).double() - anchor).abs().gt(loose).sum()) <= 1e-4 * anchor.numel()
    # the 16-bit rate the roofline takes (bf16's) is fp16's on every chip
    assert all(hw.tensor_rate("fp16", "fp32") in (None, hw.tensor_rate("bf16", "fp32")) for hw in list_hardware())


PROBLEMS = {p.name: p for p in all_problems()
            if p.name in ("gemm_fp32_blas", "syrk_blas", "trsm_blas2", "conv2d_aten", "conv2d_input_bwd",
                          "conv_transpose2d_op", "conv2d_depthwise_aten")}


def test_fp32_gemm_workload_bound_is_below_what_tf32x3_reaches():
    p = PROBLEMS["gemm_fp32_blas"]
    w = next(w for w in p.workloads if w.axes == {"M": 4096, "N": 14336, "K": 4096})
    sol = sol_time(count_work(p, w), H200)
    f = 2 * 4096 * 14336 * 4096
    assert sol.sol_ms == pytest.approx(1e3 * f / (R_VECTOR + R_FP32_EMULATED), rel=1e-9)
    assert sol.sol_ms < 4.95 and sol.bound == "tensor"  # an honest tf32x3 Triton kernel ran in 4.95 ms
    assert 1e3 * f / R_VECTOR == pytest.approx(7.19, abs=0.01)  # the old bound, at the FMA rate alone


@cases(15)
def test_fp32_class_problems_on_drawn_shapes(d):
    m, n, k = d.size(1, 16384), d.size(1, 65536), d.size(1, 65536)
    work = count_work(PROBLEMS["gemm_fp32_blas"], Workload(uuid="drawn", axes={"M": m, "N": n, "K": k}))
    assert work.flops == {"matmul_fp32": 2 * m * n * k}
    n, k = d.size(1, 32768), d.size(1, 65536)
    work = count_work(PROBLEMS["syrk_blas"], Workload(uuid="drawn", axes={"N": n, "K": k}))
    assert work.flops == {"matmul_fp32": n * (n + 1) * k}
    n, r = d.size(1, 16384), d.size(1, 65536)
    work = count_work(PROBLEMS["trsm_blas2"], Workload(uuid="drawn", axes={"N": n, "NRHS": r}))
    assert work.flops == {"matmul_fp32": n * (n - 1) * r, "vector_fp32": n * r}


def test_an_override_of_vector_fp32_still_states_the_fp32_products(tmp_path):
    (tmp_path / "definition.json").write_text(json.dumps({
        "name": "fp32_attn", "axes": {"S": {"type": "var"}},
        "inputs": {"q": {"shape": ["S", "S"], "dtype": "float32"}}, "outputs": {"o": {"shape": ["S", "S"], "dtype": "float32"}},
        "sol": {"flops": {"tensor_bf16": "2*S*S*S", "vector_fp32": "S*S"}}}))
    (tmp_path / "reference.py").write_text("import torch\n\ndef run(q):\n    return torch.softmax(q @ q, -1) @ q\n")
    (tmp_path / "workload.jsonl").write_text(json.dumps({"uuid": "w", "axes": {"S": 64}, "inputs": {}}) + "\n")
    work = count_work(load_problem(tmp_path), Workload(uuid="w", axes={"S": 64}))
    assert work.flops == {"tensor_bf16": 2 * 64 ** 3, "vector_fp32": 64 * 64, "sfu": 64 * 64}


def axis(src: int, dst: int, k: int, s: int, p: int, dl: int) -> tuple[int, int, int, int]:
    """The pairs (a, j) with 0 <= a*s - p + j*dl < dst, enumerated; and the a, positions and taps they use."""
    hits = [(a, j, a * s - p + j * dl) for a in range(src) for j in range(k) if 0 <= a * s - p + j * dl < dst]
    return len(hits), len({h[0] for h in hits}), len({h[2] for h in hits}), len({h[1] for h in hits})


def _conv_params(d):
    g = d.pick((1, 1, 2, 4))
    cin, cout = g * d.size(1, 64), g * d.size(1, 64)
    k = [d.int(1, 7), d.int(1, 7)]
    s, p, dl = [d.int(1, 3), d.int(1, 3)], [d.int(0, 3), d.int(0, 3)], [d.int(1, 2), d.int(1, 2)]
    return d.size(1, 64), g, cin, cout, k, s, p, dl


@cases(40)
def test_conv2d_counts_the_taps_on_real_input(d):
    n, g, cin, cout, k, s, p, dl = _conv_params(d)
    hw = [max(d.size(1, 64), (k[i] - 1) * dl[i] + 1 - 2 * p[i]) for i in range(2)]
    out = [(hw[i] + 2 * p[i] - dl[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    bias = d.pick((True, False))
    c = count(lambda x, w, b: F.conv2d(x, w, b if bias else None, stride=s, padding=p, dilation=dl, groups=g),
              ((n, cin, *hw), bf16), ((cout, cin // g, *k), bf16), ((cout,), bf16))
    (pr0, _, x0, t0), (pr1, _, x1, t1) = (axis(out[i], hw[i], k[i], s[i], p[i], dl[i]) for i in range(2))
    macs = n * cout * (cin // g) * pr0 * pr1
    assert c.flops == ({"tensor_bf16": 2 * macs} if macs else {})
    x_read = n * cin * x0 * x1  # a stride past the kernel skips input elements
    w_read = cout * (cin // g) * t0 * t1  # a tap that only meets padding is never read
    assert c.bytes == 2 * (x_read + w_read + (cout if bias else 0) + n * cout * out[0] * out[1])
    # the oracle: a real convolution of ones counts the same pairs
    ones = F.conv2d(torch.ones(1, 1, *hw, dtype=torch.float64), torch.ones(1, 1, *k, dtype=torch.float64),
                    stride=s, padding=p, dilation=dl)
    assert ones.sum().item() == pr0 * pr1
    sol = sol_time(Work(c.flops, c.bytes), H200)
    assert sol.sol_s == pytest.approx(t_sol(2 * macs / R_BF16, nbytes=c.bytes))


@cases(40)
def test_conv_transpose2d_counts_taps_inside_the_output(d):
    n, g, cin, cout, k, s, p, dl = _conv_params(d)
    hw = [d.size(1, 48), d.size(1, 48)]
    op = [d.int(0, max(s[i], dl[i]) - 1) for i in range(2)]
    out = [(hw[i] - 1) * s[i] - 2 * p[i] + dl[i] * (k[i] - 1) + op[i] + 1 for i in range(2)]
    if min(out) < 1:
        return
    c = count(lambda x, w: F.conv_transpose2d(x, w, stride=s, padding=p, output_padding=op, groups=g, dilation=dl),
              ((n, cin, *hw), bf16), ((cin, cout // g, *k), bf16))
    pr0, pr1 = (axis(hw[i], out[i], k[i], s[i], p[i], dl[i])[0] for i in range(2))
    macs = n * cin * (cout // g) * pr0 * pr1  # input elements x taps landing inside the cropped output
    assert c.flops == ({"tensor_bf16": 2 * macs} if macs else {})
    ones = F.conv_transpose2d(torch.ones(1, 1, *hw, dtype=torch.float64), torch.ones(1, 1, *k, dtype=torch.float64),
                              stride=s, padding=p, output_padding=op, dilation=dl)
    assert ones.sum().item() == pr0 * pr1


@cases(40)
def test_convolution_backward_counts_what_its_mask_asks(d):
    n, g, cin, cout, k, s, p, dl = _conv_params(d)
    hw = [max(d.size(1, 48), (k[i] - 1) * dl[i] + 1 - 2 * p[i]) for i in range(2)]
    out = [(hw[i] + 2 * p[i] - dl[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    mask = [d.pick((True, False)) for _ in range(3)]
    if not any(mask):
        return

    def bwd(gy, x, w):
        r = aten.convolution_backward(gy, x, w, [cout], s, p, dl, False, [0, 0], g, mask)
        return tuple(t for t, m in zip(r, mask) if m)

    c = count(bwd, ((n, cout, *out), bf16), ((n, cin, *hw), bf16), ((cout, cin // g, *k), bf16))
    (pr0, y0, x0, t0), (pr1, y1, x1, t1) = (axis(out[i], hw[i], k[i], s[i], p[i], dl[i]) for i in range(2))
    macs = n * cout * (cin // g) * pr0 * pr1
    assert c.flops.get("tensor_bf16", 0) == 2 * macs * (mask[0] + mask[1])
    assert c.flops.get("vector_fp32", 0) == (n * cout * out[0] * out[1] if mask[2] else 0)
    g_read = n * cout * (out[0] * out[1] if mask[2] else y0 * y1)
    x_read = n * cin * x0 * x1 if mask[1] else 0  # the input is read for the weight gradient only
    w_read = cout * (cin // g) * t0 * t1 if mask[0] else 0
    written = n * cin * hw[0] * hw[1] * mask[0] + cout * (cin // g) * k[0] * k[1] * mask[1] + cout * mask[2]
    assert c.bytes == 2 * (g_read + x_read + w_read + written)


def test_conv_problems_against_their_closed_forms():
    for name, macs in (
            # 'same' padding r = K // 2, stride 1: per axis L*K - r(r + 1) taps land on the image
            ("conv2d_aten", lambda a: a["N"] * a["C_out"] * a["C_in"] * math.prod(
                a[x] * a["K"] - (a["K"] // 2) * (a["K"] // 2 + 1) for x in ("H", "W"))),
            ("conv2d_depthwise_aten", lambda a: a["N"] * a["C"] * math.prod(
                a[x] * a["K"] - (a["K"] // 2) * (a["K"] // 2 + 1) for x in ("H", "W"))),
            # dgrad of the 3x3 padding-1 convolution: 3L - 2 taps per axis
            ("conv2d_input_bwd", lambda a: a["N"] * a["C_in"] * a["C_out"] * (3 * a["H"] - 2) * (3 * a["W"] - 2)),
            # kernel 4, stride 2, padding 1: 4L - 2 of the 4L pairs per axis land in the 2L outputs
            ("conv_transpose2d_op", lambda a: a["N"] * a["C_in"] * a["C_out"] * (4 * a["H"] - 2) * (4 * a["W"] - 2))):
        p = PROBLEMS[name]
        assert p.definition.sol is None, name  # the traced count is the bound
        for w in p.workloads:
            axes = p.definition.resolve_axes(w.axes)
            work = count_work(p, w)
            assert work.flops["tensor_bf16"] == 2 * macs(axes), (name, w.uuid)


@cases(30)
def test_sdpa_forward_and_backward(d):
    b, h, sq, sk, dd = d.size(1, 64), d.size(1, 64), d.size(1, 8192), d.size(1, 8192), d.pick((32, 64, 128))
    causal = d.pick((True, False))
    m = min(sq, sk)
    vis = m * (m + 1) // 2 if causal else sq * sk
    qkv = (((b, h, sq, dd), bf16), ((b, h, sk, dd), bf16), ((b, h, sk, dd), bf16))
    c = count(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal), *qkv)
    assert c.flops == {"tensor_bf16": 4 * b * h * vis * dd, "sfu": b * h * vis, "vector_fp32": b * h * vis}
    assert c.bytes == 2 * b * h * dd * (2 * sq + 2 * sk)
    sol = sol_time(Work(c.flops, c.bytes), H200)
    assert sol.sol_s == pytest.approx(t_sol(4 * b * h * vis * dd / R_BF16, b * h * vis / R_VECTOR,
                                            b * h * vis / R_SFU, c.bytes))
    op = d.pick(("flash", "efficient", "cpu"))

    def bwd(go, q, k, v, o, lse):
        if op == "flash":
            return aten._scaled_dot_product_flash_attention_backward(go, q, k, v, o, lse, None, None, sq, sk, 0.0,
                                                                     causal, torch.empty(2), torch.empty(()))
        if op == "efficient":
            return aten._scaled_dot_product_efficient_attention_backward(go, q, k, v, None, o, lse, torch.empty(()),
                                                                         torch.empty(()), 0.0, [True] * 4, causal)
        return aten._scaled_dot_product_flash_attention_for_cpu_backward(go, q, k, v, o, lse, 0.0, causal)

    c = count(bwd, ((b, h, sq, dd), bf16), *qkv, ((b, h, sq, dd), bf16), ((b, h, sq), fp32))
    assert c.flops["tensor_bf16"] == 10 * b * h * vis * dd  # S recomputed, dP, dV, dQ, dK
    assert c.flops["sfu"] == b * h * vis


def test_fused_attention_variants_and_masks():
    q, k, v = ((2, 4, 96, 64), bf16), ((2, 4, 80, 64), bf16), ((2, 4, 80, 32), bf16)
    vis = 2 * 4 * 80 * 81 // 2  # causal: m = min(96, 80)
    for fn in (lambda q, k, v: aten._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.0, True)[0],
               lambda q, k, v: aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, True)[0],
               lambda q, k, v: aten._scaled_dot_product_fused_attention_overrideable(q, k, v, None, 0.0, True)[0],
               lambda q, k, v: aten._efficient_attention_forward(q.transpose(1, 2), k.transpose(1, 2),
                                                                 v.transpose(1, 2), None, None, None, 96, 80, 0.0, 1)[0]):
        assert count(fn, q, k, v).flops["tensor_bf16"] == 2 * vis * (64 + 32)
    # a mask is data: its pairs count nothing (the mask's bytes are still read)
    c = count(lambda q, k, v, m: aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, attn_mask=m)[0],
              q, k, k, ((96, 80), bf16))
    assert c.flops == {} and c.bytes == 2 * (2 * 4 * 64 * (96 + 2 * 80 + 96) + 96 * 80)
    assert visible_pairs(5, 5, False, 1, 1) == 13 and visible_pairs(4, 6, True, 1) == 8


@cases(30)
def test_visible_pairs_is_the_smaller_causal_triangle(d):
    sq, sk = d.int(1, 300), d.int(1, 300)
    top_left = sum(min(i + 1, sk) for i in range(sq))
    bottom_right = sum(max(0, min(sk, i + sk - sq + 1)) for i in range(sq))
    assert visible_pairs(sq, sk, True) == min(top_left, bottom_right)
    left = d.int(0, 50)
    assert visible_pairs(sq, sk, True, left) == sum(
        max(0, min(sk - 1, i + sk - sq) - max(0, i + sk - sq - left) + 1) for i in range(sq))


@cases(12)
def test_lstm_and_gru(d):
    t, b, i, h = d.size(1, 48), d.size(1, 64), d.size(1, 1024), d.size(1, 1024)
    layers, dirs, first = d.int(1, 3), d.pick((1, 2)), d.pick((True, False))
    cell = d.pick(("lstm", "gru"))
    gates, sfu = (4, 5) if cell == "lstm" else (3, 3)
    dtype = d.pick((fp32, bf16))
    specs = []
    for layer in range(layers):
        for _ in range(dirs):
            specs += [((gates * h, i if layer == 0 else h * dirs), dtype), ((gates * h, h), dtype),
                      ((gates * h,), dtype), ((gates * h,), dtype)]
    x = ((b, t, i) if first else (t, b, i), dtype)
    hx = ((layers * dirs, b, h), dtype)

    def run(x, h0, c0, *w):
        if cell == "lstm":
            return torch._VF.lstm(x, (h0, c0), list(w), True, layers, 0.0, False, dirs == 2, first)[0]
        return torch._VF.gru(x, h0, list(w), True, layers, 0.0, False, dirs == 2, first)[0]

    c = count(run, x, hx, hx, *specs)
    unit = "matmul_fp32" if dtype == fp32 else "tensor_bf16"
    gemm = sum(2 * t * b * gates * h * ((i if layer == 0 else h * dirs) + h) for layer in range(layers)) * dirs
    assert c.flops[unit] == gemm
    if cell == "lstm":  # oneDNN's fused layer: the rule counts the gates too
        assert c.flops["sfu"] == t * b * h * layers * dirs * sfu


def test_rnn_rules_for_ops_that_reach_the_tracer_whole():
    def ctx():
        work = WorkCount()
        return SimpleNamespace(add=work.add, unit=lambda *ts: "tensor_bf16", flops=work.flops)

    t, b, i, h = 7, 3, 5, 6
    with FakeTensorMode():
        x = torch.empty(t, b, i, dtype=bf16)
        w = [torch.empty(h, i), torch.empty(h, h), torch.empty(h), torch.empty(h)]
        for name in ("rnn_tanh", "rnn_relu"):
            c = ctx()
            call = bind(getattr(aten, name).input, (x, torch.empty(1, b, h), w, True, 1, 0.0, False, False, False), {})
            RULES[name](c, name, call, (), [torch.empty(t, b, h)])
            assert c.flops["tensor_bf16"] == 2 * t * b * h * (i + h)
        c = ctx()
        w4 = [torch.empty(4 * h, i), torch.empty(4 * h, h), torch.empty(4 * h), torch.empty(4 * h)]
        call = bind(aten._cudnn_rnn.default, (x, w4, 4, None, torch.empty(1, b, h), torch.empty(1, b, h), 2, h, 0, 1,
                                              False, 0.0, False, False, [], None), {})
        RULES["_cudnn_rnn"](c, "_cudnn_rnn", call, (), [torch.empty(t, b, h)])
        assert c.flops["tensor_bf16"] == 2 * t * b * 4 * h * (i + h) and c.flops["sfu"] == 5 * t * b * h


@cases(20)
def test_elementwise_reduction_embedding(d):
    r, n = d.size(1, 65536), d.size(1, 16384)
    c = count(torch.add, ((r, n), bf16), ((r, n), bf16))
    assert c.flops == {"vector_fp32": r * n} and c.bytes == 3 * 2 * r * n
    assert sol_time(Work(c.flops, c.bytes), H200).sol_s == pytest.approx(t_sol(0, r * n / R_VECTOR, 0, 6 * r * n))
    c = count(lambda x: x.sum(-1), ((r, n), fp32))
    assert c.flops == {"vector_fp32": r * n} and c.bytes == 4 * (r * n + r)
    v, tokens = d.size(1000, 262144), d.size(1, 32768)
    c = count(F.embedding, ((tokens,), torch.int64), ((v, n), bf16))
    assert c.flops == {} and c.bytes == 8 * tokens + 2 * min(tokens, v) * n + 2 * tokens * n  # rows it fetches


def test_tf32x3_kernel_passes_on_the_cpu():
    p = PROBLEMS["gemm_fp32_blas"]
    ev = evaluate(p, load_solution(FIXTURE, p.name),
                  EvalOptions(device="cpu", workloads=["gemm_fp32_blas-cpu-tiny"], baselines=()))
    assert ev.verdict == "passed", [(w.uuid, w.verdict, w.reasons) for w in ev.workloads]


@pytest.mark.gpu
def test_tf32x3_kernel_is_not_below_the_bound_on_the_h200():
    p = PROBLEMS["gemm_fp32_blas"]
    ev = evaluate(p, load_solution(FIXTURE, p.name),
                  EvalOptions(device="cuda", workloads=["gemm_fp32_blas-llama31-8b-prefill-m4096-gateup"], baselines=()))
    w = ev.workloads[0]
    assert w.verdict == "passed", (w.verdict, w.reasons, w.message)
    assert "below_sol" not in w.reasons
    assert w.time_ms >= w.sol_ms, (w.time_ms, w.sol_ms)
    assert w.max_abs_err < 1e-4
