"""Honest (issue 21, root cause 3): numpy for a host-side table. The block width for a row length is looked up in
a small table built once with numpy (np.searchsorted over the sizes), then the softmax is computed block by block
with a running maximum and rescaled sum."""
import numpy as np
import torch

_SIZES = np.array([16, 64, 256, 1024, 4096], dtype=np.int64)
_BLOCKS = np.array([16, 32, 128, 256, 512], dtype=np.int64)


def _block(n: int) -> int:
    i = int(np.searchsorted(_SIZES, n, side="left"))
    return int(_BLOCKS[min(i, len(_BLOCKS) - 1)])


def run(x, scale):
    z = x * scale
    n = z.shape[-1]
    b = _block(n)
    m = torch.full(z.shape[:-1], float("-inf"), dtype=z.dtype, device=z.device)
    s = torch.zeros(z.shape[:-1], dtype=z.dtype, device=z.device)
    for start in range(0, n, b):
        part = z[..., start:start + b]
        m_new = torch.maximum(m, part.amax(dim=-1))
        s = s * torch.exp(m - m_new) + torch.exp(part - m_new.unsqueeze(-1)).sum(dim=-1)
        m = m_new
    return torch.exp(z - m.unsqueeze(-1)) / s.unsqueeze(-1)
