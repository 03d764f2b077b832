"""Top-k, then top-p (nucleus) filtering, then inverse-CDF sampling with a given uniform draw per row.

Per row b (logits already temperature-scaled):
  1. top-k: keep tokens whose logit >= the top_k[b]-th largest logit (ties at the threshold are kept)
  2. p = softmax over the kept tokens
  3. top-p: keep token v iff the mass of tokens with strictly larger p is < top_p[b] (the smallest prefix of
     the descending order whose mass reaches top_p; ties with its last token are kept; at least one token)
  4. q = p on the kept tokens, 0 elsewhere; c = cumsum of q in token-id order; the sample is the first token
     with c > uniform[b] * c[V - 1] (never beyond the last kept token)

Math in fp32 (float64 for the evaluator's anchor). The sort only finds thresholds; no data-dependent shapes.
"""

import torch


def run(logits, top_k, top_p, uniform):
    B, V = logits.shape
    f = torch.promote_types(logits.dtype, torch.float32)
    x = logits.to(f)
    srt = torch.sort(x, dim=-1, descending=True).values                          # [B, V]
    kth = torch.gather(srt, 1, (top_k.long() - 1).clamp(0, V - 1)[:, None])      # [B, 1]
    keep_k = x >= kth
    m = srt[:, :1]
    e = torch.exp(x - m) * keep_k                                                 # zero outside the top k
    p = e / e.sum(dim=-1, keepdim=True)
    ps = torch.sort(p, dim=-1, descending=True).values
    before = torch.cumsum(ps, dim=-1) - ps                                        # mass strictly before each rank
    n_keep = (before < top_p.to(f)[:, None]).sum(dim=-1, keepdim=True).clamp(min=1)
    thr = torch.gather(ps, 1, n_keep - 1)
    q = p * (p >= thr) * keep_k
    c = torch.cumsum(q, dim=-1)
    target = uniform.to(f)[:, None] * c[:, -1:]
    idx = (c <= target).sum(dim=-1)
    pos = torch.arange(V, device=logits.device)
    last = torch.where(q > 0, pos, torch.zeros_like(pos)).amax(dim=-1)
    return torch.minimum(idx, last).to(torch.int64)
