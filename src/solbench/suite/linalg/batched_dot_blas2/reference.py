"""scores[b, s] = keys[b, s, :] . q[b, :]  (bmm with N = 1): keys [BATCH, S, D], q [BATCH, D], scores [BATCH, S].

Computed in promote_types(dtype, float32) (fp32 for bf16, float64 for the anchor), one rounding to q's dtype.
"""

import torch


def run(keys, q):
    acc = torch.promote_types(q.dtype, torch.float32)
    scores = torch.bmm(keys.to(acc), q.to(acc).unsqueeze(-1)).squeeze(-1)
    return scores.to(q.dtype)
