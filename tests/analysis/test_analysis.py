"""Work counting on fake tensors and the roofline, against closed forms."""

import json

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from solbench.analysis.counting import trace_counts
from solbench.analysis.roofline import Work, count_work, sol_time
from solbench.hardware.spec import Ceilings
from solbench.problems.problem import load_problem


def count(fn, *specs, names=None, allow_tf32=False, out_dtypes=None):
    with FakeTensorMode():
        inputs = [torch.empty(s, dtype=d) if isinstance(s, tuple) else s for s, d in specs]
        return trace_counts(fn, inputs, names or [f"i{k}" for k in range(len(inputs))], allow_tf32, out_dtypes)


def test_gemm_is_2mnk_and_bytes_are_each_tensor_once():
    M, N, K = 128, 512, 256
    c = count(lambda a, b: a @ b.T, ((M, K), torch.bfloat16), ((N, K), torch.bfloat16))
    assert c.flops == {"tensor_bf16": 2 * M * N * K}
    assert c.bytes == (M * K + N * K + M * N) * 2


def test_fp32_gemm_is_matmul_fp32_work_and_with_tf32_tensor_work():
    # matmul_fp32: priced at the best of the FMA units and tensor-core emulation (docs/BOUNDS.md)
    spec = (((64, 64), torch.float32), ((64, 64), torch.float32))
    assert set(count(lambda a, b: a @ b, *spec).flops) == {"matmul_fp32"}
    assert set(count(lambda a, b: a @ b, *spec, allow_tf32=True).flops) == {"tensor_tf32"}


def test_upcast_operands_keep_their_arrival_precision():
    def fp8_gemm(a, b, sa, sb):
        return ((a.float() @ b.float().T) * sa[:, None] * sb[None, :]).to(torch.bfloat16)

    c = count(fp8_gemm, ((64, 128), torch.float8_e4m3fn), ((256, 128), torch.float8_e4m3fn),
              ((64,), torch.float32), ((256,), torch.float32))
    assert c.flops["tensor_fp8"] == 2 * 64 * 256 * 128
    assert c.bytes == 64 * 128 + 256 * 128 + 64 * 4 + 256 * 4 + 64 * 256 * 2


def test_rmsnorm_bytes_and_sfu():
    T, H = 64, 4096

    def rms(x, w, eps):
        xf = x.to(torch.float32)
        var = xf.pow(2).mean(-1, keepdim=True)
        return (xf * torch.rsqrt(var + eps) * w.to(torch.float32)).to(x.dtype)

    c = count(rms, ((T, H), torch.bfloat16), ((H,), torch.bfloat16), (1e-6, None))
    assert c.bytes == (2 * T * H + H) * 2  # x read, weight read, out written, once each
    assert c.flops["sfu"] == T  # one rsqrt per row; x**2 is a multiply


def test_gather_counts_only_touched_rows():
    c = count(lambda ids, table: table[ids], ((10,), torch.int64), ((100000, 64), torch.float32))
    assert c.bytes == 10 * 8 + 10 * 64 * 4 + 10 * 64 * 4


def test_slices_count_what_they_cover_and_unused_inputs_nothing():
    c = count(lambda cache, x, unused: cache[:, :16].sum(-1) + x, ((8, 1024), torch.float32),
              ((8,), torch.float32), ((1 << 20,), torch.float32))
    assert c.bytes == 8 * 16 * 4 + 8 * 4 + 8 * 4


def test_attention_closed_form_and_causal_override():
    p = load_problem_with_sol()
    for w in p.workloads:
        work = count_work(p, w)
        axes = p.definition.resolve_axes(w.axes)
        S, H, D, B = (axes[k] for k in ("S", "H", "D", "B"))
        assert work.flops["tensor_bf16"] == 4 * B * H * D * S * (S + 1) / 2
        assert "flops.tensor_bf16" in work.overridden


def load_problem_with_sol(tmp=None):
    import tempfile
    from pathlib import Path

    d = Path(tempfile.mkdtemp())
    (d / "definition.json").write_text(json.dumps({
        "name": "causal_attn", "axes": {"B": {"type": "var"}, "S": {"type": "var"}, "H": {"type": "var"},
                                        "D": {"type": "const", "value": 64}},
        "inputs": {n: {"shape": ["B", "H", "S", "D"], "dtype": "bfloat16"} for n in "qkv"},
        "outputs": {"o": {"shape": ["B", "H", "S", "D"], "dtype": "bfloat16"}},
        "sol": {"flops": {"tensor_bf16": "4 * B * H * D * S * (S + 1) / 2"}, "note": "causal: half the scores"}}))
    (d / "reference.py").write_text(
        "import torch\n\ndef run(q, k, v):\n    s = (q.float() @ k.float().transpose(-1, -2)) * 0.125\n"
        "    m = torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool).tril()\n"
        "    s = s.masked_fill(~m, float('-inf'))\n    return (torch.softmax(s, -1) @ v.float()).to(q.dtype)\n")
    (d / "workload.jsonl").write_text("\n".join(json.dumps({"uuid": f"w{s}", "axes": {"B": 1, "S": s, "H": 4}, "inputs": {}})
                                                for s in (16, 128)) + "\n")
    return load_problem(d)


def test_traced_attention_without_override_is_full_square():
    p = load_problem_with_sol()
    p.definition.sol = None
    work = count_work(p, p.workloads[1])
    assert work.flops["tensor_bf16"] == 4 * 1 * 4 * 64 * 128 * 128
    assert work.flops["sfu"] >= 4 * 128 * 128


CEIL = Ceilings(hardware="x", kind="datasheet", dram_bytes_per_s=1e12, launch_floor_s=2e-6,
                rates={"tensor_bf16": 1e15, "tensor_fp8": 2e15, "vector_fp32": 5e13, "sfu": 4e12})


@pytest.mark.parametrize("work,bound,seconds", [
    (Work(flops={"tensor_bf16": 1e12}, bytes=1e6), "tensor", 1e-3),
    (Work(flops={"tensor_bf16": 1e9}, bytes=1e9), "memory", 1e-3),
    (Work(flops={"sfu": 4e9}, bytes=1e6), "sfu", 1e-3),
    (Work(flops={"vector_fp32": 5e10}, bytes=1e6), "vector", 1e-3),
    (Work(flops={"tensor_bf16": 1e3}, bytes=1e3), "latency", 2e-6),
    # tensor units share the tensor cores: their times add
    (Work(flops={"tensor_bf16": 5e11, "tensor_fp8": 1e12}, bytes=1e6), "tensor", 1e-3),
])
def test_roofline_bound(work, bound, seconds):
    s = sol_time(work, CEIL)
    assert s.bound == bound and s.sol_s == pytest.approx(seconds)


def test_every_bundled_workload_has_a_bound_on_every_chip():
    """Work counted on fake tensors for every workload of every bundled problem, T_SOL > 0 on every registered
    chip (the whole analysis's speed is benchmarks/bench_analysis.py's)."""
    from solbench.hardware.registry import list_hardware
    from solbench.problems.suite import all_problems

    chips = [hw.ceilings() for hw in list_hardware()]
    for p in all_problems():
        for w in p.workloads:
            work = count_work(p, w)
            assert work.bytes > 0, (p.name, w.uuid)
            for c in chips:
                assert sol_time(work, c).sol_s > 0
