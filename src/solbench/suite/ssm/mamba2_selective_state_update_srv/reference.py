"""Mamba-2 decode step (selective state update), state updated in place in a slot-indexed cache.

For sequence b, state slot s = state_indices[b], head h (group g = h // (H / G)):

  dt'      = softplus(dt[b, h] + dt_bias[h])
  S        = state[s, h] * exp(dt' * A[h]) + dt' * x[b, h] (outer) B[b, g]          S in R^{P x N}
  y[b, h]  = (S C[b, g] + D[h] * x[b, h]) * silu(z[b, h])
  state[s, h] = S                                                                    (written in place)

Math in fp32 (float64 for the evaluator's anchor); y is cast to x's dtype and the new state to the
state cache's dtype.
"""

import torch
import torch.nn.functional as F


def run(state, x, dt, dt_bias, A, B, C, D, z, state_indices):
    batch, H, P = x.shape
    G, N = B.shape[1], B.shape[2]
    f = torch.promote_types(x.dtype, torch.float32)
    idx = state_indices.long()
    s = state[idx].to(f)                                                  # [batch, H, P, N]
    d = F.softplus(dt.to(f) + dt_bias.to(f))                              # [batch, H]
    decay = torch.exp(d * A.to(f))                                        # [batch, H]
    Bh = B.to(f).unsqueeze(2).expand(batch, G, H // G, N).reshape(batch, H, N)
    Ch = C.to(f).unsqueeze(2).expand(batch, G, H // G, N).reshape(batch, H, N)
    xf = x.to(f)
    new = s * decay[:, :, None, None] + (d[:, :, None] * xf)[:, :, :, None] * Bh[:, :, None, :]
    y = (new * Ch[:, :, None, :]).sum(dim=-1) + D.to(f)[None, :, None] * xf
    zf = z.to(f)
    y = y * (zf * torch.sigmoid(zf))
    state.index_copy_(0, idx, new.to(state.dtype))
    return y.to(x.dtype)
