"""DeepSeek-V3 MLA decode, absorbed form, against the latent cache.

  scores[b, h, t] = scale * (q_nope[b, h] . ckv[b, t] + q_pe[b, h] . kpe[b, t])
  out[b, h]       = sum_t softmax_t(scores[b, h, :]) * ckv[b, t]

fp32 math (float64 for the evaluator's anchor), result cast to q_nope's dtype.
"""

import torch


def run(q_nope, q_pe, ckv, kpe, scale):
    f = torch.promote_types(q_nope.dtype, torch.float32)
    c = ckv.to(f)                                                     # [B, L, 512]
    scores = torch.matmul(q_nope.to(f), c.transpose(1, 2))            # [B, H, L]
    scores = scores + torch.matmul(q_pe.to(f), kpe.to(f).transpose(1, 2))
    scores = scores * scale
    scores = scores - scores.amax(dim=-1, keepdim=True)
    p = torch.exp(scores)
    p = p / p.sum(dim=-1, keepdim=True)
    out = torch.matmul(p, c)                                          # [B, H, 512]
    return out.to(q_nope.dtype)
