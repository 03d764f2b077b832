"""RMSNorm fused with static fp8 (e4m3) quantization.

  y[t, h]   = x[t, h] * rsqrt(mean_h x[t, h]^2 + eps) * weight[h]
  y_q[t, h] = e4m3(clamp(y[t, h] / scale, -448, 448))            scale: one static dequantization scale

Math in fp32. For the evaluator's anchor the floating inputs arrive as float64 and y_q is returned unrounded
(float64), the exact value the fp8 output approximates.
"""

import torch

FP8_MAX = 448.0


def run(x, weight, scale, eps):
    f = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(f)
    rstd = torch.rsqrt((xf * xf).mean(dim=-1, keepdim=True) + eps)
    y = xf * rstd * weight.to(f)
    q = (y / scale.to(f)).clamp(-FP8_MAX, FP8_MAX)
    q_dtype = torch.float8_e4m3fn if f == torch.float32 else f
    return q.to(q_dtype)
