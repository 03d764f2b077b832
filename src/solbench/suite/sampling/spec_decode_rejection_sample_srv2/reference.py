"""Speculative-decoding rejection sampling, deterministic given the uniform and exponential draws.

  accept[j] = draft_probs[j, d_j] > 0 and target_probs[j, d_j] / draft_probs[j, d_j] >= uniform[j]
  n = number of leading accepted drafts
  p = max(target_probs[n] - draft_probs[n], 0) if n < K else target_probs[K]
  token = argmax_v p[v] / q_exp[v]
  output = [d_0 .. d_{n-1}, token, -1, ...],  num_accepted = n

The reference evaluates the candidate token at every position and picks position n (no data-dependent shapes).
"""

import torch


def run(draft_token_ids, draft_probs, target_probs, uniform, q_exp):
    f = torch.promote_types(draft_probs.dtype, torch.float32)
    B, K, V = draft_probs.shape
    dp = draft_probs.to(f)
    tp = target_probs.to(f)
    idx = draft_token_ids.long()
    pd = dp.gather(2, idx[..., None]).squeeze(-1)
    pt = tp[:, :K].gather(2, idx[..., None]).squeeze(-1)
    accept = (pd > 0) & (pt / pd >= uniform.to(f))
    n = torch.cumprod(accept.long(), dim=1).sum(dim=1)
    resid = torch.cat([(tp[:, :K] - dp).clamp(min=0), tp[:, K:]], dim=1)
    cand = (resid / q_exp.to(f)[:, None, :]).argmax(dim=-1)
    token = cand.gather(1, n[:, None])
    pos = torch.arange(K + 1, device=idx.device)[None, :]
    drafts = torch.cat([idx, idx.new_zeros(B, 1)], dim=1)
    out = torch.where(pos < n[:, None], drafts, torch.full_like(drafts, -1))
    out = torch.where(pos == n[:, None], token.expand(B, K + 1), out)
    return out, n.to(torch.int32)
