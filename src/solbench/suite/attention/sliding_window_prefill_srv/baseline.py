"""Baseline: scaled_dot_product_attention per block of queries, with a boolean sliding-window mask."""

import torch
import torch.nn.functional as F

QB = 4096


def run(q, k, v, window, scale):
    bsz, L, Hq, D = q.shape
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    w = window.long()[:, None, None, None]
    outs = []
    for s in range(0, L, QB):
        e = min(s + QB, L)
        i = torch.arange(s, e, device=q.device)[:, None]
        j = torch.arange(e, device=q.device)[None, :]
        mask = (j <= i) & (j > i - w)                                   # [b, 1, rows, e]
        outs.append(F.scaled_dot_product_attention(qt[:, :, s:e], kt[:, :, :e], vt[:, :, :e], attn_mask=mask,
                                                   scale=scale, enable_gqa=True))
    return torch.cat(outs, dim=2).transpose(1, 2)
