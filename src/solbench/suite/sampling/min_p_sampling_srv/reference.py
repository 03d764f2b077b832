"""Min-p filtering, then sampling by an exponential race with given uniform noise per token.

Per row b:
  p          = softmax(logits[b])
  keep v     iff p[v] >= min_p[b] * max_v p[v]
  E[v]       = -log(noise[b, v])                      (Exp(1) noise; noise = 0 gives E = inf)
  sample     = argmax over kept v of p[v] / E[v]      (first index on exact ties)

argmax of p / E with E ~ Exp(1) draws v with probability proportional to p[v] (the exponential race).
Math in fp32 (float64 for the evaluator's anchor).
"""

import torch


def run(logits, min_p, noise):
    f = torch.promote_types(logits.dtype, torch.float32)
    x = logits.to(f)
    p = torch.softmax(x, dim=-1)
    pmax = p.amax(dim=-1, keepdim=True)
    keep = p >= min_p.to(f)[:, None] * pmax
    race = p / (-torch.log(noise.to(f)))
    race = torch.where(keep, race, torch.full_like(race, -1.0))
    return torch.argmax(race, dim=-1).to(torch.int64)
