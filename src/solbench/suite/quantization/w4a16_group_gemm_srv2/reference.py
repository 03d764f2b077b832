"""W4A16 GEMM with AWQ-style asymmetric group quantization (group 128).

  q[n, 2i] = qweight[n, i] & 15,  q[n, 2i + 1] = qweight[n, i] >> 4
  W[n, k]  = (q[n, k] - zeros[n, k // 128]) * scales[n, k // 128]
  y        = x @ W^T
"""

import torch

GROUP = 128


def run(x, qweight, scales, zeros):
    f = torch.promote_types(x.dtype, torch.float32)
    N = qweight.shape[0]
    qw = qweight.to(torch.int32)
    q = torch.stack([qw & 15, (qw >> 4) & 15], dim=-1).reshape(N, -1)
    zq = zeros.to(torch.int32).repeat_interleave(GROUP, dim=1)
    s = scales.to(f).repeat_interleave(GROUP, dim=1)
    w = (q - zq).to(f) * s
    return (x.to(f) @ w.t()).to(x.dtype)
