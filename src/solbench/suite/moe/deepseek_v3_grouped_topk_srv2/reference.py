"""DeepSeek-V3 grouped top-k routing (8 groups of 32 experts, 4 groups kept, top-8 experts).

  s = sigmoid(logits);  b = s + bias
  group score = sum of the 2 largest b in the group;  keep the 4 best groups
  ids = the 8 largest b among kept groups, returned in ascending id order
  w = s[ids] / sum(s[ids]) * 2.5
"""

import torch

N_GROUP = 8
TOPK_GROUP = 4
TOP_K = 8
SCALE = 2.5


def run(logits, e_score_correction_bias):
    f = torch.promote_types(logits.dtype, torch.float32)
    T, E = logits.shape
    s = torch.sigmoid(logits.to(f))
    b = s + e_score_correction_bias.to(f)
    gs = b.view(T, N_GROUP, E // N_GROUP).topk(2, dim=-1).values.sum(-1)
    gidx = gs.topk(TOPK_GROUP, dim=-1).indices
    gmask = torch.zeros_like(gs).scatter(1, gidx, 1.0)
    emask = gmask[:, :, None].expand(T, N_GROUP, E // N_GROUP).reshape(T, E) > 0
    masked = b.masked_fill(~emask, float("-inf"))
    ids = masked.topk(TOP_K, dim=-1).indices
    ids = torch.sort(ids, dim=-1).values
    w = s.gather(1, ids)
    w = w / w.sum(-1, keepdim=True) * SCALE
    return ids.to(torch.int32), w
