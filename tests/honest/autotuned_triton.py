"""Honest: a row-softmax Triton kernel tuned by @triton.autotune over block size and warp count, keyed on N.
Longer rows take a max sweep, a sum sweep and a write sweep. Off CUDA (Triton's interpreter has no benchmarker)
the candidates are pruned to the first config, which skips the tuning runs."""
import torch
import triton
import triton.language as tl


def _prune_off_gpu(configs, named_args, **kwargs):
    x = named_args.get("x_ptr")
    return configs if getattr(x, "is_cuda", False) else configs[:1]


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 512}, num_warps=2),
        triton.Config({"BLOCK": 1024}, num_warps=4),
        triton.Config({"BLOCK": 4096}, num_warps=8),
    ],
    key=["N"],
    prune_configs_by={"early_config_prune": _prune_off_gpu},
)
@triton.jit
def _softmax_tuned(x_ptr, out_ptr, scale, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * N
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + base + cols, mask=cols < N, other=float("-inf")) * scale
        m = tl.maximum(m, tl.where(cols < N, v, float("-inf")))
    row_max = tl.max(m, 0)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + base + cols, mask=cols < N, other=0.0) * scale
        s += tl.where(cols < N, tl.exp(v - row_max), 0.0)
    inv = 1.0 / tl.sum(s, 0)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + base + cols, mask=cols < N, other=0.0) * scale
        tl.store(out_ptr + base + cols, tl.exp(v - row_max) * inv, mask=cols < N)


def run(x, scale):
    x = x.contiguous()
    B, N = x.shape
    out = torch.empty_like(x)
    _softmax_tuned[(B,)](x, out, float(scale), N)
    return out
