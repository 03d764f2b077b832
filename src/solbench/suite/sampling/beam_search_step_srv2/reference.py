"""Beam-search step: cumulative score of every (beam, token) pair, then the top 2W per request.

  cand[b, w, v] = beam_scores[b, w] + log_softmax(logits[b, w])[v]
  scores, flat_ids = topk(cand.reshape(B, W * V), 2W)   (descending)
"""

import torch


def run(logits, beam_scores):
    f = torch.promote_types(logits.dtype, torch.float32)
    B, W, V = logits.shape
    lp = torch.log_softmax(logits.to(f), dim=-1)
    cand = (lp + beam_scores.to(f)[..., None]).reshape(B, W * V)
    scores, ids = cand.topk(2 * W, dim=-1)
    return scores.to(torch.promote_types(beam_scores.dtype, torch.float32)), ids
