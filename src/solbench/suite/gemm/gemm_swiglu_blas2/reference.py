"""out = silu(x @ W_gate.T) * (x @ W_up.T), with W_gu = [W_gate; W_up] of shape [2*I, H].

Products and epilogue in promote_types(dtype, float32) (fp32 for bf16, float64 for the anchor), one rounding.
"""

import torch


def run(x, W_gu):
    acc = torch.promote_types(x.dtype, torch.float32)
    inter = W_gu.shape[0] // 2
    gu = torch.matmul(x.to(acc), W_gu.to(acc).t())  # [M, 2I]
    g, u = gu[:, :inter], gu[:, inter:]
    out = g * torch.sigmoid(g) * u  # silu(g) * u
    return out.to(x.dtype)
