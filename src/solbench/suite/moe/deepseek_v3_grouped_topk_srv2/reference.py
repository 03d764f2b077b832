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


def accept(inputs, outputs, expected):
    """Another valid routing (the definition's custom_check_entrypoint), consulted when the outputs differ from
    the reference's: a kernel that computes the scores with other rounding may break a near-tie between two
    experts (or two groups) the other way. Accepted when every token's ids are distinct, ascending and in range;
    tokens routed differently are few, and their experts' scores equal the reference choice's within 1e-5; and the
    weights match the candidate's own ids everywhere. Returns None to accept, else why not."""
    logits, bias = inputs["logits"], inputs["e_score_correction_bias"]
    ids, w = outputs[0], outputs[1]
    ref_ids = expected[0]
    if not (isinstance(ids, torch.Tensor) and isinstance(w, torch.Tensor)) or ids.shape != ref_ids.shape \
            or w.shape != expected[1].shape or ids.dtype != torch.int32:
        return "outputs of the wrong kind"
    T, E = logits.shape
    s = torch.sigmoid(logits.to(torch.float64))
    b = s + bias.to(torch.float64)
    idl = ids.to(torch.int64)
    if bool(((idl < 0) | (idl >= E)).any()):
        return "expert ids out of range"
    if TOP_K > 1 and bool((idl[:, 1:] <= idl[:, :-1]).any()):
        return "a token's ids are not strictly ascending (each expert once, in id order)"
    groups = torch.zeros(T, N_GROUP, dtype=torch.bool, device=ids.device)
    groups.scatter_(1, idl // (E // N_GROUP), True)
    if bool((groups.sum(-1) > TOPK_GROUP).any()):
        return f"a token's experts come from more than {TOPK_GROUP} groups"
    differ = (ids != ref_ids).any(dim=1)
    n = int(differ.sum())
    if n > max(1, T // 1000):
        return f"{n} of {T} tokens routed differently: more than near-ties explain"
    if n:
        rows = differ.nonzero().flatten()
        got_b = torch.sort(b[rows].gather(1, idl[rows]), dim=1).values
        ref_b = torch.sort(b[rows].gather(1, ref_ids[rows].to(torch.int64)), dim=1).values
        if not torch.allclose(got_b, ref_b, rtol=0.0, atol=1e-5):
            return "a differently routed token's experts score lower than the reference's: not a tie"
    want = s.gather(1, idl)
    want = want / want.sum(-1, keepdim=True) * SCALE
    if not torch.allclose(w.to(torch.float64), want, rtol=1e-4, atol=1e-5):
        return "the weights do not follow the chosen experts' scores"
    return None
