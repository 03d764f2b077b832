"""Honest: a one-pass RMSNorm kernel under @triton.autotune over block sizes, keyed on the row length; off CUDA an
early_config_prune keeps one config, since Triton's interpreter has no benchmarker."""
import torch
import triton
import triton.language as tl


def _prune(configs, named_args, **kwargs):
    if not named_args["x_ptr"].is_cuda:
        return configs[:1]
    return configs


@triton.autotune(
    configs=[triton.Config({"BLOCK": 1024}, num_warps=4), triton.Config({"BLOCK": 2048}, num_warps=8),
             triton.Config({"BLOCK": 4096}, num_warps=8)],
    key=["n_cols"],
    prune_configs_by={"early_config_prune": _prune},
)
@triton.jit
def _rmsnorm(x_ptr, w_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=0.0)
        acc += v * v
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n_cols
        v = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=0.0)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0)
        tl.store(out_ptr + row * n_cols + offs, v * rstd * w, mask=mask)


def run(x, w):
    x = x.contiguous()
    out = torch.empty_like(x)
    _rmsnorm[(x.shape[0],)](x, w.contiguous(), out, x.shape[1], 1e-6)
    return out
