"""Logit soft-capping, temperature and softmax.

  z = softcap * tanh(logits / softcap);  probs = softmax(z / temperature[:, None], dim=-1)
"""

import torch


def run(logits, temperature, softcap):
    f = torch.promote_types(logits.dtype, torch.float32)
    x = logits.to(f)
    z = softcap * torch.tanh(x / softcap)
    z = z / temperature.to(f)[:, None]
    return torch.softmax(z, dim=-1).to(torch.promote_types(temperature.dtype, f))
