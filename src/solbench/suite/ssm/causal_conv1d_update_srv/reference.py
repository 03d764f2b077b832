"""Decode step of Mamba's short depthwise causal convolution, with a rolling state in a slot-indexed cache.

For sequence b with slot s = state_indices[b] and channel c (width W, state of W - 1 columns):

  window    = [conv_state[s, c, 0], ..., conv_state[s, c, W - 2], x[b, c]]
  y[b, c]   = silu(sum_w window[w] * weight[c, w] + bias[c])
  conv_state[s, c] = window[1:]                        (written in place: shifted left by one)

Math in fp32 (float64 for the evaluator's anchor); y is cast to x's dtype.
"""

import torch


def run(x, conv_state, weight, bias, state_indices):
    f = torch.promote_types(x.dtype, torch.float32)
    idx = state_indices.long()
    window = torch.cat([conv_state[idx].to(f), x.to(f)[:, :, None]], dim=-1)   # [batch, dim, W]
    acc = (window * weight.to(f)).sum(dim=-1) + bias.to(f)
    y = acc * torch.sigmoid(acc)
    conv_state.index_copy_(0, idx, window[:, :, 1:].to(conv_state.dtype))
    return y.to(x.dtype)
