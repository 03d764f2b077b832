"""Honest: chunked softmax in PyTorch; the row-chunk size comes from an lru_cache'd helper keyed on ints only
(a tuning decision, never data), and each chunk is computed with in-place ops on its own buffer."""
import functools

import torch


@functools.lru_cache(maxsize=64)
def rows_per_chunk(n_rows: int, n_cols: int, budget_elems: int = 1 << 20) -> int:
    return max(1, min(n_rows, budget_elems // max(1, n_cols)))


def run(x, scale):
    B, N = x.shape
    out = torch.empty_like(x)
    step = rows_per_chunk(B, N)
    for r in range(0, B, step):
        blk = out[r:r + step]
        torch.mul(x[r:r + step], scale, out=blk)
        blk.sub_(blk.amax(dim=-1, keepdim=True))
        blk.exp_()
        blk.div_(blk.sum(dim=-1, keepdim=True))
    return out
