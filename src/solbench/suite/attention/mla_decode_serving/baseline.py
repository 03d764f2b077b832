"""Baseline: one scaled_dot_product_attention call, the H heads as H query rows of a single head
(all heads share the latent key/value): keys are [c_kv, k_pe] (576 dims), values c_kv (512 dims)."""

import torch
import torch.nn.functional as F


def run(q_nope, q_pe, ckv, kpe, scale):
    q = torch.cat([q_nope, q_pe], dim=-1).unsqueeze(1)    # [B, 1, H, 576]
    k = torch.cat([ckv, kpe], dim=-1).unsqueeze(1)        # [B, 1, L, 576]
    out = F.scaled_dot_product_attention(q, k, ckv.unsqueeze(1), scale=scale)
    return out.squeeze(1)
